"""The numbers the three papers print, as shipped data (``printed/{core,fmv,scmoa}.csv``).

One row per printed number. Columns:

``id``
    stable key of the row (unique within its paper).
``table``, ``row``, ``column``
    where the number stands in the paper, in the paper's own words ("Table 1",
    "Qwen2.5-Math-1.5B / AMC", "CoRE (ours)"; text values name their section).
``measure``
    what the number measures, as a key the readers of produced tables emit
    (:mod:`concord.scorecard.readers`), e.g. ``pass_at_1:qwen2.5-math-1.5b:amc:core``. Two printed
    numbers of the same quantity (a table cell and the text quoting it) share a measure.
``value``
    the number as printed (percent for accuracies, percentage points for differences).
``spread_kind``, ``spread``, ``ci_lo``, ``ci_hi``
    the paper's reported spread: ``std`` (over seeds) or ``se`` (bootstrap standard error) in
    ``spread``; ``arm_std`` for CoRE's Δ columns, which print no spread of their own (the
    tolerance is the std the paper prints for the arm; Base prints none); ``ci95`` with
    ``ci_lo``/``ci_hi``; ``none`` when nothing is printed;
    ``lower_bound``/``upper_bound`` when the paper states a bound ("over 40%", "p < 0.05")
    instead of a value.
``setting``
    ``key=value`` pairs (``;``-separated) of the paper's setting for this number that a run must
    share for a comparison to mean anything (e.g. ``eval_k=16``); see ``SETTING_LABELS``.
``source``
    ``table`` (a cell of a tab-separated table the seed text holds), ``table_text`` (a cell of a
    table whose body the seed holds as run-together text, e.g. SC-MoA's "Self-MoA64.17": the
    quote is the row up to and including the cell, so it ends with the value), ``text`` (a number quoted in
    the running text or a caption) or ``derived`` (computed from quoted numbers by ``formula``,
    e.g. "SC-MoA reaches 86.5% (+6.1 pp over SC)" gives SC = 86.5 - 6.1).
``quote``
    the seed text that holds the number (for table cells: the cell as printed).
``formula``, ``note``
    the arithmetic of a derived value; remarks, including the paper's own anomalies.

``tests/test_scorecard_printed.py`` checks every row against the seed text.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources

PAPERS: dict[str, str] = {
    "core": "CoRE: Consensus Rewards via Equilibrium for Test-Time Reinforcement Learning",
    "fmv": "Majority Voting for Code Generation (Functional Majority Voting, FMV)",
    "scmoa": "Beyond Consensus: Trace-Level Synthesis in Mixture of Agents (SC-MoA)",
}
# The seed files of ../shared/seeds each paper is transcribed from.
SEED_PREFIX: dict[str, str] = {"core": "000", "fmv": "003", "scmoa": "004"}

COLUMNS: tuple[str, ...] = ("id", "table", "row", "column", "measure", "value", "spread_kind", "spread", "ci_lo",
                            "ci_hi", "setting", "source", "quote", "formula", "note")
SPREAD_KINDS: tuple[str, ...] = ("std", "se", "arm_std", "ci95", "none", "lower_bound", "upper_bound")
SOURCES: tuple[str, ...] = ("table", "table_text", "text", "derived")

# What each setting key means, for the "different setting" explanations.
SETTING_LABELS: dict[str, str] = {
    "eval_k": "evaluation samples per question (pass@1 as mean@k)",
    "temperature": "sampling temperature",
    "top_p": "top-p",
    "n_vote": "roll-outs voted on per question in training",
    "cells": "model-benchmark cells",
    "benchmarks": "benchmarks",
    "models": "models",
    "n": "samples per problem (N)",
    "n_questions": "questions",
    "N": "perturbations N",
    "k": "samples per perturbation k",
    "sc_k": "self-consistency samples",
    "comparisons": "SC-MoA-vs-baseline comparisons",
    "seeds": "seeds (at least)",
    "epochs": "training epochs",
    "n_rollouts": "roll-outs per question",
    "aggregator": "aggregator model",
    "perturbation": "perturbation",
    "alpha": "consensus alpha",
}
# Setting keys a run may exceed: more seeds than the paper's is the paper's setting, better measured.
AT_LEAST_KEYS: frozenset[str] = frozenset({"seeds"})

# The question counts of CoRE's benchmarks (the scale a run must share): AMC 83 (TTRL's AMC set),
# AIME 2024 30, MATH-500 500 and its level-4/5 subsets 128/134 (Appendix H: "MATH level 4 (128
# questions"), GPQA-Diamond 198 (§4: "the 198-question GPQA-Diamond subset").
CORE_QUESTIONS: dict[str, int] = {"amc": 83, "aime2024": 30, "math500": 500, "math_l4": 128, "math_l5": 134,
                                  "gpqa_diamond": 198}
# TTRL's training epochs per benchmark (80 AIME / 30 AMC / 10 MATH; GPQA as MATH), config/paper.yaml.
CORE_EPOCHS: dict[str, int] = {"aime2024": 80, "amc": 30, "math500": 10, "math_l4": 10, "math_l5": 10,
                               "gpqa_diamond": 10}


@dataclass(frozen=True)
class PrintedCell:
    """One printed number, parsed."""

    paper: str
    id: str
    table: str
    row: str
    column: str
    measure: str
    text: str  # the value exactly as printed
    spread_kind: str
    spread: float | None
    ci_lo: float | None
    ci_hi: float | None
    setting: dict[str, str]
    source: str
    quote: str
    formula: str
    note: str

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def rounding(self) -> float:
        """Half a unit in the printed value's last digit: the printed number's own uncertainty."""
        return rounding_of(self.text)


def rounding_of(text: str) -> float:
    """``"21.6"`` -> 0.05, ``"13"`` -> 0.5, ``"0.002"`` -> 0.0005."""
    exponent = Decimal(text.lstrip("+")).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent)


def parse_setting(text: str) -> dict[str, str]:
    """``"eval_k=16;temperature=0.6"`` -> ``{"eval_k": "16", "temperature": "0.6"}``."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"setting {text!r}: expected key=value pairs separated by ';', got {part!r}")
        out[key.strip()] = value.strip()
    return out


def _optional_float(text: str, what: str) -> float | None:
    if text in ("", None):
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {text!r}")
    return value


_NUMBER = re.compile(r"^[+-]?\d+(\.\d+)?$")


def parse_row(paper: str, row: dict[str, str]) -> PrintedCell:
    """Validate one CSV row; errors name the row id and the field."""
    rid = row.get("id") or "?"
    where = f"printed/{paper}.csv row {rid!r}"
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}")
    text = row["value"].strip()
    if not _NUMBER.match(text):
        raise ValueError(f"{where}: value {text!r} is not a plain number")
    kind = row["spread_kind"]
    if kind not in SPREAD_KINDS:
        raise ValueError(f"{where}: spread_kind {kind!r} is not one of {', '.join(SPREAD_KINDS)}")
    if row["source"] not in SOURCES:
        raise ValueError(f"{where}: source {row['source']!r} is not one of {', '.join(SOURCES)}")
    spread = _optional_float(row["spread"], f"{where}: spread")
    lo, hi = _optional_float(row["ci_lo"], f"{where}: ci_lo"), _optional_float(row["ci_hi"], f"{where}: ci_hi")
    if kind in ("std", "se", "arm_std") and (spread is None or spread < 0):
        raise ValueError(f"{where}: spread_kind {kind} needs a non-negative spread")
    if kind == "ci95" and (lo is None or hi is None or not lo <= float(text) <= hi):
        raise ValueError(f"{where}: a ci95 needs ci_lo <= value <= ci_hi")
    if not row["measure"]:
        raise ValueError(f"{where}: measure is empty")
    return PrintedCell(paper=paper, id=rid, table=row["table"], row=row["row"], column=row["column"],
                       measure=row["measure"], text=text, spread_kind=kind, spread=spread, ci_lo=lo, ci_hi=hi,
                       setting=parse_setting(row["setting"]), source=row["source"], quote=row["quote"],
                       formula=row["formula"], note=row["note"])


def load_printed(paper: str) -> list[PrintedCell]:
    """The printed numbers of one paper (``core``, ``fmv`` or ``scmoa``), in file order."""
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; known: {', '.join(PAPERS)}")
    text = resources.files("concord.scorecard").joinpath("printed", f"{paper}.csv").read_text(encoding="utf-8")
    cells = [parse_row(paper, row) for row in csv.DictReader(text.splitlines())]
    seen: set[str] = set()
    for cell in cells:
        if cell.id in seen:
            raise ValueError(f"printed/{paper}.csv: duplicate id {cell.id!r}")
        seen.add(cell.id)
    return cells


def load_anomalies() -> list[dict[str, str]]:
    """The papers' own inconsistencies (``printed/anomalies.csv``: paper, where, anomaly)."""
    text = resources.files("concord.scorecard").joinpath("printed", "anomalies.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))
