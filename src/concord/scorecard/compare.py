"""Printed beside reproduced: the difference and a verdict for every printed number.

Verdicts:

``within``
    the run shares the paper's setting and its number lies within the paper's reported spread:
    ``|reproduced - printed| <= spread + r`` for a std or SE (a CoRE Δ: its arm's std),
    ``ci_lo - r <= reproduced <= ci_hi + r`` for a 95% CI, ``|reproduced - printed| <= r`` where
    the paper prints no spread, where ``r`` is half a unit in the printed number's last digit (the
    printed number's own rounding); above a printed lower bound, below a printed upper bound.
``outside``
    the same setting, beyond that spread (or undefined where the paper has a number).
``different setting``
    the run produced the number under another setting (another model, benchmark, sample count,
    fewer cells ...): both are shown, the setting difference is named, nothing is judged.
``not run``
    the run produced no such number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from concord.scorecard.printed import SETTING_LABELS, PrintedCell
from concord.scorecard.readers import Reproduced

VERDICTS: tuple[str, ...] = ("within", "outside", "different setting", "not run")


@dataclass
class Row:
    """One printed number with its reproduction."""

    cell: PrintedCell
    reproduced: Reproduced | None
    verdict: str
    difference: float | None
    setting_differences: list[str] = field(default_factory=list)
    fidelity: list[str] = field(default_factory=list)  # anchors of docs/fidelity.md rows


def setting_differences(printed: Mapping[str, str], run: Mapping[str, str]) -> list[str]:
    """Every key of the paper's setting the run does not share, as ``"what: run (paper: x)"``."""
    out = []
    for key, paper_value in printed.items():
        run_value = run.get(key, "unknown")
        if not _same(paper_value, run_value):
            label = SETTING_LABELS.get(key, key)
            out.append(f"{label}: {_short(run_value)} (paper: {_short(paper_value)})")
    return out


def _same(a: str, b: str) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=1e-12)
    except ValueError:
        return a == b


def _short(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def within_spread(cell: PrintedCell, value: float) -> bool:
    """Whether ``value`` lies within the paper's reported spread of ``cell`` (see module doc)."""
    if math.isnan(value):
        return False
    r = cell.rounding + 1e-9
    if cell.spread_kind in ("std", "se", "arm_std"):
        return abs(value - cell.value) <= (cell.spread or 0.0) + r
    if cell.spread_kind == "ci95":
        return cell.ci_lo - r <= value <= cell.ci_hi + r
    if cell.spread_kind == "lower_bound":
        return value > cell.value
    if cell.spread_kind == "upper_bound":
        return value < cell.value
    return abs(value - cell.value) <= r


def judge(cell: PrintedCell, reproduced: Reproduced | None) -> Row:
    if reproduced is None:
        return Row(cell, None, "not run", None)
    differences = setting_differences(cell.setting, reproduced.setting)
    value = reproduced.value
    difference = None if math.isnan(value) else value - cell.value
    if differences:
        return Row(cell, reproduced, "different setting", difference, differences)
    return Row(cell, reproduced, "within" if within_spread(cell, value) else "outside", difference)


def compare(cells: Sequence[PrintedCell], records: Iterable[Reproduced]) -> tuple[list[Row], list[Reproduced]]:
    """Rows for every printed cell, and the produced numbers no printed cell measures."""
    by_measure: dict[str, Reproduced] = {}
    for record in records:
        first = by_measure.get(record.measure)
        if first is None:
            by_measure[record.measure] = record
        elif not (first.value == record.value or math.isclose(first.value, record.value, rel_tol=0, abs_tol=1e-9)):
            # The same quantity in two files (a model in two CoRE tables, FMV's N in both Figure 2
            # panels): the first file read stands, the other value is named beside it.
            first.notes.append(f"{record.source} gives {record.value:.4g}")
    rows = [judge(cell, by_measure.get(cell.measure)) for cell in cells]
    printed = {cell.measure for cell in cells}
    unprinted = [r for r in by_measure.values() if r.measure not in printed and r.listed]
    return rows, sorted(unprinted, key=lambda r: r.measure)


def summary(rows: Sequence[Row]) -> dict[str, int]:
    """Counts per verdict, plus ``printed`` (all) and ``compared`` (within + outside)."""
    counts = {v: 0 for v in VERDICTS}
    for row in rows:
        counts[row.verdict] += 1
    return {"printed": len(rows), **counts, "compared": counts["within"] + counts["outside"]}


def unprinted_reason(record: Reproduced, cells: Sequence[PrintedCell]) -> str:
    """Why a produced number has no printed counterpart: a model or benchmark the paper does not
    have (another setting), or a quantity the paper does not print (e.g. EC's overall mean)."""
    known = {piece for cell in cells for part in cell.measure.split(":") for piece in part.split("+")}
    parts = record.measure.split(":")
    if parts[0] not in known:
        return "the paper prints no such quantity"
    foreign = [p for p in parts[1:] if p not in known and not p.replace(".", "").isdigit()]
    if foreign:
        return f"different setting: {', '.join(foreign)} not in the paper"
    return "the paper prints no number here"
