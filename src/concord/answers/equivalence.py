"""Equivalence, grouping and grading: canonical keys first, math-verify (in the killable
:class:`~concord.answers.verifier.Verifier`) only for what the keys cannot decide."""

from __future__ import annotations

import functools
from typing import Sequence

from concord.answers.canonical import canonical_answer, cluster_keys, decide_cheaply, key_info, too_complex
from concord.answers.verifier import Verifier, default_verifier


def is_equivalent(a: str | None, b: str | None, *, verifier: "Verifier | None" = None) -> bool:
    """Mathematical equivalence of two answers, for grouping (None is equivalent to nothing).

    Symmetric and conservative: equal canonical keys, equal rationals, or math-verify verifying
    *both* directions. math-verify is asymmetric by design (a gold ``0`` accepts the
    prediction ``a+3z=0``; a gold set accepts a tuple): one direction is a grading verdict, not an
    equivalence, and merging on it would put a wrong answer into a right answer's class.
    """
    if a is None or b is None:
        return False
    return group_answers([a, b], verifier=verifier) == [0, 0]


def group_answers(answers: Sequence[str | None], *, verifier: "Verifier | None" = None) -> list[int]:
    """Equivalence-class id per answer: -1 for None, ids 0, 1, ... in order of first appearance."""
    return group_answers_batch([answers], verifier=verifier)[0]


def group_answers_batch(
    groups: Sequence[Sequence[str | None]], *, verifier: "Verifier | None" = None
) -> list[list[int]]:
    """:func:`group_answers` for many questions with one round trip to the symbolic worker."""
    keyed: list[list[str | None]] = []
    uniques: list[list[str]] = []
    for g, answers in enumerate(groups):
        if isinstance(answers, str):
            raise TypeError(f"group {g}: expected a sequence of answers, got a single string")
        keys = []
        for i, a in enumerate(answers):
            if a is not None and not isinstance(a, str):
                raise TypeError(f"group {g}, answer {i}: expected str or None, got {type(a).__name__}")
            keys.append(None if a is None else canonical_answer(a))
        keyed.append(keys)
        uniques.append(list(dict.fromkeys(k for k in keys if k is not None)))

    verifier = verifier or default_verifier()
    labels_per_group: list[list[int] | None] = [None] * len(groups)
    jobs, job_groups = [], []
    for g, unique in enumerate(uniques):
        try:  # most groups need no symbolic work at all: stay in-process
            labels_per_group[g] = cluster_keys(unique, functools.partial(_decide_locally, opaque=verifier.opaque))
        except _NeedsSymbolic:
            jobs.append(("group", unique))
            job_groups.append(g)
    if jobs:
        for g, labels in zip(job_groups, verifier.run(jobs)):
            labels_per_group[g] = labels

    out = []
    for keys, unique, labels in zip(keyed, uniques, labels_per_group):
        class_of = dict(zip(unique, labels))
        out.append([-1 if k is None else class_of[k] for k in keys])
    return out


class _NeedsSymbolic(Exception):
    pass


def _decide_locally(a: str, b: str, *, opaque: set[str]) -> bool:
    cheap = decide_cheaply(a, b)
    if cheap is not None:
        return cheap
    if a in opaque or b in opaque or too_complex(a) or too_complex(b):
        return False
    raise _NeedsSymbolic


def grade(pred: str | None, gold: str | int | float, *, verifier: "Verifier | None" = None) -> bool:
    """Is the answer ``pred`` correct for ``gold``? math-verify's gold-to-prediction verdict
    (evaluation: gold goes first, math-verify is asymmetric), after meaning-preserving keys.
    Multiple-choice golds compare letters; an empty or missing answer is never correct.

    Pass the answer as written (:func:`graded_answer`), not a lossy vote string.
    """
    if pred is None:
        return False
    if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        raise TypeError(f"gold must be str, int or float, got {type(gold).__name__}")
    gold_key, pred_key = canonical_answer(str(gold)), canonical_answer(pred)
    if not gold_key:
        raise ValueError(f"gold answer {gold!r} is empty; every question needs a gold answer to be graded")
    if gold_key == pred_key:
        return True
    if key_info(pred_key)[0] == "empty" or "choice" in (key_info(gold_key)[0], key_info(pred_key)[0]):
        return False
    verifier = verifier or default_verifier()
    if gold_key in verifier.opaque or pred_key in verifier.opaque or too_complex(gold_key) or too_complex(pred_key):
        return False
    # No rational shortcut here: grading follows math-verify exactly (its float rounding included).
    return verifier.run([("grade", gold_key, pred_key)])[0]
