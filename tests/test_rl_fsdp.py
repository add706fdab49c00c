"""CPU proxy of a GPU node's training job: two processes, FSDP2-sharded policy, real entry point.

``accelerate launch`` with ``config/accelerate/fsdp.yaml`` (the file the cluster jobs use) starts
two processes of ``python -m concord train``; the shim in ``tests/support/fsdp_on_cpu`` makes
accelerate shard the policy with ``fully_shard`` over gloo instead of silently falling back to
data parallelism on CPU, and the test checks that the parameters really are DTensor shards.
The run validates at step 0 and after each of 2 steps on 3 questions (shards of 2 and 1: unequal
unless padded) with one prompt per ``generate`` call, and saves the final model. Without
``synced_gpus`` and equal validation shards the processes' collectives stop pairing up at the
step-0 validation: gloo aborts ("distributed collective mismatch"), NCCL on a GPU node hangs; the
timeout turns a hang into a failure too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from concord.data import write_questions
from concord.io import read_jsonl
from support.data import CONSENSUS, QUESTIONS, TRAINING
from support.fsdp import assert_sharded_and_in_step, fsdp_launch

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TRAINING = {
    **TRAINING, "max_steps": 2, "eval_at_start": True, "val_questions": 3, "val_batch_size": 1,
    "updates_per_generation": 2,
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, boxed_model_dir):
    root = tmp_path_factory.mktemp("fsdp")
    model = boxed_model_dir  # conftest's session-wide boxed tiny model (read-only)
    write_questions(root / "questions.jsonl", QUESTIONS)
    return root, model


def test_fsdp_training_validates_in_lock_step_and_saves_in_the_training_dtype(tiny):
    root, model_dir = tiny
    out = root / "results" / "train" / "core"
    proc = fsdp_launch(root, [
        "train", "--model-dir", str(model_dir), "--questions", str(root / "questions.jsonl"), "--out", str(out),
        "--checkpoint-dir", str(root / "ckpt" / "core"), "--arm", "core", "--seed", "0", "--training",
        json.dumps(TRAINING), "--consensus", json.dumps(CONSENSUS), "--evaluation",
        json.dumps({"temperature": 0.6, "top_p": 0.95}), "--task", "math", "--threads", "1"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_sharded_and_in_step(proc.stdout, steps=2)
    rows = read_jsonl(out / "log.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2] and all("val_pass_at_1" in r for r in rows)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["num_processes"] == 2 and prov["steps"] == 2 and prov["dtype"] == "float32"

    # The final save gathered the shards into one full model that loads and matches its config.
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    weights = load_file(str(out / "model.safetensors"))
    start = load_file(str(Path(model_dir) / "model.safetensors"))
    assert weights.keys() == start.keys()
    assert all(weights[k].shape == start[k].shape and weights[k].dtype == start[k].dtype for k in start)
    assert any(not (weights[k] == start[k]).all() for k in start)  # trained
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    AutoModelForCausalLM.from_pretrained(str(out))


def test_fsdp_training_of_an_fmv_arm_validates_without_choosing_by_labels(tmp_path, tiny_model_dir):
    """The FMV arms train through the same entry point: sandboxed rewards on each process,
    hidden-test validation of one question (the second process validates a padded shard), and
    a fixed step budget: FMV-TTRL chooses no checkpoint by labels (test time has none to use), so early stopping
    and a held-out split are refused and every run trains its whole budget."""
    from concord.cli import main

    data = tmp_path / "lcb.jsonl"
    fixture = REPO / "tests" / "fixtures" / "lcb_release_v6_sample.jsonl"
    assert main(["fmv-data", "--benchmark-spec", json.dumps({"source": "livecodebench", "path": str(fixture)}),
                 "--out", str(data)]) == 0
    training = {"n_vote": 4, "n_train": 2, "prompts_per_step": 2, "max_steps": 2, "max_completion_length": 8,
                "gradient_checkpointing": False, "eval_every": 1, "eval_at_start": True, "val_k": 2,
                "val_questions": 1, "val_max_new_tokens": 8, "val_batch_size": 1, "save_every": 1,
                "learning_rate": 1e-5, "lr_scheduler": "constant", "warmup_ratio": 0.0}
    out = tmp_path / "results" / "fmv" / "train"
    args = ["fmv-train", "--data", str(data), "--model-dir", str(tiny_model_dir), "--out", str(out), "--checkpoint-dir",
            str(tmp_path / "ckpt"), "--arm", "fmv", "--seed", "0", "--exec", json.dumps({"timeout_s": 2, "memory_mb": 512}),
            "--threads", "1"]
    for bad, match in (({"early_stopping_patience": 1}, "early stopping would pick the stopping step"),
                       ({"validation_fraction": 0.34}, "validation_fraction would withhold questions")):
        with pytest.raises(ValueError, match=match):
            main(args + ["--training", json.dumps({**training, **bad})])
    proc = fsdp_launch(tmp_path, args + ["--training", json.dumps(training)])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_sharded_and_in_step(proc.stdout, steps=2, val_questions=1)
    assert "early stopping" not in proc.stdout
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["step"] == "fmv-train" and prov["num_processes"] == 2
    assert (prov["steps"], prov["max_steps"], prov["train_questions"], prov["validation_questions"]) == (2, 2, 3, 1)
    assert prov["early_stopping"]["patience"] is None and prov["early_stopping"]["stopped_at"] is None
    assert (out / "validation.csv").read_text().splitlines()[1:] == ["0,0.0,2,1", "1,0.0,2,1", "2,0.0,2,1"]
    groups = read_jsonl(out / "groups.jsonl")
    assert {g["question_id"] for g in groups} <= {r["id"] for r in read_jsonl(data)}
