"""Record time: ``<results>/manifest.json``, each sidecar merged with Snakemake's record of the same
output (the file a reviewer reads without Snakemake), and reading it back for verification."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from concord import io, provenance
from concord.audit.layout import FORMAT_VERSION, MANIFEST_NAME
from concord.audit.metadata import WorkflowFacts, _code_sha256, _conda_env_entry, _params_sha256, workflow_facts
from concord.audit.report import EXIT_CODES
from concord.audit.sidecars import _read_sidecars, sidecar_targets

def _manifest_entry(sidecar: dict, facts: WorkflowFacts, results: Path, workdir: Path) -> dict:
    target = sidecar.get("target") or str(results / sidecar["path"])
    record = facts.records.get(target)
    rule = record.rule if record is not None and record.rule else sidecar.get("rule")
    intermediate = facts.is_temp(target)
    return {
        "path": sidecar["path"],
        "kind": sidecar["kind"],
        "sha256": sidecar["sha256"],
        "size": sidecar.get("size"),
        "intermediate": intermediate,
        "present": (results / sidecar["path"]).exists(),
        "rule": rule,
        "target": target,
        "inputs": sidecar.get("inputs", []),
        # From Snakemake's record: the config subset (the rule's params), the rule's code, the
        # set of input files and the software stack, exactly as its rerun triggers compare them.
        "params": list(record.params) if record is not None and record.params is not None else None,
        "params_sha256": _params_sha256(record.params if record is not None else None),
        "code_sha256": _code_sha256(record.code if record is not None else None),
        "shellcmd": record.shellcmd if record is not None else None,
        "input_set": list(record.input) if record is not None and record.input is not None else None,
        "software_stack_hash": record.software_stack_hash if record is not None else None,
        "conda_env": _conda_env_entry(rule, record, facts, workdir),
        "code_version": sidecar.get("code_version"),
        "env": sidecar.get("env"),
        "processor": sidecar.get("processor"),
        "accelerators": sidecar.get("accelerators"),
        "started": record.starttime if record is not None else None,
        "finished": record.endtime if record is not None else sidecar.get("registered_at"),
        "snakemake_metadata": record is not None,
    }


def build_manifest(
    results_dir: str | os.PathLike,
    config: Any = None,
    facts: WorkflowFacts | None = None,
    workdir: str | os.PathLike | None = None,
) -> dict:
    """Merge every sidecar with Snakemake's record of the same output into one manifest dict.

    Files nobody registered are not entered (``audit verify`` lists them as untracked).
    """
    results = Path(results_dir)
    if not results.is_dir():
        raise FileNotFoundError(f"results directory does not exist: {results}")
    work = Path(workdir) if workdir is not None else Path.cwd()
    facts = facts or WorkflowFacts()
    artifacts = {rel: _manifest_entry(sidecar, facts, results, work) for rel, sidecar in _read_sidecars(results).items()}
    return {
        "format": FORMAT_VERSION,
        "code_version": provenance.code_version(),
        "recorded_at": time.time(),
        "config": config,
        "config_hash": provenance.config_hash(config) if config is not None else None,
        "exit_codes": {str(k): v for k, v in EXIT_CODES.items()},
        "artifacts": dict(sorted(artifacts.items())),
    }


def write_manifest(
    results_dir: str | os.PathLike,
    config: Any = None,
    facts: WorkflowFacts | None = None,
    workdir: str | os.PathLike | None = None,
) -> Path:
    """Write ``<results>/manifest.json`` (atomically) and return its path."""
    manifest = build_manifest(results_dir, config, facts, workdir)
    return io.write_json(Path(results_dir) / MANIFEST_NAME, manifest)


def record_from_workflow(workflow, config: Any, results_dir: str | os.PathLike) -> Path:
    """The Snakefile's ``onsuccess`` step: manifest = sidecars + this workflow's metadata."""
    facts = workflow_facts(workflow, sidecar_targets(results_dir))
    return write_manifest(results_dir, config=config, facts=facts)


def load_manifest(results_dir: str | os.PathLike, manifest_path: str | os.PathLike | None = None) -> dict:
    results = Path(results_dir)
    manifest_file = Path(manifest_path) if manifest_path is not None else results / MANIFEST_NAME
    if not manifest_file.is_file():
        raise FileNotFoundError(f"no manifest at {manifest_file}; run the workflow (or `snakemake audit`) first")
    try:
        manifest = io.read_json(manifest_file)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{manifest_file} is not valid JSON: {exc.msg}") from None
    if manifest.get("format") != FORMAT_VERSION:
        raise ValueError(f"{manifest_file}: unsupported manifest format {manifest.get('format')!r} "
                         f"(this code reads format {FORMAT_VERSION}); rerun the workflow to re-record it")
    return manifest
