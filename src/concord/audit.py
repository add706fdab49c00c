"""The run manifest: what every artifact is, who made it from what, and whether it still holds.

Three steps:

1. **register** -- a command that writes an artifact calls :func:`register` (or the rule appends
   ``python -m concord audit register ...``). One sidecar per artifact lands at
   ``<results>/.manifest/<relpath>.json`` (atomically, so parallel jobs never race): the
   artifact's sha256, producing rule, its inputs' sha256, the hash of the config sections it
   read, the code version and the conda env.
2. **record** -- :func:`write_manifest` (run by the workflow's ``onsuccess`` handler, or
   ``python -m concord audit record results``) merges the sidecars into
   ``<results>/manifest.json`` and hashes any file nobody registered (``rule: null``).
3. **verify** -- :func:`verify` (``python -m concord audit verify results``) re-hashes the tree
   and reports *missing* artifacts, *modified* artifacts (hash differs from the record) and
   *stale* artifacts (an input's current hash differs from the recorded one, an input is gone,
   the config sections it read hash differently now, or an upstream artifact is itself
   missing/modified/stale). Files present but absent from the manifest are *untracked*.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from concord import io, provenance

MANIFEST_DIR = ".manifest"
MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1
# Not artifacts: the audit's own files and the tree's README.
EXCLUDED_TOP_LEVEL = frozenset({MANIFEST_DIR, MANIFEST_NAME, "README.md", ".gitignore", ".gitkeep"})
RESULTS_ENV = "CONCORD_RESULTS_DIR"
CONDA_ENV_ENV = "CONCORD_CONDA_ENV"


# ------------------------------------------------------------------ paths


def default_results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV, "results"))


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def sidecar_path(results_dir: str | Path, relpath: str) -> Path:
    return Path(results_dir) / MANIFEST_DIR / f"{relpath}.json"


def _input_ref(path: str | Path, results_dir: Path, workdir: Path) -> dict:
    """Where an input lives: inside the results tree (portable) or relative to the workdir."""
    path = Path(path)
    rel = _relative_to(path, results_dir)
    if rel is not None:
        return {"root": "results", "path": rel}
    rel = _relative_to(path, workdir)
    return {"root": "workdir", "path": rel if rel is not None else str(path.resolve())}


def _resolve_ref(ref: Mapping, results_dir: Path, workdir: Path) -> Path:
    base = results_dir if ref["root"] == "results" else workdir
    return base / ref["path"]


# ------------------------------------------------------------------ register


def config_fingerprint(config: Any) -> tuple[str | None, list[str] | None]:
    """Hash of the config an artifact read, and its top-level sections when it is a mapping.

    Pass the sections your step reads, keyed as in the workflow config (e.g.
    ``{"rollouts": config["rollouts"], "engine": config["engine"]}``): then :func:`verify` can
    tell whether *those* sections changed since, without flagging unrelated config edits.
    """
    if config is None:
        return None, None
    sections = sorted(config) if isinstance(config, Mapping) else None
    return provenance.config_hash(config), sections


def _conda_record(conda_env: str | os.PathLike | None) -> dict | None:
    conda_env = conda_env or os.environ.get(CONDA_ENV_ENV)
    prefix = os.environ.get("CONDA_PREFIX")
    if not conda_env and not prefix:
        return None
    record: dict[str, Any] = {"file": str(conda_env) if conda_env else None, "prefix": prefix}
    if conda_env and Path(conda_env).is_file():
        record["sha256"] = provenance.sha256_file(conda_env)
    return record


def register(
    outputs: Iterable[str | os.PathLike],
    *,
    rule: str,
    inputs: Iterable[str | os.PathLike] = (),
    config: Any = None,
    conda_env: str | os.PathLike | None = None,
    results_dir: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
) -> list[Path]:
    """Record each output's sha256 and provenance in its sidecar; returns the sidecar paths.

    ``outputs`` must lie inside ``results_dir`` (default ``$CONCORD_RESULTS_DIR`` or
    ``results``); files and directories are both fine. ``inputs`` may lie anywhere (inside the
    results tree they are stored relative to it, so a copied tree still verifies). ``conda_env``
    is the env file (default ``$CONCORD_CONDA_ENV``); an active ``$CONDA_PREFIX`` is recorded too.
    """
    results = Path(results_dir) if results_dir is not None else default_results_dir()
    work = Path(workdir) if workdir is not None else Path.cwd()
    if not rule:
        raise ValueError("register: 'rule' (the producing rule's name) is required")
    input_records = []
    for item in inputs:
        if not Path(item).exists():
            raise FileNotFoundError(f"register({rule}): input does not exist: {item}")
        input_records.append({**_input_ref(item, results, work), "sha256": provenance.sha256_path(item)})
    cfg_hash, sections = config_fingerprint(config)
    conda = _conda_record(conda_env)
    written = []
    for out in outputs:
        out = Path(out)
        rel = _relative_to(out, results)
        if rel is None:
            raise ValueError(f"register({rule}): output {out} is not inside the results directory {results}")
        if not out.exists():
            raise FileNotFoundError(f"register({rule}): output does not exist: {out}")
        entry = {
            "path": rel,
            "kind": "dir" if out.is_dir() else "file",
            "sha256": provenance.sha256_path(out),
            "rule": rule,
            "inputs": input_records,
            "config_hash": cfg_hash,
            "config_sections": sections,
            "code_version": provenance.code_version(),
            "conda_env": conda,
        }
        written.append(io.write_json(sidecar_path(results, rel), entry))
    return written


# ------------------------------------------------------------------ record


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


def _artifact_files(results: Path, covered_dirs: Iterable[str]) -> list[str]:
    """Every file of the tree (relative), minus audit files, temporaries and registered dirs."""
    covered = tuple(f"{d.rstrip('/')}/" for d in covered_dirs)
    files = []
    for path in results.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(results).as_posix()
        parts = rel.split("/")
        if parts[0] in EXCLUDED_TOP_LEVEL or any(p.startswith(".") for p in parts):
            continue
        if rel.startswith(covered):
            continue
        files.append(rel)
    return sorted(files)


def build_manifest(results_dir: str | os.PathLike, config: Any = None) -> dict:
    """Merge sidecars and hash unregistered files into one manifest dict."""
    results = Path(results_dir)
    if not results.is_dir():
        raise FileNotFoundError(f"results directory does not exist: {results}")
    artifacts = _read_sidecars(results)
    dirs = [p for p, e in artifacts.items() if e.get("kind") == "dir"]
    for rel in _artifact_files(results, dirs):
        if rel not in artifacts:
            artifacts[rel] = {
                "path": rel, "kind": "file", "sha256": provenance.sha256_file(results / rel), "rule": None,
                "inputs": [], "config_hash": None, "config_sections": None, "code_version": None, "conda_env": None,
            }
    return {
        "format": FORMAT_VERSION,
        "code_version": provenance.code_version(),
        "config": config,
        "config_hash": provenance.config_hash(config) if config is not None else None,
        "artifacts": dict(sorted(artifacts.items())),
    }


def write_manifest(results_dir: str | os.PathLike, config: Any = None) -> Path:
    """Write ``<results>/manifest.json`` (atomically) and return its path."""
    manifest = build_manifest(results_dir, config)
    return io.write_json(Path(results_dir) / MANIFEST_NAME, manifest)


# ------------------------------------------------------------------ verify


@dataclass
class AuditReport:
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # artifact -> reasons
    untracked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.modified or self.stale)

    def to_dict(self) -> dict:
        return {"checked": self.checked, "ok": self.ok, "missing": self.missing, "modified": self.modified,
                "stale": self.stale, "untracked": self.untracked}

    def format(self) -> str:
        lines = [f"checked {self.checked} artifact(s): "
                 f"{len(self.missing)} missing, {len(self.modified)} modified, {len(self.stale)} stale, "
                 f"{len(self.untracked)} untracked"]
        lines += [f"MISSING   {p}" for p in self.missing]
        lines += [f"MODIFIED  {p}" for p in self.modified]
        for path, reasons in self.stale.items():
            lines += [f"STALE     {path}: {'; '.join(reasons)}"]
        lines += [f"UNTRACKED {p}" for p in self.untracked]
        return "\n".join(lines)


def _restricted_hash(config: Any, sections: list[str]) -> str:
    current = config if isinstance(config, Mapping) else {}
    return provenance.config_hash({s: current.get(s) for s in sections})


def verify(
    results_dir: str | os.PathLike,
    manifest_path: str | os.PathLike | None = None,
    config: Any = None,
    workdir: str | os.PathLike | None = None,
) -> AuditReport:
    """Check a results tree against its manifest.

    ``config`` is the configuration to judge staleness against (default: the config stored
    in the manifest by the last ``record``). Only the sections an artifact recorded reading
    are compared.
    """
    results = Path(results_dir)
    manifest_file = Path(manifest_path) if manifest_path is not None else results / MANIFEST_NAME
    if not manifest_file.is_file():
        raise FileNotFoundError(f"no manifest at {manifest_file}; run `python -m concord audit record {results}` first")
    manifest = io.read_json(manifest_file)
    if manifest.get("format") != FORMAT_VERSION:
        raise ValueError(f"{manifest_file}: unsupported manifest format {manifest.get('format')!r}")
    artifacts: dict[str, dict] = manifest["artifacts"]
    work = Path(workdir) if workdir is not None else Path.cwd()
    current_config = config if config is not None else manifest.get("config")
    report = AuditReport(checked=len(artifacts))

    hash_cache: dict[Path, str | None] = {}

    def current_hash(path: Path) -> str | None:
        if path not in hash_cache:
            hash_cache[path] = provenance.sha256_path(path) if path.exists() else None
        return hash_cache[path]

    for rel, entry in artifacts.items():
        now = current_hash(results / rel)
        if now is None:
            report.missing.append(rel)
        elif now != entry["sha256"]:
            report.modified.append(rel)
        reasons = []
        for ref in entry.get("inputs", []):
            name = ref["path"] if ref["root"] == "results" else f"{ref['root']}:{ref['path']}"
            got = current_hash(_resolve_ref(ref, results, work))
            if got is None:
                reasons.append(f"input {name} is gone")
            elif got != ref["sha256"]:
                reasons.append(f"input {name} changed")
        sections = entry.get("config_sections")
        if sections and current_config is not None and entry.get("config_hash"):
            if _restricted_hash(current_config, sections) != entry["config_hash"]:
                reasons.append(f"config changed (sections: {', '.join(sections)})")
        if reasons:
            report.stale[rel] = reasons

    # Staleness flows downstream: anything built from a broken artifact is broken too.
    broken = set(report.missing) | set(report.modified) | set(report.stale)
    changed = True
    while changed:
        changed = False
        for rel, entry in artifacts.items():
            if rel in report.stale:
                continue
            upstream = [r["path"] for r in entry.get("inputs", []) if r["root"] == "results" and r["path"] in broken]
            if upstream:
                report.stale[rel] = [f"upstream {u} is missing, modified or stale" for u in upstream]
                broken.add(rel)
                changed = True

    dirs = [p for p, e in artifacts.items() if e.get("kind") == "dir"]
    report.untracked = [p for p in _artifact_files(results, dirs) if p not in artifacts]
    report.stale = dict(sorted(report.stale.items()))
    return report


def register_command(rule: str, conda_env: str, results_dir: str = "results") -> str:
    """Shell suffix that registers a Snakemake rule's declared outputs, for rules whose command
    does not call :func:`register` itself::

        shell: "python -m concord evaluate ... && " + register_command("evaluate", "envs/gpu.yaml")

    Snakemake fills ``{input}`` and ``{output}`` when it formats the shell command.
    """
    return (
        f"python -m concord audit register --rule {rule} --results {results_dir} "
        f"--conda-env {conda_env} --inputs {{input:q}} --outputs {{output:q}}"
    )
