"""The profile on a Slurm with accounting (scripts/slurm_local.sh --accounting: slurmdbd + MariaDB):
the README's documented flag `--slurm-status-command sacct` tracks a real job to completion, and
Slurm's accounting database records it under the account the run names. Skips only where Slurm
cannot be started (not root, no apt)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from concord.cluster import local_slurm

pytestmark = pytest.mark.slow


def test_sacct_status_checks_with_accounting(tmp_path):
    reason = local_slurm.cannot_start_reason(accounting=True)
    if reason:
        pytest.skip(f"no local Slurm with accounting: {reason}")
    from test_slurm_local import OVERRIDES, _copy_checkout, _env

    layout = local_slurm.Layout(tmp_path / "slurm")
    try:
        local_slurm.start(layout, local_slurm.Settings(gpus=1, accounting=True))
        env = _env(layout)
        work = _copy_checkout(tmp_path / "w")
        proc = subprocess.run([sys.executable, "-m", "snakemake", "results/fmv/data/humaneval.jsonl", *OVERRIDES,
                               "--slurm-status-command", "sacct"], cwd=work, env=env, capture_output=True, text=True,
                              timeout=1200)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert "slurm status checks: sacct" in out
        jobid = next(line.split("SLURM jobid ")[1].split()[0] for line in out.splitlines() if "SLURM jobid" in line)
        record = subprocess.run(["sacct", "-X", "-n", "-P", "-j", jobid, "--format=JobIdRaw,State,Account,Partition"],
                                env=env, capture_output=True, text=True, check=True).stdout.strip()
        assert record == f"{jobid}|COMPLETED|concord|local", record
    finally:
        local_slurm.stop(layout)
        assert not local_slurm.status(layout)["running"]
