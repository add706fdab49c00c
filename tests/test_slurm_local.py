"""`snakemake --profile slurm` for real: a single-node Slurm started by scripts/slurm_local.sh.

The workflow runs from a scratch copy of the checkout through the project's profile, with only the
README's command-line overrides (account, partition, config files, software deployment), on a
subset of the embedded default's targets that holds a CoRE roll-out, a training, an evaluation,
an FMV execution and an SC-MoA run (config/slurm_local.yaml makes them small and makes GPU rules
reserve a fake GPU). Checked: Slurm's own records of the submitted jobs, GPU jobs' --gpus and
CUDA_VISIBLE_DEVICES, the same bytes from the jobs that need no training when they are rerun
locally from the same inputs, a failing job reported with its Slurm log, a job cancelled with
scancel and recovered by rerunning the same command, and the partition-limit check. The cluster is the session's (tests/conftest.py ``slurm_cluster``), shared
with the accounting test. Skips only where Slurm cannot be started (not root, no apt).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from concord.cluster import limits
from support.slurm import GPU_RULES, OVERRIDES, JobRecords, copy_checkout, digest, slurm, slurm_env
from support.snakemake import snakemake

pytestmark = pytest.mark.slow


#: The batch rules of the subset below no training: rerun locally to compare their bytes.
RERUN_LOCALLY = ("rollouts", "fmv_generate", "fmv_execute", "scmoa_run")


def _targets(work: Path, env: dict) -> list[str]:
    """One output per rule of interest, chosen by rule name from the default's plan."""
    proc = snakemake(work, "-n", "--forceall", "--configfile", "config/config.yaml", "config/slurm_local.yaml",
                     snakefile=None, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs: dict[str, list[str]] = {}
    rule = None
    for line in proc.stdout.splitlines():
        if re.match(r"^(local)?rule \w+:", line):
            rule = line.split()[1].rstrip(":")
        elif rule and line.strip().startswith("output:"):
            outputs.setdefault(rule, []).append(line.split(":", 1)[1].split(",")[0].strip())
            rule = None
    evaluations = [p for p in outputs["evaluate"] if "/base/" not in p]  # an evaluation that needs a training
    return [evaluations[0], outputs["rollouts"][0], outputs["fmv_execute"][0],
            next(p for p in outputs["scmoa_run"] if "@" not in p)]


@pytest.fixture(scope="module")
def cluster(slurm_cluster):
    return slurm_cluster


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One scratch checkout for the module: later tests reuse what the first one built."""
    return copy_checkout(tmp_path_factory.mktemp("checkout"))


def _snakemake(work: Path, env: dict, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return snakemake(work, *args, snakefile=None, env=env, timeout=timeout)


def test_profile_runs_the_default_subset_on_slurm_like_locally(cluster, work, tmp_path):
    layout, facts = cluster
    env = slurm_env(layout)
    slurm_dir = work
    targets = _targets(slurm_dir, env)

    started = time.monotonic()
    with JobRecords(env) as jobs:
        proc = _snakemake(slurm_dir, env, *targets, *OVERRIDES)
    slurm_s = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "slurm status checks: squeue" in out
    submitted = dict(re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)", out))
    assert submitted, out[-3000:]

    # Slurm's own records: every submitted job is known to the controller, COMPLETED, in partition local.
    for jobid in submitted:
        record = jobs.records[jobid]
        assert "JobState=COMPLETED" in record and "Partition=local" in record, record
    # GPU rules asked for a GPU (--gpus) and saw it; CPU rules did not.
    gpu_jobs = 0
    for jobid, log in submitted.items():
        text = Path(log).read_text()
        rule = Path(log).parent.parent.name.removeprefix("rule_")
        record = jobs.records[jobid]
        if rule in GPU_RULES:
            gpu_jobs += 1
            assert re.search(r"TresPerJob=\S*gres[/:]gpu:1", record), (rule, record)
            assert re.search(r"concord: slurm job \d+ on \S+ CUDA_VISIBLE_DEVICES=[01]\b", text), (rule, text[-2000:])
        else:
            assert "CUDA_VISIBLE_DEVICES=none" in text, (rule, text[-2000:])
    assert gpu_jobs >= 4

    # The jobs rerun locally, from the same inputs, give the same bytes: a copy of the tree Slurm
    # built, every job that is not upstream of a training forced to run again (a training run's
    # bytes, locally and rerun, are tests/test_workflow.py's; its trained model is temporary here).
    local_dir = Path(shutil.copytree(slurm_dir, tmp_path / "local", symlinks=True))
    # Without the roll-outs' chunk cache: the rerun generates as the batch job did, rather than
    # assembling the same rows from finished chunks (equal tables, other parquet bytes).
    shutil.rmtree(local_dir / "results" / ".cache", ignore_errors=True)
    local_env = {k: v for k, v in env.items() if k != "SLURM_CONF"}
    leaves = targets[1:]
    started = time.monotonic()
    local = _snakemake(local_dir, local_env, *leaves, "--cores", "2", "--configfile", "config/config.yaml",
                       "config/slurm_local.yaml", "--forcerun", *RERUN_LOCALLY)
    local_s = time.monotonic() - started
    assert local.returncode == 0, local.stderr[-4000:]
    rerun = set(re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", local.stdout + local.stderr))
    assert rerun == set(RERUN_LOCALLY), rerun
    for target in leaves:
        assert digest(slurm_dir / target) == digest(local_dir / target), target
    print(f"\n[slurm-local] {len(submitted)} batch jobs; through Slurm {slurm_s:.0f} s, {len(rerun)} rerun locally "
          f"{local_s:.0f} s")


def test_a_failing_job_is_reported_with_its_slurm_log(cluster, work):
    layout, _ = cluster
    env = slurm_env(layout)
    # A real rule that fails inside its batch job: fmv_data asked for a HumanEval problem that does not exist.
    proc = _snakemake(work, env, "results/fmv/data/humaneval.jsonl", *OVERRIDES,
                      "--config", "fmv={benchmarks: {humaneval: {task_ids: [HumanEval/9998, HumanEval/9999]}}}", timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    match = re.search(r"SLURM-job '(\d+)' failed, SLURM status is: 'FAILED'", out)
    assert match, out[-4000:]
    assert "Error in rule fmv_data" in out
    log = work / "results" / "logs" / "slurm" / "rule_fmv_data" / "humaneval" / f"{match[1]}.log"
    assert str(log) in out and log.is_file(), out[-3000:]
    assert "JobState=FAILED" in slurm(env, "scontrol", "show", "job", "-o", match[1])


def test_a_cancelled_job_is_recovered_by_rerunning_the_same_command(cluster, work):
    layout, _ = cluster
    env = slurm_env(layout)
    targets = _targets(work, env)[1:2]  # the roll-outs (and the model and data, unless built already)
    (work / targets[0]).unlink(missing_ok=True)
    run = snakemake(work, *targets, *OVERRIDES, snakefile=None, env=env, background=True)
    # The profile retries a failed job once: cancel every attempt of the roll-outs mid-run.
    cancelled = []
    deadline = time.monotonic() + 900
    while run.poll() is None and time.monotonic() < deadline:
        for line in slurm(env, "squeue", "-h", "-t", "R", "-o", "%i %k").splitlines():
            jobid, comment = line.split(maxsplit=1)
            if comment.startswith("rule_rollouts") and jobid not in cancelled:
                time.sleep(3)
                slurm(env, "scancel", jobid)
                cancelled.append(jobid)
        time.sleep(1)
    out, _ = run.communicate(timeout=600)
    assert cancelled, out[-3000:]
    assert run.returncode != 0, out[-3000:]
    assert f"SLURM-job '{cancelled[-1]}' failed, SLURM status is: 'CANCELLED'" in out, out[-3000:]
    for jobid in cancelled:
        assert "JobState=CANCELLED" in slurm(env, "scontrol", "show", "job", "-o", jobid)
    assert not (work / targets[0]).exists()
    rerun = _snakemake(work, env, *targets, *OVERRIDES, timeout=1200)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-4000:]
    assert (work / targets[0]).is_file()
    # The rerun resubmitted the roll-outs only: what the cancelled run had finished was kept.
    assert re.findall(r"submitted with SLURM jobid \d+ \(log: \S+/rule_(\w+?)/", rerun.stdout + rerun.stderr) == ["rollouts"]


def test_a_job_no_node_can_run_stops_the_run_before_submission(cluster, work):
    layout, facts = cluster
    env = slurm_env(layout)
    proc = _snakemake(work, env, "results/models/smollm2-135m", *OVERRIDES, "--forcerun", "model", "--set-resources",
                      f"model:mem_mb={facts['memory_mb'] * 4}", timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "can never start" in out and "rule model: asks mem_mb" in out and "partition 'local'" in out, out[-3000:]
    assert "has been submitted" not in out


def test_limits_parse_what_scontrol_prints(cluster):
    layout, facts = cluster
    os.environ["SLURM_CONF"] = str(layout.slurm_conf)
    try:
        parts = limits.query_partitions()
    finally:
        del os.environ["SLURM_CONF"]
    local = parts["local"]
    assert local.default and local.largest["cpus"] == facts["cpus"] and local.largest["gpus"] == 2
    ok = limits.Request("rollouts", "local", 1, 1000, 1, 10)
    too_big = limits.Request("train", "local", 1, 1000, 3, 10)
    assert limits.problems([ok], parts) == []
    assert limits.problems([too_big], parts) == ["rule train: asks GPUs 3 > 2 (the most one node of partition 'local' offers)"]
