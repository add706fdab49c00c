"""Final answers: extraction from ``\\boxed{}``, canonical keys, symbolic equivalence, grouping, grading.

Equivalence is decided by math-verify (``parse`` + ``verify``). math-verify's own timeouts use
SIGALRM, which raises outside the main thread and cannot interrupt work stuck inside C code
(power towers such as ``10^{10^{10}}`` hang forever), so every symbolic operation runs in a worker
*process* forked from a warm template; a worker that exceeds the per-operation timeout is killed
and replaced within milliseconds. The worker announces each parse/verify before starting it, so
the parent knows which answer (or pair) hung, remembers it as opaque, and resumes the remaining
work in the fresh worker. Works from any thread; POSIX only (fork, Unix sockets).

Answer policies (``extract_answer``): ``strict`` reads the last complete ``\\boxed{}``; ``ttrl``
reproduces TTRL's extractor (:mod:`concord.ttrl_extraction`), where the empty answer ``""`` votes.

Grouping N answers avoids N^2 symbolic comparisons: answers first collapse by a cheap canonical key
(presentation-only LaTeX clean-up, rational literals in normal form, multiple-choice letters);
pairs of rationals and letters are then decided exactly without math-verify, and only the
remaining class representatives are compared symbolically, greedily, in order of first appearance.
"""

from __future__ import annotations

from concord.answers.canonical import (
    MAX_SYMBOLIC_CHARS,
    MAX_SYMBOLIC_DEPTH,
    canonical_answer,
    cluster_keys,
    decide_cheaply,
    key_info,
    normalize_choice,
    too_complex,
)
from concord.answers.equivalence import grade, group_answers, group_answers_batch, is_equivalent
from concord.answers.extraction import POLICIES, TASKS, check_policy, extract_answer, extract_boxed, graded_answer
from concord.answers.verifier import Verifier, WorkerError, default_verifier

__all__ = [
    "MAX_SYMBOLIC_CHARS",
    "MAX_SYMBOLIC_DEPTH",
    "POLICIES",
    "TASKS",
    "Verifier",
    "WorkerError",
    "canonical_answer",
    "check_policy",
    "cluster_keys",
    "decide_cheaply",
    "default_verifier",
    "extract_answer",
    "extract_boxed",
    "grade",
    "graded_answer",
    "group_answers",
    "group_answers_batch",
    "is_equivalent",
    "key_info",
    "normalize_choice",
    "too_complex",
]
