"""The whole workflow, once, at toy scale (a tiny random model, a few questions, one training step;
the session's ``toy_tree``): the HTML report covers the three papers with captions and tables in
the page, and the results tree it leaves verifies clean -- then a changed byte (in a copy of the
tree) is caught by name."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from support.snakemake import job_env
from support.toy import toy_config

pytestmark = pytest.mark.slow


def _concord(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concord", *args], cwd=workdir, env=job_env(), capture_output=True,
                          text=True, timeout=2400)


def _results(report: str) -> dict:
    """The `results` object the report page renders (path -> caption, category, ...)."""
    match = re.search(r"var results = (\{.*?\});\n", report, re.S)
    assert match, "no results in the report"
    return json.loads(match.group(1))


def test_report_covers_all_three_papers_with_captions_and_tables_in_the_page(toy_tree):
    page = (toy_tree / "results/report.html").read_text(encoding="utf-8")
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


def test_toy_run_verifies_clean_and_a_changed_byte_is_named(toy_tree, toy_tree_copy):
    proc = _concord(toy_tree, "audit", "verify", "results", "--json", "--snakefile", str(REPO / "Snakefile"),
                    "--configfile", "config.yaml")
    found = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert found["modified"] == found["missing"] == [] and found["stale"] == {} and found["planned"]
    assert found["untracked"] == [], found["untracked"]  # every output of every rule is registered
    manifest = json.loads((toy_tree / "results/manifest.json").read_text())["artifacts"]
    assert all(e["rule"] and e["params"] is not None for e in manifest.values())
    assert any(p.startswith("scmoa/") for p in manifest) and any(p.startswith("fmv/") for p in manifest)
    assert {p for p, e in manifest.items() if e["intermediate"]} == {
        p for p in manifest if p.endswith("/model") and "train/" in p}

    table = toy_tree_copy / "results/tables/table1.csv"
    original = table.read_bytes()
    table.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    proc = _concord(toy_tree_copy, "audit", "verify", "results", "--no-plan")
    assert proc.returncode == 4 and "MODIFIED  tables/table1.csv" in proc.stdout, proc.stdout[-3000:]
