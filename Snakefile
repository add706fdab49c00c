"""concord: consensus-based reasoning with language models.

Every (model, benchmark, arm, seed) becomes roll-out, training, evaluation, statistics,
table and figure jobs. Rules are thin: each calls `python -m concord <command>`.
"""

import os
import shlex
import sys

from snakemake.utils import min_version

# The library lives in src/: the workflow imports it from the checkout, and so does every job
# (local, conda or SLURM), which also learns where the results tree (and its manifest) lives.
SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, SRC)

min_version("9.0")


# The embedded default, unless config files are named on the command line: then those alone
# define the run (`--configfile config/paper.yaml` must not inherit the default's models).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config/config.yaml")


# Fail the plan (also `snakemake -n`) in a few lines: a schema error names the key, the rule it
# broke and what is allowed; an input only the user can supply (SLURM account, LiveCodeBench
# file, SC-MoA files and endpoint) says where to supply it and how to run without it; any other
# config path that does not exist is named before any job starts.
from concord import inputs, preflight

try:
    preflight.validate_config(config, os.path.join(workflow.basedir, "config/schema.yaml"))
    preflight.apply_subset(config)
    inputs.check_inputs(config, account=inputs.cluster_account(workflow))
    preflight.check_paths(config)
    preflight.check_context_budgets(config, workflow.basedir)
except (preflight.ConfigError, inputs.MissingInputError) as _config_error:
    raise WorkflowError(str(_config_error)) from None


include: "rules/common.smk"
include: "rules/core/common.smk"
include: "rules/fmv/common.smk"
include: "rules/scmoa/common.smk"


# (Snakemake formats the prefix like a command: literal shell braces are doubled.)
shell.prefix(
    "set -euo pipefail; export PYTHONPATH="
    + shlex.quote(SRC)
    + "${{PYTHONPATH:+:$PYTHONPATH}} CONCORD_RESULTS_DIR="
    + shlex.quote(RESULTS)
    + "; "
    # In a Slurm job, one line in its Slurm log: which job, node and GPUs it was given.
    + '[ -z "${{SLURM_JOB_ID:-}}" ] || echo "concord: slurm job $SLURM_JOB_ID on $(hostname)'
    + ' CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES:-none}}" >&2; '
)


wildcard_constraints:
    model=alternatives(MODELS),
    benchmark=alternatives(BENCHMARKS),
    arm=alternatives(["base"] + ARMS),
    seed=r"\d+",


report: "report/workflow.rst"


# Shared by every paper: models and benchmarks.
include: "rules/data.smk"
# The CoRE paper: roll-outs, offline consensus (Figure 2, Appendix H), test-time GRPO,
# evaluation, Figure 3, Tables 1-3, Figures 4-5.
include: "rules/core/rollouts.smk"
include: "rules/core/analysis.smk"
include: "rules/core/train.smk"
include: "rules/core/tables.smk"
# The FMV paper: functional majority voting for code and FMV-TTRL.
include: "rules/fmv/fmv.smk"
# The SC-MoA paper: trace-level synthesis in mixture of agents.
include: "rules/scmoa/scmoa.smk"
# The reproduction scorecard: every printed number beside the reproduced one (after the papers).
include: "rules/scorecard.smk"
# Run manifest and audit.
include: "rules/audit.smk"
# Slurm runs (--profile slurm): status command and partition limits checked before submitting.
include: "rules/cluster.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
