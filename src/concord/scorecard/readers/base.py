"""What every scorecard reader shares: the :class:`Reproduced` record, config look-ups, column checks,
and the registry of produced-file kinds (:func:`register_reader`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import pandas as pd

from concord.registry import Registry
from concord.scorecard.tolerance import (Uncertainty)

@dataclass
class Reproduced:
    """One number a run produced, keyed like the printed numbers (see ``printed.py``)."""

    paper: str
    measure: str
    value: float
    source: str  # the produced file, relative to the results tree
    spread: str = ""  # the run's own spread, for display ("± 1.2 (std, 3 seeds)")
    setting: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # remarks that do not change the verdict
    listed: bool = True  # False: an intermediate number, not shown among the unprinted ones
    uncertainty: Uncertainty | None = None  # the run's own standard error of ``value``
    group: str = ""  # the run unit it came from (an SC-MoA setup), for cross-table aggregates


def fmt_setting(value) -> str:
    """Config values as the printed settings spell them: 16, 0.6, 0 (not 0.0), unknown."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{value:g}"
    return str(value)


def _section(config: Mapping, *path: str) -> Mapping:
    node: object = config
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _resolved(config: Mapping, path: str) -> Mapping:
    """A config section with the schema's defaults filled in (what the workflow runs with), as
    concord.config resolves it; the section as given where the schema cannot resolve it."""
    from concord.config import resolve

    values = _section(config, *path.split("."))
    try:
        return resolve(path, values)
    except (KeyError, ValueError, TypeError):
        return values


def _require(frame: pd.DataFrame, columns: Iterable[str], path: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; found {list(frame.columns)}")


def _finite(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _int(value, default: int = 0) -> int:
    out = _finite(value)
    return default if out is None else int(out)


def _read_csv(path: Path) -> pd.DataFrame | None:
    """An optional table: None when absent or empty (a run without its data writes an empty file,
    e.g. k_sweep_h1 without a k sweep)."""
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None


# ------------------------------------------------------------------ the registry of produced files


@dataclass(frozen=True)
class Found:
    """One produced file: its path, its path inside the results tree, and the fields its path names."""

    path: Path
    rel: str
    fields: dict[str, str]


@dataclass
class ReadContext:
    """What every reader may consult: the results tree, the workflow config, the question counts
    of CoRE's benchmarks, the records read so far, and the paper's CoRE table families."""

    root: Path
    config: Mapping
    questions: object  # core.CoreQuestions (typed loosely: this module sits below the paper readers)
    records: list[Reproduced]
    core_families: Mapping[str, set[tuple[str, str]]]


@dataclass(frozen=True)
class FileReader:
    """How one kind of produced file is read.

    ``patterns`` match its path inside the results tree (named groups become :attr:`Found.fields`).
    ``read`` takes every file of the kind at once, with the context. ``stage`` orders the kinds:
    stage 0 reads file by file in the order given (a table stands alone); a later stage runs after
    every earlier one, because its setting comes from what they read (Figure 5a takes the seeds of
    the cells it compares) or because it reads a directory at once (an SC-MoA cell).
    """

    patterns: tuple[re.Pattern, ...]
    read: Callable[[list[Found], ReadContext], list[Reproduced]]
    stage: int = 0


READERS: Registry[FileReader] = Registry("scorecard file kind", hint="register one with concord.scorecard.readers."
                                         "register_reader")


def register_reader(name: str, *patterns: str, stage: int = 0):
    """Decorator: ``read(found, ctx)`` reads the files of kind ``name`` whose paths match ``patterns``."""
    def wrap(read: Callable[[list[Found], ReadContext], list[Reproduced]]):
        READERS.register(name, FileReader(tuple(re.compile(p) for p in patterns), read, stage))
        return read

    return wrap
