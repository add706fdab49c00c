"""concord.stats against textbook values and independently computed references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from concord import stats

# ---------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        # Textbook values (e.g. Agresti & Coull 1998; any exact binomial CI table).
        (0, 10, 0.0, 0.3085),
        (5, 10, 0.1871, 0.8129),
        (10, 10, 0.6915, 1.0),
        (1, 20, 0.0013, 0.2487),
        (13, 14, 0.6613, 0.9982),
    ],
)
def test_clopper_pearson_textbook_values(k, n, lo, hi):
    got = stats.clopper_pearson(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_clopper_pearson_closed_form_at_the_ends():
    # For k = 0 the upper bound solves (1 - p)^n = alpha/2; for k = n the lower solves p^n = alpha/2.
    n, alpha = 37, 0.1
    assert stats.clopper_pearson(0, n, alpha)[1] == pytest.approx(1 - (alpha / 2) ** (1 / n))
    assert stats.clopper_pearson(n, n, alpha)[0] == pytest.approx((alpha / 2) ** (1 / n))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), data=st.data(), alpha=st.sampled_from([0.01, 0.05, 0.1, 0.32]))
def test_clopper_pearson_is_the_exact_binomial_tail_inversion(n, data, alpha):
    k = data.draw(st.integers(0, n))
    lo, hi = stats.clopper_pearson(k, n, alpha)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    # Definition via binomial tails (independent of the beta quantiles statsmodels uses).
    if k > 0:
        assert sps.binom.sf(k - 1, n, lo) == pytest.approx(alpha / 2, rel=1e-6)
    if k < n:
        assert sps.binom.cdf(k, n, hi) == pytest.approx(alpha / 2, rel=1e-6)


@pytest.mark.parametrize(
    ("k", "n", "alpha", "message"),
    [(11, 10, 0.05, "exceed"), (0, 0, 0.05, "n >= 1"), (1, 10, 1.5, "alpha"), (-1, 10, 0.05, "non-negative"),
     (1.5, 10, 0.05, "integer")],
)
def test_clopper_pearson_rejects_bad_input(k, n, alpha, message):
    with pytest.raises(ValueError, match=message):
        stats.clopper_pearson(k, n, alpha)


# ---------------------------------------------------------------- sign test


def test_sign_test_reproduces_the_papers_13_of_14():
    # Paper section 6: CoRE beats CISC on 13/14 cells, sign test p = 0.002.
    p = stats.sign_test(13, 1)
    assert p == pytest.approx(2 * (1 + 14) / 2**14)
    assert round(p, 3) == 0.002


@settings(max_examples=60, deadline=None)
@given(wins=st.integers(0, 60), losses=st.integers(0, 60))
def test_sign_test_matches_statsmodels_and_is_symmetric(wins, losses):
    from statsmodels.stats.descriptivestats import sign_test as sm_sign_test

    p = stats.sign_test(wins, losses)
    assert p == stats.sign_test(losses, wins)
    assert 0.0 < p <= 1.0
    if wins + losses:
        sample = np.array([1.0] * wins + [-1.0] * losses)
        assert p == pytest.approx(sm_sign_test(sample, 0.0)[1], rel=1e-9)
    else:
        assert p == 1.0


# ---------------------------------------------------------------- Wilcoxon


def _exact_wilcoxon_by_enumeration(d):
    """Two-sided exact p from all 2^n sign flips of ranks (no ties, no zeros)."""
    ranks = sps.rankdata(np.abs(d))
    observed = ranks[np.asarray(d) > 0].sum()
    total = ranks.sum()
    extreme = min(observed, total - observed)
    count = sum(
        1
        for signs in itertools.product((0, 1), repeat=len(d))
        if min(s := float(np.dot(signs, ranks)), total - s) <= extreme
    )
    return count / 2 ** len(d)


def test_wilcoxon_exact_small_sample_by_enumeration():
    a = np.array([3.1, 4.0, 2.2, 6.5, 5.3, 7.9, 1.05, 8.75, 9.6])
    b = np.array([2.0, 4.5, 1.0, 3.0, 5.0, 1.5, 2.6, 1.0, 9.0])
    assert stats.wilcoxon(a, b) == pytest.approx(_exact_wilcoxon_by_enumeration(a - b))


def test_wilcoxon_paper_pattern():
    # 14 cells, one loss with the 3rd-smallest magnitude: p = 2 * 5 / 2^14 ~ 0.001 (paper: 0.001).
    d = np.arange(1.0, 15.0)
    d[2] *= -1
    p = stats.wilcoxon(d, np.zeros_like(d))
    assert p == pytest.approx(10 / 2**14)
    assert round(p, 3) == 0.001


def test_wilcoxon_identical_samples_and_errors():
    assert stats.wilcoxon([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        stats.wilcoxon([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        stats.wilcoxon([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="empty"):
        stats.wilcoxon([], [])


# ---------------------------------------------------------------- McNemar


@pytest.mark.parametrize(("b", "c"), [(10, 2), (5, 2), (40, 25), (0, 7), (1, 1)])
def test_mcnemar_chi_square_without_correction(b, c):
    statistic = (b - c) ** 2 / (b + c)
    assert stats.mcnemar(b, c) == pytest.approx(sps.chi2.sf(statistic, df=1), rel=1e-9)


def test_mcnemar_known_value_and_exact_variant():
    # (10 - 2)^2 / 12 = 5.333..., p = 0.0209 (no continuity correction).
    assert stats.mcnemar(10, 2) == pytest.approx(0.020921335337794035, rel=1e-9)
    # Exact: 2 * P(Bin(12, 1/2) <= 2) = 2 * (1 + 12 + 66) / 4096.
    assert stats.mcnemar(10, 2, exact=True) == pytest.approx(2 * 79 / 4096)
    assert stats.mcnemar(0, 0) == 1.0
    assert stats.mcnemar(0, 0, exact=True) == 1.0
    with pytest.raises(ValueError, match="non-negative"):
        stats.mcnemar(-1, 3)


# ---------------------------------------------------------------- bootstrap


def test_paired_bootstrap_is_deterministic_and_brackets_the_delta():
    rng = np.random.default_rng(7)
    a = rng.random(80)
    b = a - 0.05 + rng.normal(0, 0.1, 80)
    first = stats.paired_bootstrap(a, b, n_resamples=2000, seed=3)
    assert first == stats.paired_bootstrap(a, b, n_resamples=2000, seed=3)
    assert first != stats.paired_bootstrap(a, b, n_resamples=2000, seed=4)
    delta, lo, hi = first
    assert delta == pytest.approx(np.mean(a - b))
    assert lo < delta < hi


def test_paired_bootstrap_width_matches_normal_theory():
    rng = np.random.default_rng(11)
    d = rng.normal(0.3, 1.0, 400)
    _, lo, hi = stats.paired_bootstrap(d, np.zeros_like(d), n_resamples=4000, seed=0)
    expected = 2 * 1.959964 * d.std(ddof=1) / math.sqrt(d.size)
    assert hi - lo == pytest.approx(expected, rel=0.1)


@settings(max_examples=25, deadline=None)
@given(
    diffs=st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=30),
    shift=st.floats(-5, 5, allow_nan=False),
)
def test_paired_bootstrap_depends_only_on_differences(diffs, shift):
    b = np.linspace(0, 1, len(diffs))
    a = b + np.array(diffs)
    base = stats.paired_bootstrap(a, b, n_resamples=200, seed=1)
    moved = stats.paired_bootstrap(a + shift, b + shift, n_resamples=200, seed=1)
    assert moved == pytest.approx(base, abs=1e-9)
    assert base[0] == pytest.approx(float(np.mean(diffs)), abs=1e-12)
    assert base[1] <= base[2]


def test_bootstrap_se_close_to_analytic_standard_error():
    rng = np.random.default_rng(5)
    x = rng.normal(0, 2.0, 300)
    se = stats.bootstrap_se(x, n_resamples=4000, seed=0)
    assert se == pytest.approx(x.std(ddof=0) / math.sqrt(x.size), rel=0.08)
    assert se == stats.bootstrap_se(x, n_resamples=4000, seed=0)
    assert stats.bootstrap_se([2.0, 2.0, 2.0], n_resamples=100, seed=0) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.bootstrap_se([1.0], 100, 0), "at least 2"),
        (lambda: stats.bootstrap_se([1.0, 2.0], 0, 0), "n_resamples"),
        (lambda: stats.bootstrap_se([1.0, 2.0], 10, 1.5), "seed"),
        (lambda: stats.paired_bootstrap([1.0, 2.0], [1.0], 10, 0), "differ in length"),
        (lambda: stats.paired_bootstrap([1.0, 2.0], [1.0, 3.0], 10, 0, confidence_level=1.0), "confidence_level"),
    ],
)
def test_bootstrap_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_sign_flip_test_is_exact_on_small_samples():
    # Differences 1, 2, 3: of the 8 sign patterns only +++ and --- have |mean| >= 2 -> p = 2/8.
    assert stats.sign_flip_test([1.0, 2.0, 3.0], n_resamples=1000, seed=0) == pytest.approx(0.25)
    assert stats.sign_flip_test([0.0, 0.0, 0.0]) == 1.0 and stats.sign_flip_test([5.0]) == 1.0
    assert stats.sign_flip_test([1.0, -1.0, 2.0, -2.0], n_resamples=1000, seed=0) == pytest.approx(1.0)


def test_stratified_bootstrap_keeps_each_group_in_its_stratum():
    d = np.array([0.25, 0.0, 0.5, -0.25, 0.75, 0.0, 0.25, 0.5])
    # One group: exactly the paired bootstrap of the differences (same resamples, same seed).
    assert stats.bootstrap_mean_of_means([d], 2000, 3) == pytest.approx(stats.paired_bootstrap(d, np.zeros_like(d), 2000, 3))
    # Two constant groups: the mean of means never moves, whatever is resampled within them
    # (a pooled bootstrap over all 8 values would spread between 0 and 1).
    assert stats.bootstrap_mean_of_means([np.ones(4), np.zeros(4)], 2000, 0) == (0.5, 0.5, 0.5)
    est, lo, hi = stats.bootstrap_mean_of_means([d, d[:3] + 1], 2000, 0)
    assert est == pytest.approx((d.mean() + (d[:3] + 1).mean()) / 2) and lo < est < hi
    with pytest.raises(ValueError, match="non-empty"):
        stats.bootstrap_mean_of_means([d, []])


def test_questions_and_seeds_bootstrap_reduces_to_the_question_bootstrap_with_one_seed():
    rng = np.random.default_rng(1)
    d = rng.choice([-100.0, 0.0, 0.0, 100.0], size=200)
    est, lo, hi = stats.bootstrap_questions_and_seeds([d[:, None]], 4000, 0)
    ref = stats.bootstrap_mean_of_means([d], 4000, 0)
    assert est == pytest.approx(ref[0])
    assert lo == pytest.approx(ref[1], abs=1.5) and hi == pytest.approx(ref[2], abs=1.5)


def test_questions_and_seeds_bootstrap_widens_with_the_spread_over_seeds():
    rng = np.random.default_rng(2)
    questions = rng.normal(0.0, 5.0, size=(100, 1))
    seeds = np.array([[-20.0, 0.0, 20.0]])  # training seeds that disagree by tens of points
    d = questions + seeds
    _, lo, hi = stats.bootstrap_questions_and_seeds([d], 4000, 0)
    _, lo_q, hi_q = stats.bootstrap_mean_of_means([d.mean(axis=1)], 4000, 0)  # seeds averaged away
    assert (hi - lo) > 5 * (hi_q - lo_q)
    assert stats.bootstrap_questions_and_seeds([d], 4000, 0) == (stats.bootstrap_questions_and_seeds([d], 4000, 0))
    assert stats.bootstrap_questions_and_seeds([np.full((3, 2), 4.0)], 100, 0) == (4.0, 4.0, 4.0)
    with pytest.raises(ValueError, match="questions x seeds"):
        stats.bootstrap_questions_and_seeds([np.array([1.0, 2.0])])


def test_mcnemar_variants_match_the_papers_printed_p_values():
    from concord import stats as cs

    # SC-MoA Table 37 (exact), Tables 29-30 (chi-square), Table 27 (continuity-corrected chi-square).
    assert round(cs.mcnemar(10, 23, method="exact"), 3) == 0.035
    assert round(cs.mcnemar(10, 23, exact=True), 3) == 0.035
    assert round(cs.mcnemar(12, 5), 3) == 0.090 and round(cs.mcnemar_statistic(12, 5), 2) == 2.88
    assert round(cs.mcnemar(11, 7, method="chi2_cc"), 3) == 0.480
    assert cs.mcnemar_statistic(11, 7, correction=True) == pytest.approx(0.5)
    assert cs.mcnemar(0, 0, method="exact") == 1.0 and cs.mcnemar_statistic(0, 0) == 0.0
    with pytest.raises(ValueError, match="unknown McNemar method"):
        cs.mcnemar(3, 4, method="fisher")
    with pytest.raises(ValueError, match="non-negative integer"):
        cs.mcnemar(-1, 4, method="exact")


def test_holm_matches_statsmodels_and_rejects_bad_p_values():
    from concord import stats as cs

    assert cs.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert cs.holm([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cs.holm([0.5, 1.5])
