"""One test-time GRPO run: (model, benchmark, arm, seed) -> trained model + per-step log.

The training data is the benchmark itself, *without* its answers (TTRL): each row carries the
chat prompt and the question id, nothing else unless a scorer needs a non-gold field (code
tasks' test inputs). Gold answers are handed separately to the per-step diagnostics and the
validation pass@1, both of which only log -- unless early stopping is on, where validation
decides when training ends; it then validates on questions held out of training
(``training.validation_fraction``), never on the ones it trains on.

Every paper's arms train here (the CoRE paper's math arms, the FMV paper's code arms): the task
(:mod:`concord.rl.tasks`) says how a question becomes a prompt and how validation grades it.
A *step* is TTRL's step: one round of generation for ``prompts_per_step`` questions, consumed by
``updates_per_generation`` optimiser updates (TRL's ``global_step`` counts the updates); every
step-valued setting (``max_steps``, ``eval_every``, ``save_every``) and every logged ``step`` is in
TTRL's steps.

Checkpoints go to ``checkpoint_dir``, which the workflow keeps outside Snakemake's declared
outputs (Snakemake deletes a job's outputs before running it): a job killed at any point reruns
from its last complete checkpoint, and the per-step log, kept beside the checkpoints, is cut back
to that step so no step is logged twice. The declared output directory is written only at the
end, atomically (a temporary sibling renamed into place).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping, Sequence

# Defaults live in config/schema.yaml, resolved by concord.config (one resolver for every command).
from concord.config import SCHEMA_PATH, resolve_section, section_defaults  # noqa: F401
from concord.rl.rewards import GOLD_FIELDS

log = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"  # written last into a checkpoint: its presence marks a complete one


def total_steps(n_questions: int, training: Mapping[str, Any], benchmark: str | None = None) -> int:
    """Training steps (generation rounds): ``max_steps`` when set, else epochs x full steps per
    epoch (TRL drops a partial last batch, as verl's ``drop_last``)."""
    if training.get("max_steps"):
        return int(training["max_steps"])
    per_step = int(training["prompts_per_step"])
    if n_questions < per_step:
        raise ValueError(f"{n_questions} questions cannot fill one step of prompts_per_step={per_step}")
    epochs = (training.get("epochs_by_benchmark") or {}).get(benchmark, training["epochs"])
    return int(epochs) * (n_questions // per_step)


# --------------------------------------------------------------------------- data without gold
def build_train_dataset(
    questions: Sequence[dict], prompt_style: str, task: str, context_fields: Sequence[str] = ()
):
    """The TTRL training set: ``prompt`` (chat messages), ``question_id`` and the task's non-gold
    context fields (plus ``context_fields`` copied as they are) -- never an answer."""
    from datasets import Dataset

    from concord.rl.tasks import get_task

    hooks = get_task(task)
    rows = []
    for q in questions:
        row = {"prompt": hooks.messages(q, prompt_style), "question_id": str(q["id"]), **hooks.context(q)}
        for f in context_fields:
            if f not in q:
                raise KeyError(f"question {q['id']!r} has no field {f!r} needed by the reward")
            row[f] = q[f]
        leaked = GOLD_FIELDS.intersection(row)
        if leaked:
            raise ValueError(f"field(s) {sorted(leaked)} hold reference answers and cannot enter the training data")
        rows.append(row)
    ids = [r["question_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique: they key each roll-out group")
    return Dataset.from_list(rows)


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


def check_prompt_budget(prompt_lengths: Mapping[str, int], max_prompt_length: int) -> int:
    """The longest prompt in tokens; an error naming the questions whose prompt exceeds the budget
    (TTRL's ``data.truncation='error'``: a cut prompt would be a different question)."""
    if not prompt_lengths:
        raise ValueError("no prompts to train on")
    over = {k: n for k, n in prompt_lengths.items() if n > max_prompt_length}
    if over:
        worst = sorted(over.items(), key=lambda kv: -kv[1])[:5]
        raise ValueError(
            f"{len(over)} prompt(s) exceed training.max_prompt_length={max_prompt_length} tokens (longest: "
            f"{', '.join(f'{k}: {n}' for k, n in worst)}); raise max_prompt_length in the config"
        )
    return max(prompt_lengths.values())


def prompt_tokens(tokenizer, messages: Sequence[Mapping[str, str]]) -> int:
    """Tokens of a chat prompt as the policy sees it (template and generation prompt included)."""
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------- checkpoints
def last_complete_checkpoint(checkpoint_dir: str | os.PathLike) -> Path | None:
    """The newest ``checkpoint-N`` holding a trainer state; newer incomplete ones are removed.

    A kill during a save leaves a ``checkpoint-N`` without ``trainer_state.json`` (written last);
    it must not be resumed from, and left in place it would confuse checkpoint rotation.
    """
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return None
    found = sorted(
        (int(p.name.split("-")[1]), p) for p in root.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[1].isdigit()
    )
    for step, path in reversed(found):
        if (path / TRAINER_STATE).is_file():
            return path
        log.warning("removing incomplete checkpoint %s (killed while saving)", path)
        shutil.rmtree(path)
    return None


class RunLog:
    """Append-only JSONL logs beside the checkpoints, cut back to the resumed step on restart."""

    def __init__(self, directory: str | os.PathLike, names: Sequence[str] = ("log", "groups")):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.paths = {n: self.dir / f"{n}.jsonl" for n in names}

    def truncate_after(self, step: int) -> None:
        for path in self.paths.values():
            if not path.exists():
                continue
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            kept = [r for r in rows if int(r["step"]) <= step]
            if len(kept) != len(rows):
                log.info("dropping %d log row(s) after step %d from %s", len(rows) - len(kept), step, path.name)
            from concord.io import write_jsonl

            write_jsonl(path, kept)

    def reset(self) -> None:
        for path in self.paths.values():
            path.unlink(missing_ok=True)

    def append(self, name: str, rows: Sequence[dict]) -> None:
        with self.paths[name].open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True, default=_json_default) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self, name: str) -> list[dict]:
        path = self.paths[name]
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# --------------------------------------------------------------------------- validation pass@1
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

    LOG_KEYS = ("loss", "reward", "reward_std", "learning_rate", "grad_norm", "entropy", "kl", "frac_reward_zero_std",
                "completions/mean_length", "completions/clipped_ratio", "step_time", "epoch")

    def __init__(self, trainer_ref, reward, run_log: RunLog, questions_by_id, val_questions, val_cfg: dict,
                 eval_every: int, eval_at_start: bool, max_steps: int, *, task: str = "math",
                 updates_per_step: int = 1, stopper: EarlyStopping | None = None, answer_policy: str | None = None):
        self.trainer_ref = trainer_ref  # a one-element list, filled once the trainer exists
        self.reward = reward
        self.run_log = run_log
        self.questions_by_id = questions_by_id
        self.val_questions = val_questions
        self.val_cfg = val_cfg
        self.eval_every = int(eval_every)
        self.eval_at_start = eval_at_start
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
        out = validation_pass_at_1(self.trainer, self.val_questions, task=self.task, seed=self.val_cfg["seed"] + step,
                                   answer_policy=self.answer_policy,
                                   **{k: v for k, v in self.val_cfg.items() if k != "seed"})
        out["val_seconds"] = round(time.time() - t, 2)
        # Every process logs its own result: they must agree (gathered), and a test checks that they do.
        log.info("process %d: step %d validation pass@1 %.6f on %d question(s)", self.trainer.accelerator.process_index,
                 step, out["val_pass_at_1"], out["val_questions"])
        return out

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
        if self.eval_every > 0 and (step % self.eval_every == 0 or step == self.max_steps):
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
        row = {**{k: logs[k] for k in self.LOG_KEYS if k in logs}, **self.row, "step": self.step_of(state.global_step),
               "wall_seconds": round(time.time() - self.t0, 2)}
        self.run_log.append("log", [row])
        self.row = {}
        parts = [f"loss {row.get('loss', float('nan')):.4g}", f"reward {row.get('reward', float('nan')):.3f}"]
        for key, label in (("label_accuracy", "label acc"), ("mean_gate", "gate"), ("val_pass_at_1", "val pass@1")):
            if key in row:
                parts.append(f"{label} {row[key]:.3f}")
        log.info("step %d/%d (%.1fs): %s", row["step"], self.max_steps, row.get("step_time", float("nan")), ", ".join(parts))


def resolve_training(training: Mapping[str, Any] | None, evaluation: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """The ``training`` and ``evaluation`` sections with the schema's defaults; validation samples
    as many tokens as evaluation unless ``val_max_new_tokens`` says otherwise (vLLM's context is
    sized for it)."""
    ev = resolve_section("evaluation", evaluation)
    cfg = resolve_section("training", training)
    cfg["val_max_new_tokens"] = int(cfg["val_max_new_tokens"] or ev["max_new_tokens"])
    return cfg, ev


def job_layout(cfg: Mapping[str, Any], num_processes: int):
    """The checked batch layout of a job of ``num_processes`` processes (one per GPU)."""
    from concord.rl.batching import Layout, check_layout

    return check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"], int(num_processes),
                               cfg["gradient_accumulation_steps"], cfg["updates_per_generation"]))


def resolve_dtype(cfg: Mapping[str, Any], on_gpu: bool) -> str:
    """The training dtype: the model is loaded, trained and saved in it (``auto``: bf16 on GPU)."""
    return cfg["dtype"] if cfg["dtype"] != "auto" else ("bfloat16" if on_gpu else "float32")


def grpo_config(cfg: Mapping[str, Any], layout, *, checkpoint_dir: str | os.PathLike, seed: int, max_steps: int,
                on_gpu: bool):
    """TRL's ``GRPOConfig`` for a resolved ``training`` section and a checked batch layout."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_settings(cfg, layout, checkpoint_dir=checkpoint_dir, seed=seed, max_steps=max_steps,
                                      on_gpu=on_gpu))


def grpo_settings(cfg: Mapping[str, Any], layout, *, checkpoint_dir: str | os.PathLike, seed: int, max_steps: int,
                  on_gpu: bool) -> dict:
    """The keyword arguments of TRL's ``GRPOConfig`` for one job (pure: a test resolves a paper
    config into every job's settings without a GPU).

    ``max_steps`` is in TTRL steps; TRL counts optimiser updates, ``layout.updates_per_generation``
    of them per step, so every step-valued setting is scaled by it. TRL's KL term (``beta``) is
    the k3 estimator exp(q - p) - (q - p) - 1, verl's ``low_var_kl`` without its clamp to [-10, 10].
    """
    from concord.engines.vllm import context_length

    dtype = resolve_dtype(cfg, on_gpu)
    use_vllm = bool(cfg["use_vllm"]) and on_gpu
    if cfg["vllm_mode"] != "colocate":
        raise ValueError(f"training.vllm_mode {cfg['vllm_mode']!r} is not supported: use 'colocate'")
    updates = int(layout.updates_per_generation)
    return dict(
        output_dir=str(checkpoint_dir),
        seed=int(seed),
        data_seed=int(seed),
        use_cpu=not on_gpu,
        bf16=dtype == "bfloat16",
        fp16=dtype == "float16",
        model_init_kwargs={"dtype": dtype},
        num_generations=layout.n_vote,
        per_device_train_batch_size=layout.per_device_train_batch_size,
        gradient_accumulation_steps=layout.gradient_accumulation_steps,
        steps_per_generation=layout.steps_per_generation,
        max_completion_length=int(cfg["max_completion_length"]),
        temperature=float(cfg["temperature"]),
        top_p=float(cfg["top_p"]),
        learning_rate=float(cfg["learning_rate"]),
        weight_decay=float(cfg["weight_decay"]),
        lr_scheduler_type=cfg["lr_scheduler"],
        warmup_steps=float(cfg["warmup_ratio"]),  # transformers 5: a value < 1 is a ratio of the steps
        max_steps=max_steps * updates,
        beta=float(cfg["beta"]),
        loss_type=cfg["loss_type"],
        scale_rewards=cfg["scale_rewards"],
        epsilon=float(cfg["epsilon"]),
        epsilon_high=float(cfg["epsilon_high"]) if cfg["epsilon_high"] is not None else None,
        num_iterations=int(cfg["num_iterations"]),
        mask_truncated_completions=bool(cfg["mask_truncated_completions"]),
        gradient_checkpointing=bool(cfg["gradient_checkpointing"]),
        use_vllm=use_vllm,
        vllm_mode=cfg["vllm_mode"],
        vllm_gpu_memory_utilization=float(cfg["vllm_gpu_memory_utilization"]),
        # Sized to the job: left None, vLLM would reserve the model's whole context (see context_length).
        vllm_max_model_length=(context_length(int(cfg["max_prompt_length"]), int(cfg["max_completion_length"]),
                                              int(cfg["val_max_new_tokens"] or 0))
                               if use_vllm else None),
        vllm_importance_sampling_correction=bool(cfg["vllm_importance_sampling_correction"]),
        save_strategy="steps",
        save_steps=int(cfg["save_every"]) * updates,  # checkpoints fall on step boundaries only
        save_total_limit=1,
        logging_steps=updates,  # one log row per step: TRL averages its metrics over the step's updates
        report_to=[],
        disable_tqdm=True,
        remove_unused_columns=False,
        log_completions=False,
        shuffle_dataset=True,
        dataloader_num_workers=0,
    )


# --------------------------------------------------------------------------- the trained model
def cast_state_dict(state_dict: Mapping[str, Any], dtype: str) -> dict:
    """Floating-point tensors in ``dtype``, the others as they are: the model is saved in the dtype
    it was trained in (FSDP2 with mixed precision keeps fp32 master weights; saving those would
    double the size of every trained model, about 32 GB per 8B model instead of 16)."""
    import torch

    target = getattr(torch, dtype)
    return {k: (v.to(target) if torch.is_floating_point(v) else v) for k, v in state_dict.items()}


def drop_tied_copies(state_dict: Mapping[str, Any], tied: Mapping[str, str]) -> dict:
    """Without the tied aliases (``{alias: source}``, e.g. ``lm_head.weight`` ->
    ``model.embed_tokens.weight``) that hold a copy of their source.

    A state dict gathered from FSDP shards holds tied weights as separate copies, which
    ``save_pretrained`` (it detects ties by shared storage) would write twice.
    """
    import torch

    out = dict(state_dict)
    for alias, source in tied.items():
        if alias in out and source in out and torch.equal(out[alias], out[source]):
            del out[alias]
    return out


def publish_model(trainer, tokenizer, dest: str | os.PathLike, dtype: str) -> None:
    """Write the trained policy (full weights in ``dtype``, safetensors) and tokenizer to ``dest``.

    Collective under FSDP: every process must call it (the shards are gathered to the main one).
    """
    state_dict = trainer.accelerator.get_state_dict(trainer.model_wrapped)
    if trainer.accelerator.is_main_process:
        model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        tied = getattr(model, "all_tied_weights_keys", None) or getattr(model, "_tied_weights_keys", None) or {}
        state_dict = drop_tied_copies(cast_state_dict(state_dict, dtype), tied if isinstance(tied, Mapping) else {})
        model.save_pretrained(str(dest), state_dict=state_dict, safe_serialization=True)
        # save_pretrained records the dtype of the live parameters (fp32 master weights under FSDP2
        # mixed precision); the file holds `dtype`, and loading must say so.
        config_path = Path(dest) / "config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["dtype"] = dtype
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tokenizer.save_pretrained(str(dest))
    trainer.accelerator.wait_for_everyone()


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


# --------------------------------------------------------------------------- the run
def train(
    *,
    model_dir: str | os.PathLike,
    questions_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    checkpoint_dir: str | os.PathLike,
    arm: str,
    seed: int,
    training: Mapping[str, Any] | None = None,
    consensus: Mapping[str, Any] | None = None,
    evaluation: Mapping[str, Any] | None = None,
    prompt_style: str = "instruct",
    task: str = "math",
    benchmark: str | None = None,
    context_fields: Sequence[str] = (),
    provenance_config: Mapping[str, Any] | None = None,
    provenance_step: str = "train",
    answers: Mapping[str, Any] | None = None,
) -> Path:
    """Train ``model_dir`` with the ``arm``'s consensus rewards; write ``out_dir``.

    Args:
        model_dir: Hugging Face model directory to start from.
        questions_path: the benchmark, read by the task's loader; its reference answers reach only
            validation and the diagnostics.
        out_dir: the declared output: model (safetensors, training dtype), tokenizer,
            ``log.jsonl``, ``groups.jsonl``, ``validation.csv``, ``provenance.json``.
        checkpoint_dir: resumable checkpoints and logs, outside the declared outputs.
        arm: reward arm (``concord.rl.rewards`` registry: majority, ec, cisc, core, fmv, ...).
        seed: training seed (also seeds validation sampling).
        training, consensus, evaluation: config sections (``consensus`` goes to the scorer as its
            parameters; ``evaluation`` sets validation sampling).
        prompt_style, task: how questions become prompts (:mod:`concord.rl.tasks`).
        answers: the config's answers section: how the math arms read answers (``policy``), for
            the reward, validation and diagnostics alike.
        benchmark: selects ``training.epochs_by_benchmark``.
        context_fields: extra question fields copied into the training rows for the scorer.
        provenance_config, provenance_step: what ``provenance.json`` records.
    """
    import torch
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from concord import provenance
    from concord.io import write_json, write_jsonl
    from concord.rl.rewards import ConsensusReward
    from concord.rl.tasks import get_task
    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg, ev = resolve_training(training, evaluation)
    cons = dict(consensus or {})
    policy = resolve_section("answers", answers)["policy"]
    hooks = get_task(task, policy)
    if cfg["early_stopping_patience"] is not None and int(cfg["eval_every"]) <= 0:
        raise ValueError("training.early_stopping_patience needs validation: set training.eval_every > 0")
    out_dir, checkpoint_dir = Path(out_dir), Path(checkpoint_dir)
    questions = hooks.load(questions_path)
    train_questions, held_out = holdout_split(questions, cfg["validation_fraction"])
    questions_by_id = {str(q["id"]): q for q in questions}  # diagnostics and validation only
    dataset = build_train_dataset(train_questions, prompt_style, task, context_fields)
    max_steps = total_steps(len(train_questions), cfg, benchmark)

    on_gpu = torch.cuda.is_available()
    dtype = resolve_dtype(cfg, on_gpu)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    longest_prompt = check_prompt_budget({row["question_id"]: prompt_tokens(tokenizer, row["prompt"]) for row in dataset},
                                         int(cfg["max_prompt_length"]))

    # Read the launcher's environment: creating accelerate's PartialState before the trainer
    # does would fix it without `cpu=True`, and multi-process CPU runs would not form a group.
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))
    is_main = int(os.environ.get("RANK", "0")) == 0

    layout = job_layout(cfg, num_processes)
    args = grpo_config(cfg, layout, checkpoint_dir=checkpoint_dir, seed=seed, max_steps=max_steps, on_gpu=on_gpu)
    reward = ConsensusReward(arm, layout.n_vote, cons, answer_policy=policy, task=task)
    run_log = RunLog(checkpoint_dir)
    resume = last_complete_checkpoint(checkpoint_dir)
    if resume is None:
        if is_main:
            run_log.reset()  # a fresh start must not inherit rows of an earlier attempt
    else:
        log.info("resuming from %s", resume)
    val_cfg = {
        "prompt_style": prompt_style, "k": int(cfg["val_k"]), "temperature": float(ev["temperature"]),
        "top_p": float(ev["top_p"]), "max_new_tokens": cfg["val_max_new_tokens"],
        "seed": int(seed) * 1_000_003, "batch_size": int(cfg["val_batch_size"]), "params": cons,
    }
    stopper = EarlyStopping(cfg["early_stopping_patience"], float(cfg["early_stopping_min_delta"]))
    trainer_ref: list = [None]
    monitor = TrainingMonitor(trainer_ref, reward, run_log, questions_by_id, validation_subset(held_out, cfg["val_questions"]),
                              val_cfg, cfg["eval_every"], bool(cfg["eval_at_start"]), max_steps, task=task,
                              updates_per_step=layout.updates_per_generation, stopper=stopper, answer_policy=policy)
    trainer = ConsensusGRPOTrainer(
        model=str(model_dir), args=args, train_dataset=dataset, processing_class=tokenizer,
        consensus_reward=reward, n_train=layout.n_train, callbacks=[monitor],
    )
    trainer_ref[0] = trainer
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    log.info("training %s on %s with arm %s, seed %d: up to %d steps of %d prompts x %d roll-outs (train on %d, "
             "%d update(s) per step), %d process(es), %s, longest prompt %d tokens",
             model_dir, questions_path, arm, seed, max_steps, layout.prompts_per_step, layout.n_vote, layout.n_train,
             layout.updates_per_generation, num_processes, dtype, longest_prompt)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    elapsed = time.time() - t0
    steps_done = trainer.state.global_step // layout.updates_per_generation

    # Final output: a temporary sibling, renamed into place once complete.
    partial = out_dir.parent / f".{out_dir.name}.partial"
    if is_main and partial.exists():
        shutil.rmtree(partial)
    trainer.accelerator.wait_for_everyone()
    publish_model(trainer, tokenizer, partial, dtype)
    if is_main:
        rows = run_log.read("log")
        write_jsonl(partial / "log.jsonl", rows)
        write_jsonl(partial / "groups.jsonl", run_log.read("groups"))
        write_validation_curve(partial / "validation.csv", rows)
        prov = provenance.record(
            step=provenance_step, seed=int(seed), inputs=[questions_path],
            config=dict(provenance_config or {"training": cfg, "consensus": cons, "arm": arm, "task": task,
                                              "prompt_style": prompt_style, "answers": {"policy": policy}}),
            model=str(model_dir), arm=arm, steps=steps_done, max_steps=max_steps, dtype=dtype,
            updates_per_step=layout.updates_per_generation, early_stopping=stopper.summary(),
            train_questions=len(train_questions), validation_questions=len(monitor.val_questions),
            resumed_from=str(resume) if resume else None, train_seconds=round(elapsed, 1), num_processes=num_processes,
        )
        write_json(partial / "provenance.json", prov)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(partial, out_dir)
        if not cfg["keep_checkpoints"]:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
        log.info("wrote %s (%d of up to %d steps in %.0f s)", out_dir, steps_done, max_steps, elapsed)
    trainer.accelerator.wait_for_everyone()
    return out_dir


def cpu_threads(threads: int | None) -> None:
    """Cap CPU PyTorch threads: on a shared machine, oversubscribed OpenMP threads spin and crawl."""
    if threads:
        import torch

        torch.set_num_threads(int(threads))


__all__ = [
    "EarlyStopping", "RunLog", "TrainingMonitor", "build_train_dataset", "cast_state_dict", "check_prompt_budget",
    "cpu_threads", "equal_shard", "grpo_config", "holdout_split", "last_complete_checkpoint", "mean_at_k",
    "grpo_settings", "job_layout", "resolve_training", "publish_model", "resolve_section", "section_defaults", "total_steps", "train",
    "validation_pass_at_1", "validation_subset",
]
