"""The scorecard's verdicts are calibrated: runs drawn from the paper's own distribution are
called "within" at the level docs/scorecard.md states (95%, two-sided), within Monte-Carlo error.

Each test draws faithful reproductions of a real printed cell -- the number and spread a paper
printed -- the way docs/scorecard.md defines them, judges each with the scorecard's own verdict
(``compare.judge``) and checks the within-rate against ``tolerance.LEVEL``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from concord.scorecard.compare import judge
from concord.scorecard.printed import load_printed
from concord.scorecard.readers import Reproduced, _flip_uncertainties
from concord.scorecard.tolerance import LEVEL, Uncertainty, proportion_uncertainty, seed_uncertainty

DRAWS = 3000
# Four binomial standard errors of the estimated rate: a calibrated verdict fails this < 1e-4 of the time.
MC = 4 * math.sqrt(LEVEL * (1 - LEVEL) / DRAWS)


def _cell(paper: str, cell_id: str):
    return next(c for c in load_printed(paper) if c.id == cell_id)


def _rate(verdicts) -> float:
    verdicts = list(verdicts)
    return sum(v == "within" for v in verdicts) / len(verdicts)


@pytest.mark.parametrize("run_seeds", [3, 5])
def test_core_seed_means_are_within_at_the_stated_level(run_seeds):
    """A faithful CoRE reproduction: the paper's 3 seeds and the run's seeds come from one
    distribution; the paper printed its mean and population std (ddof 0) to one decimal."""
    rng = np.random.default_rng(7)
    template = _cell("core", "t1.qwen2.5-math-1.5b.math500.core")  # 77.0 ± 1.5
    sigma = template.spread * math.sqrt(1.5)  # the per-seed spread its ddof-0 std estimates
    verdicts = []
    for _ in range(DRAWS):
        paper = rng.normal(template.value, sigma, 3)
        cell = dataclasses.replace(template, text=f"{paper.mean():.1f}", spread=round(float(paper.std()), 1))
        run = rng.normal(template.value, sigma, run_seeds)
        record = Reproduced("core", cell.measure, float(run.mean()), "x", setting={**cell.setting, "seeds": str(run_seeds)},
                            uncertainty=seed_uncertainty(float(run.std()), run_seeds, 0))
        verdicts.append(judge(cell, record).verdict)
    assert abs(_rate(verdicts) - LEVEL) < MC, _rate(verdicts)


def test_a_run_drawn_around_the_printed_value_itself_is_within_more_often():
    """docs/scorecard.md also states the rate when the printed mean is taken as the truth (the
    run alone is noisy): the tolerance counts the paper's noise too, so the rate exceeds 99%."""
    rng = np.random.default_rng(8)
    cell = _cell("core", "t1.qwen2.5-math-1.5b.math500.core")
    sigma = cell.spread * math.sqrt(1.5)
    verdicts = []
    for _ in range(DRAWS):
        run = rng.normal(cell.value, sigma, 3)
        record = Reproduced("core", cell.measure, float(run.mean()), "x", setting=dict(cell.setting),
                            uncertainty=seed_uncertainty(float(run.std()), 3, 0))
        verdicts.append(judge(cell, record).verdict)
    assert _rate(verdicts) > 0.99


def test_fmv_bootstrap_se_cells_are_within_at_the_stated_level():
    """FMV prints a bootstrap SE over questions: a run on the same questions draws its mean from
    N(printed, SE^2) and reports the same SE."""
    rng = np.random.default_rng(9)
    cell = _cell("fmv", "t1.fmv.train_mean")  # 36.9 ± 3.8
    verdicts = []
    for _ in range(DRAWS):
        value = rng.normal(cell.value, cell.spread)
        record = Reproduced("fmv", cell.measure, value, "x", setting=dict(cell.setting),
                            uncertainty=Uncertainty(cell.spread))
        verdicts.append(judge(cell, record).verdict)
    assert abs(_rate(verdicts) - LEVEL) < MC, _rate(verdicts)


@pytest.mark.parametrize("cell_id", ["t1.bbh3.sc", "t1.gpqa.cot", "t1.aime.scmoa"])
def test_scmoa_accuracies_without_a_spread_are_within_at_the_stated_level(cell_id):
    """SC-MoA prints these without a spread: a faithful run's correct count is binomial around
    the printed accuracy over the paper's questions; its own binomial SE is the tolerance."""
    rng = np.random.default_rng(10)
    cell = _cell("scmoa", cell_id)
    n = int(cell.setting["n_questions"])
    verdicts = []
    for correct in rng.binomial(n, cell.value / 100, DRAWS):
        value = 100 * correct / n
        record = Reproduced("scmoa", cell.measure, value, "x", setting=dict(cell.setting),
                            uncertainty=proportion_uncertainty(value, n))
        verdicts.append(judge(cell, record).verdict)
    # Counts are discrete: the rate may exceed the level by the lattice's slack, never fall short.
    rate = _rate(verdicts)
    assert LEVEL - MC < rate < LEVEL + 2 * MC, rate


def test_scmoa_clopper_pearson_cells_are_within_at_least_the_stated_level():
    """A printed Clopper-Pearson CI is wider than the binomial SE it stands for (exact intervals
    are conservative): a faithful run is within at least at the level, by at most a few points more."""
    rng = np.random.default_rng(11)
    cell = _cell("scmoa", "t1.gpqa.scmoa")  # 73.2 [66.5, 79.3], 198 questions
    verdicts = []
    for correct in rng.binomial(198, cell.value / 100, DRAWS):
        value = 100 * correct / 198
        record = Reproduced("scmoa", cell.measure, value, "x", setting=dict(cell.setting),
                            uncertainty=proportion_uncertainty(value, 198))
        verdicts.append(judge(cell, record).verdict)
    rate = _rate(verdicts)
    assert LEVEL - MC < rate < 0.985, rate


def test_p_values_are_judged_on_their_statistic_at_the_stated_level():
    """A p-value printed without a spread: a faithful run's test statistic is the paper's plus a
    unit-variance error (McNemar's chi-square is z^2 of such a z)."""
    rng = np.random.default_rng(12)
    cell = _cell("scmoa", "t29.p")  # 0.090
    z = stats.norm.isf(cell.value / 2)
    verdicts = []
    for draw in rng.normal(z, 1.0, DRAWS):
        p = float(2 * stats.norm.sf(abs(draw)))
        verdicts.append(judge(cell, Reproduced("scmoa", cell.measure, p, "x", setting=dict(cell.setting))).verdict)
    # |z| folds the draws below zero: the rate can only exceed the level there.
    rate = _rate(verdicts)
    assert LEVEL - MC < rate < LEVEL + 2 * MC, rate


def test_flip_counts_are_within_at_the_stated_level():
    """Table 29's 12 beneficial flips of 198 questions: a faithful run's count is binomial."""
    rng = np.random.default_rng(13)
    cell = _cell("scmoa", "t29.beneficial")
    verdicts = []
    for count in rng.binomial(198, 12 / 198, DRAWS):
        record = Reproduced("scmoa", cell.measure, float(count), "x", setting=dict(cell.setting),
                            uncertainty=_flip_uncertainties(int(count), 5, 198)["beneficial"])
        verdicts.append(judge(cell, record).verdict)
    rate = _rate(verdicts)
    assert LEVEL - MC < rate < LEVEL + 2 * MC, rate


def test_a_zero_std_cell_has_a_floor_not_exact_equality():
    """40.0 ± 0.0 (Qwen2.5-Math-7B AIME, Majority... EC): a std printed as 0.0 is below 0.05, so
    its floor admits a run that differs by a few hundredths, not only an exact repeat."""
    cell = next(c for c in load_printed("core") if c.spread_kind == "std" and c.spread == 0.0)
    run = Reproduced("core", cell.measure, cell.value + 0.06, "x", setting=dict(cell.setting),
                     uncertainty=seed_uncertainty(0.0, 3, 0))
    row = judge(cell, run)
    assert row.verdict == "within" and row.tolerance.half_width > 0.06
    far = dataclasses.replace(run, value=cell.value + 1.0)
    assert judge(cell, far).verdict == "outside"


def test_a_derived_number_carries_the_rounding_of_both_literals():
    from concord.scorecard.tolerance import rounding_sd

    derived = _cell("scmoa", "t1.bbh3.sc")  # 86.5 - 6.1
    quoted = _cell("scmoa", "t1.gpqa.cot")  # 66.7
    assert rounding_sd(derived) == pytest.approx(math.sqrt(2) * rounding_sd(quoted))
    assert rounding_sd(quoted) == pytest.approx(0.1 / math.sqrt(12))
