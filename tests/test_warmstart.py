"""Warm start (concord.warmstart): ``python -m concord`` forked from a preloaded interpreter writes
what a fresh process writes, ends as it ends, and dies with its caller. Real processes throughout:
the server, its children and the callers are the ones a workflow's jobs would be."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO
from support.data import QUESTIONS
from support.snakemake import job_env


def _env(warm_dir: Path | None, **extra: str) -> dict[str, str]:
    env = job_env(**{"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **extra})
    env.pop("CONCORD_WARM_DIR", None)
    env.pop("CONCORD_WARM_OWNER", None)
    if warm_dir is not None:
        env.update(CONCORD_WARM_DIR=str(warm_dir), CONCORD_WARM_OWNER=str(os.getpid()))
    return env


def _concord(args: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concord", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=600, **kwargs)


def _served(warm_dir: Path) -> list[str]:
    """The requests the servers in ``warm_dir`` forked a child for (their logs)."""
    return [line for log in warm_dir.glob("*.log") for line in log.read_text().splitlines()
            if line.startswith("warm: served")]


def _wait_for_server(warm_dir: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not list(warm_dir.glob("*.sock")):
        assert time.monotonic() < deadline, f"no warm server came up: {[p.read_text() for p in warm_dir.glob('*.log')]}"
        time.sleep(0.2)


@pytest.fixture()
def warm_dir(tmp_path):
    directory = tmp_path / "warm"
    directory.mkdir()
    yield directory
    subprocess.run([sys.executable, "-m", "concord.warmstart", "stop", str(directory)], env=_env(None), cwd=REPO,
                   check=True, timeout=60)


def _evaluate_args(model_dir: Path, questions: Path, out: Path, max_new_tokens: int = 8, k: int = 2) -> list[str]:
    return ["core-evaluate", "--model-dir", str(model_dir), "--questions", str(questions), "--out", str(out),
            "--seed", "0", "--threads", "1", "--model-spec", '{"prompt_style": "instruct"}',
            "--evaluation", json.dumps({"k": k, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": max_new_tokens}),
            "--engine", '{"backend": "hf", "batch_size": 8}']


@pytest.fixture()
def questions(tmp_path) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return path


def test_a_command_forked_from_the_warm_interpreter_writes_what_a_fresh_process_writes(
        tiny_model_dir, questions, warm_dir, tmp_path):
    fresh = _concord(_evaluate_args(tiny_model_dir, questions, tmp_path / "fresh.json"), _env(None))
    assert fresh.returncode == 0, fresh.stderr
    # The first caller of a key finds no server: it runs cold and starts one for the callers after it.
    first = _concord(_evaluate_args(tiny_model_dir, questions, tmp_path / "first.json"), _env(warm_dir))
    assert first.returncode == 0, first.stderr
    assert not _served(warm_dir)
    _wait_for_server(warm_dir)
    warm = _concord(_evaluate_args(tiny_model_dir, questions, tmp_path / "warm.json"), _env(warm_dir))
    assert warm.returncode == 0, warm.stderr
    assert len(_served(warm_dir)) == 1, "the second caller was not served by the warm server"
    assert "pass@1 (mean@2)" in warm.stderr  # the command's log reached the caller's stderr
    fresh_bytes = (tmp_path / "fresh.json").read_bytes()
    assert (tmp_path / "first.json").read_bytes() == fresh_bytes
    assert (tmp_path / "warm.json").read_bytes() == fresh_bytes


def test_a_warm_commands_exit_code_and_output_are_a_fresh_ones(warm_dir):
    _concord(["--help"], _env(warm_dir))  # starts the server
    _wait_for_server(warm_dir)
    for args in (["--help"], ["core-evaluate", "--no-such-option"], ["core-table", "--help"]):
        fresh, warm = _concord(args, _env(None)), _concord(args, _env(warm_dir))
        assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr), args
    assert len(_served(warm_dir)) == 3
    fresh = _concord(["core-evaluate", "--no-such-option"], _env(None))
    assert fresh.returncode == 2 and "error: the following arguments are required" in fresh.stderr


def test_a_caller_with_another_environment_is_not_served_by_a_server_of_another(warm_dir):
    _concord(["--help"], _env(warm_dir))
    _wait_for_server(warm_dir)
    other = _concord(["--help"], _env(warm_dir, OMP_NUM_THREADS="2"))  # torch reads it at import
    assert other.returncode == 0
    assert not _served(warm_dir)
    assert len(list(warm_dir.glob("*.lock"))) == 2  # it started a server of its own key


def test_a_warm_command_ends_with_its_caller(tiny_model_dir, questions, warm_dir, tmp_path):
    _concord(["--help"], _env(warm_dir))
    _wait_for_server(warm_dir)
    server = int(next(warm_dir.glob("*.pid")).read_text())
    # Long enough to be running when its caller is killed: 64 samples of 2,048 tokens per question.
    caller = subprocess.Popen([sys.executable, "-m", "concord",
                               *_evaluate_args(tiny_model_dir, questions, tmp_path / "long.json", 2048, 64)],
                              env=_env(warm_dir), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not _served(warm_dir):
        assert time.monotonic() < deadline and caller.poll() is None
        time.sleep(0.1)
    child = int(_served(warm_dir)[0].split("pid ")[1].split(":")[0])
    assert _parent(child) == server
    caller.send_signal(signal.SIGTERM)
    assert caller.wait(timeout=30) == -signal.SIGTERM
    deadline = time.monotonic() + 30
    while _parent(child) == server:  # SIGTERM, SIGKILL after the grace period, then reaped
        assert time.monotonic() < deadline, "the child outlived its caller"
        time.sleep(0.2)
    assert not (tmp_path / "long.json").exists()


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
