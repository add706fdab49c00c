"""TRL's colocated vLLM GRPO through ``concord.rl.run.train`` on vLLM's CPU build, every arm.

Each run opts in with ``training.vllm_on_cpu``, validates through the colocated engine
(``vllm_validation_texts``) at steps 0 and 1, and checks TRL's weight sync after every update:
the engine's weights differ from the updated policy's before ``sync_weights()`` and equal them,
bit for bit, after (:class:`WeightSyncCheck`). The math arms train the boxed tiny model, the FMV
arms a tiny model that writes programs printing disagreeing numbers (sandboxed rewards).
Two ranks under ``torchrun`` and the FSDP2 path (``config/accelerate/fsdp.yaml``) with vLLM
colocated run the same entry point as the cluster jobs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch

from concord.data import write_questions
from concord.io import read_jsonl
from concord.rl.tiny import build_boxed_tiny_model

from sync_check import WeightSyncCheck  # tests/vllm/ (pytest puts it on sys.path)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CONSENSUS = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}
QUESTIONS = [
    {"id": f"q{i}", "prompt": f"What is {i % 3} + 1?", "answer": str(i % 3 + 1), "level": 1, "subject": "arith",
     "source": "test"}
    for i in range(4)
]
TRAINING = {
    "n_vote": 4, "n_train": 2, "prompts_per_step": 2, "learning_rate": 5e-3, "max_steps": 1,
    "max_completion_length": 12, "max_prompt_length": 116, "gradient_checkpointing": False, "gpus": 0,
    "eval_every": 1, "eval_at_start": True, "val_questions": 2, "val_k": 2, "val_max_new_tokens": 12,
    "save_every": 1, "warmup_ratio": 0.0, "lr_scheduler": "constant", "dtype": "float32",
    "use_vllm": True, "vllm_on_cpu": True,
}
EVALUATION = {"temperature": 0.6, "top_p": 0.95}


@pytest.fixture(scope="module")
def math_setup(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("vllm-train")
    model = build_boxed_tiny_model(root / "model", steps=40)
    write_questions(root / "questions.jsonl", QUESTIONS)
    return root, model


def check_run(out: Path, check: WeightSyncCheck, steps: int = 1) -> dict:
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["generation"] == {"backend": "vllm", "device": "cpu", "dtype": "float32"}
    assert prov["dtype"] == "float32" and check.engine_dtype == "torch.float32"
    rows = read_jsonl(out / "log.jsonl")
    assert [r["step"] for r in rows] == list(range(steps + 1)) and all("val_pass_at_1" in r for r in rows)
    # Every update moved the policy away from the engine's copy, and the sync brought the copy level.
    assert len(check.records) == steps, check.records
    for before, after in check.records:
        assert before < 1.0 and after == 1.0, check.records
    return prov


@pytest.mark.parametrize("arm", ["core", "ec", "cisc", "majority"])
def test_math_arm_trains_with_colocated_vllm(math_setup, arm, tmp_path):
    from concord.rl.run import train

    root, model = math_setup
    check = WeightSyncCheck()
    out = train(model_dir=model, questions_path=root / "questions.jsonl", out_dir=tmp_path / "out",
                checkpoint_dir=tmp_path / "ckpt", arm=arm, seed=0, training=TRAINING, consensus=CONSENSUS,
                evaluation=EVALUATION, callbacks=[check])
    check_run(out, check)
    groups = read_jsonl(out / "groups.jsonl")
    assert len(groups) == 2 and all(len(g["answers"]) == 4 for g in groups)
