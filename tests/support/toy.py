"""The whole workflow at toy scale: every rule of the three papers on a tiny random model, a few
questions, one training step. Built once per session (tests/conftest.py's ``toy_tree``) and read by
the report, workflow and audit tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from support import REPO
from support.snakemake import snakemake


def toy_config() -> dict:
    """The embedded default, shrunk: every rule of every paper runs, on a tiny random model."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"] = {"tiny": {"source": "tiny-random", "family": "Tiny", "prompt_style": "instruct"}}
    config["benchmarks"]["synthetic"]["n_questions"] = 4
    config["rollouts"].update(n=4, max_new_tokens=8)
    config["analysis"].update(n_values=[2, 4], n_subsamples=2)
    # Validation under the evaluation's protocol: its ends are the evaluations (ends_from_evaluation).
    config["training"].update(max_completion_length=8, val_max_new_tokens=8, val_questions=2, val_k=1)
    config["evaluation"].update(k=1, max_new_tokens=8, max_questions=2)
    config["report"] = {"tables": {"table1": ["tiny"]}, "labels": {"tiny": "Tiny"}}
    fmv = config["fmv"]
    fmv["benchmarks"]["humaneval"] = {"source": "humaneval", "n_questions": 2, "max_inputs": 2}
    fmv["sampling"].update(n=2, max_new_tokens=16)
    fmv["analysis"].update(n_values=[1, 2], n_subsamples=2, n_resamples=100)
    fmv["ttrl"].update(enabled=True, table1_n_vote={"fmv": 2, "fmv_pointwise": 2}, table2_n_vote=[2])
    # One prompt per step: the 2-problem toy's train half holds one question (one epoch, a fixed budget).
    fmv["ttrl"]["training"].update(max_completion_length=8, prompts_per_step=1)
    scmoa = config["scmoa"]
    scmoa["sampling"] = {**scmoa.get("sampling", {}), "max_tokens": 8}
    scmoa["n_resamples"] = 100
    return config


def build_toy_tree(workdir: Path) -> Path:
    """Run the whole toy workflow in ``workdir`` (``config.yaml`` there) and render its report."""
    snakemake(workdir, "--cores", "2", config=toy_config(), timeout=2400, check=True)
    snakemake(workdir, "--report", "results/report.html", config=workdir / "config.yaml", timeout=2400, check=True)
    return workdir
