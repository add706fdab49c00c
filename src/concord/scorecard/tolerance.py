"""How far a reproduced number may lie from the printed one and still be called "within".

A reproduction runs on the paper's own questions, so a verdict tests "the run and the paper measured
the same quantity on the same questions": a two-sided test at :data:`LEVEL` (95%) whose tolerance
holds only what varies between two runs on the same questions, never the sampling of the questions.
The difference ``reproduced - printed`` is compared with

    ``q * sqrt(SE_paper^2 + SE_run^2 + SD_rounding^2)``

where the parts are run-to-run noise of each side:

``SEEDS``
    a mean over seeds: the printed std over ``s`` seeds with the paper's ``ddof`` gives
    ``std * sqrt((s - ddof) / ((s - 1) s))`` (CoRE: 3 seeds, population std); the run's from its own
    seeds. Two plain seed means are compared by the pooled two-sample t-test
    (``df = s_paper + s_run - 2``): a faithful reproduction's seeds and the paper's come from one
    distribution.
``SAMPLING``
    a single run's sampling noise on fixed questions (temperature > 0): the run's own estimate, a
    per-question ``sum_i p_i (1 - p_i) / (k n^2)`` (:func:`sampling_uncertainty`) or its binomial upper
    bound ``p (1 - p) / (n k)`` (:func:`proportion_uncertainty`, :func:`count_uncertainty`); the
    paper's single run had the same noise, so it counts on both sides (``2 SE_run^2``). Under greedy
    decoding with cached calls (a setting with ``temperature=0``: SC-MoA, "no stochastic variance",
    its Appendix G) two runs on the same questions are identical and this part is zero.
``QUESTIONS``
    the sampling of the benchmark's questions (FMV's bootstrap SE over questions, SC-MoA's
    Clopper-Pearson CI, a bootstrap over a run's questions): not counted, the questions are shared.
``SD_rounding``
    the printed digits' rounding as a uniform error: ``2r / sqrt(12)`` for half a unit ``r`` in
    the last digit; a derived number (``86.5 - 6.1``) sums the variances of every rounded literal.

``q`` is the two-sided Student-t quantile with Welch-Satterthwaite degrees of freedom over the
seed-based parts (a normal quantile when no part is estimated from few seeds), from ``scipy.stats``.

P-values are judged by two conditions. The significance verdict at the paper's :data:`ALPHA` must
agree (a printed 0.090 is not reproduced by p = 0.0003, nor a printed 0.035 by 0.2); and on the scale
of the test statistic, ``z = Phi^-1(1 - p/2)``, the difference must lie within the tolerance above
with the printed digits' rounding mapped through ``dz/dp`` and, for a sampled setting, a run-to-run
z-noise of at most 1 (a unit-variance statistic); greedy settings leave only the rounding, so the
flips must give the printed digits.

``docs/scorecard.md`` states the resulting within-rate of a faithful reproduction and the power
against a named shift; ``tests/test_scorecard_calibration.py`` checks both by simulating reproductions
at the level of questions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

from scipy import stats as _stats

from concord.scorecard.printed import PrintedCell, rounding_of

#: The significance level of a verdict: two-sided, so a faithful reproduction is "within" with
#: this probability (docs/scorecard.md, "What within means").
LEVEL = 0.95
#: The significance level at which the papers call a p-value significant ("p < 0.05").
ALPHA = 0.05
#: How the papers computed their printed spreads (seed counts and ddof of a std).
PRINTED_SEEDS: dict[str, int] = {"core": 3}
PRINTED_DDOF: dict[str, int] = {"core": 0}
# Kinds of standard error.
SEEDS, SAMPLING, QUESTIONS, STATISTIC = "seeds", "sampling", "questions", "statistic"


@dataclass(frozen=True)
class Uncertainty:
    """One side's standard error of a number: its size, degrees of freedom and source."""

    se: float
    df: float = math.inf
    kind: str = QUESTIONS  # seeds | sampling | questions | statistic
    n: int | None = None  # the seed count of a plain mean over seeds (the pooled test needs it)


@dataclass
class Tolerance:
    """The half-width a difference is judged against, with its parts for display."""

    half_width: float
    difference: float  # on the compared scale (z for p-values)
    quantile: float
    df: float
    parts: dict[str, float] = field(default_factory=dict)
    scale: str = "value"
    significance_agrees: bool = True  # p-values: both sides on the same side of ALPHA

    @property
    def within(self) -> bool:
        return (self.significance_agrees and math.isfinite(self.difference)
                and abs(self.difference) <= self.half_width + 1e-9)

    def text(self) -> str:
        names = {"paper": "paper SE", "run": "run SE", "rounding": "rounding",
                 "sampling": "sampling SE, both runs"}
        parts = ", ".join(f"{names[k]} {v:.3g}" for k, v in self.parts.items() if v)
        df = "normal" if math.isinf(self.df) else f"t({self.df:.1f})"
        unit = " on the z scale" if self.scale == "z" else ""
        verdict = "" if self.significance_agrees else f"; the significance verdict at {ALPHA:g} differs"
        return f"±{self.half_width:.3g}{unit} ({int(100 * LEVEL)}%, {df}{': ' + parts if parts else ''}{verdict})"


def rounding_sd(cell: PrintedCell) -> float:
    """The standard deviation of the printed digits' rounding (uniform), summed over every
    rounded literal of a derived number's formula."""
    literals = re.findall(r"\d+(?:\.\d+)?", cell.formula) if cell.source == "derived" and cell.formula else [cell.text]
    return math.sqrt(sum((2 * rounding_of(lit)) ** 2 / 12.0 for lit in literals))


def _spread_floor(cell: PrintedCell) -> float:
    """A printed ±0.0: the std is below half a unit of the printed digit."""
    return rounding_of(cell.text)


def printed_uncertainty(cell: PrintedCell) -> Uncertainty | None:
    """The standard error of the printed number from its printed spread (None: none printed)."""
    kind = cell.spread_kind
    if kind in ("std", "arm_std"):
        seeds = int(float(cell.setting.get("seeds", PRINTED_SEEDS.get(cell.paper, 1))))
        ddof = PRINTED_DDOF.get(cell.paper, 1)
        std = cell.spread if cell.spread else _spread_floor(cell)
        if seeds < 2:
            return Uncertainty(std, math.inf, SEEDS)
        return Uncertainty(std * math.sqrt((seeds - ddof) / ((seeds - 1) * seeds)), float(seeds - 1), SEEDS, seeds)
    if kind == "se":
        return Uncertainty(cell.spread or _spread_floor(cell), math.inf, QUESTIONS)
    if kind == "ci95":
        z = _stats.norm.ppf(0.975)
        return Uncertainty((cell.ci_hi - cell.ci_lo) / (2 * z), math.inf, QUESTIONS)
    return None


#: Measure segments that name a p-value.
P_VALUE_SEGMENTS = frozenset({"mcnemar_p", "sign_test_p", "wilcoxon_p", "p", "p_holm", "welch_p"})


def is_p_value(measure: str) -> bool:
    return any(part in P_VALUE_SEGMENTS for part in measure.split(":"))


def _z(p: float) -> float:
    return float(_stats.norm.isf(min(max(p, 1e-300), 1.0) / 2.0))


def _welch_df(parts: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variances with their df."""
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if math.isfinite(df) and df > 0 and v > 0)
    if total <= 0 or denominator <= 0:
        return math.inf
    return total * total / denominator


def greedy(cell: PrintedCell) -> bool:
    """Whether the paper's setting decodes greedily (``temperature=0``): reruns are identical."""
    try:
        return float(cell.setting.get("temperature", "nan")) == 0.0
    except ValueError:
        return False


def tolerance(cell: PrintedCell, value: float, run: Uncertainty | None) -> Tolerance:
    """The half-width ``value - cell.value`` is judged against (see the module doc)."""
    paper = printed_uncertainty(cell)
    rounding = rounding_sd(cell)
    printed, reproduced, scale = cell.value, value, "value"
    same_questions = greedy(cell)
    if paper is not None and paper.kind == QUESTIONS:
        paper = None  # the questions are shared: their sampling is no difference between two runs
    if run is not None and (run.kind == QUESTIONS or (same_questions and run.kind in (SAMPLING, STATISTIC))):
        run = None
    agrees = True
    if is_p_value(cell.measure) and paper is None:
        # A p-value is judged on its test statistic's scale; the printed digits' rounding maps
        # through the derivative dz/dp = 1 / (2 phi(z)).
        z = _z(printed)
        rounding = rounding / (2.0 * max(float(_stats.norm.pdf(z)), 1e-300))
        agrees = not math.isfinite(value) or (value < ALPHA) == (printed < ALPHA)
        printed, reproduced, scale = z, _z(value) if math.isfinite(value) else math.nan, "z"
        run = None if same_questions else Uncertainty(1.0 / math.sqrt(2.0), math.inf, STATISTIC)
    parts: dict[str, float] = {}
    variances: list[tuple[float, float]] = []
    pooled = (paper is not None and run is not None and paper.n and run.n and paper.kind == run.kind == SEEDS)
    if pooled:
        # Both plain means over seeds: under "faithful reproduction" the seeds of both come from
        # one distribution, so the two-sample t-test pools their variances (df = n_p + n_x - 2),
        # exact where Welch's approximation is conservative for 3 seeds a side.
        n_p, n_x = paper.n, run.n
        pooled_var = ((n_p - 1) * n_p * paper.se ** 2 + (n_x - 1) * n_x * run.se ** 2) / (n_p + n_x - 2)
        parts.update(paper=paper.se, run=run.se)
        variances.append((pooled_var * (1 / n_p + 1 / n_x), float(n_p + n_x - 2)))
    else:
        if paper is not None and paper.se > 0:
            parts["paper"] = paper.se
            variances.append((paper.se ** 2, paper.df))
        if run is not None and run.se > 0:
            if run.kind in (SAMPLING, STATISTIC) and paper is None:
                # The paper's single run had the same sampling noise on the same questions.
                parts["sampling"] = run.se
                variances.append((2 * run.se ** 2, run.df))
            else:
                parts["run"] = run.se
                variances.append((run.se ** 2, run.df))
    parts["rounding"] = rounding
    variances.append((rounding ** 2, math.inf))
    df = _welch_df(variances)
    q = float(_stats.norm.ppf(0.5 + LEVEL / 2)) if math.isinf(df) else float(_stats.t.ppf(0.5 + LEVEL / 2, df))
    half = q * math.sqrt(sum(v for v, _ in variances))
    difference = reproduced - printed if math.isfinite(reproduced) else math.nan
    return Tolerance(half, difference, q, df, parts, scale, agrees)


def sampling_uncertainty(rates, k: int) -> Uncertainty:
    """Run-to-run SE (in points) of an accuracy over fixed questions from each question's observed
    success rate over its ``k`` samples: ``sqrt(sum_i p_i (1 - p_i) / (k - 1)) / n`` (the unbiased
    per-question variance ``p (1 - p) k / (k - 1)`` over ``k`` samples, averaged over ``n``)."""
    import numpy as np

    p = np.asarray(rates, dtype=float)
    if p.ndim != 1 or p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError("rates must be a non-empty list of per-question success rates in [0, 1]")
    if k < 2:
        raise ValueError(f"a per-question sampling variance needs k >= 2 samples, got {k}")
    return Uncertainty(100.0 * float(np.sqrt(np.sum(p * (1 - p)) / (k - 1)) / p.size), math.inf, SAMPLING)


def count_uncertainty(count: float, n: float) -> Uncertainty:
    """Binomial SE of a count of ``n`` trials, with a half-count offset: an upper bound of the count's
    run-to-run sampling SE on fixed questions (see the module doc)."""
    if n <= 0:
        return Uncertainty(0.0, math.inf, SAMPLING)
    f = (count + 0.5) / (n + 1.0)
    return Uncertainty(math.sqrt(n * f * (1.0 - f)), math.inf, SAMPLING)


def proportion_uncertainty(percent: float, n: float) -> Uncertainty:
    """Binomial SE (in points) of an accuracy in percent over ``n`` outcomes: an upper bound of its
    run-to-run sampling SE on fixed questions (``sum_i p_i (1 - p_i) <= n p (1 - p)``)."""
    if n <= 0:
        return Uncertainty(0.0, math.inf, SAMPLING)
    f = min(max(percent / 100.0, 0.0), 1.0)
    f = (f * n + 0.5) / (n + 1.0)
    return Uncertainty(100.0 * math.sqrt(f * (1.0 - f) / n), math.inf, SAMPLING)


def seed_uncertainty(std: float | None, seeds: int, ddof: int = 0) -> Uncertainty | None:
    """SE of a mean over ``seeds`` runs from their std (``ddof`` as the run computed it)."""
    if std is None or seeds < 2 or not math.isfinite(std):
        return None
    return Uncertainty(std * math.sqrt((seeds - ddof) / ((seeds - 1) * seeds)), float(seeds - 1), SEEDS, seeds)


def combine(parts: list[Uncertainty | None], weights: list[float]) -> Uncertainty | None:
    """SE of ``sum(w_i x_i)`` for independent ``x_i`` (None if any part is unknown)."""
    if not parts or any(p is None for p in parts):
        return None
    variances = [(w * w * p.se * p.se, p.df) for p, w in zip(parts, weights)]
    kinds = {p.kind for p in parts}
    kind = next((k for k in (SEEDS, SAMPLING, QUESTIONS) if k in kinds), STATISTIC)
    return Uncertainty(math.sqrt(sum(v for v, _ in variances)), _welch_df(variances), kind)


def decimals(text: str) -> int:
    return max(0, -int(Decimal(text.lstrip("+")).as_tuple().exponent))
