"""FMV rewards for TTRL: the ``fmv`` and ``fmv_pointwise`` arms.

For one question's group of N completions: extract and run the programs on the question's
oracle inputs (sandboxed), then

* ``fmv`` (joint target): reward 1 for every roll-out whose execution vector equals the
  consensus program's (:func:`concord.consensus.fmv.fmv_select`), else 0;
* ``fmv_pointwise``: reward 1 for every roll-out whose execution vector equals the synthetic
  target ``y*`` (:func:`concord.consensus.fmv.pointwise_target`) on every input where ``y*`` is
  defined, else 0.

No consensus (no valid program, or no output anywhere) gives every roll-out 0. Importing this
module registers both arms with the GRPO trainer's scorer registry (:mod:`concord.rl.rewards`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from concord.consensus.fmv import execution_vectors, fmv_select, functional_clusters, pointwise_target

TARGETS = ("joint", "pointwise")
ARMS = {"fmv": "joint", "fmv_pointwise": "pointwise"}
# Execution defaults when neither the scorer params nor the question say otherwise.
DEFAULT_TIMEOUT_S = 6.0
DEFAULT_MEMORY_MB = 1024


@dataclass
class CodeVote:
    """One group's vote. ``label``: the target execution vector (None entries = undefined);
    ``rewards``: (N,) 0/1; ``gate``: 1.0 when a label exists, else 0.0; ``mass``: the fraction
    of roll-outs that match the label; ``consensus``: the consensus program's index (joint)."""

    label: list[str | None] | None
    rewards: np.ndarray
    gate: float
    mass: float
    consensus: int | None
    vectors: list[list[str | None]]
    clusters: np.ndarray

    @property
    def label_text(self) -> str | None:
        return None if self.label is None else json.dumps(self.label, ensure_ascii=False)


def vote_rewards(outcomes: Sequence[Sequence[Any]], target: str = "joint") -> CodeVote:
    """Rewards from an N x K outcome matrix (pure: no execution)."""
    if target not in TARGETS:
        raise ValueError(f"FMV target must be one of {TARGETS}, got {target!r}")
    vectors = execution_vectors(outcomes)
    n = len(vectors)
    rewards = np.zeros(n, dtype=float)
    consensus = None
    label: list[str | None] | None = None
    if target == "joint":
        consensus = fmv_select(outcomes) if n else None
        if consensus is not None:
            label = list(vectors[consensus])
            rewards = np.array([float(v == label) for v in vectors])
    else:
        y = pointwise_target(outcomes)
        defined = [k for k, t in enumerate(y) if t is not None]
        if defined:
            label = y
            rewards = np.array([float(all(v[k] == y[k] for k in defined)) for v in vectors])
    mass = float(rewards.mean()) if n else 0.0
    return CodeVote(label=label, rewards=rewards, gate=1.0 if label is not None else 0.0, mass=mass,
                    consensus=consensus, vectors=vectors, clusters=functional_clusters(outcomes) if n else np.array([], int))


def fmv_rewards(
    completions: Sequence[str],
    inputs: Sequence[str],
    *,
    mode: str,
    fn_name: str | None = None,
    target: str = "joint",
    prefix: str = "",
    prompt: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    sandbox: str | None = None,
    workers: int | None = None,
    thinking: bool = False,
) -> CodeVote:
    """Per-completion FMV rewards for one question's N completions.

    ``inputs``: the question's oracle test inputs (LiveCodeBench format); ``mode``: "stdin" or
    "call" (then ``fn_name``); ``prefix``/``prompt``: HumanEval's helper code and function header
    (see :func:`concord.papers.fmv.extract.assemble_program`); ``target``: "joint" (arm ``fmv``) or
    "pointwise" (arm ``fmv_pointwise``); ``thinking``: the policy is a reasoning model (code is
    taken after ``</think>`` only).
    """
    from concord.papers.fmv.grading import ExecSettings, execute, programs_for

    question = {"id": "?", "inputs": list(inputs), "mode": mode, "fn_name": fn_name, "prefix": prefix,
                "starter_code": prompt, "source": "humaneval" if prompt else None}
    programs = programs_for(question, completions, thinking=thinking)
    settings = ExecSettings(timeout_s=timeout_s, memory_mb=memory_mb, sandbox=sandbox, workers=workers)
    return vote_rewards(execute(question, programs, settings), target=target)


def _scorer(arm: str):
    target = ARMS[arm]

    def score(group):
        from concord.rl.rewards import GroupScore

        ctx, params = group.context, group.params
        for key in ("inputs", "mode"):
            if key not in ctx:
                raise ValueError(f"arm {arm!r} needs the question's {key!r} field in the training data "
                                 f"(question {group.question_id})")
        vote = fmv_rewards(
            group.texts, list(ctx["inputs"]), mode=ctx["mode"], fn_name=ctx.get("fn_name") or None, target=target,
            prefix=ctx.get("prefix") or "",
            prompt=ctx.get("starter_code") or "" if ctx.get("source") == "humaneval" else "",
            timeout_s=float(params.get("timeout_s", ctx.get("timeout_s", DEFAULT_TIMEOUT_S))),
            memory_mb=int(params.get("memory_mb", ctx.get("memory_mb", DEFAULT_MEMORY_MB))),
            sandbox=params.get("sandbox", ctx.get("sandbox")),
            thinking=bool(params.get("thinking", False)),
        )
        # "answers" are the execution vectors as JSON text, so the trainer's logs show what voted.
        answers = [json.dumps(v, ensure_ascii=False) if any(o is not None for o in v) else None for v in vote.vectors]
        return GroupScore(rewards=vote.rewards, gate=1.0, label=vote.label_text, answers=answers,
                          classes=[int(c) for c in vote.clusters])

    score.__name__ = f"score_{arm}"
    return score


def _register() -> None:
    try:
        from concord.rl.rewards import register_scorer
    except ImportError:  # the trainer is an optional part of an install
        return
    for arm in ARMS:
        register_scorer(arm, _scorer(arm))


_register()
