"""Validation during training: which questions validate, mean@k of the live policy, early
stopping, and the per-step log callback that runs them.

Gold answers reach only this module's grading and the diagnostics, both of which only log --
unless early stopping is on, where validation decides when training ends; it then validates on
questions held out of training (``training.validation_fraction``), never on the ones it trains on.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping, Sequence

from concord.rl.checkpoints import RunLog

log = logging.getLogger(__name__)


def validation_subset(questions: Sequence[dict], n: int | None) -> list[dict]:
    """The first ``n`` questions (all when None): the same subset for every arm and seed."""
    return list(questions) if not n else list(questions)[: int(n)]


def holdout_split(questions: Sequence[dict], fraction: float | None) -> tuple[list[dict], list[dict]]:
    """(training questions, held-out validation questions).

    ``fraction=None``: every question trains and validates (test-time training). Otherwise the
    ``round(fraction x n)`` questions (at least 1, at most n - 1) with the smallest sha256 of their
    id are held out: the same split for every arm, seed and model, and stable when questions are
    added or reordered. Order within each part follows the input.
    """
    import hashlib

    questions = list(questions)
    if fraction is None:
        return questions, questions
    if not 0 < fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), got {fraction}")
    if len(questions) < 2:
        raise ValueError(f"holding out a validation split needs at least 2 questions, got {len(questions)}")
    n_val = min(max(1, round(fraction * len(questions))), len(questions) - 1)
    ranked = sorted(questions, key=lambda q: hashlib.sha256(str(q["id"]).encode()).hexdigest())
    held = {str(q["id"]) for q in ranked[:n_val]}
    return [q for q in questions if str(q["id"]) not in held], [q for q in questions if str(q["id"]) in held]


def mean_at_k(correct: Sequence[Sequence[bool]]) -> float:
    """pass@1 estimated as mean@k: the mean over questions of the fraction of correct samples."""
    if not correct:
        raise ValueError("no questions to evaluate")
    return float(sum(sum(c) / len(c) for c in correct) / len(correct))


def equal_shard(items: Sequence, rank: int, world: int) -> tuple[list, int]:
    """This process's share of ``items`` (every ``world``-th from ``rank``) padded with copies of
    ``items[0]`` to ``ceil(n / world)``, and how many of them are real.

    Under sharded parameters every process must make the same number of ``generate`` calls (and
    of forward passes within them): a process with fewer prompts would stop all-gathering the
    shards the others still wait for. Padding costs at most one extra prompt per process; the
    padded results are dropped before the gather.
    """
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside a world of {world}")
    items = list(items)
    if not items:
        return [], 0
    per_process = -(-len(items) // world)
    own = items[rank::world]
    return own + [items[0]] * (per_process - len(own)), len(own)


@contextmanager
def _generation_model(trainer):
    """The policy, gathered for generation the way TRL's own HF generation path does it."""
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(
        trainer.model_wrapped, trainer.accelerator,
        gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
    ) as model, trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False):
        was_training = model.training
        model.eval()
        try:
            yield model
        finally:
            model.train(was_training)


def validation_pass_at_1(trainer, questions: Sequence[dict], *, task: str = "math", params: Mapping[str, Any] | None = None,
                         prompt_style: str, k: int, temperature: float, top_p: float, max_new_tokens: int, seed: int,
                         batch_size: int, answer_policy: str | None = None) -> dict:
    """mean@k of the current policy on ``questions`` (sharded evenly over processes, gathered).

    Every process returns the same numbers. Under FSDP the processes generate in lock-step
    (``synced_gpus``) on shards of equal size (:func:`equal_shard`).
    """
    import torch
    from accelerate.utils import gather_object

    from concord.engines.base import SamplingParams
    from concord.engines.hf import HFEngine
    from concord.rl.tasks import get_task
    from concord.rl.trainer import is_sharded, mark_sharded_for_generation

    hooks = get_task(task, answer_policy)
    acc = trainer.accelerator
    shard, n_real = equal_shard(questions, acc.process_index, acc.num_processes)
    sampling = SamplingParams(n=k, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
    conversations = [hooks.messages(q, prompt_style) for q in shard]
    if getattr(trainer, "use_vllm", False) and getattr(trainer, "vllm_mode", None) == "colocate":
        texts = vllm_validation_texts(trainer, conversations, sampling)
    else:
        devices = [acc.device] if acc.device.type == "cuda" else []
        sharded = is_sharded(trainer)
        mark_sharded_for_generation(trainer)
        # fork_rng: validation sampling must not move the training RNG (a resumed run replays it).
        with torch.random.fork_rng(devices=devices), _generation_model(trainer) as model:
            engine = HFEngine.from_model(model, trainer.processing_class, batch_size=batch_size,
                                         synced_gpus=True if sharded else None)
            gens = engine.generate(conversations, sampling) if shard else []
        texts = [[g.text for g in samples] for samples in gens]
    real = shard[:n_real]
    correct = hooks.grade(real, texts[:n_real], dict(params or {}))
    gathered = gather_object([(str(q["id"]), c) for q, c in zip(real, correct)])
    return {"val_pass_at_1": mean_at_k([c for _, c in gathered]), "val_k": k, "val_questions": len(gathered)}


def vllm_validation_texts(trainer, conversations: Sequence[Sequence[Mapping[str, str]]], sampling) -> list[list[str]]:
    """Validation samples from the trainer's colocated vLLM engine (GPU jobs with ``use_vllm``).

    HF ``generate`` on an FSDP-sharded 7-8B policy all-gathers the parameters at every token
    (hours per validation of MATH-500 at 3,072 tokens); the colocated engine TRL already keeps
    in step with the policy samples in seconds. Its weights are synced first, as TRL does before
    a generation step (collective under FSDP: every process calls this together). Each process
    samples its own shard with its own engine; no collective inside ``generate``.
    """
    from concord.engines.vllm import _import_vllm

    vllm = _import_vllm()  # a clear error where vLLM is not installed
    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step
    if not conversations:
        return []
    tok = trainer.processing_class
    prompts = [{"prompt_token_ids": tok(tok.apply_chat_template(list(c), tokenize=False, add_generation_prompt=True),
                                        add_special_tokens=False)["input_ids"]} for c in conversations]
    params = vllm.SamplingParams(n=sampling.n, temperature=sampling.temperature, top_p=sampling.top_p,
                                max_tokens=sampling.max_new_tokens, seed=sampling.seed)
    outputs = trainer.vllm_generation.llm.generate(prompts, sampling_params=params, use_tqdm=False)
    return [[o.text for o in request.outputs] for request in outputs]


# --------------------------------------------------------------------------- early stopping
class EarlyStopping:
    """Stop when validation has not improved by more than ``min_delta`` for ``patience``
    validations in a row; ``patience=None`` never stops (the step budget is the maximum).

    The first value (step 0 when the untrained policy is validated) sets the baseline. Pure
    state, rebuilt from the run log on resume, so a resumed run stops where an uninterrupted one
    would.
    """

    def __init__(self, patience: int | None, min_delta: float = 0.0):
        if patience is not None and int(patience) < 1:
            raise ValueError(f"early_stopping_patience must be >= 1 or null, got {patience}")
        if min_delta < 0:
            raise ValueError(f"early_stopping_min_delta must be >= 0, got {min_delta}")
        self.patience = None if patience is None else int(patience)
        self.min_delta = float(min_delta)
        self.best_value: float | None = None
        self.best_step: int | None = None
        self.since_best = 0
        self.stopped_at: int | None = None

    def update(self, step: int, value: float) -> bool:
        """Record a validation value; True when training should stop now."""
        if self.best_value is None or value > self.best_value + self.min_delta:
            self.best_value, self.best_step, self.since_best = float(value), int(step), 0
        else:
            self.since_best += 1
        if self.patience is not None and self.since_best >= self.patience:
            self.stopped_at = int(step)
            return True
        return False

    def summary(self) -> dict:
        return {"patience": self.patience, "min_delta": self.min_delta, "best_step": self.best_step,
                "best_val_pass_at_1": self.best_value, "stopped_at": self.stopped_at}


def describe_sharding(trainer) -> str:
    """How the policy is distributed, for the job log: the accelerate mode, the policy's class
    (FSDP2 wraps it as ``FSDP<Model>``) and how many parameters are DTensor shards."""
    from torch.distributed.tensor import DTensor

    model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
    params = list(model.parameters())
    sharded = sum(isinstance(p, DTensor) for p in params)
    return (f"distributed type {trainer.accelerator.distributed_type.value}, policy {type(model).__name__}, "
            f"{sharded} of {len(params)} parameter tensors are DTensor shards")


# --------------------------------------------------------------------------- callback
def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class TrainingMonitor(_callback_base()):
    """Per-step log rows: TRL's metrics + task diagnostics + validation pass@1, progress lines,
    and early stopping. ``step`` is TTRL's step (TRL's ``global_step`` / ``updates_per_step``)."""

    # No wall-clock field (TRL's step_time, elapsed or validation seconds) enters the log rows: they
    # are artifacts, and a rerun for the same seed on the same machine must reproduce them byte for
    # byte. Times go to the job's log (results/logs/), a diagnostic.
    LOG_KEYS = ("loss", "reward", "reward_std", "learning_rate", "grad_norm", "entropy", "kl", "frac_reward_zero_std",
                "completions/mean_length", "completions/clipped_ratio", "epoch")

    def __init__(self, trainer_ref, reward, run_log: RunLog, questions_by_id, val_questions, val_cfg: dict,
                 eval_every: int, eval_at_start: bool, max_steps: int, *, task: str = "math",
                 updates_per_step: int = 1, stopper: EarlyStopping | None = None, answer_policy: str | None = None,
                 validate_ends: bool = True):
        self.trainer_ref = trainer_ref  # a one-element list, filled once the trainer exists
        self.reward = reward
        self.run_log = run_log
        self.questions_by_id = questions_by_id
        self.val_questions = val_questions
        self.val_cfg = val_cfg
        self.eval_every = int(eval_every)
        # False: steps 0 and max_steps are the evaluations of Base and of the trained arm
        # (training.ends_from_evaluation), so the run does not sample them a second time.
        self.eval_at_start = eval_at_start and validate_ends
        self.validate_last = validate_ends
        self.max_steps = max_steps
        self.task = task
        self.answer_policy = answer_policy
        self.updates = int(updates_per_step)
        self.stopper = stopper or EarlyStopping(None)
        self.row: dict = {}
        self.groups: list = []
        self.t0 = time.time()

    @property
    def trainer(self):
        return self.trainer_ref[0]

    def _is_main(self) -> bool:
        return self.trainer.accelerator.is_main_process

    def step_of(self, global_step: int) -> int:
        return global_step // self.updates

    def _validate(self, step: int) -> dict:
        if not self.val_questions or self.eval_every <= 0:
            return {}
        t = time.time()
        # The same seed at every step (common random numbers): two steps' points differ by what the
        # policy learned, not by another random draw, and with the evaluation's protocol (its
        # questions, k, seed and batch) the last point is the trained policy's evaluation.
        out = validation_pass_at_1(self.trainer, self.val_questions, task=self.task, answer_policy=self.answer_policy,
                                   **self.val_cfg)
        # Every process logs its own result: they must agree (gathered), and a test checks that they do.
        log.info("process %d: step %d validation pass@1 %.6f on %d question(s) in %.1f s",
                 self.trainer.accelerator.process_index, step, out["val_pass_at_1"], out["val_questions"],
                 time.time() - t)
        return out

    def _validates_at(self, step: int) -> bool:
        if self.eval_every <= 0:
            return False
        if step >= self.max_steps:
            return self.validate_last
        return step % self.eval_every == 0

    def _record_validation(self, step: int, row: dict, control) -> None:
        if "val_pass_at_1" not in row:
            return
        if self.stopper.update(step, row["val_pass_at_1"]):
            log.info("early stopping at step %d: no validation gain > %g for %d validation(s); best %.4f at step %d",
                     step, self.stopper.min_delta, self.stopper.patience, self.stopper.best_value, self.stopper.best_step)
            control.should_training_stop = True
            control.should_save = False  # the final model is written directly

    def on_train_begin(self, args, state, control, **kwargs):
        log.info("process %d of %d: %s", self.trainer.accelerator.process_index, self.trainer.accelerator.num_processes,
                 describe_sharding(self.trainer))
        step = self.step_of(state.global_step)
        if self._is_main():
            if step > 0:
                log.info("resumed at step %d of %d", step, self.max_steps)
            self.run_log.truncate_after(step)
        self.trainer.accelerator.wait_for_everyone()
        for row in self.run_log.read("log"):  # a resumed run replays the stopper's history
            if row.get("val_pass_at_1") is not None:
                self.stopper.update(int(row["step"]), float(row["val_pass_at_1"]))
        if step == 0 and self.eval_at_start:
            row = {"step": 0, **self._validate(0)}
            self._record_validation(0, row, control)
            if self._is_main() and len(row) > 1:
                self.run_log.append("log", [row])
                log.info("step 0/%d: validation pass@1 %.3f", self.max_steps, row["val_pass_at_1"])

    def on_step_end(self, args, state, control, **kwargs):
        batches, self.reward.pending = self.reward.pending, []
        self.groups.extend(g for b in batches for g in b.groups)
        if state.global_step % self.updates:
            return control  # inside a step: its roll-outs are still being consumed
        step = self.step_of(state.global_step)
        row: dict = {"step": step}
        groups, self.groups = self.groups, []
        if self._is_main() and groups:
            from concord.rl.tasks import get_task

            diagnostics = get_task(self.task, self.answer_policy).diagnostics
            if diagnostics is not None:
                row.update(diagnostics(groups, self.questions_by_id))
            self.run_log.append("groups", [{"step": step, **g.to_dict()} for g in groups])
        if self._validates_at(step):
            row.update(self._validate(step))
            self._record_validation(step, row, control)
        self.row = row
        if step >= self.max_steps:
            # The final model is written to the output directly; a last checkpoint would only be
            # deleted again (at 7B, minutes of I/O).
            control.should_save = False
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs or not self._is_main():
            return
        row = {**{k: logs[k] for k in self.LOG_KEYS if k in logs}, **self.row, "step": self.step_of(state.global_step)}
        self.run_log.append("log", [row])
        self.row = {}
        parts = [f"loss {row.get('loss', float('nan')):.4g}", f"reward {row.get('reward', float('nan')):.3f}"]
        for key, label in (("label_accuracy", "label acc"), ("mean_gate", "gate"), ("val_pass_at_1", "val pass@1")):
            if key in row:
                parts.append(f"{label} {row[key]:.3f}")
        log.info("step %d/%d (%.1f s, %.1f s since the start): %s", row["step"], self.max_steps,
                 logs.get("step_time", float("nan")), time.time() - self.t0, ", ".join(parts))


def write_validation_curve(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> Path:
    """The validation curve (step, val_pass_at_1, val_k, val_questions) as CSV."""
    import csv

    from concord.io import atomic_path

    keys = ("step", "val_pass_at_1", "val_k", "val_questions")
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            if r.get("val_pass_at_1") is not None:
                writer.writerow({k: r.get(k) for k in keys})
    return Path(path)


__all__ = [
    "EarlyStopping", "TrainingMonitor", "describe_sharding", "equal_shard", "holdout_split", "mean_at_k",
    "validation_pass_at_1", "validation_subset", "vllm_validation_texts", "write_validation_curve",
]
