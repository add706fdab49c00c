"""`snakemake --profile slurm` for real: a single-node Slurm started by scripts/slurm_local.sh.

The workflow runs from a scratch copy of the checkout through the project's profile, with only the
README's command-line overrides (account, partition, config files, software deployment), on a
subset of the embedded default's targets that holds a CoRE roll-out, a training, an evaluation,
an FMV execution and an SC-MoA run (config/slurm_local.yaml makes them small and makes GPU rules
reserve a fake GPU). Checked: Slurm's own records of the submitted jobs, GPU jobs' --gpus and
CUDA_VISIBLE_DEVICES, outputs equal to the same targets run locally, a failing job reported with
its Slurm log, a job cancelled with scancel and recovered by rerunning the same command, and the
partition-limit check. Skips only where Slurm cannot be started (not root, no apt).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from concord.cluster import limits, local_slurm

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# The README's line, targets first (--sdm takes several values).
OVERRIDES = ["--profile", "slurm", "--configfile", "config/config.yaml", "config/slurm_local.yaml",
             "--default-resources", "slurm_account=concord", "slurm_partition=local", "--sdm", "env-modules"]
GPU_RULES = {"rollouts", "train", "evaluate", "fmv_generate", "scmoa_run"}


def _targets(work: Path, env: dict) -> list[str]:
    """One output per rule of interest, chosen by rule name from the default's plan."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--configfile", "config/config.yaml",
                           "config/slurm_local.yaml"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
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


def _copy_checkout(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


# Wall-clock fields are measurements of the run, not results (an evaluation records its `seconds`).
TIMING_KEYS = {"seconds"}


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _digest(path: Path) -> str:
    """Content hash; JSON compared without its timing fields (everything else byte for byte)."""
    h = hashlib.sha256()
    for f in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
        data = f.read_bytes()
        if f.suffix == ".json":
            data = json.dumps(_without_timing(json.loads(data)), sort_keys=True).encode()
        h.update(data)
    return h.hexdigest()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = local_slurm.cannot_start_reason()
    if reason:
        pytest.skip(f"no local Slurm: {reason}")
    layout = local_slurm.Layout(tmp_path_factory.mktemp("slurm"))
    try:
        facts = local_slurm.start(layout, local_slurm.Settings(gpus=2, partition="local"))
        yield layout, facts
    finally:
        local_slurm.stop(layout)  # every daemon it started, also when a test failed
        assert not local_slurm.status(layout)["running"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One scratch checkout for the module: later tests reuse what the first one built."""
    return _copy_checkout(tmp_path_factory.mktemp("checkout"))


def _env(layout) -> dict:
    return {**os.environ, "SLURM_CONF": str(layout.slurm_conf), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _snakemake(work: Path, env: dict, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _slurm(env: dict, *args: str) -> str:
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=True, timeout=30).stdout


class JobRecords:
    """Slurm's own record of every job (`scontrol show job`), polled during a run: the controller
    forgets a job MinJobAge (300 s) after it ends."""

    def __init__(self, env: dict):
        self.env, self.records, self._stop = env, {}, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while True:
            out = subprocess.run(["scontrol", "-o", "show", "job"], env=self.env, capture_output=True, text=True).stdout
            for line in out.splitlines():
                if m := re.match(r"JobId=(\d+) ", line):
                    self.records[m[1]] = line
            if self._stop.wait(5):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_profile_runs_the_default_subset_on_slurm_like_locally(cluster, work, tmp_path):
    layout, facts = cluster
    env = _env(layout)
    slurm_dir, local_dir = work, _copy_checkout(tmp_path / "local")
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

    # The same targets run locally give the same bytes.
    local_env = {k: v for k, v in env.items() if k != "SLURM_CONF"}
    started = time.monotonic()
    local = _snakemake(local_dir, local_env, *targets, "--cores", "2", "--configfile", "config/config.yaml",
                       "config/slurm_local.yaml")
    local_s = time.monotonic() - started
    assert local.returncode == 0, local.stderr[-4000:]
    for target in targets:
        assert _digest(slurm_dir / target) == _digest(local_dir / target), target
    print(f"\n[slurm-local] {len(submitted)} batch jobs; through Slurm {slurm_s:.0f} s, locally {local_s:.0f} s")


def test_a_failing_job_is_reported_with_its_slurm_log(cluster, work):
    layout, _ = cluster
    env = _env(layout)
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
    assert "JobState=FAILED" in _slurm(env, "scontrol", "show", "job", "-o", match[1])


def test_a_cancelled_job_is_recovered_by_rerunning_the_same_command(cluster, work):
    layout, _ = cluster
    env = _env(layout)
    targets = _targets(work, env)[1:2]  # the roll-outs (and the model and data, unless built already)
    (work / targets[0]).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "snakemake", *targets, *OVERRIDES]
    run = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # The profile retries a failed job once: cancel every attempt of the roll-outs mid-run.
    cancelled = []
    deadline = time.monotonic() + 900
    while run.poll() is None and time.monotonic() < deadline:
        for line in _slurm(env, "squeue", "-h", "-t", "R", "-o", "%i %k").splitlines():
            jobid, comment = line.split(maxsplit=1)
            if comment.startswith("rule_rollouts") and jobid not in cancelled:
                time.sleep(3)
                _slurm(env, "scancel", jobid)
                cancelled.append(jobid)
        time.sleep(1)
    out, _ = run.communicate(timeout=600)
    assert cancelled, out[-3000:]
    assert run.returncode != 0, out[-3000:]
    assert f"SLURM-job '{cancelled[-1]}' failed, SLURM status is: 'CANCELLED'" in out, out[-3000:]
    for jobid in cancelled:
        assert "JobState=CANCELLED" in _slurm(env, "scontrol", "show", "job", "-o", jobid)
    assert not (work / targets[0]).exists()
    rerun = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-4000:]
    assert (work / targets[0]).is_file()
    # The rerun resubmitted the roll-outs only: what the cancelled run had finished was kept.
    assert re.findall(r"submitted with SLURM jobid \d+ \(log: \S+/rule_(\w+?)/", rerun.stdout + rerun.stderr) == ["rollouts"]


def test_a_job_no_node_can_run_stops_the_run_before_submission(cluster, work):
    layout, facts = cluster
    env = _env(layout)
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
