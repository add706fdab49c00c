"""Statistics the paper reports: exact intervals, paired tests, bootstrap.

Every function is a thin, validated wrapper around scipy/statsmodels so that the numbers
in the tables and figures come from reference implementations, not hand-rolled formulas.
All p-values are two-sided.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as _sps

__all__ = [
    "clopper_pearson",
    "sign_test",
    "wilcoxon",
    "mcnemar",
    "mcnemar_statistic",
    "MCNEMAR_METHODS",
    "holm",
    "paired_bootstrap",
    "bootstrap_mean_of_means",
    "sign_flip_test",
    "bootstrap_se",
]


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or value < 0:
        raise ValueError(f"{name} must be a non-negative integer count, got {value!r}")
    return int(value)


def _alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    return float(alpha)


def _vector(name: str, values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = _vector("a", a), _vector("b", b)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: len(a)={x.size}, len(b)={y.size}")
    if x.size == 0:
        raise ValueError("paired samples are empty")
    return x, y


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact (Clopper-Pearson) ``1 - alpha`` interval for a binomial proportion ``k / n``."""
    from statsmodels.stats.proportion import proportion_confint

    k, n, alpha = _count("k", k), _count("n", n), _alpha(alpha)
    if n == 0:
        raise ValueError("clopper_pearson needs n >= 1 trials")
    if k > n:
        raise ValueError(f"successes k={k} exceed trials n={n}")
    lo, hi = proportion_confint(k, n, alpha=alpha, method="beta")
    # statsmodels returns NaN at the closed ends (k=0 / k=n); the exact bound there is 0 / 1.
    lo = 0.0 if k == 0 else float(lo)
    hi = 1.0 if k == n else float(hi)
    return lo, hi


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of ``wins`` vs ``losses`` (ties already dropped).

    With no untied pairs there is no evidence either way, so the p-value is 1.
    """
    wins, losses = _count("wins", wins), _count("losses", losses)
    n = wins + losses
    if n == 0:
        return 1.0
    return float(_sps.binomtest(wins, n, p=0.5, alternative="two-sided").pvalue)


def wilcoxon(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank test of paired samples ``a`` and ``b``.

    scipy's defaults: zero differences are dropped ("wilcox"), the exact null distribution is
    used for small samples without ties, the normal approximation otherwise. When every
    difference is zero the samples are identical and the p-value is 1.
    """
    x, y = _paired(a, b)
    if np.all(x == y):
        return 1.0
    return float(_sps.wilcoxon(x, y, alternative="two-sided").pvalue)


#: McNemar variants, as the papers use them (docs/fidelity.md, "Which test each printed p-value uses"):
#: ``exact`` the two-sided binomial test of ``b`` in ``b + c``; ``chi2`` the chi-square statistic
#: ``(b - c)^2 / (b + c)`` on 1 df; ``chi2_cc`` with Edwards' continuity correction
#: ``(|b - c| - 1)^2 / (b + c)``.
MCNEMAR_METHODS: dict[str, str] = {
    "exact": "McNemar, exact binomial (two-sided)",
    "chi2": "McNemar, chi-square without continuity correction",
    "chi2_cc": "McNemar, chi-square with continuity correction",
}


def _mcnemar_method(method: str | None, exact: bool) -> str:
    if method is None:
        return "exact" if exact else "chi2"
    if method not in MCNEMAR_METHODS:
        raise ValueError(f"unknown McNemar method {method!r}; known: {', '.join(MCNEMAR_METHODS)}")
    return method


def mcnemar(b: int, c: int, exact: bool = False, method: str | None = None) -> float:
    """McNemar's test from the two discordant counts ``b`` and ``c``: the two-sided p-value.

    ``method`` is one of :data:`MCNEMAR_METHODS` (``exact``, ``chi2``, ``chi2_cc``); without it,
    ``exact=True`` selects ``exact`` and the default is ``chi2``. Without discordant pairs the two
    arms agree everywhere and the p-value is 1.
    """
    from statsmodels.stats.contingency_tables import mcnemar as _sm_mcnemar

    b, c = _count("b", b), _count("c", c)
    method = _mcnemar_method(method, exact)
    if b + c == 0:
        return 1.0
    table = [[0, b], [c, 0]]  # concordant cells do not enter McNemar's statistic
    result = _sm_mcnemar(table, exact=method == "exact", correction=method == "chi2_cc")
    return float(min(1.0, result.pvalue))


def mcnemar_statistic(b: int, c: int, correction: bool = False) -> float:
    """McNemar's chi-square statistic (statsmodels), with or without the continuity correction;
    0 without discordant pairs."""
    from statsmodels.stats.contingency_tables import mcnemar as _sm_mcnemar

    b, c = _count("b", b), _count("c", c)
    if b + c == 0:
        return 0.0
    return float(_sm_mcnemar([[0, b], [c, 0]], exact=False, correction=bool(correction)).statistic)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of one family (statsmodels ``multipletests``)."""
    from statsmodels.stats.multitest import multipletests

    ps = _vector("pvalues", pvalues)
    if ps.size == 0:
        return []
    if np.any((ps < 0) | (ps > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    return [float(p) for p in multipletests(ps, method="holm")[1]]


def _rng(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed))


def _resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return int(n_resamples)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> tuple[float, float, float]:
    """Mean paired difference ``mean(a - b)`` with a percentile bootstrap interval.

    Pairs are resampled together (``paired=True``), so per-question correlation between the
    two arms is preserved. Returns ``(delta, lo, hi)``; a fixed ``seed`` gives identical output.
    """
    x, y = _paired(a, b)
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must lie strictly between 0 and 1, got {confidence_level!r}")
    delta = float(np.mean(x - y))
    if x.size == 1:
        # A single pair cannot be resampled into anything but itself.
        return delta, delta, delta
    res = _sps.bootstrap(
        (x, y),
        _mean_difference,
        paired=True,
        vectorized=True,
        n_resamples=_resamples(n_resamples),
        confidence_level=confidence_level,
        method="percentile",
        rng=_rng(seed),
    )
    return delta, float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_mean_of_means(
    samples: Sequence[Sequence[float]],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> tuple[float, float, float]:
    """The mean over groups of each group's mean, with a stratified percentile bootstrap interval.

    Each group (e.g. one table cell's per-question differences) is resampled on its own, so the
    interval of a table's Mean-Delta row keeps every cell's questions in their cell. With one
    group this is the ordinary bootstrap of that group's mean. Returns ``(estimate, lo, hi)``.
    """
    groups = [_vector(f"samples[{i}]", g) for i, g in enumerate(samples)]
    if not groups or any(g.size == 0 for g in groups):
        raise ValueError("bootstrap_mean_of_means needs at least one non-empty group")
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must lie strictly between 0 and 1, got {confidence_level!r}")
    estimate = float(np.mean([g.mean() for g in groups]))
    if all(g.size == 1 or np.all(g == g[0]) for g in groups):
        return estimate, estimate, estimate  # nothing to resample: every resample is the data

    def statistic(*resampled, axis=-1):
        return np.mean([np.mean(r, axis=axis) for r in resampled], axis=0)

    res = _sps.bootstrap(
        tuple(groups), statistic, paired=False, vectorized=True, n_resamples=_resamples(n_resamples),
        confidence_level=confidence_level, method="percentile", rng=_rng(seed),
    )
    return estimate, float(res.confidence_interval.low), float(res.confidence_interval.high)


def sign_flip_test(differences: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired permutation (sign-flip) test that the mean paired difference is 0.

    Under the null each pair's two members are exchangeable, so each difference keeps its size
    and takes either sign (scipy's ``permutation_test``, ``permutation_type="samples"``; exact
    when ``2**n <= n_resamples``). All-zero differences give p = 1.
    """
    d = _vector("differences", differences)
    if d.size == 0:
        raise ValueError("sign_flip_test needs at least one difference")
    if np.all(d == 0) or d.size == 1:
        return 1.0  # one difference: both of its signs are as extreme as the observed one
    res = _sps.permutation_test(
        (d,), lambda x, axis=-1: np.mean(x, axis=axis), permutation_type="samples", vectorized=True,
        n_resamples=_resamples(n_resamples), alternative="two-sided", rng=_rng(seed),
    )
    return float(min(1.0, res.pvalue))


def bootstrap_se(values: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """Bootstrap standard error of the mean of ``values`` (fixed ``seed`` => fixed result)."""
    x = _vector("values", values)
    if x.size < 2:
        raise ValueError(f"bootstrap_se needs at least 2 values, got {x.size}")
    res = _sps.bootstrap(
        (x,),
        np.mean,
        vectorized=True,
        n_resamples=_resamples(n_resamples),
        method="percentile",
        rng=_rng(seed),
    )
    se = float(res.standard_error)
    return 0.0 if math.isclose(se, 0.0, abs_tol=1e-15) else se


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def bootstrap_se_seeds_questions(values, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Bootstrap SE of the grand mean of a (seeds x questions) matrix, resampling both.

    Each resample draws the questions and, independently, the seeds with replacement (a
    two-way crossed bootstrap), so the error holds both the sampling of the benchmark and the
    run-to-run noise of sampling and training. With one seed it is the bootstrap over questions.
    scipy's ``bootstrap`` resamples one axis of paired samples only, hence this function.
    """
    m = np.asarray(values, dtype=float)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 2:
        raise ValueError(f"need a (seeds x questions) matrix with at least 2 questions, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("values must be finite")
    rng = _rng(seed)
    n_seeds, n_questions = m.shape
    total = _resamples(n_resamples)
    stats = []
    for start in range(0, total, 1000):  # chunks bound the (resamples x seeds x questions) index arrays
        b = min(1000, total - start)
        rows = rng.integers(n_seeds, size=(b, n_seeds))
        cols = rng.integers(n_questions, size=(b, n_questions))
        stats.append(m[rows[:, :, None], cols[:, None, :]].mean(axis=(1, 2)))
    se = float(np.concatenate(stats).std(ddof=1))
    return 0.0 if math.isclose(se, 0.0, abs_tol=1e-15) else se


def bootstrap_questions_and_seeds(
    cells: Sequence[np.ndarray],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> tuple[float, float, float]:
    """Mean over cells of each cell's mean paired difference, with a percentile bootstrap interval
    that resamples questions *and* seeds.

    Each cell is a (questions x seeds) matrix of per-question differences (an arm's accuracy on a
    question in one training seed minus Base's). One resample draws, in every cell on its own, its
    questions with replacement and its seeds with replacement (a two-way crossed bootstrap: the
    question set and the training seed both vary between two reproductions); the statistic is the
    mean of the cells' resampled means. With one seed per cell this is the ordinary stratified
    bootstrap over questions. scipy's ``bootstrap`` resamples one axis of independent
    observations, so the crossed design is drawn here with numpy's multinomial counts.
    Returns ``(estimate, lo, hi)``.
    """
    mats = [np.asarray(c, dtype=float) for c in cells]
    if not mats or any(m.ndim != 2 or m.size == 0 for m in mats):
        raise ValueError("bootstrap_questions_and_seeds needs non-empty (questions x seeds) matrices")
    if any(not np.isfinite(m).all() for m in mats):
        raise ValueError("bootstrap_questions_and_seeds: differences must be finite")
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must lie strictly between 0 and 1, got {confidence_level!r}")
    estimate = float(np.mean([m.mean() for m in mats]))
    if all(np.all(m == m.flat[0]) for m in mats):
        return estimate, estimate, estimate
    rng = _rng(seed)
    b = _resamples(n_resamples)
    total = np.zeros(b)
    for m in mats:
        q, s = m.shape
        wq = rng.multinomial(q, np.full(q, 1.0 / q), size=b)  # (b, q) times each question is drawn
        ws = rng.multinomial(s, np.full(s, 1.0 / s), size=b)  # (b, s) times each seed is drawn
        total += np.einsum("bq,qs,bs->b", wq, m, ws) / (q * s)
    stats_ = total / len(mats)
    alpha = (1.0 - confidence_level) / 2.0
    lo, hi = np.quantile(stats_, [alpha, 1.0 - alpha])
    return estimate, float(lo), float(hi)
