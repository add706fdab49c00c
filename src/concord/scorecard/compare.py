"""Printed beside reproduced: the difference and a verdict for every printed number.

Verdicts:

``within``
    the run shares the paper's setting (scale included: questions, seeds, training epochs, N, k)
    and its number passes a two-sided test at :data:`~concord.scorecard.tolerance.LEVEL` (95%)
    of "same quantity on the same questions": ``|reproduced - printed| <= q * sqrt(SE_paper^2 +
    SE_run^2 + SD_rounding^2)`` over what varies between two runs on the paper's questions
    (:mod:`concord.scorecard.tolerance`: seed spreads, a sampled run's sampling noise on both
    sides, nothing for a greedy cached run, the printed digits' rounding; never the sampling of
    the questions); a p-value must also share the paper's significance verdict; above a printed
    lower bound, below a printed upper bound.
``outside``
    the same setting, beyond that tolerance (or undefined where the paper has a number).
``different setting``
    the run produced the number under another setting (another sample count, fewer questions or
    seeds, a capped training, fewer cells ...): the setting difference is named, both numbers are
    shown, nothing is judged and no difference is computed.
``analogue computed``
    the run produced no such number, but computed the same quantity for another model or
    benchmark (e.g. the default run's tiny model on the synthetic benchmark): the analogue is
    named, and listed among the numbers the paper does not print.
``not run``
    the run produced neither the number nor an analogue of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from concord.scorecard.printed import AT_LEAST_KEYS, SETTING_LABELS, PrintedCell
from concord.scorecard.readers import Reproduced
from concord.scorecard.tolerance import Tolerance, tolerance

VERDICTS: tuple[str, ...] = ("within", "outside", "different setting", "analogue computed", "not run")


@dataclass
class Row:
    """One printed number with its reproduction."""

    cell: PrintedCell
    reproduced: Reproduced | None
    verdict: str
    difference: float | None
    setting_differences: list[str] = field(default_factory=list)
    fidelity: list[str] = field(default_factory=list)  # anchors of docs/fidelity.md rows
    tolerance: Tolerance | None = None
    analogues: list[str] = field(default_factory=list)  # measures of the analogues computed


def setting_differences(printed: Mapping[str, str], run: Mapping[str, str]) -> list[str]:
    """Every key of the paper's setting the run does not share, as ``"what: run (paper: x)"``.

    Seeds may exceed the paper's (more seeds measure the same quantity better); every other
    key, question counts included, must match.
    """
    out = []
    for key, paper_value in printed.items():
        run_value = run.get(key, "unknown")
        if key in AT_LEAST_KEYS and _at_least(run_value, paper_value):
            continue
        if not _same(paper_value, run_value):
            label = SETTING_LABELS.get(key, key)
            fewer = key in ("seeds", "n_questions") and _below(run_value, paper_value)
            out.append(f"{label}: {_short(run_value)} (paper: {_short(paper_value)}){' -- fewer than the paper' if fewer else ''}")
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _at_least(run: str, paper: str) -> bool:
    a, b = _number(run), _number(paper)
    return a is not None and b is not None and a >= b


def _below(run: str, paper: str) -> bool:
    a, b = _number(run), _number(paper)
    return a is not None and b is not None and a < b


def _same(a: str, b: str) -> bool:
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=0, abs_tol=1e-12)
    return a == b


def _short(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def within_spread(cell: PrintedCell, value: float, reproduced: Reproduced | None = None) -> bool:
    """Whether ``value`` passes the verdict's test against ``cell`` (see the module doc)."""
    if math.isnan(value):
        return False
    if cell.spread_kind == "lower_bound":
        return value > cell.value
    if cell.spread_kind == "upper_bound":
        return value < cell.value
    return tolerance(cell, value, None if reproduced is None else reproduced.uncertainty).within


def judge(cell: PrintedCell, reproduced: Reproduced | None, analogues: Sequence[str] = ()) -> Row:
    if reproduced is None:
        if analogues:
            return Row(cell, None, "analogue computed", None, analogues=list(analogues))
        return Row(cell, None, "not run", None)
    differences = setting_differences(cell.setting, reproduced.setting)
    value = reproduced.value
    if differences:
        return Row(cell, reproduced, "different setting", None, differences)
    difference = None if math.isnan(value) else value - cell.value
    if cell.spread_kind in ("lower_bound", "upper_bound"):
        return Row(cell, reproduced, "within" if within_spread(cell, value) else "outside", difference)
    tol = tolerance(cell, value, reproduced.uncertainty)
    return Row(cell, reproduced, "within" if tol.within else "outside", difference, tolerance=tol)


def _quantity(measure: str) -> tuple[str, str]:
    """What a measure measures regardless of model and benchmark: (quantity, method/arm)."""
    parts = measure.split(":")
    return parts[0], parts[-1] if len(parts) > 3 else ""


def compare(cells: Sequence[PrintedCell], records: Iterable[Reproduced]) -> tuple[list[Row], list[Reproduced]]:
    """Rows for every printed cell, and the produced numbers no printed cell measures.

    A measure produced under several settings (an SC-MoA accuracy in the main and the
    mechanistic setup) is matched to each printed cell by its setting: the record sharing the
    cell's setting, else the one differing in the fewest keys.
    """
    by_measure: dict[str, list[Reproduced]] = {}
    for record in records:
        same = next((r for r in by_measure.get(record.measure, []) if r.setting == record.setting), None)
        if same is None:
            by_measure.setdefault(record.measure, []).append(record)
        elif not (same.value == record.value or math.isclose(same.value, record.value, rel_tol=0, abs_tol=1e-9)):
            # The same quantity in two files (a model in two CoRE tables, FMV's N in both Figure 2
            # panels): the first file read stands, the other value is named beside it.
            same.notes.append(f"{record.source} gives {record.value:.4g}")
    printed = {cell.measure for cell in cells}
    produced_kinds: dict[tuple[str, str], list[str]] = {}
    for measure in by_measure:
        if measure not in printed:
            produced_kinds.setdefault(_quantity(measure), []).append(measure)
    rows = []
    for cell in cells:
        candidates = by_measure.get(cell.measure, [])
        best = min(candidates, key=lambda r: len(setting_differences(cell.setting, r.setting)), default=None)
        analogues = [] if best is not None else [m for m in produced_kinds.get(_quantity(cell.measure), [])
                                                 if any(r.listed for r in by_measure[m])]
        rows.append(judge(cell, best, sorted(analogues)[:3]))
    unprinted = [r for measure, group in by_measure.items() if measure not in printed for r in group if r.listed]
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
