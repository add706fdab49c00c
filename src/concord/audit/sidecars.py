"""Job time: every job registers its outputs in one sidecar each (``<results>/.manifest/<relpath>.json``):
content hashes, inputs' hashes, code version, environment, processor and accelerators."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

from concord import hardware, io, provenance
from concord.audit.layout import MANIFEST_DIR, _input_ref, _relative_to, default_results_dir, sidecar_path

def _recorded_input_hash(path: Path, results: Path) -> str:
    """An input's sha256: reused from its own sidecar while its files are untouched since (a
    model directory is not re-read by every job that loads it), else hashed now."""
    rel = _relative_to(path, results)
    if rel is not None:
        sidecar = sidecar_path(results, rel)
        if sidecar.is_file():
            try:
                entry = io.read_json(sidecar)
            except (json.JSONDecodeError, OSError):
                entry = {}
            if entry.get("signature") and entry.get("signature") == provenance.stat_signature(path):
                return entry["sha256"]
    return provenance.sha256_path(path)


def register(
    outputs: Iterable[str | os.PathLike],
    *,
    rule: str | None = None,
    inputs: Iterable[str | os.PathLike] = (),
    results_dir: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
) -> list[Path]:
    """Record each output's content hash, its inputs' hashes, code version and env in its sidecar.

    ``outputs`` must lie inside ``results_dir`` (default ``$CONCORD_RESULTS_DIR`` or
    ``results``); files and directories are both fine. ``inputs`` may lie anywhere (inside the
    results tree they are stored relative to it, so a copied tree still verifies). Each output is
    also stored under the name the workflow gave it (``target``): the key of Snakemake's own
    metadata record, merged in by :func:`build_manifest` (which also supplies the producing rule;
    ``rule`` names it for outputs made outside Snakemake). Returns the sidecar paths.
    """
    results = Path(results_dir) if results_dir is not None else default_results_dir()
    work = Path(workdir) if workdir is not None else Path.cwd()
    input_records = []
    for item in dict.fromkeys(str(i) for i in inputs):  # a file named twice is hashed once
        path = Path(item)
        if not path.exists():
            raise FileNotFoundError(f"register: input does not exist: {item}")
        input_records.append({**_input_ref(path, results, work), "sha256": _recorded_input_hash(path, results)})
    env = provenance.environment()
    written = []
    for out in outputs:
        path = Path(out)
        rel = _relative_to(path, results)
        if rel is None:
            raise ValueError(f"register: output {out} is not inside the results directory {results}")
        if not path.exists():
            raise FileNotFoundError(f"register: output does not exist: {out}")
        entry = {
            "path": rel,
            "target": str(out),
            "kind": "dir" if path.is_dir() else "file",
            "sha256": provenance.sha256_path(path),
            "size": provenance.size_of(path),
            "signature": provenance.stat_signature(path),
            "rule": rule,
            "inputs": input_records,
            "code_version": provenance.code_version(),
            "env": env,
            "processor": hardware.processor(),
            "accelerators": hardware.accelerators(),
            "registered_at": time.time(),
        }
        written.append(io.write_json(sidecar_path(results, rel), entry))
    return written


def register_command(results_dir: str = "results") -> str:
    """The shell suffix that registers a Snakemake job's declared outputs (rules/common.smk
    appends it to every rule's command through ``audited()``). Snakemake fills ``{input}`` and
    ``{output}`` when it formats the command."""
    import shlex

    # No --rule: the producing rule is read from Snakemake's own record of the output at record time.
    return (
        f" && python -m concord audit register --results {shlex.quote(str(results_dir))}"
        " --outputs {output:q} --inputs {input:q}"
    )


def _read_sidecars(results: Path) -> dict[str, dict]:
    root = results / MANIFEST_DIR
    entries: dict[str, dict] = {}
    if not root.is_dir():
        return entries
    for sidecar in sorted(root.rglob("*.json")):
        if sidecar.name.startswith("."):
            continue  # an atomic write still in flight
        try:
            entry = io.read_json(sidecar)
        except json.JSONDecodeError as exc:
            raise ValueError(f"corrupt manifest sidecar {sidecar}: {exc.msg}") from exc
        entries[entry["path"]] = entry
    return entries


def sidecar_targets(results_dir: str | os.PathLike) -> list[str]:
    """The workflow's names of every registered output (keys of Snakemake's metadata)."""
    results = Path(results_dir)
    return [s.get("target") or str(results / rel) for rel, s in _read_sidecars(results).items()]
