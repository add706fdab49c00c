"""The whole workflow, once, at toy scale (a tiny random model, a few questions, one training step):
the HTML report covers the three papers with captions and tables in the page, and the results
tree it leaves verifies clean -- then a changed byte is caught by name."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def toy_config() -> dict:
    """The embedded default, shrunk: every rule of every paper runs, on a tiny random model."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"] = {"tiny": {"source": "tiny-random", "family": "Tiny", "prompt_style": "instruct"}}
    config["benchmarks"]["synthetic"]["n_questions"] = 4
    config["rollouts"].update(n=4, max_new_tokens=8)
    config["analysis"].update(n_values=[2, 4], n_subsamples=2)
    config["training"].update(max_completion_length=8, val_max_new_tokens=8, val_questions=1)
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


def _run(workdir: Path, *args: str, module: str = "snakemake") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if module == "snakemake":
        args = ("--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
                "--configfile", str(workdir / "config.yaml"), *args)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=2400)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("toy")
    (workdir / "config.yaml").write_text(yaml.safe_dump(toy_config(), sort_keys=False))
    proc = _run(workdir, "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    proc = _run(workdir, "--report", "results/report.html")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir


def _results(report: str) -> dict:
    """The `results` object the report page renders (path -> caption, category, ...)."""
    match = re.search(r"var results = (\{.*?\});\n", report, re.S)
    assert match, "no results in the report"
    return json.loads(match.group(1))


def test_report_covers_all_three_papers_with_captions_and_tables_in_the_page(toy_run):
    page = (toy_run / "results/report.html").read_text(encoding="utf-8")
    results = _results(page)
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", page, re.S).group(1))
    assert {"CoRE paper", "FMV paper", "SC-MoA paper"} <= set(categories)
    # (Figure 5a needs MATH L4/L5 cells, which the toy run does not have.)
    assert {"Table 1", "Figure 2", "Figure 3", "Figure 4", "Figure 5b", "Appendix H"} <= set(categories["CoRE paper"])
    assert {"Figure 2", "Table 1", "Table 2"} <= set(categories["FMV paper"])

    def caption(path: str) -> str:
        entry = results["results/" + path]
        assert entry["caption"], path
        return html.unescape(entry["caption"])

    # Each caption says what is shown and on which model and benchmark (run values via Jinja);
    # tables are rendered in the page (an HTML table in the caption), not only as downloads.
    figure2 = caption("figures/figure2/tiny_synthetic_seed0.png")
    assert "Figure 2" in figure2 and "tiny" in figure2 and "synthetic" in figure2
    for path in ("tables/table1.csv", "tables/figure3_steps_saved.csv", "fmv/tables/table1.csv",
                 "fmv/tables/table2.csv", "scmoa/tiny/synthetic/analysis/accuracy.csv"):
        assert "<table" in caption(path), path
    assert "Appendix H" in caption("analysis/tiny/synthetic/recovery.md") and "<pre" in caption(
        "analysis/tiny/synthetic/recovery.md")
    assert "humaneval" in caption("fmv/figures/humaneval/figure2_left.png")
    accuracy = caption("scmoa/tiny/synthetic/analysis/accuracy.csv")
    n = toy_config()["scmoa"]["n"]  # the run's value reaches the caption
    assert "Table 1" in accuracy and "tiny" in accuracy and "synthetic" in accuracy and f"N={n}" in accuracy
    assert "{{" not in page  # every Jinja placeholder was filled


def test_toy_run_verifies_clean_and_a_changed_byte_is_named(toy_run):
    proc = _run(toy_run, "audit", "verify", "results", "--json", "--snakefile", str(REPO / "Snakefile"),
                "--configfile", "config.yaml", module="concord")
    found = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert found["modified"] == found["missing"] == [] and found["stale"] == {} and found["planned"]
    assert found["untracked"] == [], found["untracked"]  # every output of every rule is registered
    manifest = json.loads((toy_run / "results/manifest.json").read_text())["artifacts"]
    assert all(e["rule"] and e["params"] is not None for e in manifest.values())
    assert any(p.startswith("scmoa/") for p in manifest) and any(p.startswith("fmv/") for p in manifest)
    assert {p for p, e in manifest.items() if e["intermediate"]} == {
        p for p in manifest if p.endswith("/model") and "train/" in p}

    table = toy_run / "results/tables/table1.csv"
    original = table.read_bytes()
    table.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        proc = _run(toy_run, "audit", "verify", "results", "--no-plan", module="concord")
        assert proc.returncode == 4 and "MODIFIED  tables/table1.csv" in proc.stdout, proc.stdout[-3000:]
    finally:
        table.write_bytes(original)
