"""Test data used by several modules: arithmetic questions whose gold answers lie in the boxed tiny
model's answer set (1..3, so some pseudo-labels are right and some wrong), the consensus settings,
and the training settings each training test starts from."""

from __future__ import annotations

CONSENSUS = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}

QUESTIONS = [
    {"id": f"q{i}", "prompt": f"What is {i % 3} + 1?", "answer": str(i % 3 + 1), "level": 1, "subject": "arith",
     "source": "test"}
    for i in range(6)
]

#: Three steps of two prompts, 4 roll-outs voted and 2 trained on each; validation after every
#: step. Modules override what their run needs (steps, validation, the generation backend).
TRAINING = {
    "n_vote": 4, "n_train": 2, "prompts_per_step": 2, "learning_rate": 5e-3, "max_steps": 3,
    "max_completion_length": 12, "gradient_checkpointing": False, "gpus": 0, "eval_every": 1, "val_questions": 2,
    "val_k": 2, "val_max_new_tokens": 12, "save_every": 1, "warmup_ratio": 0.0, "lr_scheduler": "constant",
}
