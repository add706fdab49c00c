"""Per-step diagnostics that need gold answers -- computed *after* the reward, for logging only.

This is the one place in the training stack that sees gold answers. It receives the scored
groups (:class:`concord.rl.rewards.GroupRecord`) that the reward function has already produced
and turned into advantages; nothing it returns flows back into the loss.

TTRL's diagnostics, per step:

* ``label_accuracy`` -- fraction of questions whose pseudo-label is correct;
* ``reward_accuracy`` -- fraction of roll-outs whose pseudo-reward agrees with the true reward,
  where a roll-out is pseudo-rewarded when its reward is positive (for every math arm a positive
  reward means "in the consensus answer class": the affinity is block-diagonal over classes) and
  truly rewarded when its answer is correct;
* ``majority_ratio`` -- mean share of a group held by its largest answer class;
* ``mean_gate`` -- mean cohesiveness gate w_q (1 for majority and CISC);
* ``rollout_accuracy`` -- fraction of correct roll-outs (the policy's pass@1 at the training
  temperature, for free).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np


def math_diagnostics(
    groups: Sequence, gold_by_id: Mapping[str, str], grade: Callable[[str | None, str], bool] | None = None
) -> dict[str, float]:
    """TTRL's label/reward accuracy, majority ratio and mean gate over one step's groups."""
    if grade is None:
        from concord.answers import grade
    if not groups:
        return {}
    label_ok, reward_ok, correct, ratios, gates = [], [], [], [], []
    for g in groups:
        if g.question_id not in gold_by_id:
            raise KeyError(f"no gold answer for question {g.question_id!r} (diagnostics only)")
        gold = gold_by_id[g.question_id]
        # Grade what was written (``graded``), never TTRL's lossy vote string; the label is the
        # answer of the first roll-out that gave it, so it is graded as that roll-out wrote it.
        graded = g.graded if getattr(g, "graded", None) is not None else g.answers
        truth = np.array([grade(a, gold) for a in graded], dtype=bool)
        pseudo = np.asarray(g.rewards) > 0
        label_ok.append(bool(g.label is not None and grade(graded[list(g.answers).index(g.label)], gold)))
        reward_ok.extend((pseudo == truth).tolist())
        correct.extend(truth.tolist())
        ratios.append(majority_ratio(g.classes if g.classes is not None else _classes_by_text(g.answers)))
        gates.append(g.gate)
    return {
        "label_accuracy": float(np.mean(label_ok)),
        "reward_accuracy": float(np.mean(reward_ok)),
        "rollout_accuracy": float(np.mean(correct)),
        "majority_ratio": float(np.mean(ratios)),
        "mean_gate": float(np.mean(gates)),
    }


def majority_ratio(classes: Sequence[int]) -> float:
    """Share of the group in its largest answer class (roll-outs without an answer count as none)."""
    classes = np.asarray(classes, dtype=int)
    answered = classes[classes >= 0]
    if classes.size == 0 or answered.size == 0:
        return 0.0
    return float(np.bincount(answered).max() / classes.size)


def _classes_by_text(answers: Sequence[str | None]) -> list[int]:
    ids: dict[str, int] = {}
    return [-1 if a is None else ids.setdefault(a, len(ids)) for a in answers]
