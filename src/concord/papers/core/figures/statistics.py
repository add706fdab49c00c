"""The numbers the figures plot: Figure 4's cells and outcomes, Figure 5a's CoRE-vs-CISC tests, Figure
5b's factorial effects. Pure functions of the summaries and evaluation files."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io, stats
from concord.papers.core import tables

from concord.papers.core.figures.recovery import RecoveryCell

def recovery_frame(cells: Sequence[RecoveryCell], outcomes: Mapping[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """Figure 4's numbers: one row per cell, with its bars, which side of them it lies on and,
    given ``outcomes``, its CoRE minus Majority final pass@1 (points) and win/loss/tie."""
    outcomes = outcomes or {}
    rows = []
    for cell in cells:
        row = asdict(cell)
        row["recovered_fraction"] = cell.recovered_fraction
        row["confidence_factor"] = cell.confidence_factor if cell.measured else float("nan")
        row["confidence_bar"] = cell.confidence_bar if cell.measured else float("nan")
        row["above_vote_bar"] = bool(cell.measured and cell.coherence_advantage > cell.vote_bar)
        row["above_confidence_bar"] = bool(cell.measured and cell.coherence_advantage > cell.confidence_bar)
        delta = outcomes.get((cell.model, cell.benchmark))
        row["core_minus_majority"] = float("nan") if delta is None else delta
        row["outcome"] = _outcome(delta)
        rows.append(row)
    return pd.DataFrame(rows)


def core_minus_majority(summary: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Per (model, benchmark): CoRE's minus Majority's final pass@1, means over seeds in points
    (the two columns Tables 1-3 print), from :func:`tables.summarise`."""
    means = summary["mean"]
    out = {}
    for model, benchmark in dict.fromkeys((m, b) for m, b, _ in summary.index):
        if (model, benchmark, "core") in means.index and (model, benchmark, "majority") in means.index:
            out[(model, benchmark)] = float(means[(model, benchmark, "core")] - means[(model, benchmark, "majority")])
    return out


def _outcome(delta: float | None) -> str:
    if delta is None:
        return "not evaluated"
    return "win" if delta > 0 else "loss" if delta < 0 else "tie"


def pooled_confidence_factor(cells: Sequence[RecoveryCell]) -> float:
    """Question-weighted geometric mean of ``e^(-delta/tau)`` over measured cells."""
    measured = [c for c in cells if c.measured and c.n_questions > 0]
    if not measured:
        raise ValueError("no recovery cell has contested questions; Figure 4 has nothing to show")
    weights = np.array([c.n_questions for c in measured], dtype=float)
    logs = np.array([-c.confidence_gap_nats / c.tau for c in measured])
    return float(np.exp(np.average(logs, weights=weights)))


def core_vs_cisc(summary: pd.DataFrame, models: Sequence[str], benchmarks: Sequence[str]) -> tuple[pd.DataFrame, dict]:
    """Per (model, benchmark) cell: CoRE and CISC pass@1 (%, mean over seeds) and the tests.

    Wins/losses count cells where CoRE's mean beats/trails CISC's (ties dropped); the sign test
    and the Wilcoxon signed-rank test run on these per-cell means, as in the paper's section 6.
    """
    if not benchmarks:
        raise ValueError("Figure 5a: none of the configured report.fig5a_benchmarks is a configured benchmark")
    rows = []
    for model in models:
        for bench in benchmarks:
            try:
                core = float(summary.loc[(model, bench, "core"), "mean"])
                cisc = float(summary.loc[(model, bench, "cisc"), "mean"])
            except KeyError:
                raise ValueError(f"Figure 5a: no core/cisc evaluation for {model}/{bench}") from None
            rows.append({"model": model, "benchmark": bench, "cisc": cisc, "core": core, "delta": core - cisc})
    cells = pd.DataFrame(rows)
    wins = int((cells["delta"] > 0).sum())
    losses = int((cells["delta"] < 0).sum())
    result = {
        "n_cells": int(len(cells)),
        "wins": wins,
        "losses": losses,
        "ties": int(len(cells)) - wins - losses,
        "mean_delta": float(cells["delta"].mean()),
        "sign_test_p": stats.sign_test(wins, losses),
        "wilcoxon_p": stats.wilcoxon(cells["core"], cells["cisc"]),
    }
    return cells, result


FACTORIAL: dict[str, tuple[bool, bool]] = {
    # arm: (graph, confidence)
    "majority": (False, False),
    "ec": (True, False),
    "cisc": (False, True),
    "core": (True, True),
}


def factorial(
    summary: pd.DataFrame,
    models: Sequence[str],
    benchmarks: Sequence[str],
    n_resamples: int = 2000,
    seed: int = 0,
    question_deltas: Mapping[str, np.ndarray] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Mean improvement over Base (points) of each graph x confidence arm, over all cells.

    Returns the 2x2 frame (arm, graph, confidence, mean_delta, se, se_over, n_cells) and the
    effects: ``interaction = (CoRE - CISC) - (EC - Majority)``, positive when graph and confidence
    reinforce each other. SEs are bootstrap SEs over cells (fixed ``seed``); a grid of one cell
    has no spread over cells, so there the SE resamples that cell's questions and seeds instead
    (``question_deltas``: arm -> seeds x questions matrix of arm minus Base, points; see
    :func:`cell_question_deltas`), and ``se_over`` says which.
    """
    deltas: dict[str, list[float]] = {arm: [] for arm in FACTORIAL}
    for model in models:
        for bench in benchmarks:
            try:
                base = float(summary.loc[(model, bench, "base"), "mean"])
                for arm in FACTORIAL:
                    deltas[arm].append(float(summary.loc[(model, bench, arm), "mean"]) - base)
            except KeyError:
                raise ValueError(
                    f"Figure 5b needs base, majority, ec, cisc and core evaluations; {model}/{bench} lacks one"
                ) from None
    rows = []
    for arm, (graph, confidence) in FACTORIAL.items():
        values = np.array(deltas[arm])
        se, se_over = float("nan"), ""
        if values.size >= 2:
            se, se_over = stats.bootstrap_se(values, n_resamples=n_resamples, seed=seed), "cells"
        elif question_deltas is not None and np.shape(question_deltas[arm])[-1] >= 2:
            se = stats.bootstrap_se_seeds_questions(question_deltas[arm], n_resamples=n_resamples, seed=seed)
            se_over = "questions x seeds"
        rows.append({"arm": arm, "graph": graph, "confidence": confidence, "mean_delta": float(values.mean()),
                     "se": se, "se_over": se_over, "n_cells": int(values.size)})
    frame = pd.DataFrame(rows)
    m = frame.set_index("arm")["mean_delta"]
    effects = {
        "graph_given_confidence": float(m["core"] - m["cisc"]),
        "graph_without_confidence": float(m["ec"] - m["majority"]),
        "confidence_given_graph": float(m["core"] - m["ec"]),
        "confidence_without_graph": float(m["cisc"] - m["majority"]),
        "interaction": float((m["core"] - m["cisc"]) - (m["ec"] - m["majority"])),
    }
    return frame, effects


def cell_question_deltas(paths: Sequence[str | Path], model: str, benchmark: str) -> dict[str, np.ndarray]:
    """Per arm, the seeds x questions matrix of (arm minus Base) per-question accuracy in points,
    paired by seed and question id, from one cell's evaluation files (their ``per_question``)."""
    accuracy: dict[tuple[str, int], dict[str, float]] = {}
    for path in paths:
        info = tables.parse_eval_path(path)
        if (info["model"], info["benchmark"]) != (model, benchmark):
            continue
        rows = io.read_json(path).get("per_question") or []
        accuracy[(info["arm"], info["seed"])] = {str(r["id"]): 100.0 * r["n_correct"] / r["k"] for r in rows}
    seeds = sorted(s for a, s in accuracy if a == "base")
    out = {}
    for arm in FACTORIAL:
        matrix = []
        for s in seeds:
            base, other = accuracy.get(("base", s), {}), accuracy.get((arm, s))
            if other is None:
                continue
            shared = [q for q in base if q in other]
            matrix.append([other[q] - base[q] for q in shared])
        if matrix and len({len(r) for r in matrix}) == 1:
            out[arm] = np.array(matrix, dtype=float)
    return out if len(out) == len(FACTORIAL) else {}
