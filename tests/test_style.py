"""Formatting and lint checks that keep the code base clean (ruff, `snakemake --lint` is in
tests/test_slurm_profile.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_no_errors():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed (it is pinned in requirements/cpu.lock)"
    proc = subprocess.run([ruff, "check", "--no-cache", "src", "tests", "benchmarks"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
