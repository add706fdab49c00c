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

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from concord.hardware import avoid_cpu_flash_attention_amx_fault
from concord.rl.checkpoints import RunLog, last_complete_checkpoint
from concord.rl.config import TrainingRun
from concord.rl.publish import publish_model
from concord.rl.rewards import GOLD_FIELDS
from concord.rl.settings import (
    MASTER_WEIGHTS_DTYPE,
    check_model_positions,
    grpo_config,
    job_layout,
    resolve_dtype,
    total_steps,
)
from concord.rl.validation import (
    EarlyStopping,
    TrainingMonitor,
    holdout_split,
    validation_subset,
    write_validation_curve,
)

log = logging.getLogger(__name__)


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


# --------------------------------------------------------------------------- the run
def train(run: TrainingRun | None = None, /, *, callbacks: Sequence[Any] = (), **fields: Any) -> Path:
    """Train ``run.model_dir`` with the ``run.arm``'s consensus rewards; write ``run.out_dir``.

    Args:
        run: the run (:class:`concord.rl.config.TrainingRun`); or its fields as keyword arguments
            (``train(model_dir=..., questions_path=..., ...)``), which build one.
        callbacks: factories ``trainer -> TrainerCallback``, added once the trainer is built
            (instrumentation: the vLLM tests check the weight sync through one).

    Generation runs in a colocated vLLM engine on a GPU, and on a CPU when ``training.vllm_on_cpu``
    opts in (:func:`concord.rl.settings.resolve_use_vllm`), in the training dtype.
    """
    if run is None:
        run = TrainingRun(**fields)
    elif fields:
        raise TypeError(f"train() takes a TrainingRun or its fields, not both (got {sorted(fields)})")
    settings = run.resolved
    cfg = settings.training
    hooks, questions, train_questions, held_out, dataset = _training_data(run, settings)
    max_steps = total_steps(len(train_questions), cfg, run.benchmark)
    tokenizer, on_gpu, dtype, longest_prompt = _policy_setup(run, cfg, dataset)

    # Read the launcher's environment: creating accelerate's PartialState before the trainer
    # does would fix it without `cpu=True`, and multi-process CPU runs would not form a group.
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))
    is_main = int(os.environ.get("RANK", "0")) == 0

    trainer, monitor, stopper, layout, run_log, resume = _build_trainer(
        run, settings, questions, held_out, dataset, tokenizer, max_steps, on_gpu, num_processes, is_main, callbacks)
    generation = f"vLLM ({'GPU' if on_gpu else 'CPU'}, colocated)" if trainer.args.use_vllm else "HF generate"
    log.info("training %s on %s with arm %s, seed %d: up to %d steps of %d prompts x %d roll-outs (train on %d, "
             "%d update(s) per step), %d process(es), %s, generation by %s, longest prompt %d tokens",
             run.model_dir, run.questions_path, run.arm, run.seed, max_steps, layout.prompts_per_step, layout.n_vote,
             layout.n_train, layout.updates_per_generation, num_processes, dtype, generation, longest_prompt)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    elapsed = time.time() - t0
    steps_done = trainer.state.global_step // layout.updates_per_generation

    # Final output: a temporary sibling, renamed into place once complete.
    out_dir = run.out_dir
    partial = out_dir.parent / f".{out_dir.name}.partial"
    if is_main and partial.exists():
        shutil.rmtree(partial)
    trainer.accelerator.wait_for_everyone()
    publish_model(trainer, tokenizer, partial, MASTER_WEIGHTS_DTYPE)
    if is_main:
        files = partial if run.run_dir is None else run.run_dir
        prov = _provenance(run, settings, trainer, stopper, monitor, resume, dtype, on_gpu, steps_done, max_steps,
                           len(train_questions), num_processes, layout.updates_per_generation)
        _write_run_files(files, run_log, prov)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(partial, out_dir)
        if not cfg["keep_checkpoints"]:
            shutil.rmtree(run.checkpoint_dir, ignore_errors=True)
        log.info("wrote %s (%d of up to %d steps in %.0f s)", out_dir, steps_done, max_steps, elapsed)
    trainer.accelerator.wait_for_everyone()
    return out_dir


def _training_data(run: TrainingRun, settings):
    """The task's hooks, every question, the ones trained on, the held-out ones, the training set."""
    from concord.rl.tasks import get_task

    hooks = get_task(run.task, settings.answer_policy)
    questions = hooks.load(run.questions_path)
    train_questions, held_out = holdout_split(questions, settings.training["validation_fraction"])
    dataset = build_train_dataset(train_questions, run.prompt_style, run.task, run.context_fields)
    return hooks, questions, train_questions, held_out, dataset


def _policy_setup(run: TrainingRun, cfg: Mapping[str, Any], dataset):
    """Tokenizer, device, dtype, and the longest prompt, checked against the model and the budget."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    on_gpu = torch.cuda.is_available()
    dtype = resolve_dtype(cfg, on_gpu)
    avoid_cpu_flash_attention_amx_fault("cuda" if on_gpu else "cpu", dtype)
    positions = getattr(AutoConfig.from_pretrained(str(run.model_dir)), "max_position_embeddings", None)
    check_model_positions(cfg, positions, str(run.model_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(run.model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    longest_prompt = check_prompt_budget({row["question_id"]: prompt_tokens(tokenizer, row["prompt"]) for row in dataset},
                                         int(cfg["max_prompt_length"]))
    return tokenizer, on_gpu, dtype, longest_prompt


def _build_trainer(run: TrainingRun, settings, questions, held_out, dataset, tokenizer, max_steps: int, on_gpu: bool,
                   num_processes: int, is_main: bool, callbacks: Sequence[Any]):
    """The GRPO trainer with the consensus reward, the run log (reset on a fresh start), and the
    monitor that logs, validates and stops."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from concord.rl.rewards import ConsensusReward
    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg, ev, cons = settings.training, settings.evaluation, dict(run.consensus)
    layout = job_layout(cfg, num_processes)
    args = grpo_config(cfg, layout, checkpoint_dir=run.checkpoint_dir, seed=run.seed, max_steps=max_steps, on_gpu=on_gpu)
    if args.use_vllm:
        from concord.engines.vllm import _import_vllm

        _import_vllm()  # concord's message (which env to use), not TRL's `pip install trl[vllm]` (the CUDA build)
    reward = ConsensusReward(settings.reward_arm, layout.n_vote, cons, answer_policy=settings.answer_policy,
                             task=run.task)
    run_log = RunLog(run.checkpoint_dir)
    resume = last_complete_checkpoint(run.checkpoint_dir)
    if resume is None:
        if is_main:
            run_log.reset()  # a fresh start must not inherit rows of an earlier attempt
    else:
        log.info("resuming from %s", resume)
    # seed x 1_000_003 is the seed `concord.papers.core.evaluation.evaluate` gives its first chunk of
    # questions: validated as evaluated, the policy draws the evaluation's samples.
    val_cfg = {
        "prompt_style": run.prompt_style, "k": int(cfg["val_k"]), "temperature": float(ev["temperature"]),
        "top_p": float(ev["top_p"]), "max_new_tokens": cfg["val_max_new_tokens"],
        "seed": int(run.seed) * 1_000_003, "batch_size": int(cfg["val_batch_size"]), "params": cons,
    }
    stopper = EarlyStopping(cfg["early_stopping_patience"], float(cfg["early_stopping_min_delta"]))
    trainer_ref: list = [None]
    questions_by_id = {str(q["id"]): q for q in questions}  # diagnostics and validation only
    monitor = TrainingMonitor(trainer_ref, reward, run_log, questions_by_id, validation_subset(held_out, cfg["val_questions"]),
                              val_cfg, cfg["eval_every"], bool(cfg["eval_at_start"]), max_steps, task=run.task,
                              updates_per_step=layout.updates_per_generation, stopper=stopper,
                              answer_policy=settings.answer_policy,
                              validate_ends=not cfg["ends_from_evaluation"])
    trainer = ConsensusGRPOTrainer(
        model=str(run.model_dir), args=args, train_dataset=dataset, processing_class=tokenizer,
        consensus_reward=reward, n_train=layout.n_train, callbacks=[monitor],
        share_prompt_prefix=bool(cfg["share_prompt_prefix"]),
    )
    trainer_ref[0] = trainer
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    for factory in callbacks:
        trainer.add_callback(factory(trainer))
    return trainer, monitor, stopper, layout, run_log, resume


def _provenance(run: TrainingRun, settings, trainer, stopper, monitor, resume, dtype: str, on_gpu: bool,
                steps_done: int, max_steps: int, n_train_questions: int, num_processes: int,
                updates_per_step: int) -> dict:
    from concord import provenance

    cfg = dict(settings.training)
    use_vllm = trainer.args.use_vllm
    default = {"training": cfg, "consensus": dict(run.consensus), "arm": run.arm, "task": run.task,
               "prompt_style": run.prompt_style, "answers": {"policy": settings.answer_policy}}
    return provenance.record(
        step=run.provenance_step, seed=int(run.seed), inputs=[run.questions_path],
        config=dict(run.provenance_config or default),
        model=str(run.model_dir), arm=run.arm, reward_arm=settings.reward_arm, learning_rate=float(cfg["learning_rate"]),
        steps=steps_done, max_steps=max_steps, dtype=dtype, master_weights=MASTER_WEIGHTS_DTYPE,
        saved_dtype=MASTER_WEIGHTS_DTYPE, numeric=provenance.numeric_path(dtype),
        generation={"backend": "vllm" if use_vllm else "hf", "device": "cuda" if on_gpu else "cpu",
                    "dtype": trainer.vllm_dtype if use_vllm else dtype},
        updates_per_step=updates_per_step, early_stopping=stopper.summary(),
        train_questions=n_train_questions, validation_questions=len(monitor.val_questions),
        resumed_from=str(resume) if resume else None, num_processes=num_processes,  # time: the job log
    )


def _write_run_files(where: Path, run_log: RunLog, prov: Mapping[str, Any]) -> None:
    """The run's log, groups, validation curve and provenance (each written atomically)."""
    from concord.io import write_json, write_jsonl

    rows = run_log.read("log")
    write_jsonl(where / "log.jsonl", rows)
    write_jsonl(where / "groups.jsonl", run_log.read("groups"))
    write_validation_curve(where / "validation.csv", rows)
    write_json(where / "provenance.json", prov)


def cpu_threads(threads: int | None) -> None:
    """Cap CPU PyTorch threads: on a shared machine, oversubscribed OpenMP threads spin and crawl."""
    if threads:
        import torch

        torch.set_num_threads(int(threads))


__all__ = ["TrainingRun", "build_train_dataset", "check_prompt_budget", "cpu_threads", "prompt_tokens", "train"]
