"""Offline consensus analysis: Figure 2 curves, Appendix H recovery statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from concord.papers.core.analysis import class_correctness, default_n_values, diagnose, label_accuracy_curve, recovery_summary
from concord.papers.core.figures import RecoveryCell
from concord.papers.core.rollouts import COLUMNS, groups, validate_rollouts

RNG = np.random.default_rng(0)
CORRECT_TEXT = "Add the numbers: 12 + 7 = 19, so the answer is \\boxed{19}."


def _wrong_text(i: int) -> str:
    words = ["zebra", "quantum", "marmalade", "tundra", "saxophone", "glacier", "origami", "nebula"]
    return " ".join(RNG.permutation(words * 3)) + f" {i} so \\boxed{{21}}"


def recovery_frame() -> pd.DataFrame:
    """Question q0: a wrong, incoherent, unconfident plurality (5 x '21') against a coherent,
    confident correct minority (3 x '19'): the vote fails, CoRE should recover.
    Question q1: the vote is already right."""
    rows = []
    for i in range(8):
        correct = i < 3
        rows.append({"question_id": "q0", "rollout_idx": i,
                     "text": CORRECT_TEXT if correct else _wrong_text(i), "n_tokens": 20, "finish_reason": "stop",
                     "confidence": -0.2 if correct else -1.5, "answer": "19" if correct else "21",
                     "answer_class": 1 if correct else 0, "gold": "19"})
    for i in range(8):
        rows.append({"question_id": "q1", "rollout_idx": i, "text": f"It is 5. \\boxed{{{5 if i < 6 else 6}}}",
                     "n_tokens": 10, "finish_reason": "stop", "confidence": -0.5,
                     "answer": "5" if i < 6 else "6", "answer_class": 0 if i < 6 else 1, "gold": "5"})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    # q0's classes must be numbered by first appearance: the correct answers come first.
    frame.loc[frame.question_id == "q0", "answer_class"] = [0, 0, 0, 1, 1, 1, 1, 1]
    return validate_rollouts(frame)


def test_diagnosis_finds_the_recovery():
    g = groups(recovery_frame())
    diag = diagnose(g, class_correctness(g), {"kappa": 0.1, "tau": 0.25, "alpha": 0.1})
    q0 = diag.set_index("question_id").loc["q0"]
    assert not q0.majority_correct and q0.core_correct
    assert q0.plurality_size == 5 and q0.correct_size == 3
    assert q0.confidence_gap == pytest.approx(1.3)
    assert q0.reward_gap > 0 and q0.coherence_correct > q0.coherence_plurality
    summary = recovery_summary(diag, tau=0.25)
    assert summary["recovered"] == 1 and summary["n_questions"] == 1 and summary["regressions"] == 0
    assert summary["outnumbering_ratio"] == pytest.approx(5 / 3)
    assert summary["majority_accuracy"] == 0.5 and summary["core_accuracy"] == 1.0
    # Appendix H's gate is averaged over the recovered questions; the mean over all is labelled.
    gates = diag.set_index("question_id")["core_gate"]
    assert summary["mean_gate_recovered"] == pytest.approx(gates["q0"])
    assert summary["mean_gate_all_questions"] == pytest.approx(gates.mean())
    assert gates["q0"] != pytest.approx(gates.mean())
    # The summary is exactly what Figure 4 reads.
    cell = RecoveryCell.from_dict(summary, model="m", benchmark="b")
    assert cell.confidence_bar < cell.vote_bar


def test_label_accuracy_curve_at_full_n_matches_the_direct_vote():
    g = groups(recovery_frame())
    curve = label_accuracy_curve(g, class_correctness(g), [2, 4, 8], n_subsamples=5, seed=1,
                                 consensus={"kappa": 0.1, "tau": 0.25, "alpha": 0.1})
    full = curve[curve.n == 8].set_index("method")
    assert full.loc["majority", "mean"] == 0.5
    assert full.loc["core", "mean"] == 1.0
    assert (full["subsamples"] == 1).all()
    assert (curve[curve.n == 2]["subsamples"] == 5).all()
    assert ((curve["lo"] <= curve["mean"]) & (curve["mean"] <= curve["hi"])).all()
    again = label_accuracy_curve(g, class_correctness(g), [2, 4, 8], n_subsamples=5, seed=1,
                                 consensus={"kappa": 0.1, "tau": 0.25, "alpha": 0.1})
    pd.testing.assert_frame_equal(curve, again)  # seeded subsampling: reruns are identical


def test_bad_n_values_are_named():
    g = groups(recovery_frame())
    with pytest.raises(ValueError, match="n_values"):
        label_accuracy_curve(g, class_correctness(g), [16], 2, 0)


def test_default_n_values():
    assert default_n_values(64) == [2, 4, 8, 16, 32, 64]
    assert default_n_values(6) == [2, 4, 6]


def test_malformed_rollouts_are_rejected():
    frame = recovery_frame()
    with pytest.raises(ValueError, match="missing column"):
        validate_rollouts(frame.drop(columns=["confidence"]))
    with pytest.raises(ValueError, match="different roll-out counts"):
        validate_rollouts(frame.iloc[:-1])
    broken = frame.copy()
    broken.loc[0, "answer"] = None
    with pytest.raises(ValueError, match="answer/answer_class disagree"):
        validate_rollouts(broken)
