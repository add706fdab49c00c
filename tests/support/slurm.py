"""The local Slurm cluster (scripts/slurm_local.sh) as the Slurm tests use it: the README's
command-line overrides, a scratch checkout, the jobs' environment, Slurm's records of the jobs."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

from support import REPO
from support.snakemake import job_env

# The README's line, targets first (--sdm takes several values); then the first status check
# 3 s after a submission instead of the profile's 15 s: the tests' jobs take seconds, and every
# later check waits 10 s longer than the one before until a job ends (the executor plugin's
# back-off), so the first check decides how long a short job's end goes unseen.
OVERRIDES = ["--profile", "slurm", "--configfile", "config/config.yaml", "config/slurm_local.yaml",
             "--default-resources", "slurm_account=concord", "slurm_partition=local", "--sdm", "env-modules",
             "--slurm-init-seconds-before-status-checks", "3"]
GPU_RULES = {"rollouts", "train", "evaluate", "fmv_generate", "scmoa_run"}


def copy_checkout(dest: Path) -> Path:
    """The repository's tracked files copied to ``dest`` (a scratch checkout the workflow may fill)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


def slurm_env(layout) -> dict:
    """The jobs' environment, pointed at the local cluster's slurm.conf."""
    return job_env(SLURM_CONF=str(layout.slurm_conf))


def slurm(env: dict, *args: str) -> str:
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=True, timeout=30).stdout


class JobRecords:
    """Slurm's own record of every job (`scontrol show job`), polled during a run: the controller
    forgets a job MinJobAge (300 s) after it ends."""

    def __init__(self, env: dict):
        self.env, self.records, self._stop = env, {}, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _snapshot(self):
        out = subprocess.run(["scontrol", "-o", "show", "job"], env=self.env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if m := re.match(r"JobId=(\d+) ", line):
                self.records[m[1]] = line

    def _poll(self):
        while not self._stop.wait(5):
            self._snapshot()

    def __enter__(self):
        self._snapshot()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        # The last word: a job that ended after the last poll (up to 5 s before the run's end) would
        # keep the state it had then (RUNNING); the controller still holds it for MinJobAge.
        self._snapshot()


# Wall-clock fields are measurements of the run, not results (an evaluation records its `seconds`).
TIMING_KEYS = {"seconds"}


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def digest(path: Path) -> str:
    """Content hash; JSON compared without its timing fields (everything else byte for byte)."""
    h = hashlib.sha256()
    for f in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
        data = f.read_bytes()
        if f.suffix == ".json":
            data = json.dumps(without_timing(json.loads(data)), sort_keys=True).encode()
        h.update(data)
    return h.hexdigest()
