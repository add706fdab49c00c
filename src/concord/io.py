"""Atomic, provenance-carrying writes: nothing half-written ever sits at a final path.

Every writer goes through :func:`atomic_path`, which hands out a temporary sibling and
renames it into place only when the block finishes without an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{final.name}.", suffix=suffix if suffix is not None else final.suffix, dir=final.parent
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, final)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    with atomic_path(path) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True, default=_json_default) + "\n")
    return Path(path)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    rows = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
    return rows


def write_parquet(path: str | os.PathLike, frame, metadata: dict | None = None) -> Path:
    """Write a pandas DataFrame as Parquet; ``metadata`` (e.g. provenance) goes into the schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged[b"concord"] = json.dumps(metadata, sort_keys=True, default=_json_default).encode()
        table = table.replace_schema_metadata(merged)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def read_parquet_metadata(path: str | os.PathLike) -> dict:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(b"concord")
    return json.loads(raw) if raw else {}


def save_figure(fig, stem: str | os.PathLike, formats: Iterable[str] = ("png", "pdf")) -> list[Path]:
    """Save a matplotlib figure as ``stem.png`` and ``stem.pdf`` (atomically)."""
    stem = Path(stem)
    if stem.suffix in {".png", ".pdf"}:
        stem = stem.with_suffix("")
    out = []
    for fmt in formats:
        # Appended, not with_suffix: a stem such as "qwen2.5-math-1.5b_gpqa" has the "suffix"
        # ".5b_gpqa", which with_suffix would replace.
        target = stem.with_name(f"{stem.name}.{fmt}")
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, bbox_inches="tight", dpi=150, metadata=_figure_metadata(fmt))
        out.append(target)
    return out


def _figure_metadata(fmt: str) -> dict:
    # Fixed metadata keeps PNG/PDF bytes reproducible across reruns.
    if fmt == "pdf":
        return {"CreationDate": None, "ModDate": None, "Producer": "concord"}
    if fmt == "png":
        return {"Software": "concord"}
    return {}


def _json_default(obj: Any):
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
