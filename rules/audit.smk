"""The run manifest (concord.audit): every job registers its outputs' content hashes (`audited()` in
rules/common.smk); after every successful run the handler below merges them with Snakemake's own
metadata (rule, code, params = config subset, input set, software env) into results/manifest.json,
on the submitting host (cluster jobs run with --no-hooks, so it runs once).

    snakemake audit                                   # re-plan with this config and verify the tree
    python -m concord audit verify results            # the same, with distinct exit codes (README)

Included last: it checks that every rule writing outputs registers them (wrapped in audited()).
"""

import json as _audit_json

from concord import audit as _audit

_AUDIT_RESULTS = config.get("results_dir", "results")


# A rule that writes outputs must end its command with the registration (audited()).
_AUDIT_UNREGISTERED = sorted(
    r.name for r in workflow.rules if r.output and "concord audit register" not in (r.shellcmd or "")
)
if _AUDIT_UNREGISTERED:
    raise WorkflowError(
        "rules that write outputs but do not register them in the run manifest: "
        + ", ".join(_AUDIT_UNREGISTERED)
        + ". Wrap the rule's shell command in audited(...) (rules/common.smk)."
    )


rule audit:
    """Verify the results tree against its manifest and the workflow as configured now."""
    localrule: True
    params:
        config=lambda wildcards: _audit_json.dumps(config, sort_keys=True, default=str),
        snakefile=workflow.main_snakefile,
        results=_AUDIT_RESULTS,
    log:
        f"{_AUDIT_RESULTS}/logs/audit.log",
    conda:
        "../envs/analysis.yaml"
    shell:
        # The report goes to the terminal and to the log; pipefail keeps verify's exit code.
        "python -m concord audit verify {params.results:q} --snakefile {params.snakefile:q}"
        " --config-json {params.config:q} 2>&1 | tee {log:q}"


onsuccess:
    _audit.record_from_workflow(workflow, config, _AUDIT_RESULTS)
