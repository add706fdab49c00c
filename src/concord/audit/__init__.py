"""The run manifest: what every artifact is, who made it from what, and whether it still holds.

Snakemake already records, for every output it produced (``.snakemake/metadata``, what
``--summary`` and ``--list-changes`` read): the producing rule, the rule's code, its params (in
this workflow: the config subset the rule reads, passed as JSON params), the set of input files
and the software stack. The audit keeps no second copy of that by hand; it adds only what
Snakemake lacks:

1. **register** (job time) -- every rule's shell command ends with
   ``python -m concord audit register --rule {rule} --outputs {output} --inputs {input}``
   (``audited()`` in rules/common.smk). It writes one sidecar per output at
   ``<results>/.manifest/<relpath>.json`` (atomically): the output's sha256 (a directory hashed
   the same way here and at verification), its size, its inputs' sha256, the code version and
   the Python environment. Hashing at job time also covers intermediate outputs (``temp()``)
   that Snakemake removes later.
2. **record** (after a successful run: the workflow's ``onsuccess``; also ``snakemake audit``)
   merges each sidecar with Snakemake's metadata record of the same output into
   ``<results>/manifest.json``, the file a reviewer reads without Snakemake.
3. **verify** (``python -m concord audit verify results``, or ``snakemake audit``) re-hashes
   the tree: *missing* and *modified* artifacts against their recorded sha256, *stale* ones
   whose inputs changed, and -- re-planning the workflow with the current config through
   Snakemake's API (:func:`plan`) -- artifacts whose rule, code, params (config subset), input
   set or software stack differ from the record; staleness then flows downstream along the
   recorded inputs. A removed intermediate (``temp()``) is reported as such, never as missing.
   Every sidecar also records the processor the job ran on (:func:`concord.hardware.processor`:
   CPU model, instruction set torch dispatched to, native bf16); a tree produced on another
   processor is named as such (*other processor*, its own exit code), neither clean nor stale:
   its files are intact, but a rerun here may print other numbers (README, "Auditing results").
   The GPUs a job saw (:func:`concord.hardware.accelerators`: models, count, CUDA, driver) are
   recorded and compared the same way: a tree made on other accelerators takes the same exit code.

Exit codes of ``audit verify``: see :data:`EXIT_CODES`.

One concern per module: ``layout`` (where the audit's files lie, how paths are recorded),
``sidecars`` (register, job time), ``metadata`` (what Snakemake records), ``manifest`` (record),
``planning`` (re-planning through Snakemake's API), ``verification`` (verify), ``report`` (the
verdict and its exit codes). This package hands on their public names.
"""

from __future__ import annotations

from concord.audit.layout import (
    EXCLUDED_TOP_LEVEL,
    FORMAT_VERSION,
    MANIFEST_DIR,
    MANIFEST_NAME,
    RESULTS_ENV,
    default_results_dir,
    sidecar_path,
)
from concord.audit.manifest import build_manifest, load_manifest, record_from_workflow, write_manifest
from concord.audit.metadata import WorkflowFacts, workflow_facts
from concord.audit.planning import Plan, PlanError, PlannedOutput, plan
from concord.audit.report import (
    EXIT_CANNOT_VERIFY,
    EXIT_CODES,
    EXIT_MODIFIED,
    EXIT_OK,
    EXIT_OTHER_PROCESSOR,
    EXIT_STALE,
    EXIT_UNTRACKED,
    AuditReport,
)
from concord.audit.sidecars import register, register_command, sidecar_targets
from concord.audit.verification import describe_params_change, verify

__all__ = [
    "EXCLUDED_TOP_LEVEL", "EXIT_CANNOT_VERIFY", "EXIT_CODES", "EXIT_MODIFIED", "EXIT_OK", "EXIT_OTHER_PROCESSOR",
    "EXIT_STALE", "EXIT_UNTRACKED", "FORMAT_VERSION", "MANIFEST_DIR", "MANIFEST_NAME", "RESULTS_ENV", "AuditReport",
    "Plan", "PlanError", "PlannedOutput", "WorkflowFacts", "build_manifest", "default_results_dir",
    "describe_params_change", "load_manifest", "plan", "record_from_workflow", "register", "register_command",
    "sidecar_path", "sidecar_targets", "verify", "workflow_facts", "write_manifest",
]
