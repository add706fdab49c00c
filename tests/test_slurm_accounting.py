"""The profile on a Slurm with accounting (scripts/slurm_local.sh --accounting: slurmdbd + MariaDB):
the README's documented flag `--slurm-status-command sacct` tracks a real job to completion, and
Slurm's accounting database records it under the account the run names. The cluster is the
session's (tests/conftest.py ``slurm_cluster``, started with accounting where it can be). Skips
only where Slurm cannot be started (not root, no apt)."""

from __future__ import annotations

import subprocess

import pytest

from concord.cluster import local_slurm
from support.slurm import OVERRIDES, copy_checkout, slurm_env
from support.snakemake import snakemake

pytestmark = pytest.mark.slow


def test_sacct_status_checks_with_accounting(slurm_cluster, tmp_path):
    layout, facts = slurm_cluster
    if not facts["accounting"]:
        pytest.skip(f"no local Slurm with accounting: {local_slurm.cannot_start_reason(accounting=True)}")
    env = slurm_env(layout)
    # A checkout of its own: the job must run here, not find its output built by another test.
    work = copy_checkout(tmp_path / "w")
    proc = snakemake(work, "results/fmv/data/humaneval.jsonl", *OVERRIDES, "--slurm-status-command", "sacct",
                     snakefile=None, env=env, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "slurm status checks: sacct" in out
    jobid = next(line.split("SLURM jobid ")[1].split()[0] for line in out.splitlines() if "SLURM jobid" in line)
    record = subprocess.run(["sacct", "-X", "-n", "-P", "-j", jobid, "--format=JobIdRaw,State,Account,Partition"],
                            env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert record == f"{jobid}|COMPLETED|concord|local", record
