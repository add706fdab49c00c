"""The scorecard on a results tree of synthetic table files -- some reproduce the printed numbers,
some miss them, some were run in another setting -- and the real `snakemake scorecard` target
planned and run on a tiny config in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from concord.scorecard import build, core_families, load_printed, output_names, scorecard_inputs
from concord.scorecard.compare import judge, within_spread
from concord.scorecard.fidelity import link_cells, parse_fidelity, rows_for
from concord.scorecard.readers import Reproduced, fmv_row_key, read_produced

REPO = Path(__file__).resolve().parents[1]
ARMS = ("base", "majority", "ec", "cisc", "core")

# The papers' settings, as a workflow config would state them.
PAPER_CONFIG = {
    "run_name": "synthetic",
    "seeds": [0, 1, 2],
    "evaluation": {"k": 16, "temperature": 0.6, "top_p": 0.95},
    "training": {"n_vote": 64, "epochs_by_benchmark": {"aime2024": 80, "amc": 30, "math500": 10, "math_l4": 10,
                                                       "math_l5": 10, "gpqa_diamond": 10}},
    # The paper's hub benchmarks, uncapped: the run's question counts are the paper's.
    "benchmarks": {b: {"source": "hub", "dataset": b}
                   for b in ("amc", "aime2024", "math500", "math_l4", "math_l5", "gpqa_diamond")},
    "fmv": {"models": {"qwen3-4b-instruct-2507": {"label": "Qwen3-4B-Instruct"},
                        "qwen3-4b-thinking-2507": {"label": "Qwen3-4B-Thinking"}},
             "benchmarks": {"lcb_v6": {"source": "livecodebench"}},
             "sampling": {"n": 64, "temperature": 0.6, "top_p": 0.95},
             "ttrl": {"model": "qwen3-4b-instruct-2507"}},
    "scmoa": {"n": 5, "k": 2, "sc_k": 10, "sampling": {"temperature": 0.0}},
}


def _printed(paper: str) -> dict:
    return {c.measure: c for c in load_printed(paper)}


def _core_row(model: str, bench: str, shift: dict | None = None, seeds: int = 3) -> dict:
    """A row of concord's CoRE table CSV with the printed means (plus ``shift`` points per arm)."""
    printed = _printed("core")
    row = {"family": "Math-specialized", "model": model, "benchmark": bench}
    for arm in ARMS:
        cell = printed.get(f"pass_at_1:{model}:{bench}:{arm}")
        mean = (cell.value if cell else 10.0) + (shift or {}).get(arm, 0.0)
        row.update({f"{arm}_mean": mean, f"{arm}_std": (cell.spread or 0.0) if cell else 0.0, f"{arm}_n": seeds})
    for arm in ARMS[1:]:
        row[f"delta_{arm}"] = row[f"{arm}_mean"] - row["base_mean"]
    return row


def _write(path: Path, frame: pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def results(tmp_path) -> tuple[Path, list[Path]]:
    """A results tree whose tables reproduce some printed cells and miss others."""
    root = tmp_path / "results"
    files = []
    # CoRE Table 1: AMC reproduced exactly; MATH-500 with CoRE 5 points low; a SmolLM2 row (another setting).
    files.append(_write(root / "tables/table1.csv", pd.DataFrame([
        _core_row("qwen2.5-math-1.5b", "amc"),
        _core_row("qwen2.5-math-1.5b", "math500", {"core": -5.0}),
        _core_row("smollm2-135m", "synthetic", seeds=1),
        {"family": "", "model": "Mean Δ vs. Base", "benchmark": ""},
    ])))
    # Figure 5a on the paper's 14 cells: 13 wins, the paper's p-values.
    cells = [(m, b) for m in sorted({k.split(":")[1] for k in _printed("core") if k.startswith("pass_at_1:")})
             for b in ("math_l4", "math_l5")]
    (root / "figures").mkdir(parents=True)
    _write(root / "figures/figure5a.csv", pd.DataFrame(cells, columns=["model", "benchmark"]))
    (root / "figures/figure5a.json").write_text(json.dumps(
        {"n_cells": 14, "wins": 13, "losses": 1, "ties": 0, "sign_test_p": 0.0018, "wilcoxon_p": 0.0012}))
    files += [root / "figures/figure5a.json", root / "figures/figure5a.csv"]
    # Figure 3: LLaMA reproduces 70%, DeepSeek saves only 40% (paper 57%).
    files.append(_write(root / "tables/figure3_steps_saved.csv", pd.DataFrame([
        {"model": "llama-3.1-8b-instruct", "benchmark": "amc", "steps_saved_pct": 70.4, "n_seeds": 3},
        {"model": "deepseek-math-7b", "benchmark": "amc", "steps_saved_pct": 40.0, "n_seeds": 3}])))
    # FMV Table 1 (fractions, labels as concord writes them): base within the printed digits (its SE
    # over questions is no difference between runs on the same questions), FMV TTRL outside.
    files.append(_write(root / "fmv/tables/table1.csv", pd.DataFrame([
        {"method": "Base (Qwen3-4B-Instruct)", "train_mean": 0.308, "train_se": 0.03, "holdout_mean": 0.33,
         "holdout_se": 0.03},
        {"method": "with FMV TTRL", "train_mean": 0.25, "train_se": 0.03, "holdout_mean": 0.34, "holdout_se": 0.03},
        {"method": "with Pointwise-FMV TTRL", "train_mean": 0.366, "train_se": 0.03, "holdout_mean": 0.345,
         "holdout_se": 0.03}])))
    files.append(_write(root / "fmv/figures/lcb_v6/figure2_left.csv", pd.DataFrame([
        {"model": "Qwen3-4B-Thinking", "method": "semantic", "n": 64, "accuracy": 0.481, "se": 0.02,
         "n_questions": 100},
        {"model": "Qwen3-4B-Thinking", "method": "gencluster", "n": 64, "accuracy": 0.40, "se": 0.02,
         "n_questions": 100}])))
    # SC-MoA on GPQA-Diamond: 198 questions, Table 1 accuracies, Table 29's flips.
    analysis = root / "scmoa/gpt-oss-120b/gpqa_diamond/analysis"
    acc = [("scmoa", 145), ("sc", 140), ("self_moa", 127), ("cot", 110), ("vote_pre", 138)]
    files.append(_write(analysis / "accuracy.csv", pd.DataFrame(
        [{"method": m, "label": m, "n": 198, "correct": k, "accuracy": k / 198, "ci_lo": 0.0, "ci_hi": 1.0,
          "calls": 1.0} for m, k in acc])))
    files.append(_write(analysis / "significance.csv", pd.DataFrame([
        {"method": "scmoa", "baseline": "sc", "wins": 9, "losses": 4, "mcnemar_p": 0.17, "delta": 5 / 198,
         "ci_lo": -0.01, "ci_hi": 0.06}])))
    # Section 3's 2x2 table (vote vs synthesis over the same pre-refinement proposals), as concord writes it.
    files.append(_write(analysis / "tables29_30_synthesis_vs_vote.csv", pd.DataFrame(
        [["Vote correct", 133, 5, 138], ["Vote wrong", 12, 48, 60], ["Total", 145, 53, 198]],
        columns=["", "Synthesis correct", "Synthesis wrong", "Total"])))
    files.append(_write(analysis / "flips.csv", pd.DataFrame([
        {"n": 198, "beneficial": 10, "harmful": 4, "P_c": 0.7, "mcnemar_p": 0.11}])))
    return root, files


def _verdicts(out: Path, paper: str) -> dict[str, str]:
    frame = pd.read_csv(out / f"{paper}.csv", keep_default_na=False)
    return dict(zip(frame["id"], frame["verdict"]))


def test_synthetic_tree_is_judged_cell_by_cell(results, tmp_path):
    root, files = results
    out = tmp_path / "scorecard"
    written = build(files, root, PAPER_CONFIG, out)
    assert [p.name for p in written] == output_names()
    core = _verdicts(out, "core")
    # Reproduced exactly, missed by 5 points (beyond the 1.5 std), never run.
    assert core["t1.qwen2.5-math-1.5b.amc.core"] == "within"
    assert core["t1.qwen2.5-math-1.5b.amc.delta_core"] == "within"
    assert core["t1.qwen2.5-math-1.5b.math500.core"] == "outside"
    assert core["t1.qwen2.5-math-1.5b.math500.majority"] == "within"
    # Not produced for this model, but the SmolLM2 row computed the same quantity: an analogue.
    assert core["t2.qwen3-8b.amc.core"] == "analogue computed"
    # A Table 1 mean over 2 of its 18 cells is another setting, shown but not judged.
    assert core["t1.mean_delta.core"] == "different setting"
    assert core["fig5a.wins"] == core["fig5a.sign_test_p"] == core["fig5a.wilcoxon_p"] == "within"
    assert core["fig3.llama_amc"] == "within" and core["fig3.deepseek_amc"] == "outside"
    assert core["fig3.qwen15_math500"] == "not run"
    fmv = _verdicts(out, "fmv")
    assert fmv["t1.base.train_mean"] == "within" and fmv["t1.fmv.train_mean"] == "outside"
    assert fmv["t1.fmv_pointwise.train_mean"] == "within" and fmv["t2.base.mean"] == "not run"
    assert fmv["fig2.thinking.semantic"] == "within" and fmv["fig2.thinking.gencluster"] == "outside"
    scmoa = _verdicts(out, "scmoa")
    assert scmoa["t1.gpqa.scmoa"] == scmoa["t1.gpqa.sc"] == scmoa["t1.gpqa.self_moa"] == "within"
    # 55.6 vs the printed 66.7 (no spread printed): beyond 1.96 x the run's binomial SE (3.5 points).
    assert scmoa["t1.gpqa.cot"] == "outside"
    assert scmoa["t1.bbh3.scmoa"] == "not run"
    for cell in ("beneficial", "harmful", "chi2", "p", "advantage", "ratio"):
        assert scmoa[f"t29.{cell}"] == "within", cell
    assert scmoa["t31.gpqa.harmful"] == "different setting"  # Table 31's GPQA is N=4, k=5
    # Table 13's count needs all 12 comparisons: 1 of 12 is another setting.
    assert scmoa["t13.n_significant"] == "different setting"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["papers"]["core"]["within"] == sum(v == "within" for v in core.values())
    assert summary["papers"]["core"]["printed"] == len(load_printed("core"))
    # The SmolLM2 row (5 arms, 4 deltas) and the two overall means the paper does not print (EC, CISC).
    assert summary["papers"]["core"]["unprinted"] == 11

    md = (out / "core.md").read_text()
    # The tolerance: two SEs of 1.5/sqrt(2) (paper and run, 2 df each) and the rounding, t(4.0).
    assert "| Qwen2.5-Math-1.5B / MATH-500 | CoRE (ours) | 77.0 ± 1.5 (std) | 72.00 ± 1.5 (std, 3 seeds) | -5.00 |" \
        " ±4.16 (95%, t(4.0): paper SE 1.06, run SE 1.06, rounding 0.0289) | outside |" in md
    # The SmolLM2 row has no printed counterpart and says why.
    assert "| pass_at_1:smollm2-135m:synthetic:core | 10.00 ± 0.0 (std, 1 seed) | different setting: " \
        "smollm2-135m, synthetic not in the paper |" in md
    assert "| overall_mean_delta:ec | 30.45 | the paper prints no number here |" in md
    html = (out / "core.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and 'class="outside"' in html and "Mean Δ vs. Base" in html


def test_the_default_setting_is_labelled_not_judged(results, tmp_path):
    root, files = results
    config = json.loads(json.dumps(PAPER_CONFIG))
    config["evaluation"]["k"] = 2  # the embedded default's mean@2
    config["scmoa"].update(n=3, k=2)
    out = tmp_path / "scorecard"
    build(files, root, config, out)
    core = pd.read_csv(out / "core.csv", keep_default_na=False).set_index("id")
    row = core.loc["t1.qwen2.5-math-1.5b.amc.core"]
    assert row["verdict"] == "different setting"
    assert "evaluation samples per question (pass@1 as mean@k): 2 (paper: 16)" in row["setting_differences"]
    assert float(row["reproduced"]) == pytest.approx(48.9)  # shown beside the printed value all the same
    scmoa = _verdicts(out, "scmoa")
    assert scmoa["t1.gpqa.scmoa"] == "different setting" and scmoa["t1.gpqa.cot"] == "outside"


def test_spread_rules():
    from concord.scorecard.tolerance import Uncertainty

    cells = {c.id: c for c in load_printed("core")}
    std = cells["t1.qwen2.5-math-1.5b.amc.core"]  # 48.9 ± 0.9 over 3 seeds (ddof 0): SE 0.9/sqrt(2)
    run = Reproduced("core", std.measure, 48.9, "x", setting=dict(std.setting),
                     uncertainty=Uncertainty(0.9 / 2 ** 0.5, 2.0, "seeds"))
    tol = judge(std, run).tolerance
    # Welch: two SEs of 0.636 on 2 df each plus the rounding (0.029): t(~4.0) = 2.78, half-width ~2.5.
    assert 2.3 < tol.half_width < 2.7 and tol.df == pytest.approx(4.0, abs=0.1)
    assert within_spread(std, 48.9 + tol.half_width - 1e-6, run)
    assert not within_spread(std, 48.9 + tol.half_width + 1e-3, run)
    base = cells["t1.qwen2.5-math-1.5b.amc.base"]  # 26.7, no spread: the run's SE alone
    assert within_spread(base, 26.74) and not within_spread(base, 26.76)  # no SE known: the rounding only
    # A run's sampling SE counts on both sides (the paper's single run had the same noise); an SE over
    # questions does not count (a reproduction runs on the paper's questions).
    sampled = Reproduced("core", base.measure, 27.5, "x", uncertainty=Uncertainty(0.5, kind="sampling"))
    assert within_spread(base, 27.5, sampled)
    from concord.scorecard.tolerance import tolerance

    assert tolerance(base, 27.5, sampled.uncertainty).half_width == pytest.approx(1.96 * (2 * 0.25 + 0.1 ** 2 / 12) ** 0.5, rel=1e-3)
    assert not within_spread(base, 27.5, Reproduced("core", base.measure, 27.5, "x", uncertainty=Uncertainty(0.5)))
    wins = cells["fig5a.wins"]
    assert within_spread(wins, 13) and not within_spread(wins, 12)  # no SE known
    scmoa = {c.id: c for c in load_printed("scmoa")}
    # SC-MoA is greedy and cached: a rerun on the same questions gives the same number, so only the
    # printed digits' rounding remains (its Clopper-Pearson CI is question sampling).
    assert within_spread(scmoa["t1.lcb.scmoa"], 62.57) and not within_spread(scmoa["t1.lcb.scmoa"], 62.0)
    assert within_spread(scmoa["t31.bbh.p"], 0.01) and not within_spread(scmoa["t31.bbh.p"], 0.3)
    # A p-value: the significance verdict at 0.05 must agree, and greedy flips must give the digits.
    assert within_spread(scmoa["t29.p"], 0.0896) and not within_spread(scmoa["t29.p"], 0.3)
    assert not within_spread(scmoa["t29.p"], 0.0003) and not within_spread(scmoa["t29.p"], 0.04)
    fmv = {c.id: c for c in load_printed("fmv")}
    assert within_spread(fmv["fig2.instruct.fmv_n32"], 41.0) and not within_spread(fmv["fig2.instruct.fmv_n32"], 39.0)
    nan = Reproduced("core", wins.measure, float("nan"), "x", setting=dict(wins.setting))
    assert judge(wins, nan).verdict == "outside"


FIDELITY = """# Fidelity

## CoRE

| where | paper says | concord does | source |
| --- | --- | --- | --- |
| §4 evaluation | mean@16 at temperature 0.6 | the same | TTRL scripts |
| CISC arm | confidence-weighted vote | softmax over mean log-prob | Taubenfeld et al. |
| GPQA prompt (Table 1) | letter in \\boxed{} | the same, choices shuffled with seed 0 | App. I |

## FMV

| where | paper says | concord does | source |
| --- | --- | --- | --- |
| GenCluster baseline | LLM-judge tournament | round robin of cluster representatives | Samadi et al. |

## Shared core

| where | paper says | concord does | source |
| --- | --- | --- | --- |
| answer equivalence | symbolic | math-verify with a timeout | Math-Verify |
"""


def test_fidelity_rows_link_the_cells_they_concern(results, tmp_path):
    rows = parse_fidelity(FIDELITY)
    assert [r.section for r in rows] == ["CoRE", "CoRE", "CoRE", "FMV", "Shared core"]
    core_rows = rows_for("core", rows)
    assert len(core_rows) == 4
    cells = load_printed("core")
    specific, general = link_cells("core", cells, core_rows)
    cisc = next(r for r in core_rows if r.where == "CISC arm").anchor
    gpqa = next(r for r in core_rows if r.where.startswith("GPQA")).anchor
    assert cisc in specific["t1.qwen2.5-math-1.5b.amc.cisc"] and cisc not in specific["t1.qwen2.5-math-1.5b.amc.core"]
    assert gpqa in specific["t1.qwen2.5-math-1.5b.gpqa_diamond.core"]
    assert gpqa not in specific["t2.qwen3-8b.gpqa_diamond.core"]  # the row names Table 1 only
    assert gpqa not in specific["t1.qwen2.5-math-1.5b.amc.core"]
    assert {r.where for r in general} == {"§4 evaluation", "answer equivalence"}

    root, files = results
    out = tmp_path / "scorecard"
    build(files, root, PAPER_CONFIG, out, fidelity_text=FIDELITY)
    frame = pd.read_csv(out / "core.csv", keep_default_na=False).set_index("id")
    assert frame.loc["t1.qwen2.5-math-1.5b.amc.cisc", "fidelity"] == cisc
    md = (out / "core.md").read_text()
    assert f'<a id="{cisc}"></a>' in md and f"(#{cisc})" in md
    html = (out / "core.html").read_text()
    assert f'<a id="{cisc}"></a>' in html and f'href="#{cisc}"' in html
    fmv = pd.read_csv(out / "fmv.csv", keep_default_na=False).set_index("id")
    assert fmv.loc["fig2.thinking.gencluster", "fidelity"] and not fmv.loc["fig2.thinking.semantic", "fidelity"]


def test_bad_inputs_fail_with_the_problem_named(results, tmp_path):
    root, files = results
    stray = root / "tables/notes.txt"
    stray.write_text("x")
    with pytest.raises(ValueError, match="tables/notes.txt: not a table the scorecard reads"):
        read_produced([stray], root, PAPER_CONFIG)
    broken = _write(root / "tables/table2.csv", pd.DataFrame([{"model": "m", "benchmark": "b", "core_mean": 1.0}]))
    with pytest.raises(ValueError, match="no base_mean column"):
        read_produced([broken], root, PAPER_CONFIG)
    with pytest.raises(FileNotFoundError, match="produced table missing"):
        read_produced([root / "tables/table3.csv"], root, PAPER_CONFIG)
    outside = tmp_path / "elsewhere.csv"
    outside.write_text("a\n1\n")
    with pytest.raises(ValueError, match="not inside the results tree"):
        read_produced([outside], root, PAPER_CONFIG)


def test_inputs_are_picked_from_the_workflow_targets():
    targets = ["results/tables/table1.csv", "results/tables/table1.md", "results/figures/figure5a.png",
               "results/figures/figure5a.json", "results/fmv/figures/humaneval/figure2_left.png",
               "results/scmoa/m/b/analysis/accuracy.md", "results/scmoa/m/b/analysis/transition.csv",
               "results/tables/figure3_steps_saved_curves.csv", "results/data/synthetic.jsonl"]
    assert scorecard_inputs(targets, "results") == [
        "results/tables/table1.csv", "results/figures/figure5a.csv", "results/figures/figure5a.json",
        "results/fmv/figures/humaneval/figure2_left.csv", "results/scmoa/m/b/analysis/accuracy.csv"]


def test_fmv_rows_are_told_apart_by_their_labels():
    assert fmv_row_key("Base (Qwen3-4B-Instruct)") == "base"
    assert fmv_row_key("with FMV TTRL") == "fmv"
    assert fmv_row_key("with Pointwise-FMV TTRL") == "fmv_pointwise"
    assert fmv_row_key("with Joint (N=128)") == "fmv_n128"
    assert fmv_row_key("+ Pointwise ($N=32$)") == "fmv_pointwise_n32"


def test_core_families_are_the_papers_tables():
    families = core_families(load_printed("core"))
    assert {k: len(v) for k, v in families.items()} == {"table1": 18, "table2": 12, "table3": 12}


# ------------------------------------------------------------------ the real Snakemake target


def _tiny_config(results: str = "results") -> dict:
    return {
        "run_name": "tiny",
        "results_dir": results,
        "models": {"tiny": {"source": "tiny-random", "family": "Tiny", "prompt_style": "instruct"}},
        "benchmarks": {"synthetic": {"source": "synthetic", "task": "math", "n_questions": 4, "seed": 0}},
        "arms": ["majority", "ec", "cisc", "core"],
        "seeds": [0],
        "engine": {"backend": "hf", "dtype": "float32", "batch_size": 16},
        "rollouts": {"n": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12, "chunk_questions": 1},
        "consensus": {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200},
        "analysis": {"n_values": [2, 4], "n_subsamples": 3},
        "report": {"fig5a_benchmarks": ["synthetic"]},
    }


def _snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    cfg = workdir / "config.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(cfg), "--cores", "1", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_snakemake_scorecard_is_planned_and_run_on_a_tiny_config(tmp_path):
    config = _tiny_config()
    plan = _snakemake(tmp_path, config, "-n", "scorecard")
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    log = plan.stdout + plan.stderr
    # The scorecard waits for the tables the config produces.
    for job in ("scorecard", "table1", "figure5a", "figure3"):
        assert f"rule {job}:" in log or f"localrule {job}:" in log, job

    # Run the target itself on produced tables put in place (every upstream rule is real and
    # tested elsewhere; here only the scorecard may run).
    root = tmp_path / "results"
    _write(root / "tables/table1.csv", pd.DataFrame([_core_row("tiny", "synthetic", seeds=1)]))
    _write(root / "figures/figure5a.csv", pd.DataFrame([{"model": "tiny", "benchmark": "synthetic"}]))
    (root / "figures/figure5a.json").write_text(json.dumps(
        {"n_cells": 1, "wins": 1, "losses": 0, "sign_test_p": 1.0, "wilcoxon_p": 1.0}))
    (root / "analysis/tiny/synthetic").mkdir(parents=True)
    (root / "analysis/tiny/synthetic/recovery.json").write_text(json.dumps(
        {"n_questions": 1, "recovered": 0, "confidence_gap_nats": 0.1, "tau": 0.25, "n_questions_total": 4,
         "majority_wrong": 2, "recovered_total": 1, "regressions": 0, "net": 1, "recovered_confidence_gap_nats": 0.2,
         "recovered_reward_gap": 0.1, "mean_gate_recovered": 0.5}))
    _write(root / "tables/figure3_steps_saved.csv", pd.DataFrame(
        [{"model": "tiny", "benchmark": "synthetic", "steps_saved_pct": float("nan"), "n_seeds": 1}]))
    for name, frame in {
        "fmv/tables/table1.csv": [{"method": "Base (tiny)", "train_mean": 0.0, "train_se": 0.0, "holdout_mean": 0.0,
                                    "holdout_se": 0.0}],
        "fmv/tables/table2.csv": [{"method": "Base (tiny)", "mean": 0.0, "mean_se": 0.0, "fmv": 0.0, "fmv_se": 0.0,
                                    "best": 0.0, "best_se": 0.0}],
        "fmv/figures/humaneval/figure2_left.csv": [{"model": "tiny", "method": "fmv", "n": 4, "accuracy": 0.25,
                                                     "se": 0.1}],
        # the right panel repeats the left one's N (here with another value, as subsampling may)
        "fmv/figures/humaneval/figure2_right.csv": [{"model": "tiny", "method": "fmv", "n": 4, "accuracy": 0.3,
                                                      "se": 0.1}],
    }.items():
        _write(root / name, pd.DataFrame(frame))
    run = _snakemake(tmp_path, config, "scorecard", "--allowed-rules", "scorecard")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = root / "scorecard"
    assert sorted(p.name for p in out.iterdir()) == sorted(output_names())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["run_name"] == "tiny"
    core = pd.read_csv(out / "core.csv", keep_default_na=False)
    # Nothing of the paper ran, but its quantities were computed for the tiny model: analogues.
    # Figure 5a's numbers stand beside the paper's, labelled.
    cells = core[core["id"].str.startswith("t1.") & core["measure"].str.match(r"(pass_at_1|delta):")]
    assert set(cells["verdict"]) == {"analogue computed"}
    assert set(core.loc[core["id"].str.startswith("appH."), "verdict"]) == {"analogue computed"}
    assert set(core.loc[core["id"].str.startswith("fig5a."), "verdict"]) == {"different setting"}
    md = (out / "core.md").read_text()
    assert "This run is not the paper's setting" in md and "pass_at_1:tiny:synthetic:core" in md
    fmv_md = (out / "fmv.md").read_text()
    assert "| figure2:accuracy:tiny:humaneval:fmv:4 | 25.00 ± 10.0 (bootstrap SE) |" in fmv_md
    assert "fmv/figures/humaneval/figure2_right.csv gives 30" in fmv_md
    sidecars = list((root / ".manifest").rglob("*.json")) if (root / ".manifest").is_dir() else []
    assert any("scorecard" in p.as_posix() for p in sidecars), "the outputs are registered in the manifest"


def test_the_real_core_writers_feed_the_scorecard(tmp_path):
    """concord's own Table and Figure 5a commands, on evaluation files whose seeds reproduce the
    printed MATH-L4/L5 cells (mean and population std over 3 seeds), give 'within' throughout."""
    printed = _printed("core")
    cells = sorted({(k.split(":")[1], k.split(":")[2]) for k in printed if k.startswith("pass_at_1:")
                    and k.split(":")[2] in ("math_l4", "math_l5")})
    root = tmp_path / "results"
    for model, bench in cells:
        for arm in ("base", "cisc", "core"):
            cell = printed[f"pass_at_1:{model}:{bench}:{arm}"]
            # Three seeds m - s*sqrt(3/2), m, m + s*sqrt(3/2): mean m, population std s (the paper's ddof=0).
            step = (cell.spread or 0.0) * 1.5 ** 0.5
            for seed, value in enumerate((cell.value - step, cell.value, cell.value + step)):
                path = root / f"eval/{model}/{bench}/{arm}/seed{seed}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                n = round(value / 100 * 10**6)  # one question whose accuracy is the printed value
                path.write_text(json.dumps({"pass_at_1": n / 10**6, "k": 10**6,
                                            "n_questions": {"math_l4": 128, "math_l5": 134}[bench],
                                            "per_question": [{"id": "q0", "n_correct": n, "k": 10**6}]}))
    models = sorted({m for m, _ in cells})
    config = {**PAPER_CONFIG, "models": {m: {"family": "F"} for m in models},
              "benchmarks": {"math_l4": {}, "math_l5": {}}, "arms": ["cisc", "core"], "seeds": [0, 1, 2],
              "report": {"tables": {"table1": models}, "fig5a_benchmarks": ["math_l4", "math_l5"], "std_ddof": 0}}
    env = {**os.environ, "CONCORD_RESULTS_DIR": str(root)}
    for command in (["table", "--table", "table1"], ["figure", "--figure", "figure5a"]):
        proc = subprocess.run([sys.executable, "-m", "concord", *command, "--results", str(root),
                               "--config-json", json.dumps(config)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    files = [root / "tables/table1.csv", root / "figures/figure5a.json", root / "figures/figure5a.csv"]
    out = tmp_path / "scorecard"
    build(files, root, config, out)
    verdicts = _verdicts(out, "core")
    judged = {k: v for k, v in verdicts.items() if k.startswith("t") and (".math_l4." in k or ".math_l5." in k)
              and k.split(".")[-1] in ("base", "cisc", "core", "delta_cisc", "delta_core")}
    assert len(judged) == 14 * 5 and set(judged.values()) == {"within"}, \
        {k: v for k, v in judged.items() if v != "within"}
    for key in ("fig5a.wins", "fig5a.n_cells", "fig5a.sign_test_p", "fig5a.wilcoxon_p"):
        assert verdicts[key] == "within", key


def test_the_printed_tables_reproduce_themselves_and_expose_the_texts_anomalies(tmp_path):
    """Tables 1-3 written exactly as printed (means, stds, Δs, 3 seeds): every table cell is
    'within'; the text's own inconsistent +25.0 against Table 1's +21.6 is 'outside'. CoRE − CISC
    +1.2 / +1.5 where the printed tables give +1.14 / +1.42 lie within the SE the cells' stds give."""
    printed = load_printed("core")
    by_measure = {c.measure: c for c in printed}
    root = tmp_path / "results"
    for table, cells in core_families(printed).items():
        rows = []
        for model, bench in sorted(cells):
            row = _core_row(model, bench)
            for arm in ARMS[1:]:
                row[f"delta_{arm}"] = by_measure[f"delta:{model}:{bench}:{arm}"].value
            rows.append(row)
        _write(root / f"tables/{table}.csv", pd.DataFrame(rows))
    out = tmp_path / "scorecard"
    build(sorted((root / "tables").glob("table*.csv")), root, PAPER_CONFIG, out)
    verdicts = _verdicts(out, "core")
    tables = {k: v for k, v in verdicts.items() if k.startswith(("t1.", "t2.", "t3."))}
    assert len(tables) == 42 * 9 + 3 * 4 and set(tables.values()) == {"within"}
    outside = {k for k, v in verdicts.items() if v == "outside"}
    assert outside == {"s5.table1_mean_delta_core"}
    assert verdicts["abstract.overall_mean_delta_core"] == verdicts["s6.core_minus_cisc.table1"] == "within"


def test_a_run_outside_the_papers_setting_says_so_on_every_page(tmp_path):
    """Only analogues (a tiny model on the synthetic benchmark): the summary carries the banner the
    paper pages carry, and the printed cells say "analogue computed", naming the analogue."""
    root = tmp_path / "results"
    table = _write(root / "tables/table1.csv", pd.DataFrame([_core_row("tiny", "synthetic", seeds=1)]))
    out = tmp_path / "scorecard"
    build([table], root, PAPER_CONFIG, out)
    for page in ("summary.md", "summary.html", "core.md", "core.html"):
        assert "This run is not the paper" in (out / page).read_text(), page  # (HTML escapes the ')
    core = pd.read_csv(out / "core.csv", keep_default_na=False).set_index("id")
    row = core.loc["t1.qwen2.5-math-1.5b.amc.core"]
    assert row["verdict"] == "analogue computed" and row["analogues"] == "pass_at_1:tiny:synthetic:core"
    assert core.loc["fig5a.wins", "verdict"] == "not run"  # nothing like it was computed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["papers"]["core"]["analogue computed"] > 0 and summary["papers"]["core"]["compared"] == 0
