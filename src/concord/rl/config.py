"""One test-time GRPO run as one object, as TRL's trainers take one config dataclass.

:class:`TrainingRun` holds what :func:`concord.rl.run.train` needs: where the run reads and
writes, which arm and seed, how questions become prompts, the config sections, and what its
provenance records. Its config sections are resolved once, on first use (:attr:`TrainingRun.resolved`),
against ``config/schema.yaml``; every later step reads that one resolved copy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class ResolvedTraining:
    """The run's settings after the schema's defaults and the arm's overrides.

    Args:
        training: the ``training`` section for this arm (the zero-update control's learning rate 0
            included; ``val_max_new_tokens`` filled from evaluation).
        evaluation: the ``evaluation`` section (validation samples with its temperature, top_p).
        reward_arm: the registered reward arm that scores the groups.
        answer_policy: how answers are read (``answers.policy``).
    """

    training: Mapping[str, Any]
    evaluation: Mapping[str, Any]
    reward_arm: str
    answer_policy: str


@dataclass(frozen=True)
class TrainingRun:
    """One run: ``(model, questions, arm, seed) -> trained model + per-step log``.

    > Where the run reads and writes

    Args:
        model_dir: Hugging Face model directory to start from.
        questions_path: the benchmark, read by the task's loader; its reference answers reach only
            validation and the diagnostics.
        out_dir: the declared output: model (safetensors, fp32 master weights) and tokenizer.
        checkpoint_dir: resumable checkpoints and logs, outside the declared outputs.
        run_dir: where ``log.jsonl``, ``groups.jsonl``, ``validation.csv`` and ``provenance.json``
            go; ``out_dir`` itself when None (the model directory then holds them).

    > What is trained

    Args:
        arm: reward arm (``concord.rl.rewards`` registry: majority, ec, cisc, core, fmv, ...), or
            ``zero_update``: the control at learning rate 0 (``concord.rl.settings.arm_training``).
        seed: training seed (also seeds validation sampling).
        task, prompt_style: how questions become prompts (:mod:`concord.rl.tasks`).
        benchmark: selects ``training.epochs_by_benchmark``.
        context_fields: extra question fields copied into the training rows for the scorer.

    > Config sections

    Args:
        training, evaluation: the config sections (``evaluation`` sets validation sampling).
        consensus: the scorer's parameters.
        answers: the config's answers section: how the math arms read answers (``policy``), for the
            reward, validation and diagnostics alike.

    > Provenance

    Args:
        provenance_config, provenance_step: what ``provenance.json`` records.

    Example::

        run = TrainingRun(model_dir="results/models/smollm2-135m", questions_path="results/data/synthetic.jsonl",
                          out_dir="out/model", checkpoint_dir="out/ckpt", arm="core", seed=0,
                          training={"max_steps": 2})
        run.resolved.training["max_steps"]  # 2, with every other key at its schema default
    """

    model_dir: Path
    questions_path: Path
    out_dir: Path
    checkpoint_dir: Path
    arm: str
    seed: int = 0
    training: Mapping[str, Any] = field(default_factory=dict)
    consensus: Mapping[str, Any] = field(default_factory=dict)
    evaluation: Mapping[str, Any] = field(default_factory=dict)
    answers: Mapping[str, Any] | None = None
    prompt_style: str = "instruct"
    task: str = "math"
    benchmark: str | None = None
    context_fields: Sequence[str] = ()
    provenance_config: Mapping[str, Any] | None = None
    provenance_step: str = "train"
    run_dir: Path | None = None

    def __post_init__(self) -> None:
        for name in ("model_dir", "questions_path", "out_dir", "checkpoint_dir"):
            value = getattr(self, name)
            if not isinstance(value, (str, os.PathLike)) or not str(value):
                raise ValueError(f"TrainingRun.{name} must be a path, got {value!r}")
            object.__setattr__(self, name, Path(value))
        if self.run_dir is not None:
            object.__setattr__(self, "run_dir", Path(self.run_dir))
        if not isinstance(self.arm, str) or not self.arm:
            raise ValueError(f"TrainingRun.arm must name a reward arm, got {self.arm!r}")
        object.__setattr__(self, "seed", int(self.seed))
        for name in ("training", "consensus", "evaluation"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name) or {})))
        object.__setattr__(self, "context_fields", tuple(self.context_fields))

    @property
    def files_dir(self) -> Path:
        """Where the run's log, groups, validation curve and provenance are written."""
        return self.run_dir if self.run_dir is not None else self.out_dir

    @cached_property
    def resolved(self) -> ResolvedTraining:
        """The sections resolved once: schema defaults, the arm's overrides, the answer policy.
        Bad settings fail here, naming the key, before any model loads."""
        from concord.config import resolve_section
        from concord.rl.settings import arm_training, resolve_training

        cfg, ev = resolve_training(dict(self.training), dict(self.evaluation))
        cfg, reward_arm = arm_training(self.arm, cfg)
        if cfg["early_stopping_patience"] is not None and int(cfg["eval_every"]) <= 0:
            raise ValueError("training.early_stopping_patience needs validation: set training.eval_every > 0")
        if cfg["early_stopping_patience"] is not None and cfg["ends_from_evaluation"]:
            raise ValueError("training.early_stopping_patience needs every validation point in training, and "
                             "training.ends_from_evaluation leaves the first and last to the evaluations: set one of them off")
        policy = resolve_section("answers", self.answers)["policy"]
        return ResolvedTraining(MappingProxyType(cfg), MappingProxyType(ev), reward_arm, policy)


__all__ = ["ResolvedTraining", "TrainingRun"]
