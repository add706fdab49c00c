"""Resumable state beside the checkpoints: the last complete checkpoint and the per-step logs.

Checkpoints go to ``checkpoint_dir``, which the workflow keeps outside Snakemake's declared
outputs (Snakemake deletes a job's outputs before running it): a job killed at any point reruns
from its last complete checkpoint, and the per-step log, kept beside the checkpoints, is cut back
to that step so no step is logged twice.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Sequence

log = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"  # written last into a checkpoint: its presence marks a complete one


def last_complete_checkpoint(checkpoint_dir: str | os.PathLike) -> Path | None:
    """The newest ``checkpoint-N`` holding a trainer state; newer incomplete ones are removed.

    A kill during a save leaves a ``checkpoint-N`` without ``trainer_state.json`` (written last);
    it must not be resumed from, and left in place it would confuse checkpoint rotation.
    """
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return None
    found = sorted(
        (int(p.name.split("-")[1]), p) for p in root.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[1].isdigit()
    )
    for step, path in reversed(found):
        if (path / TRAINER_STATE).is_file():
            return path
        log.warning("removing incomplete checkpoint %s (killed while saving)", path)
        shutil.rmtree(path)
    return None


class RunLog:
    """Append-only JSONL logs beside the checkpoints, cut back to the resumed step on restart."""

    def __init__(self, directory: str | os.PathLike, names: Sequence[str] = ("log", "groups")):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.paths = {n: self.dir / f"{n}.jsonl" for n in names}

    def truncate_after(self, step: int) -> None:
        for path in self.paths.values():
            if not path.exists():
                continue
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            kept = [r for r in rows if int(r["step"]) <= step]
            if len(kept) != len(rows):
                log.info("dropping %d log row(s) after step %d from %s", len(rows) - len(kept), step, path.name)
            from concord.io import write_jsonl

            write_jsonl(path, kept)

    def reset(self) -> None:
        for path in self.paths.values():
            path.unlink(missing_ok=True)

    def append(self, name: str, rows: Sequence[dict]) -> None:
        with self.paths[name].open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True, default=_json_default) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self, name: str) -> list[dict]:
        path = self.paths[name]
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


__all__ = ["RunLog", "TRAINER_STATE", "last_complete_checkpoint"]
