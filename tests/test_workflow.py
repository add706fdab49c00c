"""The real Snakemake DAG on a tiny config: a tiny model built by the workflow, a few questions,
every stage run for real (the CoRE stages read the session's toy run of the whole workflow);
an interrupted run resumes; a rerun from scratch is byte-identical."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from support.snakemake import snakemake as run_snakemake


def tiny_config(results: str = "results", n_questions: int = 4) -> dict:
    return {
        "run_name": "tiny",
        "results_dir": results,
        "models": {"tiny": {"source": "tiny-random", "family": "Tiny", "prompt_style": "instruct"}},
        "benchmarks": {"synthetic": {"source": "synthetic", "task": "math", "n_questions": n_questions, "seed": 0}},
        "arms": ["majority", "ec", "cisc", "core"],
        "seeds": [0],
        "engine": {"backend": "hf", "dtype": "float32", "batch_size": 16},
        "rollouts": {"n": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12, "chunk_questions": 1},
        "consensus": {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200},
        "analysis": {"n_values": [2, 4], "n_subsamples": 3},
    }


def snakemake(workdir: Path, config: dict, *targets: str, background: bool = False, extra=()):
    """The repository's workflow on ``config`` in ``workdir`` (2 cores); asserts success."""
    return run_snakemake(workdir, "--cores", "2", "--rerun-incomplete", *extra, *targets, config=config,
                         background=background, check=not background)


def test_bad_config_is_rejected_with_the_key_named(tmp_path):
    config = tiny_config()
    config["rollouts"]["n"] = 0
    proc = run_snakemake(tmp_path, "-n", config=config, timeout=300)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    assert "Invalid config: rollouts.n = 0" in message and "minimum" in message
    assert len(message.splitlines()) < 15  # the key, the rule, what is allowed -- not the whole schema


def test_core_stages_run_for_real(toy_tree):
    """Roll-outs, analysis, Figure 2 and Appendix H of the session's toy run (4 questions, 4
    roll-outs, N in {2, 4}: support.toy)."""
    results = toy_tree / "results"
    frame = pd.read_parquet(results / "rollouts/tiny/synthetic/seed0.parquet")
    assert len(frame) == 4 * 4 and set(frame.rollout_idx) == {0, 1, 2, 3}
    assert (frame.confidence < 0).all()
    from concord.io import read_parquet_metadata

    prov = read_parquet_metadata(results / "rollouts/tiny/synthetic/seed0.parquet")
    assert prov["seed"] == 0 and prov["config"]["rollouts"]["n"] == 4 and prov["code_version"]
    assert prov["inputs"]  # the questions file's hash
    for suffix in ("png", "pdf"):
        assert (results / f"figures/figure2/tiny_synthetic_seed0.{suffix}").stat().st_size > 1000
    curve = pd.read_csv(results / "analysis/tiny/synthetic/seed0/label_accuracy.csv")
    assert set(curve.method) == {"majority", "ec", "cisc", "core"} and set(curve.n) == {2, 4}
    assert (results / "analysis/tiny/synthetic/recovery.json").is_file()
    assert (results / "logs/rollouts/tiny/synthetic/seed0.log").is_file()
    assert (results / "benchmarks/rollouts/tiny/synthetic/seed0.tsv").is_file()


def test_interrupted_rollouts_resume_from_their_chunks(tmp_path):
    config = tiny_config(n_questions=10)
    config["rollouts"]["max_new_tokens"] = 24
    target = "results/rollouts/tiny/synthetic/seed0.parquet"
    cache = tmp_path / "results/.cache/rollouts/tiny/synthetic/seed0"
    proc = snakemake(tmp_path, config, target, background=True)
    deadline = time.time() + 600
    while not (cache / "chunk00001.parquet").exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline, "no roll-out chunk appeared in time"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9 the whole job tree mid-run
    proc.wait()
    assert not (tmp_path / target).exists(), "the run finished before it could be interrupted"
    first = (cache / "chunk00000.parquet").stat().st_mtime_ns

    # A killed Snakemake leaves its lock behind; --unlock is the documented first step.
    snakemake(tmp_path, config, extra=["--unlock"])
    snakemake(tmp_path, config, target)
    log = (tmp_path / "results/logs/rollouts/tiny/synthetic/seed0.log").read_text()
    assert "reusing cached chunk" in log
    assert (cache / "chunk00000.parquet").stat().st_mtime_ns == first  # not regenerated
    resumed = pd.read_parquet(tmp_path / target)

    # An uninterrupted run with the same seed gives the same roll-outs.
    fresh = tmp_path / "results" / "fresh.parquet"
    env = {**os.environ, "CONCORD_RESULTS_DIR": str(tmp_path / "results")}
    subprocess.run(
        [sys.executable, "-m", "concord", "rollouts", "--model-dir", str(tmp_path / "results/models/tiny"),
         "--questions", str(tmp_path / "results/data/synthetic.jsonl"), "--out", str(fresh), "--seed", "0",
         "--rollouts", '{"n": 4, "max_new_tokens": 24, "chunk_questions": 1}',
         "--engine", '{"backend": "hf", "batch_size": 16, "dtype": "float32"}',
         "--model-spec", '{"source": "tiny-random"}', "--threads", "2"],
        check=True, env=env, cwd=tmp_path, capture_output=True, timeout=600,
    )
    pd.testing.assert_frame_equal(resumed, pd.read_parquet(fresh))


def _artifact_digests(results: Path) -> dict[str, str]:
    """sha256 of every artifact, byte for byte (the training record included: wall-clock times
    live in the job logs under logs/, which are diagnostics, not artifacts)."""
    import hashlib

    digests = {}
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results).as_posix()
        if not path.is_file() or rel.split("/")[0] in {"logs", "benchmarks", ".manifest", ".cache", "manifest.json"}:
            continue
        digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def test_a_target_rerun_from_scratch_is_byte_identical_and_the_zero_update_control_holds(tmp_path, monkeypatch):
    """Table 1 of a tiny grid (Base, the zero-update control, Majority trained two steps), built
    twice from scratch in two directories: every artifact hashes the same, the training record
    included, and the table says the control reproduced Base."""
    # One clone, one code version: a checkout edited while the test runs must not count as a change.
    monkeypatch.setenv("CONCORD_CODE_VERSION", "rerun-test")
    config = {**tiny_config(n_questions=4), "arms": ["majority", "zero_update"],
              "report": {"tables": {"table1": ["tiny"]}}}
    config["training"] = {"n_vote": 2, "n_train": 2, "prompts_per_step": 1, "max_steps": 2, "max_completion_length": 8,
                          "learning_rate": 1.0e-3, "gradient_checkpointing": False, "gpus": 0, "threads": 1,
                          "eval_every": 0, "eval_at_start": False, "save_every": 1}
    config["evaluation"] = {"k": 2, "max_new_tokens": 8, "max_questions": 4}
    digests = []
    for run in ("first", "second"):
        workdir = tmp_path / run
        workdir.mkdir()
        snakemake(workdir, config, "table1")
        digests.append(_artifact_digests(workdir / "results"))
    first, second = digests
    assert "tables/table1.csv" in first and "eval/tiny/synthetic/zero_update/seed0.json" in first
    assert "train/tiny/synthetic/majority/seed0/log.jsonl" in first
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []
    table = pd.read_csv(tmp_path / "first/results/tables/table1.csv", keep_default_na=False)
    assert table.iloc[0]["zero_update_equals_base"] in (True, "True")
    assert float(table.iloc[0]["delta_zero_update"]) == 0.0
    assert "reproduces Base exactly" in (tmp_path / "first/results/tables/table1.md").read_text()
