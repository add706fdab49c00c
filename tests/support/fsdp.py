"""Two CPU processes of ``python -m concord`` under ``accelerate launch`` with FSDP2: the
launcher and the checks that the run really sharded its policy (tests/test_rl_fsdp.py,
tests/test_rl_master_weights.py)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "tests" / "support" / "fsdp_on_cpu"
TIMEOUT_S = 420  # a healthy run takes about a minute on 2 cores; a hang must fail, not stall CI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fsdp_launch(root: Path, command: list[str], mixed_precision: str = "no",
                extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m concord <command>`` as 2 FSDP2 processes on CPU; kill the group on timeout.
    ``mixed_precision``: accelerate's setting (the cluster's config says bf16)."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / "config/accelerate/fsdp.yaml"),
           "--num_processes", "2", "--mixed_precision", mixed_precision, "--main_process_port", str(free_port()),
           "-m", "concord", *command]
    env = {**os.environ, **(extra_env or {}), "CONCORD_FSDP_ON_CPU": "1", "OMP_NUM_THREADS": "1",
           "CONCORD_RESULTS_DIR": str(root / "results"),
           "PYTHONPATH": os.pathsep.join([str(SHIM), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"2-process FSDP training did not finish in {TIMEOUT_S} s (hang):\n{output[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, output, "")


def assert_sharded_and_in_step(output: str, steps: int | None, val_questions: int = 3) -> None:
    """Both processes ran FSDP2 with DTensor parameters and logged identical validation numbers
    (``steps=None``: a run without validation)."""
    sharding = re.findall(r"process (\d) of 2: distributed type (\w+), policy (\w+), (\d+) of (\d+) parameter", output)
    assert sorted(int(p) for p, *_ in sharding) == [0, 1], output[-3000:]
    for _, dist, cls, n_sharded, n_params in sharding:
        assert dist == "FSDP" and cls.startswith("FSDP"), (dist, cls)
        assert int(n_sharded) == int(n_params) > 0, "parameters are not DTensor shards: not FSDP"
    assert "find_unused_parameters" not in output  # DDP's warning: the run fell back to data parallelism
    if steps is None:
        return
    vals = re.findall(r"process (\d): step (\d+) validation pass@1 ([0-9.]+) on (\d+) question", output)
    by_process = {p: [(int(s), v, int(n)) for q, s, v, n in vals if q == p] for p in ("0", "1")}
    assert [s for s, _, _ in by_process["0"]] == list(range(steps + 1)), output[-3000:]
    assert by_process["0"] == by_process["1"]  # gathered: the same numbers on both processes
    assert all(n == val_questions for _, _, n in by_process["0"])  # every validation question counted once
