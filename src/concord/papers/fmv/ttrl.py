"""TTRL with FMV rewards on code questions (arms ``fmv`` and ``fmv_pointwise``).

The optimisation is the project's GRPO trainer (:class:`concord.rl.trainer.ConsensusGRPOTrainer`
with :class:`concord.rl.rewards.ConsensusReward`), exactly as for the math arms: same batch
layout, same clipped surrogate, the ``training`` config section's hyper-parameters. What differs
is the data: the prompt is the code-generation conversation, and every row carries the
question's non-gold fields the FMV scorer needs (oracle inputs, mode, function name, helper
code). Hidden tests never enter the dataset.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

log = logging.getLogger(__name__)

#: Question fields the FMV reward reads (none of them holds an answer).
CONTEXT_FIELDS = ("inputs", "mode", "fn_name", "prefix", "starter_code", "source")


def build_dataset(questions: Sequence[dict]):
    """Rows: ``prompt`` (chat messages), ``question_id`` and :data:`CONTEXT_FIELDS` -- never gold."""
    from datasets import Dataset

    from concord.papers.fmv.prompts import generation_messages

    rows = []
    for q in questions:
        row = {"prompt": generation_messages(q), "question_id": str(q["id"])}
        for f in CONTEXT_FIELDS:
            # Arrow needs one type per column: missing function names become "".
            row[f] = q.get(f) if q.get(f) is not None else ("" if f != "inputs" else [])
        rows.append(row)
    ids = [r["question_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique: they key each roll-out group")
    return Dataset.from_list(rows)


def _log_callback():
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        """One row per step: TRL's metrics plus the vote's mass and how many groups had a label."""

        KEYS = ("loss", "reward", "reward_std", "learning_rate", "grad_norm", "entropy",
                "completions/mean_length", "completions/clipped_ratio", "step_time")

        def __init__(self, reward, rows: list):
            self.reward, self.rows, self.pending = reward, rows, {}
            self.t0 = time.time()

        def on_step_end(self, args, state, control, **kwargs):
            batches, self.reward.pending = self.reward.pending, []
            groups = [g for b in batches for g in b.groups]
            if groups:
                self.pending = {
                    "label_rate": sum(g.label is not None for g in groups) / len(groups),
                    "mean_mass": sum(sum(g.rewards) / len(g.rewards) for g in groups) / len(groups),
                }

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "loss" not in logs:
                return
            row = {k: logs[k] for k in self.KEYS if k in logs}
            row.update(self.pending, step=state.global_step, wall_seconds=round(time.time() - self.t0, 2))
            self.rows.append(row)
            self.pending = {}
            log.info("step %d: %s", state.global_step, ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                                                                 if isinstance(v, float)))

    return StepLog


def train_code(
    *,
    model_dir: str | os.PathLike,
    questions: Sequence[dict],
    out_dir: str | os.PathLike,
    checkpoint_dir: str | os.PathLike,
    arm: str,
    seed: int,
    training: Mapping[str, Any] | None = None,
    execution: Mapping[str, Any] | None = None,
    provenance_inputs: Sequence[str] = (),
) -> Path:
    """Train ``model_dir`` on ``questions`` with the ``arm``'s FMV rewards; write ``out_dir``
    (model, tokenizer, ``log.jsonl``, ``provenance.json``). Resumes from ``checkpoint_dir``."""
    import torch
    from accelerate import PartialState
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig

    from concord import provenance
    from concord.papers.fmv.rewards import ARMS
    from concord.io import write_json, write_jsonl
    from concord.rl.batching import Layout, check_layout
    from concord.rl.rewards import ConsensusReward
    from concord.rl.run import last_complete_checkpoint, resolve_section, total_steps
    from concord.rl.trainer import ConsensusGRPOTrainer

    if arm not in ARMS:
        raise ValueError(f"code TTRL arm must be one of {sorted(ARMS)}, got {arm!r}")
    cfg = resolve_section("training", training)
    params = {k: v for k, v in dict(execution or {}).items() if k in ("timeout_s", "memory_mb", "sandbox")}
    out_dir, checkpoint_dir = Path(out_dir), Path(checkpoint_dir)
    dataset = build_dataset(questions)
    max_steps = total_steps(len(questions), cfg)
    on_gpu = torch.cuda.is_available()
    dtype = cfg["dtype"] if cfg["dtype"] != "auto" else ("bfloat16" if on_gpu else "float32")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    state = PartialState()
    layout = check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"], state.num_processes,
                                 cfg["gradient_accumulation_steps"]))
    args = GRPOConfig(
        output_dir=str(checkpoint_dir), seed=int(seed), data_seed=int(seed), use_cpu=not on_gpu,
        bf16=dtype == "bfloat16", fp16=dtype == "float16", model_init_kwargs={"dtype": dtype},
        num_generations=layout.n_vote, per_device_train_batch_size=layout.per_device_train_batch_size,
        gradient_accumulation_steps=layout.gradient_accumulation_steps,
        max_completion_length=int(cfg["max_completion_length"]), temperature=float(cfg["temperature"]),
        top_p=float(cfg["top_p"]), learning_rate=float(cfg["learning_rate"]), lr_scheduler_type=cfg["lr_scheduler"],
        warmup_steps=float(cfg["warmup_ratio"]), max_steps=max_steps, beta=float(cfg["beta"]),
        loss_type=cfg["loss_type"], scale_rewards=cfg["scale_rewards"], epsilon=float(cfg["epsilon"]),
        epsilon_high=float(cfg["epsilon_high"]) if cfg["epsilon_high"] is not None else None,
        num_iterations=int(cfg["num_iterations"]), mask_truncated_completions=bool(cfg["mask_truncated_completions"]),
        gradient_checkpointing=bool(cfg["gradient_checkpointing"]), use_vllm=bool(cfg["use_vllm"]) and on_gpu,
        vllm_mode=cfg["vllm_mode"], vllm_gpu_memory_utilization=float(cfg["vllm_gpu_memory_utilization"]),
        save_strategy="steps", save_steps=int(cfg["save_every"]), save_total_limit=1, logging_steps=1,
        report_to=[], disable_tqdm=True, remove_unused_columns=False, log_completions=False, shuffle_dataset=True,
        dataloader_num_workers=0,
    )
    reward = ConsensusReward(arm, layout.n_vote, params)
    rows: list[dict] = []
    trainer = ConsensusGRPOTrainer(
        model=str(model_dir), args=args, train_dataset=dataset, processing_class=tokenizer,
        consensus_reward=reward, n_train=layout.n_train, callbacks=[_log_callback()(reward, rows)],
    )
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    resume = last_complete_checkpoint(checkpoint_dir)
    log.info("code TTRL: %s on %d questions, arm %s, seed %d: %d steps of %d prompts x %d roll-outs (train on %d)",
             model_dir, len(questions), arm, seed, max_steps, layout.prompts_per_step, layout.n_vote, layout.n_train)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    elapsed = time.time() - t0

    partial = out_dir.parent / f".{out_dir.name}.partial"
    if state.is_main_process and partial.exists():
        shutil.rmtree(partial)
    state.wait_for_everyone()
    trainer.save_model(str(partial))
    if state.is_main_process:
        tokenizer.save_pretrained(str(partial))
        write_jsonl(partial / "log.jsonl", rows)
        write_json(partial / "provenance.json", provenance.record(
            step="fmv-train", seed=int(seed), inputs=list(provenance_inputs),
            config={"training": cfg, "execution": params, "arm": arm}, model=str(model_dir), arm=arm,
            steps=max_steps, resumed_from=str(resume) if resume else None, train_seconds=round(elapsed, 1),
        ))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(partial, out_dir)
        if not cfg["keep_checkpoints"]:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
        log.info("wrote %s (%d steps in %.0f s)", out_dir, max_steps, elapsed)
    state.wait_for_everyone()
    return out_dir
