"""Helpers shared by the test modules (tests/conftest.py puts tests/ on ``sys.path``, so a module
imports them as ``support.<name>``): test data, the one way tests run Snakemake, the local Slurm
cluster's helpers, the toy configuration of the whole workflow and the env pins. Test modules
import from here, never from one another."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
