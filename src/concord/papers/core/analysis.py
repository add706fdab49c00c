"""Offline consensus analysis on stored roll-outs (no training needed).

- Figure 2 of the CoRE paper: pseudo-label accuracy against the gold answer versus the number
  of roll-outs N, for every operator, by repeated subsampling (mean and a 95% band).
- Appendix H: where CoRE's label differs from the vote: recoveries versus regressions, the
  confidence gap (nats) and reward gap between the correct cluster and the wrong plurality,
  and the mean cohesiveness gate.
- Recovery statistics for Figure 4: per contested question the outnumbering ratio r = m/n*,
  the measured coherence advantage c*/c_w and the confidence gap delta.

Gold answers are used here for diagnostics only; this module is never imported by training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord.consensus import METHODS, score_groups
from concord.consensus.graph import affinity, node_weights
from concord.papers.core.rollouts import groups as rollout_groups


def class_correctness(groups: Sequence[dict], policy: str = "strict", task: str = "math") -> list[np.ndarray]:
    """For each question, a boolean per answer class: does its first answer grade as gold?

    The first member's answer is graded as written (:func:`concord.answers.graded_answer` of its
    text under the ``policy`` the answers were read with), never TTRL's lossy vote string: the
    class label is that roll-out's answer, so a label is correct exactly when its class is.
    """
    from concord.answers import grade, graded_answer

    out = []
    for g in groups:
        n_classes = int(g["classes"].max()) + 1 if (g["classes"] >= 0).any() else 0
        correct = np.zeros(n_classes, dtype=bool)
        for c in range(n_classes):
            first = int(np.flatnonzero(g["classes"] == c)[0])
            correct[c] = grade(graded_answer(g["texts"][first], policy, task=task), g["gold"])
        out.append(correct)
    return out


def _first_seen_relabel(classes: np.ndarray) -> np.ndarray:
    """Renumber class ids by first appearance (ties-to-first-seen must follow the subset's order)."""
    mapping: dict[int, int] = {}
    out = np.full(classes.shape, -1, dtype=int)
    for i, c in enumerate(classes.tolist()):
        if c >= 0:
            out[i] = mapping.setdefault(c, len(mapping))
    return out


def label_accuracy_curve(
    groups: Sequence[dict],
    correctness: Sequence[np.ndarray],
    n_values: Sequence[int],
    n_subsamples: int,
    seed: int,
    methods: Sequence[str] = METHODS,
    consensus: Mapping | None = None,
) -> pd.DataFrame:
    """Pseudo-label accuracy per (method, N) over ``n_subsamples`` random subsets of N roll-outs."""
    from tqdm.auto import tqdm

    consensus = dict(consensus or {})
    n_max = min(len(g["answers"]) for g in groups)
    bad = [n for n in n_values if n < 1 or n > n_max]
    if bad:
        raise ValueError(f"analysis.n_values {bad} outside 1..{n_max} (roll-outs per question)")
    rng = np.random.default_rng(seed)
    rows = []
    for n in tqdm(list(n_values), desc="figure 2: N", unit="N"):
        # A full set has one subset; repeating it would only fake a tighter band.
        repeats = 1 if n == n_max else n_subsamples
        for r in range(repeats):
            picks = [np.sort(rng.choice(len(g["answers"]), size=n, replace=False)) for g in groups]
            sub = []
            back = []  # subset class id -> original class id
            for g, idx in zip(groups, picks):
                orig = g["classes"][idx]
                new = _first_seen_relabel(orig)
                back.append({int(nc): int(oc) for nc, oc in zip(new, orig) if nc >= 0})
                sub.append({
                    "answers": [g["answers"][i] for i in idx],
                    "texts": [g["texts"][i] for i in idx],
                    "confidences": g["confidences"][idx],
                    "classes": new,
                })
            for method in methods:
                results = score_groups(method, sub, **consensus)
                hits = [
                    res.label_class >= 0 and bool(correct[back_map[res.label_class]])
                    for res, correct, back_map in zip(results, correctness, back)
                ]
                rows.append({"method": method, "n": n, "subsample": r, "accuracy": float(np.mean(hits))})
    raw = pd.DataFrame(rows)
    summary = (
        raw.groupby(["method", "n"], sort=False)["accuracy"]
        .agg(mean="mean", std="std", lo=lambda s: s.quantile(0.025), hi=lambda s: s.quantile(0.975), subsamples="size")
        .reset_index()
    )
    summary["std"] = summary["std"].fillna(0.0)
    return summary


def default_n_values(n_max: int) -> list[int]:
    values, n = [], 2
    while n < n_max:
        values.append(n)
        n *= 2
    return values + [n_max]


@dataclass
class QuestionDiagnosis:
    question_id: str
    majority_correct: bool
    ec_correct: bool
    cisc_correct: bool
    core_correct: bool
    core_gate: float
    plurality_size: int  # m: roll-outs in the plurality class
    correct_size: int  # n*: roll-outs in the largest correct class (0 if none)
    confidence_gap: float  # mean c of the correct cluster minus mean c of the wrong plurality (nats)
    reward_gap: float  # mean CoRE reward of the correct cluster minus that of the wrong plurality
    coherence_correct: float  # mean within-cluster affinity A_ij of the correct cluster
    coherence_plurality: float  # same for the wrong plurality
    weight_ratio: float  # mean-sqrt-weight^2 of correct over wrong plurality (Prop. 3's w*/w_w)


def diagnose(groups: Sequence[dict], correctness: Sequence[np.ndarray], consensus: Mapping | None = None) -> pd.DataFrame:
    """Per-question comparison of the four operators on the full roll-out set (Appendix H)."""
    consensus = dict(consensus or {})
    kappa, tau = consensus.get("kappa", 0.1), consensus.get("tau", 0.25)
    full = [{"answers": g["answers"], "texts": g["texts"], "confidences": g["confidences"], "classes": g["classes"]} for g in groups]
    by_method = {m: score_groups(m, full, **consensus) for m in METHODS}
    rows = []
    for q, (g, correct) in enumerate(zip(groups, correctness)):
        classes = g["classes"]
        hit = {m: by_method[m][q].label_class >= 0 and bool(correct[by_method[m][q].label_class]) for m in METHODS}
        answered = classes >= 0
        sizes = np.bincount(classes[answered], minlength=len(correct)) if answered.any() else np.zeros(0, int)
        plurality = by_method["majority"][q].label_class
        correct_classes = np.flatnonzero(correct)
        best_correct = int(correct_classes[np.argmax(sizes[correct_classes])]) if correct_classes.size else -1
        gaps = _cluster_gaps(g, classes, best_correct, plurality, by_method["core"][q].rewards, kappa, tau)
        rows.append(QuestionDiagnosis(
            question_id=g["question_id"],
            majority_correct=hit["majority"], ec_correct=hit["ec"], cisc_correct=hit["cisc"], core_correct=hit["core"],
            core_gate=float(by_method["core"][q].gate),
            plurality_size=int(sizes[plurality]) if plurality >= 0 else 0,
            correct_size=int(sizes[best_correct]) if best_correct >= 0 else 0,
            **gaps,
        ).__dict__)
    return pd.DataFrame(rows)


def _cluster_gaps(g, classes, correct_class, plurality, core_rewards, kappa, tau) -> dict:
    nan = float("nan")
    if correct_class < 0 or plurality < 0 or correct_class == plurality:
        return {"confidence_gap": nan, "reward_gap": nan, "coherence_correct": nan, "coherence_plurality": nan, "weight_ratio": nan}
    answered = np.flatnonzero(classes >= 0)
    a = affinity(classes[answered], [g["texts"][i] for i in answered], kappa)
    w = node_weights(g["confidences"][answered], tau)
    sub = classes[answered]

    def coherence(c):
        idx = np.flatnonzero(sub == c)
        if idx.size < 2:
            return 0.0
        block = a[np.ix_(idx, idx)]
        return float(block.sum() / (idx.size * (idx.size - 1)))

    def mean_sqrt_w_sq(c):
        return float(np.mean(np.sqrt(w[sub == c])) ** 2)

    conf = g["confidences"]
    return {
        "confidence_gap": float(conf[classes == correct_class].mean() - conf[classes == plurality].mean()),
        "reward_gap": float(core_rewards[classes == correct_class].mean() - core_rewards[classes == plurality].mean()),
        "coherence_correct": coherence(correct_class),
        "coherence_plurality": coherence(plurality),
        "weight_ratio": mean_sqrt_w_sq(correct_class) / max(mean_sqrt_w_sq(plurality), 1e-300),
    }


def recovery_summary(diag: pd.DataFrame, tau: float) -> dict:
    """Appendix H's numbers and Figure 4's inputs (``plots.RecoveryCell``) for one (model, benchmark).

    *Contested* questions are those where the vote is wrong and a correct cluster of at least two
    roll-outs exists (a singleton is never extracted, Lemma 3): the recovery region's cells.
    ``n_questions``/``recovered`` and the three measured ratios refer to them. The ``recovered_*``
    statistics and ``mean_gate_recovered`` average over the questions CoRE recovers (Appendix H);
    ``mean_gate_all_questions`` over every question.
    """
    maj_wrong = ~diag["majority_correct"]
    recovered = maj_wrong & diag["core_correct"]
    regressed = diag["majority_correct"] & ~diag["core_correct"]
    contested_mask = maj_wrong & (diag["correct_size"] >= 2) & (diag["plurality_size"] >= 2) & diag["confidence_gap"].notna()
    contested = diag[contested_mask]
    rec = diag[recovered & diag["confidence_gap"].notna()]

    def mean(series):
        series = series.dropna()
        return float(series.mean()) if len(series) else None

    ratio = contested["plurality_size"] / contested["correct_size"]
    advantage = contested["coherence_correct"] / contested["coherence_plurality"]
    return {
        "n_questions": int(len(contested)),
        "recovered": int((contested_mask & recovered).sum()),
        "outnumbering_ratio": mean(ratio),
        "coherence_advantage": mean(advantage),
        "confidence_gap_nats": mean(contested["confidence_gap"]),
        "tau": float(tau),
        "n_questions_total": int(len(diag)),
        "majority_accuracy": float(diag["majority_correct"].mean()),
        "ec_accuracy": float(diag["ec_correct"].mean()),
        "cisc_accuracy": float(diag["cisc_correct"].mean()),
        "core_accuracy": float(diag["core_correct"].mean()),
        "majority_wrong": int(maj_wrong.sum()),
        "recovered_total": int(recovered.sum()),
        "regressions": int(regressed.sum()),
        "net": int(recovered.sum() - regressed.sum()),
        "recovered_by_cisc_too": int((recovered & diag["cisc_correct"]).sum()),
        "recovered_by_core_only": int((recovered & ~diag["cisc_correct"] & ~diag["ec_correct"]).sum()),
        "recovered_confidence_gap_nats": mean(rec["confidence_gap"]),
        "recovered_reward_gap": mean(rec["reward_gap"]),
        # Appendix H: "On the recovered questions ... CoRE's cohesiveness gate averages chi = 0.42";
        # the mean over every question is a different number and is labelled as such.
        "mean_gate_recovered": mean(diag.loc[recovered, "core_gate"]),
        "mean_gate_all_questions": float(diag["core_gate"].mean()),
    }


def load_groups(rollouts_path) -> list[dict]:
    from concord.papers.core.rollouts import validate_rollouts

    frame = validate_rollouts(pd.read_parquet(rollouts_path), str(rollouts_path))
    return rollout_groups(frame)


def load_answer_policy(rollouts_path) -> tuple[str, str]:
    """(policy, task) the roll-outs' answers were read with; older files used the last box."""
    from concord.papers.core.rollouts import answer_policy_of

    return answer_policy_of(rollouts_path, default="strict")
