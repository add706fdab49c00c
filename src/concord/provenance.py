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
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import concord
from concord import hardware

REPO_ROOT = Path(__file__).resolve().parents[2]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# Snakemake touches this file inside every directory output *after* the job has finished (it
# carries the directory's mtime); it is bookkeeping, not content, so no hash includes it.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"


def _directory_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name != SNAKEMAKE_TIMESTAMP)


def sha256_path(path: str | os.PathLike) -> str:
    """Hash a file, or a directory as the sorted list of (relative name, file hash).

    The same function hashes a directory when a job registers it and when ``audit verify``
    checks it, so the two agree exactly (Snakemake's ``.snakemake_timestamp`` is left out).
    """
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        digest = hashlib.sha256()
        for child in _directory_files(path):
            digest.update(child.relative_to(path).as_posix().encode())
            digest.update(sha256_file(child).encode())
        return digest.hexdigest()
    raise FileNotFoundError(f"cannot hash missing path: {path}")


def size_of(path: str | os.PathLike) -> int:
    """Bytes of a file, or of every file in a directory (as hashed)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in _directory_files(path))


def stat_signature(path: str | os.PathLike) -> str:
    """A cheap fingerprint (names, sizes, mtimes) of a file or directory.

    Only to decide whether an input's recorded sha256 may be reused instead of re-reading a
    large model directory in every downstream job; verification always re-hashes content.
    """
    path = Path(path)
    files = [path] if path.is_file() else _directory_files(path)
    digest = hashlib.sha256()
    for child in files:
        st = child.stat()
        digest.update(f"{child.relative_to(path).as_posix() if child != path else ''}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


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


def _name_and_version(dist) -> tuple[str | None, str | None]:
    """A distribution's ``Name`` and ``Version`` as ``dist.metadata`` gives them, from the header
    block of the same file only. *Why by hand*: ``dist.metadata`` parses the whole file, long
    description included, and ``dist.version`` parses it again; for the 140-200 distributions of
    an environment that took 0.2-0.5 s in each of the ~100 processes of a default run (every job
    and its ``audit register``), the headers alone 0.04 s, with the same strings."""
    import email.parser

    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
    headers = email.parser.HeaderParser().parsestr(text.split("\n\n", 1)[0])
    return headers["Name"], headers["Version"]


@functools.lru_cache(maxsize=1)
def environment() -> dict:
    """The software environment a job ran in: interpreter, prefix, and a hash of every installed
    distribution (name==version), so two jobs that ran under different package sets differ."""
    from importlib import metadata

    packages = sorted({f"{name}=={version}".lower() for name, version in map(_name_and_version, metadata.distributions())
                       if name})
    return {
        "python": platform.python_version(),
        "prefix": sys.prefix,
        "conda_prefix": os.environ.get("CONDA_PREFIX"),
        "packages": len(packages),
        "packages_sha256": hashlib.sha256("\n".join(packages).encode()).hexdigest(),
    }


def engine_dtype(engine) -> str | None:
    """The dtype an engine actually computes in (after ``auto`` is resolved): the HF model's
    parameter dtype, or vLLM's model config dtype; None where the engine does not say."""
    model = getattr(engine, "model", None)
    dtype = getattr(model, "dtype", None)
    if dtype is None:
        llm_engine = getattr(getattr(engine, "llm", None), "llm_engine", None)
        dtype = getattr(getattr(llm_engine, "model_config", None), "dtype", None)
    return None if dtype is None else str(dtype).removeprefix("torch.")


def numeric_path(dtype: str | None) -> dict:
    """The numeric path of a job: the dtype it computed in and the instruction set torch's CPU
    kernels dispatched to. Two trees agree byte for byte only on the same path (README: numbers
    move between processors at bf16, and at fp32 where the ISA's reduction order differs)."""
    proc = hardware.processor()
    return {"dtype": dtype, "torch_cpu_capability": proc["torch_cpu_capability"], "native_bf16": proc["native_bf16"]}


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
        "processor": hardware.processor(),
        "accelerators": hardware.accelerators(),
        "software": hardware.software(),
        **extra,
    }
