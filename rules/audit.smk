"""The run manifest: every successful run merges the per-artifact records into results/manifest.json.

Jobs record their outputs as they finish: commands call concord.audit.register, or a rule appends
concord.audit.register_command(...) to its shell command. When the whole run succeeds, the handler
below writes the manifest on the submitting host (cluster jobs run with --no-hooks, so it runs once).
Verify a tree with `python -m concord audit verify results`.
"""


onsuccess:
    from concord import audit as _audit

    _audit.write_manifest(config.get("results_dir", "results"), config=config)
