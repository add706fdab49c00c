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
from support.data import CONSENSUS, QUESTIONS, TRAINING

from sync_check import WeightSyncCheck  # tests/vllm_cpu/ (pytest puts it on sys.path)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = QUESTIONS[:4]
TRAINING = {
    **TRAINING, "max_steps": 1, "max_prompt_length": 116, "eval_at_start": True, "dtype": "float32",
    "use_vllm": True, "vllm_on_cpu": True,
}
EVALUATION = {"temperature": 0.6, "top_p": 0.95}


@pytest.fixture(scope="module")
def math_setup(tmp_path_factory, vllm_boxed_model_dir):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("vllm-train")
    model = vllm_boxed_model_dir  # conftest's session-wide model (read-only)
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


@pytest.fixture(scope="module")
def code_setup(tmp_path_factory):
    """LiveCodeBench's fixture problems and a tiny model whose programs print 1, 2 or 3."""
    import concord.papers  # noqa: F401  (registers the FMV arms)
    from concord.cli import main
    from concord.papers.fmv.ttrl import code_messages, load_code_questions
    from concord.rl.tiny import build_code_tiny_model

    root = tmp_path_factory.mktemp("vllm-fmv")
    data = root / "lcb.jsonl"
    fixture = REPO / "tests" / "fixtures" / "lcb_release_v6_sample.jsonl"
    assert main(["fmv-data", "--benchmark-spec", json.dumps({"source": "livecodebench", "path": str(fixture)}),
                 "--out", str(data)]) == 0
    conversations = [code_messages(q, "instruct") for q in load_code_questions(data)]
    return data, build_code_tiny_model(root / "model", conversations, steps=40)


@pytest.mark.parametrize("arm", ["fmv", "fmv_pointwise"])
def test_fmv_arm_trains_with_colocated_vllm(code_setup, arm, tmp_path):
    from concord.rl.run import train

    data, model = code_setup
    check = WeightSyncCheck()
    training = {**TRAINING, "max_prompt_length": 1024, "max_completion_length": 16, "val_max_new_tokens": 16}
    out = train(model_dir=model, questions_path=data, out_dir=tmp_path / "out", checkpoint_dir=tmp_path / "ckpt",
                arm=arm, seed=0, training=training, consensus={"timeout_s": 2, "memory_mb": 512},
                evaluation=EVALUATION, task="code", callbacks=[check], provenance_step="fmv-train")
    prov = check_run(out, check)
    assert prov["arm"] == arm
    rewards = [r for g in read_jsonl(out / "groups.jsonl") for r in g["rewards"]]
    assert len(rewards) == 8 and len(set(rewards)) > 1  # executed programs disagree: a live reward


def _launch(cmd: list[str], env: dict, timeout: int = 600):
    import signal
    import subprocess

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"did not finish in {timeout} s (hang):\n{output[-4000:]}")
    assert proc.returncode == 0, output[-4000:]
    return output


def _train_command(root: Path, model: Path, name: str, training: dict) -> tuple[list[str], Path]:
    out = root / name / "out"
    return ["-m", "concord", "train", "--model-dir", str(model), "--questions", str(root / "questions.jsonl"),
            "--out", str(out), "--checkpoint-dir", str(root / name / "ckpt"), "--arm", "majority", "--seed", "0",
            "--training", json.dumps({**TRAINING, **training}), "--consensus", json.dumps(CONSENSUS),
            "--evaluation", json.dumps(EVALUATION), "--task", "math", "--threads", "1"], out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _validations(output: str) -> dict[str, list]:
    vals = re.findall(r"process (\d): step (\d+) validation pass@1 ([0-9.]+) on (\d+) question", output)
    return {p: [(int(s), v, int(n)) for q, s, v, n in vals if q == p] for p in ("0", "1")}


def test_two_ranks_under_torchrun_each_with_a_colocated_engine(math_setup):
    """``torchrun --nproc_per_node 2`` (``accelerate launch --cpu`` runs one process without MPI):
    3 prompts x 4 roll-outs split over the ranks, each rank generating with its own engine."""
    root, model = math_setup
    command, out = _train_command(root, model, "torchrun", {"prompts_per_step": 3, "val_questions": 3})
    env = {**os.environ, "CONCORD_RESULTS_DIR": str(root / "results")}
    output = _launch([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                      str(_free_port()), *command], env)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["num_processes"] == 2 and prov["generation"]["backend"] == "vllm"
    assert output.count("generation by vLLM (CPU, colocated)") == 2  # one engine per rank
    by_process = _validations(output)
    assert [s for s, _, _ in by_process["0"]] == [0, 1] and by_process["0"] == by_process["1"]
    groups = read_jsonl(out / "groups.jsonl")
    assert len(groups) == 3 and all(len(g["answers"]) == 4 for g in groups)


def test_fsdp2_on_two_cpu_ranks_with_colocated_vllm(math_setup):
    """The cluster's launch (``accelerate launch --config_file config/accelerate/fsdp.yaml``) on two
    CPU processes: the policy is FSDP2-sharded (tests/support/fsdp_on_cpu turns accelerate's CPU
    fall-back to data parallelism back into FSDP), TRL gathers the shards into each rank's engine."""
    root, model = math_setup
    command, out = _train_command(root, model, "fsdp", {"prompts_per_step": 2, "val_questions": 3,
                                                        "val_batch_size": 1})
    shim = REPO / "tests" / "support" / "fsdp_on_cpu"
    env = {**os.environ, "CONCORD_FSDP_ON_CPU": "1", "CONCORD_RESULTS_DIR": str(root / "results"),
           "PYTHONPATH": os.pathsep.join([str(shim), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    output = _launch([sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                      str(REPO / "config" / "accelerate" / "fsdp.yaml"), "--num_processes", "2", "--mixed_precision",
                      "no", "--main_process_port", str(_free_port()), *command], env)
    sharding = re.findall(r"process (\d) of 2: distributed type (\w+), policy (\w+), (\d+) of (\d+) parameter", output)
    assert sorted(int(p) for p, *_ in sharding) == [0, 1], output[-3000:]
    assert all(d == "FSDP" and int(n) == int(m) > 0 for _, d, _, n, m in sharding), sharding
    by_process = _validations(output)
    assert [s for s, _, _ in by_process["0"]] == [0, 1] and by_process["0"] == by_process["1"]
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["num_processes"] == 2 and prov["generation"]["backend"] == "vllm"


def test_bf16_compute_steps_fp32_master_weights_and_the_engine_receives_them(tmp_path, smollm2_dir):
    """A real checkpoint (SmolLM2-135M), bf16 compute, one update at the paper's learning rate
    (5e-7): at least 99% of the fp32 master weights move, and after TRL's sync the bf16 engine
    holds the updated weights (rounded to bf16, bit for bit)."""
    from concord.rl.run import train

    from support import spread_reward
    from support.master_weights import MASTER_WEIGHTS_QUESTIONS, MASTER_WEIGHTS_TRAINING, moved_share

    model = smollm2_dir
    write_questions(tmp_path / "q.jsonl", MASTER_WEIGHTS_QUESTIONS)
    check = WeightSyncCheck()
    training = {**MASTER_WEIGHTS_TRAINING, "use_vllm": True, "vllm_on_cpu": True}
    out = train(model_dir=model, questions_path=tmp_path / "q.jsonl", out_dir=tmp_path / "out",
                checkpoint_dir=tmp_path / "ckpt", arm=spread_reward.register(), seed=0, training=training,
                evaluation=EVALUATION, callbacks=[check])
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["generation"] == {"backend": "vllm", "device": "cpu", "dtype": "bfloat16"}
    assert (prov["dtype"], prov["master_weights"]) == ("bfloat16", "float32")
    assert check.engine_dtype == "torch.bfloat16"
    assert len(check.records) == 1 and check.records[0][1] == 1.0, check.records  # the engine got the update
    share = moved_share(model, out)
    assert share >= 0.99, f"one update at lr 5e-7 moved {share:.2%} of the parameters"
