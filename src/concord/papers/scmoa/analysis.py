"""Analyses of section 5 and Appendices G, H, K, T, U on per-question SC-MoA records.

Each function is pure: arrays or question records in, numbers or a DataFrame out. A question
record (written by :mod:`concord.papers.scmoa.experiment`) carries ``methods`` (method -> ``answer``,
``correct``, ``calls``), the SC-MoA ``record`` of :func:`concord.papers.scmoa.run_scmoa`,
``agents_correct`` (each pre-refinement proposal graded), ``sc_correct`` (each self-consistency
sample graded) and ``k_sweep`` (k -> correct).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from concord import stats

GATE_THRESHOLDS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, math.inf)


def _bool_array(name: str, values: Sequence) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    return arr.astype(bool)


def method_correct(records: Sequence[Mapping], method: str) -> np.ndarray:
    missing = [r.get("id") for r in records if method not in r["methods"]]
    if missing:
        raise KeyError(f"method {method!r} missing from {len(missing)} record(s), e.g. {missing[:3]}")
    return np.array([bool(r["methods"][method]["correct"]) for r in records])


# ----------------------------------------------------------------------- accuracy and significance


#: The McNemar variant behind each printed table's p-values, established from the paper's own
#: printed flips where it prints them (docs/fidelity.md, "Which test each printed p-value uses"):
#: Tables 29-30 chi-square without continuity correction (12 vs 5 -> chi2 2.88, p 0.090); Table 37
#: exact binomial, uncorrected although its caption says Holm (10 vs 23 -> 0.035); Table 27
#: chi-square with continuity correction (11 vs 7 -> 0.480; exact 0.481, uncorrected 0.346); where a
#: table prints no flips (13, 31, 36, 40) the paper's own appendix method (Tables 29-30) stands in,
#: except Table 36, the same ablation run as Table 37, which takes Table 37's.
TABLE_P_METHOD: dict[str, str] = {"table13": "chi2", "table29": "chi2", "table30": "chi2", "table31": "chi2",
                                  "table36": "exact", "table37": "exact", "table26": "chi2_cc", "table27": "chi2_cc",
                                  "table34": "chi2_cc", "table40": "chi2"}
P_METHOD_LABEL: dict[str, str] = dict(stats.MCNEMAR_METHODS)


def accuracy_table(records: Sequence[Mapping], methods: Sequence[str], alpha: float = 0.05) -> pd.DataFrame:
    """Accuracy with Clopper-Pearson intervals and mean calls per method."""
    rows = []
    for m in methods:
        correct = method_correct(records, m)
        n, k = correct.size, int(correct.sum())
        lo, hi = stats.clopper_pearson(k, n, alpha)
        calls = [r["methods"][m].get("calls") for r in records]
        calls = [c for c in calls if c is not None]
        rows.append({"method": m, "n": n, "correct": k, "accuracy": k / n, "ci_lo": lo, "ci_hi": hi,
                     "calls": float(np.mean(calls)) if calls else math.nan})
    return pd.DataFrame(rows)


def significance_table(records: Sequence[Mapping], target: str, baselines: Sequence[str], *,
                       n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """McNemar and paired bootstrap of target vs each baseline (Table 13; the paper prints no flip
    counts there, so its variant is unknown: chi-square without continuity correction, as in the
    same appendix's Tables 29-30; the method is named in ``p_method``)."""
    a = method_correct(records, target).astype(float)
    rows = []
    for base in baselines:
        b = method_correct(records, base).astype(float)
        wins, losses = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        delta, lo, hi = stats.paired_bootstrap(a, b, n_resamples=n_resamples, seed=seed)
        rows.append({"method": target, "baseline": base, "wins": wins, "losses": losses,
                     "mcnemar_p": stats.mcnemar(wins, losses, method=TABLE_P_METHOD["table13"]),
                     "p_method": P_METHOD_LABEL[TABLE_P_METHOD["table13"]], "delta": delta, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------- Proposition 1


def _flip_ratio(beneficial: int, harmful: int) -> float:
    """Beneficial over harmful flips: NaN (undefined, "n/a") without flips, inf without harmful ones."""
    if harmful:
        return beneficial / harmful
    return math.inf if beneficial else math.nan


def flip_decomposition(vote_correct: Sequence, synth_correct: Sequence) -> dict:
    """Beneficial/harmful flips and the Proposition 1 terms: advantage = P_w R_s - P_c (1 - F_s)."""
    v, s = _bool_array("vote_correct", vote_correct), _bool_array("synth_correct", synth_correct)
    if v.shape != s.shape or v.size == 0:
        raise ValueError("vote and synthesis correctness must be non-empty and of equal length")
    n = v.size
    beneficial, harmful = int((~v & s).sum()), int((v & ~s).sum())
    p_c = v.mean()
    p_w = 1.0 - p_c
    f_s = float(s[v].mean()) if v.any() else math.nan
    r_s = float(s[~v].mean()) if (~v).any() else math.nan
    recovery = beneficial / n  # = P_w * R_s
    corruption = harmful / n  # = P_c * (1 - F_s)
    return {
        "n": n, "beneficial": beneficial, "harmful": harmful, "P_c": float(p_c), "P_w": float(p_w),
        "F_s": f_s, "R_s": r_s, "recovery": recovery, "corruption": corruption,
        "advantage": float(s.mean() - p_c), "flip_ratio": _flip_ratio(beneficial, harmful),
        "fidelity_threshold": float(p_c / (p_c + p_w * r_s)) if not math.isnan(r_s) and p_c + p_w * r_s > 0 else math.nan,
        "mcnemar_p": stats.mcnemar(beneficial, harmful, method=TABLE_P_METHOD["table31"]),
        "p_method": P_METHOD_LABEL[TABLE_P_METHOD["table31"]],
    }


# ----------------------------------------------------------------------- consensus transitions


def transition_matrix(pre_kmax: Sequence[int], post_kmax: Sequence[int], n: int) -> pd.DataFrame:
    """Counts of (pre-refinement k_max, post-refinement k_max); rows pre, columns post.

    k_max = 0 (no proposal answered) gets a row and column only when it occurs."""
    pre, post = np.asarray(pre_kmax, dtype=int), np.asarray(post_kmax, dtype=int)
    if pre.shape != post.shape:
        raise ValueError("pre and post consensus counts differ in length")
    if pre.size and (pre.min() < 0 or post.min() < 0 or max(pre.max(), post.max()) > n):
        raise ValueError(f"consensus counts must lie in 0..{n}")
    low = 0 if pre.size and min(pre.min(), post.min()) == 0 else 1
    levels = list(range(low, n + 1))
    table = pd.DataFrame(0, index=pd.Index(levels, name="pre"), columns=pd.Index(levels, name="post"))
    for a, b in zip(pre, post):
        table.loc[a, b] += 1
    return table


# ----------------------------------------------------------------------- trace diversity


def trace_diversity(traces: Sequence[str], max_features: int = 5000) -> float:
    """D_t: mean pairwise cosine distance of the traces in TF-IDF space (English stop words removed).

    The vocabulary is fitted on the problem's own traces (Appendix U). Fewer than two traces, or
    a trace without any content word, give NaN (undefined).
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_distances

    docs = [t or "" for t in traces]
    if len(docs) < 2:
        return math.nan
    try:
        matrix = TfidfVectorizer(max_features=max_features, stop_words="english").fit_transform(docs)
    except ValueError:  # empty vocabulary: nothing but stop words / numbers
        return math.nan
    if (matrix.getnnz(axis=1) == 0).any():
        return math.nan
    dist = cosine_distances(matrix)
    iu = np.triu_indices(len(docs), k=1)
    return float(dist[iu].mean())


def flip_outcome(vote_correct: bool, synth_correct: bool) -> str:
    if vote_correct == synth_correct:
        return "no flip"
    return "beneficial" if synth_correct else "harmful"


def diversity_rows(diversity: Sequence[float], outcomes: Sequence[str]) -> pd.DataFrame:
    """(D_t, outcome) of the problems the diversity analysis counts: D_t defined and > 0."""
    frame = pd.DataFrame({"D_t": np.asarray(diversity, dtype=float), "outcome": list(outcomes)}).dropna()
    return frame[frame["D_t"] > 0]


def diversity_by_outcome(diversity: Sequence[float], outcomes: Sequence[str]) -> tuple[pd.DataFrame, dict]:
    """Mean D_t per outcome and Welch's t-test of beneficial vs no-flip (NaN when too few).

    Degenerate problems -- D_t undefined, or D_t = 0 (all traces alike, e.g. answer-only) -- are
    excluded, as in Appendix U.
    """
    from scipy.stats import ttest_ind

    frame = diversity_rows(diversity, outcomes)
    table = (frame.groupby("outcome")["D_t"].agg(["count", "mean", "std"]).reindex(["beneficial", "harmful", "no flip"])
             .reset_index())
    table["count"] = table["count"].fillna(0).astype(int)
    ben = frame.loc[frame.outcome == "beneficial", "D_t"].to_numpy()
    none = frame.loc[frame.outcome == "no flip", "D_t"].to_numpy()
    if ben.size >= 2 and none.size >= 2:
        res = ttest_ind(ben, none, equal_var=False)
        test = {"t": float(res.statistic), "p": float(res.pvalue)}
    else:
        test = {"t": math.nan, "p": math.nan}
    # Table 32's caption names the test: "Welch t-tests (beneficial vs. non-flip)".
    test.update(n_beneficial=int(ben.size), n_no_flip=int(none.size), method="Welch t-test, two-sided")
    return table, test


# ----------------------------------------------------------------------- error correlation


def mean_error_correlation(errors: np.ndarray) -> float:
    """rho-bar: mean pairwise Pearson correlation of agents' error indicators across problems.

    Pairs where an agent's errors are constant (correlation undefined) are left out.
    """
    e = np.asarray(errors, dtype=float)
    if e.ndim != 2 or e.shape[1] < 2:
        raise ValueError(f"errors must be problems x agents with >= 2 agents, got shape {e.shape}")
    rhos = []
    for i, j in combinations(range(e.shape[1]), 2):
        a, b = e[:, i], e[:, j]
        if a.std() == 0 or b.std() == 0:
            continue
        rhos.append(float(np.corrcoef(a, b)[0, 1]))
    return float(np.mean(rhos)) if rhos else math.nan


def error_correlation(errors: np.ndarray, *, n_resamples: int = 2000, seed: int = 0) -> dict:
    """rho-bar with a 95% percentile bootstrap interval over problems (Appendix K.1)."""
    e = np.asarray(errors, dtype=float)
    point = mean_error_correlation(e)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_resamples):
        value = mean_error_correlation(e[rng.integers(0, e.shape[0], e.shape[0])])
        if not math.isnan(value):
            boots.append(value)
    lo, hi = (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))) if boots else (math.nan, math.nan)
    return {"rho_bar": point, "ci_lo": lo, "ci_hi": hi, "n_problems": int(e.shape[0]), "n_agents": int(e.shape[1])}


# ----------------------------------------------------------------------- calibration


def reliability(confidence: Sequence[float], correct: Sequence, n_bins: int | None = None) -> tuple[pd.DataFrame, float]:
    """Reliability table and expected calibration error.

    Consensus takes the values j/N, so by default each distinct value is its own bin; with
    ``n_bins`` equal-width bins on [0, 1] are used instead. ECE = sum_b (n_b / n) |acc_b - conf_b|.
    """
    conf = np.asarray(confidence, dtype=float)
    corr = _bool_array("correct", correct).astype(float)
    if conf.shape != corr.shape or conf.size == 0:
        raise ValueError("confidence and correctness must be non-empty and of equal length")
    if n_bins is None:
        keys = np.round(conf, 9)
    else:
        keys = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    frame = pd.DataFrame({"bin": keys, "confidence": conf, "correct": corr})
    table = frame.groupby("bin").agg(n=("correct", "size"), confidence=("confidence", "mean"),
                                     accuracy=("correct", "mean")).reset_index(drop=True)
    ece = float((table["n"] / conf.size * (table["accuracy"] - table["confidence"]).abs()).sum())
    return table, ece


def selective_prediction(confidence: Sequence[float], correct: Sequence) -> tuple[pd.DataFrame, float]:
    """Accuracy-coverage curve (most confident first) and AUROC of confidence for correctness."""
    from sklearn.metrics import roc_auc_score

    conf = np.asarray(confidence, dtype=float)
    corr = _bool_array("correct", correct)
    rows = []
    for c in np.unique(conf)[::-1]:  # abstain below each distinct threshold
        keep = conf >= c
        rows.append({"threshold": float(c), "coverage": float(keep.mean()), "accuracy": float(corr[keep].mean())})
    # AUROC is undefined when every answer is right (or every one wrong).
    auroc = float(roc_auc_score(corr, conf)) if 0 < corr.sum() < corr.size else math.nan
    return pd.DataFrame(rows), auroc


# ----------------------------------------------------------------------- sweeps


def gating_sweep(records: Sequence[Mapping], gold_correct_vote: Sequence, thresholds: Iterable[float] = GATE_THRESHOLDS
                 ) -> pd.DataFrame:
    """Accuracy when pre-refinement consensus >= theta exits with the vote, else always-aggregate."""
    consensus = np.array([r["record"]["clusters_pre"]["consensus"] for r in records])
    vote = _bool_array("vote", gold_correct_vote)
    synth = method_correct(records, "scmoa")
    rows = []
    for theta in thresholds:
        exit_ = consensus >= theta
        acc = np.where(exit_, vote, synth).mean()
        rows.append({"theta": theta, "accuracy": float(acc), "exit_rate": float(exit_.mean())})
    return pd.DataFrame(rows)


def k_sweep(records: Sequence[Mapping], alpha: float = 0.05) -> pd.DataFrame:
    """Accuracy at each inner sampling budget k, with Clopper-Pearson intervals."""
    ks = sorted({int(k) for r in records for k in r.get("k_sweep", {})})
    rows = []
    for k in ks:
        vals = [bool(r["k_sweep"][str(k)]["correct"]) for r in records if str(k) in r.get("k_sweep", {})]
        lo, hi = stats.clopper_pearson(sum(vals), len(vals), alpha)
        rows.append({"k": k, "n": len(vals), "accuracy": sum(vals) / len(vals), "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows, columns=["k", "n", "accuracy", "ci_lo", "ci_hi"])


# ----------------------------------------------------------------------- Section 3, Tables 29-30


def mcnemar_chi2(beneficial: int, harmful: int) -> tuple[float, float]:
    """McNemar's chi-square without continuity correction and its p-value (Tables 29-30:
    12 vs 5 flips give 2.88, p = 0.090; 16 vs 5 give 5.76, p = 0.016)."""
    return stats.mcnemar_statistic(beneficial, harmful), stats.mcnemar(beneficial, harmful, method="chi2")


def contingency(vote_correct: Sequence, synth_correct: Sequence) -> tuple[pd.DataFrame, dict]:
    """The 2x2 table vote x synthesis (counts) and its flip statistics (Tables 29-30)."""
    v, s = _bool_array("vote_correct", vote_correct), _bool_array("synth_correct", synth_correct)
    if v.shape != s.shape or v.size == 0:
        raise ValueError("vote and synthesis correctness must be non-empty and of equal length")
    table = pd.DataFrame(
        [["Vote correct", int((v & s).sum()), int((v & ~s).sum()), int(v.sum())],
         ["Vote wrong", int((~v & s).sum()), int((~v & ~s).sum()), int((~v).sum())],
         ["Total", int(s.sum()), int((~s).sum()), int(v.size)]],
        columns=["", "Synthesis correct", "Synthesis wrong", "Total"])
    beneficial, harmful = int((~v & s).sum()), int((v & ~s).sum())
    chi2, p = mcnemar_chi2(beneficial, harmful)
    summary = {"n": int(v.size), "vote_acc_pct": 100 * float(v.mean()), "synth_acc_pct": 100 * float(s.mean()),
               "delta_pp": 100 * float(s.mean() - v.mean()), "beneficial": beneficial, "harmful": harmful,
               "flip_ratio": _flip_ratio(beneficial, harmful), "mcnemar_chi2": chi2, "mcnemar_p": p,
               "p_method": P_METHOD_LABEL["chi2"]}
    return table, summary


# ----------------------------------------------------------------------- Tables 36-37


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (statsmodels, through concord.stats)."""
    return stats.holm(list(pvalues))


def flips_against(reference: Sequence, conditions: Mapping[str, Sequence], labels: Mapping[str, str] | None = None,
                  reference_label: str = "Majority vote", method: str = TABLE_P_METHOD["table37"]) -> pd.DataFrame:
    """Accuracy (%) of each condition with beneficial/harmful flips against ``reference``,
    McNemar p (``method``; exact by default: Table 37's printed p-values are the uncorrected exact
    ones) and its Holm-Bonferroni correction over all conditions (what Tables 36-37's captions say)."""
    ref = _bool_array("reference", reference)
    rows = [{"condition": reference_label, "accuracy_pct": 100 * float(ref.mean()), "beneficial": None,
             "harmful": None, "ratio": None, "p": None}]
    for name, values in conditions.items():
        c = _bool_array(name, values)
        if c.shape != ref.shape:
            raise ValueError(f"condition {name!r} has {c.size} outcomes, the reference {ref.size}")
        ben, harm = int((~ref & c).sum()), int((ref & ~c).sum())
        rows.append({"condition": (labels or {}).get(name, name), "accuracy_pct": 100 * float(c.mean()),
                     "beneficial": ben, "harmful": harm, "ratio": _flip_ratio(ben, harm),
                     "p": stats.mcnemar(ben, harm, method=method)})
    frame = pd.DataFrame(rows)
    tested = frame["p"].notna()
    frame["p_holm"] = None
    frame.loc[tested, "p_holm"] = holm(frame.loc[tested, "p"].astype(float).tolist())
    for col in ("beneficial", "harmful"):
        frame[col] = frame[col].astype("Int64")
    for col in ("ratio", "p", "p_holm"):
        frame[col] = frame[col].astype(float)
    frame["p_method"] = [""] + [P_METHOD_LABEL[method]] * (len(frame) - 1)
    return frame


def k_sweep_bootstrap(records: Sequence[Mapping], n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Appendix H.1: accuracy (%) per k with percentile-bootstrap 95% CIs over problems, and the
    paired-bootstrap difference to the previous k (questions present at both)."""
    from scipy.stats import bootstrap

    ks = sorted({int(k) for r in records for k in r.get("k_sweep", {})})
    rows, prev = [], None
    for k in ks:
        have = [r for r in records if str(k) in r.get("k_sweep", {})]
        vals = np.array([float(r["k_sweep"][str(k)]["correct"]) for r in have])
        if vals.size > 1 and vals.min() != vals.max():
            ci = bootstrap((vals,), np.mean, n_resamples=n_resamples, method="percentile",
                           rng=np.random.default_rng(seed)).confidence_interval
            lo, hi = float(ci.low), float(ci.high)
        else:  # a constant sample resamples to itself
            lo = hi = float(vals.mean())
        row = {"k": k, "n": int(vals.size), "accuracy_pct": 100 * float(vals.mean()),
               "ci_lo_pct": 100 * lo, "ci_hi_pct": 100 * hi,
               "calls": float(np.mean([r["k_sweep"][str(k)].get("calls", math.nan) for r in have])),
               "delta_prev_pp": math.nan, "delta_ci_lo_pp": math.nan, "delta_ci_hi_pp": math.nan}
        if prev is not None:
            both = [r for r in records if str(k) in r.get("k_sweep", {}) and str(prev) in r.get("k_sweep", {})]
            a = [float(r["k_sweep"][str(k)]["correct"]) for r in both]
            b = [float(r["k_sweep"][str(prev)]["correct"]) for r in both]
            d, lo, hi = stats.paired_bootstrap(a, b, n_resamples=n_resamples, seed=seed)
            row.update(delta_prev_pp=100 * d, delta_ci_lo_pp=100 * lo, delta_ci_hi_pp=100 * hi)
        rows.append(row)
        prev = k
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------- Table 13 (every pair)


def pairwise_significance(records: Sequence[Mapping], methods: Sequence[str], *, n_resamples: int = 10_000,
                          seed: int = 0) -> pd.DataFrame:
    """McNemar (Table 13's variant, :data:`TABLE_P_METHOD`) and a paired-bootstrap 95% CI of the
    accuracy difference for every pair of methods (Appendix G), with Holm-Bonferroni over all pairs."""
    rows = []
    for a, b in combinations(methods, 2):
        x, y = method_correct(records, a).astype(float), method_correct(records, b).astype(float)
        wins, losses = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
        delta, lo, hi = stats.paired_bootstrap(x, y, n_resamples=n_resamples, seed=seed)
        chi2 = stats.mcnemar_statistic(wins, losses)
        p = stats.mcnemar(wins, losses, method=TABLE_P_METHOD["table13"])
        rows.append({"method_a": a, "method_b": b, "acc_a_pct": 100 * x.mean(), "acc_b_pct": 100 * y.mean(),
                     "wins_a": wins, "wins_b": losses, "mcnemar_chi2": chi2, "mcnemar_p": p,
                     "delta_pp": 100 * delta, "ci_lo_pp": 100 * lo, "ci_hi_pp": 100 * hi})
    frame = pd.DataFrame(rows, columns=["method_a", "method_b", "acc_a_pct", "acc_b_pct", "wins_a", "wins_b",
                                        "mcnemar_chi2", "mcnemar_p", "delta_pp", "ci_lo_pp", "ci_hi_pp"])
    frame["p_holm"] = holm(frame["mcnemar_p"].tolist()) if len(frame) else []
    frame["p_method"] = P_METHOD_LABEL[TABLE_P_METHOD["table13"]]
    return frame


# ----------------------------------------------------------------------- Table 40 (selection)


def dawid_skene_choice(records: Sequence[Mapping], n_iter: int = 100) -> list[bool]:
    """Dawid-Skene EM over the Phase 1 proposals of every problem (agents = perturbation slots),
    then the answer of highest posterior per problem; correct when a proposal with that answer is
    (Appendix X.3: 0 extra calls). Multinomial DS from ``crowd-kit``; unanswered proposals give no
    label; labels are the J.6 keys of the answers (code: the program text)."""
    from crowdkit.aggregation import DawidSkene

    from concord.papers.scmoa.tasks import j6_key

    def key(r: Mapping, payload: str | None) -> str | None:
        return payload if r["task"] == "code" else j6_key(payload)

    rows = [{"task": qi, "worker": wi, "label": key(r, p["payload"])}
            for qi, r in enumerate(records) for wi, p in enumerate(r["record"]["proposals_pre"]) if p["payload"] is not None]
    if not rows:
        return [False] * len(records)
    chosen = DawidSkene(n_iter=n_iter).fit_predict(pd.DataFrame(rows))
    out = []
    for qi, r in enumerate(records):
        label = chosen.get(qi)
        hits = [c for p, c in zip(r["record"]["proposals_pre"], r["agents_correct"]) if key(r, p["payload"]) == label]
        out.append(bool(label is not None and hits and hits[0]))
    return out


def selection_table(records: Sequence[Mapping], ds_correct: Sequence[bool], *, n_resamples: int = 10_000,
                    seed: int = 0) -> pd.DataFrame:
    """Table 40: majority vote, Dawid-Skene and the pairwise judge (selection over the Phase 1
    proposals) against SC-MoA synthesis: accuracy (%) with a percentile-bootstrap 95% CI, mean calls,
    McNemar p against SC-MoA."""
    from scipy.stats import bootstrap

    synth = method_correct(records, "scmoa")
    rows = []
    conds = [("Majority vote", "vote_pre"), ("Dawid-Skene EM", None)]
    if all("pairwise_judge" in r["methods"] for r in records):
        conds.append(("Pairwise LLM judge", "pairwise_judge"))
    conds.append(("SC-MoA synthesis", "scmoa"))
    for label_, method in conds:
        c = np.asarray(ds_correct, dtype=bool) if method is None else method_correct(records, method)
        if c.size > 1 and c.min() != c.max():
            ci = bootstrap((c.astype(float),), np.mean, n_resamples=n_resamples, method="percentile",
                           rng=np.random.default_rng(seed)).confidence_interval
            lo, hi = float(ci.low), float(ci.high)
        else:
            lo = hi = float(c.mean())
        # Dawid-Skene reweights the proposals' votes: it costs what the vote costs.
        calls = np.mean([r["methods"]["vote_pre" if method is None else method]["calls"] for r in records])
        if method == "pairwise_judge":  # the proposals it selects among come first
            calls += np.mean([r["methods"]["vote_pre"]["calls"] for r in records])
        ben, harm = int((~c & synth).sum()), int((c & ~synth).sum())
        rows.append({"method": label_, "accuracy_pct": 100 * float(c.mean()), "ci_lo_pct": 100 * lo, "ci_hi_pct": 100 * hi,
                     "calls": float(calls), "mcnemar_p_vs_scmoa": math.nan if method == "scmoa" else stats.mcnemar(
                         ben, harm, method=TABLE_P_METHOD["table40"]),
                     "p_method": "" if method == "scmoa" else P_METHOD_LABEL[TABLE_P_METHOD["table40"]]})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------- Tables 15, 21-23, 26-28


def public_private_fidelity(records: Sequence[Mapping], methods: Sequence[str]) -> pd.DataFrame:
    """Table 15 (code): public pass rate, private (every test) accuracy and P(priv | pub) per method."""
    rows = []
    for m in methods:
        have = [r["methods"][m] for r in records if "public_pass" in r["methods"].get(m, {})]
        if not have:
            continue
        pub = np.array([h["public_pass"] for h in have], dtype=bool)
        priv = np.array([h["correct"] for h in have], dtype=bool)
        rows.append({"method": m, "n": len(have), "public_pass_pct": 100 * pub.mean(), "private_pass_pct": 100 * priv.mean(),
                     "p_priv_given_pub_pct": 100 * float(priv[pub].mean()) if pub.any() else math.nan})
    return pd.DataFrame(rows, columns=["method", "n", "public_pass_pct", "private_pass_pct", "p_priv_given_pub_pct"])


def override_decomposition(records: Sequence[Mapping]) -> tuple[pd.DataFrame, dict]:
    """Tables 21-22: override fire rate and accuracy with and without it, aggregation alone and
    best-of-N (always the best-scoring proposal)."""
    fired = np.array([bool(r["decomposition"]["override"]) for r in records])
    full = method_correct(records, "scmoa")
    agg = np.array([bool(r["decomposition"]["aggregate_correct"]) for r in records])
    bon = np.array([bool(r["decomposition"]["best_of_n_correct"]) for r in records])
    rows = [{"component": "Aggregation alone (no override)", "accuracy_pct": 100 * agg.mean()},
            {"component": "Full pipeline (aggregation + override)", "accuracy_pct": 100 * full.mean()},
            {"component": "Best-of-N (override always)", "accuracy_pct": 100 * bon.mean()}]
    summary = {"n": int(fired.size), "override_fires": int(fired.sum()), "override_rate_pct": 100 * float(fired.mean()),
               "acc_when_fired_pct": 100 * float(full[fired].mean()) if fired.any() else math.nan,
               "acc_when_not_fired_pct": 100 * float(full[~fired].mean()) if (~fired).any() else math.nan,
               "aggregation_alone_pct": 100 * float(agg.mean()), "full_pct": 100 * float(full.mean()),
               "best_of_n_pct": 100 * float(bon.mean())}
    return pd.DataFrame(rows), summary


def oracle_ceiling(records: Sequence[Mapping]) -> dict:
    """Table 23: accuracy if the best proposal (any of the N x k samples or refined proposals)
    were always selected, against SC-MoA's; gap = oracle - actual (pp)."""
    oracle = np.array([bool(r["oracle_correct"]) for r in records])
    actual = method_correct(records, "scmoa")
    return {"n": int(oracle.size), "oracle_pct": 100 * float(oracle.mean()), "actual_pct": 100 * float(actual.mean()),
            "gap_pp": 100 * float(oracle.mean() - actual.mean())}


def compared_to(records: Sequence[Mapping], reference: str, methods: Sequence[str],
                labels: Mapping[str, str] | None = None, method: str = TABLE_P_METHOD["table27"]) -> pd.DataFrame:
    """Accuracy (%) of each method and McNemar p against ``reference`` (Tables 26, 27): chi-square
    with continuity correction by default, the variant Table 27's 11 vs 7 -> p = 0.480 shows."""
    ref = method_correct(records, reference)
    rows = []
    for m in [reference] + [x for x in methods if x != reference]:
        c = method_correct(records, m)
        ben, harm = int((c & ~ref).sum()), int((~c & ref).sum())
        rows.append({"condition": (labels or {}).get(m, m), "accuracy_pct": 100 * float(c.mean()),
                     "wins": ben, "losses": harm,
                     "mcnemar_p": math.nan if m == reference else stats.mcnemar(ben, harm, method=method),
                     "p_method": "" if m == reference else P_METHOD_LABEL[method]})
    return pd.DataFrame(rows)


def token_accounting(records: Sequence[Mapping], methods: Sequence[str]) -> pd.DataFrame:
    """Table 28: mean tokens per problem (input + output, reasoning included) and accuracy per
    million tokens (Acc/MT = accuracy % / mean tokens in millions). Methods whose back-end
    reports no token counts are listed with empty token columns."""
    rows = []
    for m in methods:
        usages = [r["methods"][m].get("usage") or {} for r in records]
        prompt_t = [u.get("prompt_tokens") for u in usages]
        out_t = [u.get("completion_tokens") for u in usages]
        known = all(v is not None for v in prompt_t + out_t)
        acc = 100 * float(method_correct(records, m).mean())
        tokens = float(np.mean([a + b for a, b in zip(prompt_t, out_t)])) if known else math.nan
        rows.append({"method": m, "accuracy_pct": acc, "calls": float(np.mean([r["methods"][m]["calls"] for r in records])),
                     "input_tokens": float(np.mean(prompt_t)) if known else math.nan,
                     "output_tokens": float(np.mean(out_t)) if known else math.nan, "total_tokens": tokens,
                     "acc_per_mtok": acc / (tokens / 1e6) if known and tokens > 0 else math.nan})
    return pd.DataFrame(rows)


def consensus_gain_by_stratum(records: Sequence[Mapping]) -> pd.DataFrame:
    """Figure 4b: mean consensus improvement E[Delta C] = C_post - C_pre by pre-refinement consensus."""
    pre = np.array([r["record"]["clusters_pre"]["consensus"] for r in records])
    post = np.array([r["record"]["clusters_post"]["consensus"] for r in records])
    frame = pd.DataFrame({"C_pre": np.round(pre, 6), "delta_C": post - pre})
    return frame.groupby("C_pre")["delta_C"].agg(n="size", mean_delta_C="mean").reset_index()
