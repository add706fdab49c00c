"""How far a reproduced number may lie from the printed one and still be called "within".

A verdict is a two-sided test at :data:`LEVEL` (95%) of "the run and the paper measured the same
quantity in the same setting". The difference ``reproduced - printed`` is compared with

    ``q * sqrt(SE_paper^2 + SE_run^2 + SD_rounding^2)``

where

``SE_paper``
    the standard error of the printed number, from its printed spread: a std over ``s`` seeds
    with the paper's ``ddof`` gives ``std * sqrt((s - ddof) / ((s - 1) s))`` (CoRE: 3 seeds,
    population std, so ``std / sqrt(2)``; a CoRE Δ takes its arm's, Base being printed without
    one); a printed ±0.0 is a std below half a unit of its last digit, so the floor is that half
    unit; a bootstrap SE is itself; a 95% CI gives ``(hi - lo) / (2 z_0.975)``.
``SE_run``
    the run's own standard error of its number, computed by the readers from the run's artifacts:
    over its seeds (``std`` and seed count) or, for a single run, over its questions (binomial
    ``sqrt(p (1 - p) / n)``, FMV's bootstrap SE), propagated through averages and differences.
``SD_rounding``
    the printed digits' rounding as a uniform error: ``2r / sqrt(12)`` for half a unit ``r`` in
    the last digit; a derived number (``86.5 - 6.1``) sums the variances of every rounded literal.

Two plain means over seeds (a CoRE arm printed as mean ± std, reproduced over the run's seeds) are
compared by the pooled two-sample t-test, ``df = s_paper + s_run - 2``: a faithful reproduction's
seeds and the paper's come from one distribution, so the test is exact where Welch's approximation
is conservative with 3 seeds a side.

Two spreads that describe *question sampling* (FMV's bootstrap SE, SC-MoA's Clopper-Pearson CI,
and a single run's binomial SE) measure the same source of noise on the same benchmark
questions, so they are not added: the larger one counts (``max(SE_paper, SE_run)``). A number
printed without a spread uses the run's SE alone. ``q`` is the two-sided Student-t quantile with
Welch-Satterthwaite degrees of freedom over the seed-based parts (a normal quantile when no part
is estimated from few seeds), from ``scipy.stats``.

P-values are compared on the scale of their test statistic, ``z = Φ⁻¹(1 - p/2)``, where a
test statistic has unit standard error (``SE_run = 1``); counts (wins, flips, significant
comparisons) use the binomial SE of their proportion with a half-count continuity offset
(``(c + 1/2) / (n + 1)``), so that a printed 0 or "all" is not an exact-equality test.

``docs/scorecard.md`` states the resulting probability that a faithful reproduction is called
"within" (and ``tests/test_scorecard_calibration.py`` checks it by simulation).
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
#: How the papers computed their printed spreads (seed counts and ddof of a std).
PRINTED_SEEDS: dict[str, int] = {"core": 3}
PRINTED_DDOF: dict[str, int] = {"core": 0}
# Kinds of standard error.
SEEDS, QUESTIONS, STATISTIC = "seeds", "questions", "statistic"


@dataclass(frozen=True)
class Uncertainty:
    """One side's standard error of a number: its size, degrees of freedom and source."""

    se: float
    df: float = math.inf
    kind: str = QUESTIONS  # seeds | questions | statistic
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

    @property
    def within(self) -> bool:
        return math.isfinite(self.difference) and abs(self.difference) <= self.half_width + 1e-9

    def text(self) -> str:
        names = {"paper": "paper SE", "run": "run SE", "rounding": "rounding"}
        parts = ", ".join(f"{names[k]} {v:.3g}" for k, v in self.parts.items() if v)
        df = "normal" if math.isinf(self.df) else f"t({self.df:.1f})"
        unit = " on the z scale" if self.scale == "z" else ""
        return f"±{self.half_width:.3g}{unit} ({int(100 * LEVEL)}%, {df}{': ' + parts if parts else ''})"


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


def tolerance(cell: PrintedCell, value: float, run: Uncertainty | None) -> Tolerance:
    """The half-width ``value - cell.value`` is judged against (see the module doc)."""
    paper = printed_uncertainty(cell)
    rounding = rounding_sd(cell)
    printed, reproduced, scale = cell.value, value, "value"
    if is_p_value(cell.measure) and paper is None:
        # A p-value is judged on its test statistic's scale; the printed digits' rounding maps
        # through the derivative dz/dp = 1 / (2 phi(z)).
        z = _z(printed)
        rounding = rounding / (2.0 * max(float(_stats.norm.pdf(z)), 1e-300))
        printed, reproduced, scale = z, _z(value) if math.isfinite(value) else math.nan, "z"
        run = Uncertainty(1.0, math.inf, STATISTIC)
    parts: dict[str, float] = {}
    variances: list[tuple[float, float]] = []
    question_shared = paper is not None and paper.kind == QUESTIONS and run is not None and run.kind == QUESTIONS
    pooled = (paper is not None and run is not None and paper.n and run.n and paper.kind == run.kind == SEEDS)
    if question_shared:
        larger = max((paper, run), key=lambda u: u.se)
        parts["paper" if larger is paper else "run"] = larger.se
        variances.append((larger.se ** 2, larger.df))
    elif pooled:
        # Both plain means over seeds: under "faithful reproduction" the seeds of both come from
        # one distribution, so the two-sample t-test pools their variances (df = n_p + n_x - 2),
        # exact where Welch's approximation is conservative for 3 seeds a side.
        n_p, n_x = paper.n, run.n
        pooled_var = ((n_p - 1) * n_p * paper.se ** 2 + (n_x - 1) * n_x * run.se ** 2) / (n_p + n_x - 2)
        parts.update(paper=paper.se, run=run.se)
        variances.append((pooled_var * (1 / n_p + 1 / n_x), float(n_p + n_x - 2)))
    else:
        for name, side in (("paper", paper), ("run", run)):
            if side is not None and side.se > 0:
                parts[name] = side.se
                variances.append((side.se ** 2, side.df))
    parts["rounding"] = rounding
    variances.append((rounding ** 2, math.inf))
    df = _welch_df(variances)
    q = float(_stats.norm.ppf(0.5 + LEVEL / 2)) if math.isinf(df) else float(_stats.t.ppf(0.5 + LEVEL / 2, df))
    half = q * math.sqrt(sum(v for v, _ in variances))
    difference = reproduced - printed if math.isfinite(reproduced) else math.nan
    return Tolerance(half, difference, q, df, parts, scale)


def count_uncertainty(count: float, n: float) -> Uncertainty:
    """Binomial SE of a count of ``n`` trials, with a half-count offset (see the module doc)."""
    if n <= 0:
        return Uncertainty(0.0)
    f = (count + 0.5) / (n + 1.0)
    return Uncertainty(math.sqrt(n * f * (1.0 - f)), math.inf, QUESTIONS)


def proportion_uncertainty(percent: float, n: float) -> Uncertainty:
    """Binomial SE (in points) of an accuracy in percent over ``n`` questions."""
    if n <= 0:
        return Uncertainty(0.0)
    f = min(max(percent / 100.0, 0.0), 1.0)
    f = (f * n + 0.5) / (n + 1.0)
    return Uncertainty(100.0 * math.sqrt(f * (1.0 - f) / n), math.inf, QUESTIONS)


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
    kind = SEEDS if SEEDS in kinds else (QUESTIONS if QUESTIONS in kinds else STATISTIC)
    return Uncertainty(math.sqrt(sum(v for v, _ in variances)), _welch_df(variances), kind)


def decimals(text: str) -> int:
    return max(0, -int(Decimal(text.lstrip("+")).as_tuple().exponent))
