"""One test-time GRPO run: (model, benchmark, arm, seed) -> trained model + per-step log.

The training data is the benchmark itself, *without* its answers (TTRL): each row carries the
chat prompt and the question id, nothing else unless a scorer needs a non-gold field (code
tasks' test inputs). Gold answers are handed separately to the per-step diagnostics and the
validation pass@1, both of which only log.

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
    """``max_steps`` when set, else epochs x full steps per epoch (TRL drops a partial last batch)."""
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
    """The TTRL training set: ``prompt`` (chat messages) and ``question_id`` -- never an answer."""
    from datasets import Dataset

    from concord.data import build_messages

    leaked = GOLD_FIELDS.intersection(context_fields)
    if leaked:
        raise ValueError(f"field(s) {sorted(leaked)} hold reference answers and cannot enter the training data")
    rows = []
    for q in questions:
        row = {"prompt": build_messages(q["prompt"], prompt_style, task), "question_id": str(q["id"])}
        for f in context_fields:
            if f not in q:
                raise KeyError(f"question {q['id']!r} has no field {f!r} needed by the reward")
            row[f] = q[f]
        rows.append(row)
    ids = [r["question_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique: they key each roll-out group")
    return Dataset.from_list(rows)


def validation_subset(questions: Sequence[dict], n: int | None) -> list[dict]:
    """The first ``n`` questions (all when None): the same subset for every arm and seed."""
    return list(questions) if not n else list(questions)[: int(n)]


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


def validation_pass_at_1(trainer, questions: Sequence[dict], gold_by_id: Mapping[str, str], *, prompt_style: str,
                         task: str, k: int, temperature: float, top_p: float, max_new_tokens: int, seed: int,
                         batch_size: int) -> dict:
    """mean@k of the current policy on ``questions`` (sharded over processes, gathered)."""
    import torch
    from accelerate.utils import gather_object

    from concord.answers import extract_boxed, grade
    from concord.data import build_messages
    from concord.engines.base import SamplingParams
    from concord.engines.hf import HFEngine

    acc = trainer.accelerator
    shard = list(questions)[acc.process_index::acc.num_processes]
    params = SamplingParams(n=k, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
    devices = [acc.device] if acc.device.type == "cuda" else []
    results = []
    # fork_rng: validation sampling must not move the training RNG (a resumed run replays it).
    with torch.random.fork_rng(devices=devices), _generation_model(trainer) as model:
        engine = HFEngine.from_model(model, trainer.processing_class, batch_size=batch_size)
        gens = engine.generate([build_messages(q["prompt"], prompt_style, task) for q in shard], params) if shard else []
    for q, samples in zip(shard, gens):
        results.append((str(q["id"]), [bool(grade(extract_boxed(s.text), gold_by_id[str(q["id"])])) for s in samples]))
    gathered = gather_object(results)
    return {"val_pass_at_1": mean_at_k([c for _, c in gathered]), "val_k": k, "val_questions": len(gathered)}


# --------------------------------------------------------------------------- callback
def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class TrainingMonitor(_callback_base()):
    """Per-step log rows: TRL's metrics + gold diagnostics + validation pass@1, and progress lines."""

    LOG_KEYS = ("loss", "reward", "reward_std", "learning_rate", "grad_norm", "entropy", "kl", "frac_reward_zero_std",
                "completions/mean_length", "completions/clipped_ratio", "step_time", "epoch")

    def __init__(self, trainer_ref, reward, run_log: RunLog, gold_by_id, val_questions, val_cfg: dict,
                 eval_every: int, eval_at_start: bool, max_steps: int):
        self.trainer_ref = trainer_ref  # a one-element list, filled once the trainer exists
        self.reward = reward
        self.run_log = run_log
        self.gold_by_id = gold_by_id
        self.val_questions = val_questions
        self.val_cfg = val_cfg
        self.eval_every = int(eval_every)
        self.eval_at_start = eval_at_start
        self.max_steps = max_steps
        self.row: dict = {}
        self.t0 = time.time()

    @property
    def trainer(self):
        return self.trainer_ref[0]

    def _is_main(self) -> bool:
        return self.trainer.accelerator.is_main_process

    def _validate(self, step: int) -> dict:
        if not self.val_questions or self.eval_every <= 0:
            return {}
        t = time.time()
        out = validation_pass_at_1(self.trainer, self.val_questions, self.gold_by_id, seed=self.val_cfg["seed"] + step,
                                   **{k: v for k, v in self.val_cfg.items() if k != "seed"})
        out["val_seconds"] = round(time.time() - t, 2)
        return out

    def on_train_begin(self, args, state, control, **kwargs):
        if self._is_main():
            if state.global_step > 0:
                log.info("resumed at step %d of %d", state.global_step, self.max_steps)
            self.run_log.truncate_after(state.global_step)
        self.trainer.accelerator.wait_for_everyone()
        if state.global_step == 0 and self.eval_at_start:
            row = {"step": 0, **self._validate(0)}
            if self._is_main() and len(row) > 1:
                self.run_log.append("log", [row])
                log.info("step 0/%d: validation pass@1 %.3f", self.max_steps, row["val_pass_at_1"])

    def on_step_end(self, args, state, control, **kwargs):
        from concord.rl.diagnostics import math_diagnostics

        step = state.global_step
        batches, self.reward.pending = self.reward.pending, []
        groups = [g for b in batches for g in b.groups]
        row: dict = {"step": step}
        if self._is_main() and groups:
            row.update(math_diagnostics(groups, self.gold_by_id))
            self.run_log.append("groups", [{"step": step, **g.to_dict()} for g in groups])
        if self.eval_every > 0 and (step % self.eval_every == 0 or step == self.max_steps):
            row.update(self._validate(step))
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
        row = {**{k: logs[k] for k in self.LOG_KEYS if k in logs}, **self.row, "step": state.global_step,
               "wall_seconds": round(time.time() - self.t0, 2)}
        self.run_log.append("log", [row])
        self.row = {}
        parts = [f"loss {row.get('loss', float('nan')):.4g}", f"reward {row.get('reward', float('nan')):.3f}"]
        for key, label in (("label_accuracy", "label acc"), ("mean_gate", "gate"), ("val_pass_at_1", "val pass@1")):
            if key in row:
                parts.append(f"{label} {row[key]:.3f}")
        log.info("step %d/%d (%.1fs): %s", state.global_step, self.max_steps, row.get("step_time", float("nan")), ", ".join(parts))


def grpo_config(cfg: Mapping[str, Any], layout, *, checkpoint_dir: str | os.PathLike, seed: int, max_steps: int,
                on_gpu: bool):
    """TRL's ``GRPOConfig`` for a resolved ``training`` section and a checked batch layout."""
    from trl import GRPOConfig

    dtype = cfg["dtype"] if cfg["dtype"] != "auto" else ("bfloat16" if on_gpu else "float32")
    use_vllm = bool(cfg["use_vllm"]) and on_gpu
    return GRPOConfig(
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
        max_completion_length=int(cfg["max_completion_length"]),
        temperature=float(cfg["temperature"]),
        top_p=float(cfg["top_p"]),
        learning_rate=float(cfg["learning_rate"]),
        lr_scheduler_type=cfg["lr_scheduler"],
        warmup_steps=float(cfg["warmup_ratio"]),  # transformers 5: a value < 1 is a ratio of the steps
        max_steps=max_steps,
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
        save_strategy="steps",
        save_steps=int(cfg["save_every"]),
        save_total_limit=1,
        logging_steps=1,
        report_to=[],
        disable_tqdm=True,
        remove_unused_columns=False,
        log_completions=False,
        shuffle_dataset=True,
        dataloader_num_workers=0,
    )


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
) -> Path:
    """Train ``model_dir`` with the ``arm``'s consensus rewards; write ``out_dir`` (model + logs)."""
    import torch
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from concord import provenance
    from concord.data import load_questions
    from concord.io import write_json, write_jsonl
    from concord.rl.rewards import ConsensusReward
    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg = resolve_section("training", training)
    ev = resolve_section("evaluation", evaluation)
    cons = dict(consensus or {})
    out_dir, checkpoint_dir = Path(out_dir), Path(checkpoint_dir)
    questions = load_questions(questions_path)
    gold_by_id = {str(q["id"]): q["answer"] for q in questions}  # diagnostics and validation only
    dataset = build_train_dataset(questions, prompt_style, task, context_fields)
    max_steps = total_steps(len(questions), cfg, benchmark)

    on_gpu = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    from accelerate import PartialState

    from concord.rl.batching import Layout, check_layout

    # Read the launcher's environment: creating accelerate's PartialState before the trainer
    # does would fix it without `cpu=True`, and multi-process CPU runs would not form a group.
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))
    is_main = int(os.environ.get("RANK", "0")) == 0

    layout = check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"], num_processes,
                                 cfg["gradient_accumulation_steps"]))
    args = grpo_config(cfg, layout, checkpoint_dir=checkpoint_dir, seed=seed, max_steps=max_steps, on_gpu=on_gpu)
    reward = ConsensusReward(arm, layout.n_vote, cons)
    run_log = RunLog(checkpoint_dir)
    resume = last_complete_checkpoint(checkpoint_dir)
    if resume is None:
        if is_main:
            run_log.reset()  # a fresh start must not inherit rows of an earlier attempt
    else:
        log.info("resuming from %s", resume)
    val_cfg = {
        "prompt_style": prompt_style, "task": task, "k": int(cfg["val_k"]), "temperature": float(ev["temperature"]),
        "top_p": float(ev["top_p"]), "max_new_tokens": int(cfg["val_max_new_tokens"] or ev["max_new_tokens"]),
        "seed": int(seed) * 1_000_003, "batch_size": int(cfg["val_batch_size"]),
    }
    trainer_ref: list = [None]
    monitor = TrainingMonitor(trainer_ref, reward, run_log, gold_by_id, validation_subset(questions, cfg["val_questions"]),
                              val_cfg, cfg["eval_every"], bool(cfg["eval_at_start"]), max_steps)
    trainer = ConsensusGRPOTrainer(
        model=str(model_dir), args=args, train_dataset=dataset, processing_class=tokenizer,
        consensus_reward=reward, n_train=layout.n_train, callbacks=[monitor],
    )
    trainer_ref[0] = trainer
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    log.info("training %s on %s with arm %s, seed %d: %d steps of %d prompts x %d roll-outs (train on %d), %d process(es)",
             model_dir, questions_path, arm, seed, max_steps, layout.prompts_per_step, layout.n_vote, layout.n_train,
             num_processes)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    elapsed = time.time() - t0

    # Final output: a temporary sibling, renamed into place once complete.
    partial = out_dir.parent / f".{out_dir.name}.partial"
    state = PartialState()
    if state.is_main_process and partial.exists():
        shutil.rmtree(partial)
    state.wait_for_everyone()
    if getattr(trainer, "is_fsdp_enabled", False):
        # Checkpoints stay sharded (fast, resumable); the final model is one HF directory.
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(partial))
    if state.is_main_process:
        tokenizer.save_pretrained(str(partial))
        write_jsonl(partial / "log.jsonl", run_log.read("log"))
        write_jsonl(partial / "groups.jsonl", run_log.read("groups"))
        prov = provenance.record(
            step="train", seed=int(seed), inputs=[questions_path],
            config=dict(provenance_config or {"training": cfg, "consensus": cons, "arm": arm, "task": task,
                                              "prompt_style": prompt_style}),
            model=str(model_dir), arm=arm, steps=max_steps, resumed_from=str(resume) if resume else None,
            train_seconds=round(elapsed, 1), num_processes=num_processes,
        )
        write_json(partial / "provenance.json", prov)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(partial, out_dir)
        if not cfg["keep_checkpoints"]:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
        log.info("wrote %s (%d steps in %.0f s)", out_dir, max_steps, elapsed)
    state.wait_for_everyone()
    return out_dir


def cpu_threads(threads: int | None) -> None:
    """Cap CPU PyTorch threads: on a shared machine, oversubscribed OpenMP threads spin and crawl."""
    if threads:
        import torch

        torch.set_num_threads(int(threads))


__all__ = [
    "RunLog", "TrainingMonitor", "build_train_dataset", "cpu_threads", "last_complete_checkpoint", "mean_at_k",
    "resolve_section", "section_defaults", "total_steps", "train", "validation_pass_at_1", "validation_subset",
]
