"""Where the audit's files lie in a results tree, and how paths are recorded (portably: relative to
the tree or to the workdir), so a copied tree still verifies."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

MANIFEST_DIR = ".manifest"
MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 2
# Not artifacts: the audit's own files, the tree's README, jobs' logs and Snakemake's benchmark
# records (diagnostics, written around the job), resumable state and the HTML report.
EXCLUDED_TOP_LEVEL = frozenset({MANIFEST_DIR, MANIFEST_NAME, "README.md", ".gitignore", ".gitkeep", "logs",
                                "benchmarks", "report.html"})
RESULTS_ENV = "CONCORD_RESULTS_DIR"


def default_results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV, "results"))


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return None


def sidecar_path(results_dir: str | Path, relpath: str) -> Path:
    return Path(results_dir) / MANIFEST_DIR / f"{relpath}.json"


def _input_ref(path: Path, results_dir: Path, workdir: Path) -> dict:
    """Where an input lives: inside the results tree (portable) or relative to the workdir."""
    rel = _relative_to(path, results_dir)
    if rel is not None:
        return {"root": "results", "path": rel}
    rel = _relative_to(path, workdir)
    return {"root": "workdir", "path": rel if rel is not None else str(Path(path).resolve())}


def _resolve_ref(ref: Mapping, results_dir: Path, workdir: Path) -> Path:
    base = results_dir if ref["root"] == "results" else workdir
    return base / ref["path"]


def _artifact_files(results: Path, covered_dirs: Iterable[str]) -> list[str]:
    """Every file of the tree (relative), minus audit files, diagnostics, temporaries, registered dirs."""
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
