"""The table's controls: every arm against Base question by question (paired bootstrap interval,
sign-flip p-value), arms that trained identical weights, and whether zero-update reproduces Base."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord.papers.core.tables.spec import CONFIDENCE_LEVEL, ZERO_UPDATE, TableSpec

@dataclass(frozen=True)
class Comparisons:
    """Each arm against Base per (model, benchmark), question by question.

    ``cells[(model, benchmark, arm)]`` = (per-question differences in points, interval low,
    high, p-value); ``mean[arm]`` = (low, high) of the Mean-Delta row; ``identical[(model,
    benchmark, arm)]`` = the earlier arm whose weights hash the same in every seed;
    ``zero_equals_base[(model, benchmark)]`` = whether the zero-update arm gave Base's answers to
    every sample of every question in every seed.
    """

    cells: Mapping[tuple[str, str, str], tuple[np.ndarray, float, float, float]]
    mean: Mapping[str, tuple[float, float]]
    identical: Mapping[tuple[str, str, str], str]
    zero_equals_base: Mapping[tuple[str, str], bool]
    n_resamples: int
    confidence_level: float = CONFIDENCE_LEVEL


def _by_question(frame: pd.DataFrame, model: str, bench: str, arm: str) -> pd.DataFrame:
    """(questions x seeds) accuracies of one cell."""
    cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == arm)]
    bare = [r.path for r in cell.itertuples() if r.accuracy is None]
    if bare:
        raise ValueError(f"{bare[0]}: no 'per_question' records (the paired tests compare arms question by question)")
    acc = pd.DataFrame({int(r.seed): r.accuracy for r in cell.itertuples()}).sort_index(axis=1)
    if acc.empty or acc.isna().any().any():
        raise ValueError(f"{model}/{bench}/{arm}: its seeds were evaluated on different questions")
    return acc


def seed_differences(acc: pd.DataFrame, base: pd.DataFrame) -> np.ndarray:
    """(questions x arm seeds) differences in points: the arm's accuracy on each question in each
    seed minus Base's in the same seed where Base was evaluated with it, else Base's mean over its
    seeds (the rows of ``acc`` and ``base`` are the same questions, in the same order)."""
    base_mean = base.mean(axis=1)
    cols = [acc[s] - (base[s] if s in base.columns else base_mean) for s in acc.columns]
    return 100.0 * np.column_stack([c.to_numpy() for c in cols])


def compare_to_base(frame: pd.DataFrame, spec: TableSpec, n_resamples: int = 2000, seed: int = 0) -> Comparisons:
    """Paired intervals and p-values of every arm minus Base, identical models, the zero-update check."""
    from concord import stats

    cells: dict = {}
    identical: dict = {}
    zero_equals_base: dict = {}
    per_arm: dict[str, list[np.ndarray]] = {a: [] for a in spec.arms if a != "base"}  # (questions x seeds) each
    for model in spec.models:
        for bench in spec.benchmarks:
            base = _by_question(frame, model, bench, "base")
            for arm in per_arm:
                acc = _by_question(frame, model, bench, arm)
                if set(acc.index) != set(base.index):
                    raise ValueError(f"{spec.name}: {model}/{bench}/{arm} was evaluated on other questions than Base "
                                     f"({len(set(acc.index) ^ set(base.index))} differ): the paired test needs the same ones")
                by_seed = seed_differences(acc.loc[base.index], base)
                d = by_seed.mean(axis=1)
                _, lo, hi = stats.bootstrap_questions_and_seeds([by_seed], n_resamples, seed, CONFIDENCE_LEVEL)
                cells[(model, bench, arm)] = (d, lo, hi, stats.sign_flip_test(d, n_resamples, seed))
                per_arm[arm].append(by_seed)
            identical.update(_identical_models(frame, model, bench, [a for a in spec.arms if a not in ("base",)]))
            if ZERO_UPDATE in per_arm:
                zero_equals_base[(model, bench)] = _same_answers(frame, model, bench, ZERO_UPDATE, "base")
    mean = {arm: stats.bootstrap_questions_and_seeds(ds, n_resamples, seed, CONFIDENCE_LEVEL)[1:]
            for arm, ds in per_arm.items()}
    return Comparisons(cells, mean, identical, zero_equals_base, int(n_resamples))


def _identical_models(frame: pd.DataFrame, model: str, bench: str, arms: Sequence[str]) -> dict:
    """Arms whose evaluated weights hash the same as an earlier arm's in every seed."""
    hashes = {}
    for arm in arms:
        cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == arm)]
        by_seed = tuple(sorted(zip(cell["seed"], cell["model_sha256"])))
        if by_seed and all(h for _, h in by_seed):
            hashes[arm] = by_seed
    out = {}
    for i, arm in enumerate(arms):
        for earlier in arms[:i]:
            if arm in hashes and hashes.get(earlier) == hashes[arm]:
                out[(model, bench, arm)] = earlier
                break
    return out


def _same_answers(frame: pd.DataFrame, model: str, bench: str, arm: str, other: str) -> bool:
    def answers(a):
        cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == a)]
        return {int(r.seed): r.answers for r in cell.itertuples()}

    return answers(arm) == answers(other)
