"""Provenance of every artifact: code version, config subset, seed, inputs' hashes.

A provenance record is a plain dict so that it can be embedded into Parquet metadata,
JSON sidecars and the run manifest alike.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Iterable

import concord

REPO_ROOT = Path(__file__).resolve().parents[2]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_path(path: str | os.PathLike) -> str:
    """Hash a file, or a directory as the sorted list of (relative name, file hash)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        digest = hashlib.sha256()
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(child.relative_to(path)).encode())
            digest.update(sha256_file(child).encode())
        return digest.hexdigest()
    raise FileNotFoundError(f"cannot hash missing path: {path}")


def config_hash(config: Any) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``git describe`` of the checkout (with ``-dirty``), else the package version."""
    env = os.environ.get("CONCORD_CODE_VERSION")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True,
        )
        return f"{concord.__version__}+g{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        return concord.__version__


def record(
    *,
    step: str,
    config: Any = None,
    seed: int | None = None,
    inputs: Iterable[str | os.PathLike] = (),
    **extra: Any,
) -> dict:
    """Build the provenance dict for one artifact."""
    return {
        "step": step,
        "code_version": code_version(),
        "seed": seed,
        "config": config,
        "config_hash": config_hash(config) if config is not None else None,
        "inputs": {str(p): sha256_path(p) for p in inputs},
        "python": platform.python_version(),
        **extra,
    }
