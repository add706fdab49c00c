"""Arm -> group scorer registry, and the TRL reward function that scores whole groups.

A *scorer* turns one question's group of roll-outs into per-roll-out rewards, a cohesiveness
gate w_q and a pseudo-label. It sees the roll-out texts, their confidences c_i (mean token
log-probability under the sampling policy, computed once by the trainer, identically for every
arm) and the question's non-gold fields -- never a gold answer. Arms register here by name, so
other reward families (e.g. FMV for code) plug into the same trainer::

    @register_scorer("my_arm")
    def fmv(group: GroupInput) -> GroupScore: ...

    @register_scorer("core", batched=True)  # or score a whole step's groups at once
    def core(groups: list[GroupInput]) -> list[GroupScore]: ...

:class:`ConsensusReward` is the callable handed to TRL's ``GRPOTrainer`` as ``reward_funcs``.
TRL calls it on each process with that process's slice of the batch, and a question's group of
``n_vote`` roll-outs may straddle two processes. So it first gathers every process's roll-outs,
scores each complete group once on the main process, broadcasts the result, and returns the
local slice: no group is ever scored in parts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from concord.registry import Registry

log = logging.getLogger(__name__)

#: Arms whose cohesiveness gate scales the loss; the others train with w_q = 1 (paper 3.2, sec. 4).
GATED_ARMS = frozenset({"ec", "core"})
MATH_ARMS = ("majority", "ec", "cisc", "core")

#: Dataset fields that carry a reference answer and must never reach a scorer or the trainer.
GOLD_FIELDS = frozenset({"answer", "gold", "solution", "label", "reference", "target", "private_tests"})


@dataclass(frozen=True)
class GroupInput:
    """What a scorer may see of one question's roll-outs."""

    question_id: str
    texts: list[str]
    confidences: np.ndarray
    context: dict[str, Any] = field(default_factory=dict)  # non-gold dataset fields (e.g. public tests)
    params: dict[str, Any] = field(default_factory=dict)  # the config's consensus section
    answer_policy: str = "strict"  # answers.policy: how a math scorer reads answers from the texts
    task: str = "math"  # the benchmark's task (multiple-choice answers reduce to their letter)


@dataclass
class GroupScore:
    rewards: np.ndarray  # (n_vote,) in [0, 1]
    gate: float  # w_q >= 0; 1.0 for ungated arms
    label: str | None  # the pseudo-label (answer text), None when no roll-out produced one
    answers: list[str | None]  # each roll-out's extracted answer (None = no answer)
    classes: list[int] | None = None  # answer-equivalence class per roll-out (-1 = no answer)
    graded: list[str | None] | None = None  # each answer as written, what gold diagnostics grade (None: answers)


#: A scorer scores one whole question's group (``GroupInput -> GroupScore``); a *batched* scorer
#: takes the list of a step's groups and returns one score per group (the math arms: all answers
#: grouped in one symbolic-worker round trip, the replicator dynamics of all questions at once).
Scorer = Callable[[GroupInput], GroupScore]
BatchScorer = Callable[[list[GroupInput]], list[GroupScore]]
#: Every reward arm by name. The math arms register below; the paper packages register theirs
#: (e.g. ``concord.papers.fmv.rewards``: ``fmv``, ``fmv_pointwise``) when they are imported.
REWARD_ARMS: Registry[BatchScorer] = Registry(
    "reward arm", hint="arms of the paper packages register when concord.papers is imported"
)


def register_scorer(arm: str, scorer: Scorer | BatchScorer | None = None, *, batched: bool = False):
    """Register ``scorer`` for ``arm`` (usable as a decorator). Re-registering replaces it.

    ``batched=False`` (default): ``scorer(group) -> GroupScore``; ``batched=True``:
    ``scorer(groups) -> list[GroupScore]``.
    """

    def _register(fn):
        REWARD_ARMS.register(arm, fn if batched else _batch_of(fn))
        return fn

    return _register(scorer) if scorer is not None else _register


def _batch_of(fn: Scorer) -> BatchScorer:
    def batch(groups: list[GroupInput]) -> list[GroupScore]:
        return [fn(g) for g in groups]

    batch.__name__ = getattr(fn, "__name__", "scorer")
    return batch


def get_scorer(arm: str) -> BatchScorer:
    return REWARD_ARMS.get(arm)


def available_arms() -> list[str]:
    return REWARD_ARMS.names()


def math_scorer(arm: str) -> BatchScorer:
    """The consensus-library scorer for a math arm: read each group's answers with its answer
    policy (:func:`concord.answers.extract_answer`; under ``ttrl`` the empty answer votes), score
    the groups."""

    def score(groups: list[GroupInput]) -> list[GroupScore]:
        from concord.answers import extract_answer, graded_answer
        from concord.consensus import score_groups

        if not groups:
            return []
        answers = [[extract_answer(t, g.answer_policy, task=g.task) for t in g.texts] for g in groups]
        params = groups[0].params
        results = score_groups(arm, [
            {"answers": a, "texts": list(g.texts), "confidences": np.asarray(g.confidences, dtype=float)}
            for a, g in zip(answers, groups)
        ], **params)
        return [
            GroupScore(
                rewards=np.asarray(r.rewards, dtype=float),
                # w_q = 1 for the vote arms by definition (paper 3.2): only graph arms gate.
                gate=float(r.gate) if arm in GATED_ARMS else 1.0,
                label=r.label, answers=a, classes=[int(c) for c in r.classes],
                graded=[graded_answer(t, g.answer_policy, task=g.task) for t in g.texts],
            )
            for a, r, g in zip(answers, results, groups)
        ]

    score.__name__ = f"score_{arm}"
    return score


for _arm in MATH_ARMS:
    register_scorer(_arm, math_scorer(_arm), batched=True)


@dataclass
class GroupRecord:
    """One scored group, as logged (no gold): enough to audit the reward after the fact."""

    question_id: str
    answers: list[str | None]
    classes: list[int] | None
    confidences: list[float]
    rewards: list[float]
    gate: float
    label: str | None
    kept: list[bool] = field(default_factory=list)
    graded: list[str | None] | None = None  # answers as written (differ from ``answers`` under policy ttrl)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class ScoredBatch:
    """A whole global batch: per-roll-out rewards and gates (gate repeated over its group)."""

    rewards: np.ndarray
    gates: np.ndarray
    groups: list[GroupRecord]


def score_batch(
    arm: str,
    question_ids: Sequence[str],
    texts: Sequence[str],
    confidences: Sequence[float],
    contexts: Sequence[dict],
    n_vote: int,
    params: dict,
    scorer: BatchScorer | None = None,
    *,
    answer_policy: str = "strict",
    task: str = "math",
) -> ScoredBatch:
    """Score a global batch of contiguous groups of ``n_vote`` roll-outs, one whole group at a time."""
    n = len(texts)
    if not (len(question_ids) == len(confidences) == len(contexts) == n):
        raise ValueError("question_ids, texts, confidences and contexts must have one entry per roll-out")
    if n % n_vote:
        raise RuntimeError(f"{n} roll-outs do not form whole groups of n_vote={n_vote}")
    scorer = scorer or get_scorer(arm)
    inputs = []
    for start in range(0, n, n_vote):
        ids = set(question_ids[start:start + n_vote])
        if len(ids) != 1:
            raise RuntimeError(
                f"roll-outs {start}..{start + n_vote - 1} should form one question's group but carry question ids "
                f"{sorted(ids)}; the batch is not laid out in contiguous groups"
            )
        inputs.append(GroupInput(
            question_id=str(question_ids[start]), texts=list(texts[start:start + n_vote]),
            confidences=np.asarray(confidences[start:start + n_vote], dtype=float),
            context=dict(contexts[start]), params=dict(params), answer_policy=answer_policy, task=task,
        ))
    scores = scorer(inputs)
    if len(scores) != len(inputs):
        raise RuntimeError(f"scorer for arm {arm!r} returned {len(scores)} scores for {len(inputs)} groups")
    rewards = np.zeros(n)
    gates = np.ones(n)
    groups = []
    for g, (group, score) in enumerate(zip(inputs, scores)):
        r = np.asarray(score.rewards, dtype=float)
        if r.shape != (n_vote,):
            raise RuntimeError(f"scorer for arm {arm!r} returned {r.shape} rewards for a group of {n_vote}")
        if not np.isfinite(score.gate) or score.gate < 0:
            raise RuntimeError(f"scorer for arm {arm!r} returned gate {score.gate}; gates must be finite and >= 0")
        rewards[g * n_vote:(g + 1) * n_vote] = r
        gates[g * n_vote:(g + 1) * n_vote] = score.gate
        groups.append(GroupRecord(
            question_id=group.question_id, answers=list(score.answers),
            classes=None if score.classes is None else [int(c) for c in score.classes],
            confidences=[float(c) for c in group.confidences], rewards=[float(x) for x in r],
            gate=float(score.gate), label=score.label,
            graded=None if score.graded is None else list(score.graded),
        ))
    return ScoredBatch(rewards=rewards, gates=gates, groups=groups)


def completion_text(completion) -> str:
    """TRL passes conversational completions as ``[{"role": "assistant", "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"unexpected completion format: {type(completion).__name__}")


class ConsensusReward:
    """TRL reward function for one arm: whole-group consensus rewards, gates kept for the trainer.

    Called by ``GRPOTrainer._calculate_rewards`` with the local slice of the batch and every dataset
    column; needs the ``question_id`` column and the ``confidence`` column the trainer adds. The
    last global :class:`ScoredBatch` stays in :attr:`last_batch` (the trainer gates advantages
    with it) and every batch is queued in :attr:`pending` for the per-step log.
    """

    def __init__(self, arm: str, n_vote: int, params: dict | None = None, scorer: BatchScorer | None = None, *,
                 answer_policy: str = "strict", task: str = "math"):
        from concord.answers import check_policy

        self.arm = arm
        self.n_vote = int(n_vote)
        self.params = dict(params or {})
        self.answer_policy = check_policy(answer_policy)
        self.task = task
        self.scorer = scorer or get_scorer(arm)
        self.__name__ = f"consensus_{arm}"  # TRL names the reward column after the function
        self.last_batch: ScoredBatch | None = None
        self.pending: list[ScoredBatch] = []

    def __call__(self, prompts, completions, completion_ids=None, *, question_id=None, confidence=None,
                 **columns) -> list[float]:
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list, gather_object

        if question_id is None or confidence is None:
            raise RuntimeError(
                "the consensus reward needs the 'question_id' dataset column and the trainer's 'confidence' column; "
                "use concord.rl.trainer.ConsensusGRPOTrainer"
            )
        context_keys = sorted(k for k in columns if k not in _TRL_KWARGS)
        leaked = GOLD_FIELDS.intersection(context_keys)
        if leaked:
            raise RuntimeError(f"gold field(s) {sorted(leaked)} reached the reward function; the training data must not carry them")
        local = [
            (str(q), completion_text(c), float(conf), {k: columns[k][i] for k in context_keys})
            for i, (q, c, conf) in enumerate(zip(question_id, completions, confidence, strict=True))
        ]
        state = PartialState()
        gathered = gather_object(local)  # all processes' roll-outs, in process order
        payload = [None]
        if state.is_main_process:
            payload[0] = score_batch(
                self.arm, [g[0] for g in gathered], [g[1] for g in gathered], [g[2] for g in gathered],
                [g[3] for g in gathered], self.n_vote, self.params, scorer=self.scorer,
                answer_policy=self.answer_policy, task=self.task,
            )
        if state.num_processes > 1:
            broadcast_object_list(payload, from_process=0)
        batch: ScoredBatch = payload[0]
        self.last_batch = batch
        self.pending.append(batch)
        start = state.process_index * len(local)
        return [float(r) for r in batch.rewards[start:start + len(local)]]


# Keyword arguments TRL adds to every reward call besides dataset columns.
_TRL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "prompt", "completion"})
