"""The consensus operators: N roll-outs of one question -> pseudo-label, per-roll-out rewards, gate.

Four arms share one interface (seed 000, sections 3.2 and 4):

- ``majority``: TTRL's plurality vote (ties to the first seen answer), binary reward, gate 1.
- ``ec``: equilibrium consensus, CoRE with uniform confidence.
- ``cisc``: vote weighted by CoRE's node weights w_i, binary reward, gate 1.
- ``core``: the full confidence-calibrated graph with replicator dynamics.

Roll-outs without an answer (None) take no part: no edges, no vote, reward 0, never the label.
In particular the confidence anchor max_j c_j and the per-question TF-IDF fit use the answered
roll-outs only, so appending unanswered roll-outs never changes anyone else's reward.
A question with no answer at all gets label None, rewards 0 and gate 0.
The empty answer ``""`` (what TTRL's extractor reads from an empty generation or an empty box,
``answers.policy: ttrl``) is an answer like any other: it forms a class, votes, is a node of the
graph, takes part in the confidence anchor, and can win the label and earn reward.

Parameter names equal the keys of the ``consensus`` config section, so
``score_group(method, answers, texts, confidences, **config["consensus"])`` works.
The graph pieces live in :mod:`concord.consensus.graph`, the two votes in
:mod:`concord.consensus.votes`; this module assembles them into the four operators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from concord.answers import Verifier, group_answers_batch
from concord.consensus.graph import (
    affinity,
    argmax_first,
    calibrate,
    class_mass,
    cohesion_gate,
    graded_rewards,
    node_weights,
    replicator_dynamics,
)
from concord.consensus.votes import cisc_vote, majority_vote
from concord.registry import Registry


@dataclass(frozen=True)
class ConsensusMethod:
    """One consensus operator of the CoRE paper's graph x confidence factorial (Figure 5b):
    ``graph`` reads the label from the dominant set of the roll-out graph (else a vote over
    classes); ``confidence`` weights roll-outs by their generation confidence (else equally)."""

    name: str
    graph: bool
    confidence: bool
    description: str


#: Every consensus operator by name (a new one registers here and is scored by :func:`score_groups`).
CONSENSUS_METHODS: Registry[ConsensusMethod] = Registry("consensus method")
for _method in (
    ConsensusMethod("majority", graph=False, confidence=False, description="Majority vote (TTRL)"),
    ConsensusMethod("ec", graph=True, confidence=False, description="Equilibrium consensus on the graph, no confidence"),
    ConsensusMethod("cisc", graph=False, confidence=True, description="Confidence-weighted vote (CISC)"),
    ConsensusMethod("core", graph=True, confidence=True, description="CoRE: confidence-calibrated graph"),
):
    CONSENSUS_METHODS.register(_method.name, _method)

METHODS = ("majority", "ec", "cisc", "core")  # the paper's order (tables, figures)
GRAPH_METHODS = tuple(m for m in METHODS if CONSENSUS_METHODS.get(m).graph)
DEFAULTS = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}


@dataclass(frozen=True, eq=False)
class ConsensusResult:
    """What one consensus operator reads from one question's roll-outs."""

    method: str
    label: str | None  # first-seen answer string of the winning class
    label_class: int  # its class id, -1 when there is no answer
    rewards: np.ndarray  # (N,) in [0, 1]
    gate: float  # question weight w_q: x*^T A x* for graph arms, 1 for votes, 0 without answers
    mass: np.ndarray  # (N,) x* for graph arms, normalised vote weights for votes
    classes: np.ndarray  # (N,) answer class ids, -1 for no answer
    support: np.ndarray = field(repr=False)  # (N,) x*_i > support threshold (votes: mass > 0)
    iterations: int = 0  # replicator steps (0 for votes)
    converged: bool = True  # whether ||x(t+1) - x(t)|| < eps was reached within t_max

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (lists and plain numbers)."""
        return {
            "method": self.method,
            "label": self.label,
            "label_class": self.label_class,
            "rewards": self.rewards.tolist(),
            "gate": self.gate,
            "mass": self.mass.tolist(),
            "classes": self.classes.tolist(),
            "support": self.support.tolist(),
            "iterations": self.iterations,
            "converged": self.converged,
        }


def score_group(
    method: str,
    answers: Sequence[str | None],
    texts: Sequence[str | None] | None = None,
    confidences: Sequence[float] | None = None,
    *,
    classes: Sequence[int] | None = None,
    verifier: Verifier | None = None,
    **params: Any,
) -> ConsensusResult:
    """Score one question's N roll-outs with ``method`` (one of :data:`METHODS`).

    ``answers``: extracted final answers (None when a roll-out has none); ``texts``: reasoning texts
    (needed by ``ec``/``core`` unless kappa = 1); ``confidences``: mean token log-probabilities in
    nats (needed by ``cisc``/``core``); ``classes``: precomputed answer class ids (-1 for None) to
    skip regrouping. ``params``: kappa, tau, alpha, C (None = alpha), eps, t_max, support_threshold
    (None = 1/(10N)).
    """
    group = {"answers": answers, "texts": texts, "confidences": confidences, "classes": classes}
    return score_groups(method, [group], verifier=verifier, **params)[0]


def score_groups(
    method: str,
    groups: Sequence[Mapping[str, Any]],
    *,
    verifier: Verifier | None = None,
    kappa: float = DEFAULTS["kappa"],
    tau: float = DEFAULTS["tau"],
    alpha: float = DEFAULTS["alpha"],
    C: float | None = DEFAULTS["C"],
    eps: float = DEFAULTS["eps"],
    t_max: int = DEFAULTS["t_max"],
    support_threshold: float | None = None,
) -> list[ConsensusResult]:
    """:func:`score_group` for many questions: answers of all questions are grouped in one worker
    round trip and the replicator dynamics of all questions run as one batch.

    Each group is a mapping with ``answers`` and optionally ``texts``, ``confidences``, ``classes``.
    """
    spec = CONSENSUS_METHODS.get(method)
    _check_params(kappa=kappa, tau=tau, alpha=alpha, C=C, eps=eps, t_max=t_max, support_threshold=support_threshold)
    prepared = [_prepare(q, method, g, kappa) for q, g in enumerate(groups)]

    todo = [p for p in prepared if p.classes is None]
    if todo:
        for p, labels in zip(todo, group_answers_batch([p.answers for p in todo], verifier=verifier)):
            p.classes = np.asarray(labels, dtype=int)

    results: list[ConsensusResult | None] = [None] * len(prepared)
    graph_jobs = []
    for q, p in enumerate(prepared):
        answered = np.flatnonzero(p.classes >= 0)
        n_classes = int(p.classes.max()) + 1 if answered.size else 0
        threshold = support_threshold if support_threshold is not None else 1.0 / (10 * p.n)
        if answered.size == 0:
            results[q] = _no_answer(method, p.n, p.classes)
        elif not spec.graph and not spec.confidence:
            label, rewards, mass = majority_vote(p.classes, n_classes)
            results[q] = _vote_result(method, p, label, rewards, mass)
        elif not spec.graph:
            w = np.zeros(p.n)
            w[answered] = node_weights(p.confidences[answered], tau)
            label, rewards, mass = cisc_vote(p.classes, w, n_classes)
            results[q] = _vote_result(method, p, label, rewards, mass)
        else:
            sub_classes = p.classes[answered]
            sub_texts = None if p.texts is None else [p.texts[i] for i in answered]
            a = affinity(sub_classes, sub_texts, kappa)
            w = node_weights(p.confidences[answered], tau) if spec.confidence else np.ones(answered.size)
            graph_jobs.append((q, answered, n_classes, threshold, a, calibrate(a, w)))

    if graph_jobs:
        size = max(job[1].size for job in graph_jobs)
        stacked = np.zeros((len(graph_jobs), size, size))
        mask = np.zeros((len(graph_jobs), size), dtype=bool)
        for b, (_, answered, _, _, _, a_cal) in enumerate(graph_jobs):
            stacked[b, : answered.size, : answered.size] = a_cal
            mask[b, : answered.size] = True
        eq = replicator_dynamics(stacked, mask, alpha=alpha, C=C, eps=eps, t_max=t_max)
        for b, (q, answered, n_classes, threshold, a, _) in enumerate(graph_jobs):
            x = eq.x[b, : answered.size]
            results[q] = _graph_result(
                method, prepared[q], answered, n_classes, threshold, a, x, int(eq.iterations[b]), bool(eq.converged[b])
            )
    return results  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Validation and assembly
# ---------------------------------------------------------------------------------------------


@dataclass
class _Prepared:
    n: int
    answers: list[str | None]
    texts: list[str | None] | None
    confidences: np.ndarray | None
    classes: np.ndarray | None


def _check_params(*, kappa, tau, alpha, C, eps, t_max, support_threshold) -> None:
    def number(name, value):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
            raise ValueError(f"consensus parameter {name} must be a finite number, got {value!r}")

    for name, value in (("kappa", kappa), ("tau", tau), ("alpha", alpha), ("eps", eps)):
        number(name, value)
    if not 0.0 <= kappa <= 1.0:
        raise ValueError(f"kappa must lie in [0, 1], got {kappa}")
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if C is not None:
        number("C", C)
        if C < alpha:
            raise ValueError(f"the shift C={C} must be >= alpha={alpha} (W' must be nonnegative)")
    if eps <= 0:
        raise ValueError(f"eps must be positive, got {eps}")
    if isinstance(t_max, bool) or not isinstance(t_max, (int, np.integer)) or t_max < 1:
        raise ValueError(f"t_max must be an integer >= 1, got {t_max!r}")
    if support_threshold is not None:
        number("support_threshold", support_threshold)
        if not 0.0 <= support_threshold < 1.0:
            raise ValueError(f"support_threshold must lie in [0, 1), got {support_threshold}")


def _prepare(q: int, method: str, group: Mapping[str, Any], kappa: float) -> _Prepared:
    where = f"question {q}"
    if not isinstance(group, Mapping):
        raise TypeError(f"{where}: expected a mapping with 'answers' (and texts/confidences/classes)")
    unknown = set(group) - {"answers", "texts", "confidences", "classes"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    answers = group.get("answers")
    if answers is None or isinstance(answers, str):
        raise TypeError(f"{where}: 'answers' must be a sequence of str or None")
    answers = list(answers)
    n = len(answers)
    if n == 0:
        raise ValueError(f"{where}: a group needs at least one roll-out")
    for i, a in enumerate(answers):
        if a is not None and not isinstance(a, str):
            raise TypeError(f"{where}, roll-out {i}: answer must be str or None, got {type(a).__name__}")
    has_answer = np.array([a is not None for a in answers])

    classes = group.get("classes")
    if classes is not None:
        classes = np.asarray(classes)
        if classes.shape != (n,) or not np.issubdtype(classes.dtype, np.integer):
            raise ValueError(f"{where}: classes must be {n} integers, got shape {classes.shape} dtype {classes.dtype}")
        classes = classes.astype(int)
        if (classes < -1).any() or not np.array_equal(classes >= 0, has_answer):
            raise ValueError(f"{where}: classes must be -1 exactly where the answer is None and >= 0 elsewhere")

    texts = group.get("texts")
    if method in GRAPH_METHODS and kappa < 1.0:
        if texts is None:
            raise ValueError(f"{where}: method {method!r} with kappa < 1 needs the reasoning texts")
    if texts is not None:
        if isinstance(texts, str):
            raise TypeError(f"{where}: 'texts' must be a sequence of strings, not one string")
        texts = list(texts)
        if len(texts) != n:
            raise ValueError(f"{where}: {len(texts)} texts for {n} answers")
        for i in np.flatnonzero(has_answer):
            if not isinstance(texts[i], str):
                raise TypeError(f"{where}, roll-out {i}: text must be a string, got {type(texts[i]).__name__}")

    confidences = group.get("confidences")
    if CONSENSUS_METHODS.get(method).confidence:
        if confidences is None:
            raise ValueError(f"{where}: method {method!r} needs confidences (mean token log-probabilities)")
    if confidences is not None:
        try:
            confidences = np.asarray(confidences, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{where}: confidences must be numbers ({exc})") from exc
        if confidences.shape != (n,):
            raise ValueError(f"{where}: confidences must have shape ({n},), got {confidences.shape}")
        bad = np.flatnonzero(has_answer & ~np.isfinite(confidences))
        if bad.size:
            raise ValueError(f"{where}: non-finite confidence for answered roll-out(s) {bad.tolist()}")
    return _Prepared(n=n, answers=answers, texts=texts, confidences=confidences, classes=classes)


def _label_of(p: _Prepared, label_class: int) -> str | None:
    return p.answers[int(np.flatnonzero(p.classes == label_class)[0])]


def _no_answer(method: str, n: int, classes: np.ndarray) -> ConsensusResult:
    zeros = np.zeros(n)
    return ConsensusResult(method, None, -1, zeros, 0.0, zeros.copy(), classes, np.zeros(n, dtype=bool), 0, True)


def _vote_result(method, p: _Prepared, label: int, rewards, mass) -> ConsensusResult:
    return ConsensusResult(method, _label_of(p, label), label, rewards, 1.0, mass, p.classes, mass > 0, 0, True)


def _graph_result(method, p: _Prepared, answered, n_classes, threshold, a, x, iterations, converged) -> ConsensusResult:
    label = argmax_first(class_mass(x, p.classes[answered], n_classes))
    rewards = np.zeros(p.n)
    rewards[answered] = graded_rewards(a, x)
    mass = np.zeros(p.n)
    mass[answered] = x
    return ConsensusResult(
        method, _label_of(p, label), label, rewards, cohesion_gate(a, x), mass, p.classes,
        mass > threshold, iterations, converged,
    )


__all__ = [
    "CONSENSUS_METHODS", "DEFAULTS", "GRAPH_METHODS", "METHODS", "ConsensusMethod", "ConsensusResult", "score_group",
    "score_groups",
]
