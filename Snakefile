"""concord: consensus-based reasoning with language models.

Every (model, benchmark, arm, seed) becomes roll-out, training, evaluation, statistics,
table and figure jobs. Rules are thin: each calls `python -m concord <command>`.
"""

import os
import sys

from snakemake.utils import min_version, validate

# The library lives in src/; jobs (local, conda or SLURM) import it from the checkout.
sys.path.insert(0, os.path.join(workflow.basedir, "src"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.join(workflow.basedir, "src"), os.environ.get("PYTHONPATH", "")) if p
)

min_version("9.0")


# The embedded default, unless config files are named on the command line: then those alone
# define the run (`--configfile config/paper.yaml` must not inherit the default's models).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config/config.yaml")


validate(config, "config/schema.yaml")


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/rollouts.smk"
include: "rules/analysis.smk"
include: "rules/train.smk"
include: "rules/scmoa.smk"
include: "rules/report.smk"
include: "rules/audit.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True
