"""The run manifest (concord.audit): every job registers its outputs' content hashes (`audited()` in
rules/common.smk); after every successful run the handler below merges them with Snakemake's own
metadata (rule, code, params = config subset, input set, software env) into results/manifest.json,
on the submitting host (cluster jobs run with --no-hooks, so it runs once).

    snakemake audit                                   # re-plan with this config and verify the tree
    python -m concord audit verify results            # the same, with distinct exit codes (README)

"""

import json as _audit_json

from concord import audit as _audit

_AUDIT_RESULTS = config.get("results_dir", "results")


rule audit:
    """Verify the results tree against its manifest and the workflow as configured now."""
    localrule: True
    params:
        config=lambda wildcards: _audit_json.dumps(config, sort_keys=True, default=str),
        snakefile=workflow.main_snakefile,
        results=_AUDIT_RESULTS,
    shell:
        "python -m concord audit verify {params.results:q} --snakefile {params.snakefile:q}"
        " --config-json {params.config:q}"


onsuccess:
    _audit.record_from_workflow(workflow, config, _AUDIT_RESULTS)
