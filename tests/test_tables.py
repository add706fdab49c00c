"""Tables 1-3 from evaluation JSONs: numbers, layout, formats, errors, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from concord import io
from concord.papers.core import tables

REPO = Path(__file__).resolve().parents[1]

# Paper Table 1 rows (per-seed values chosen so mean/std match the printed cells).
PAPER = {
    # (model, benchmark): {arm: [seed values in %]}
    ("qwen-math-1.5b", "aime"): {
        "base": [5.6, 5.6, 5.6],
        "majority": [13.3, 20.0, 26.7],  # 20.0 +/- 5.5, as printed (population std)
        "ec": [13.3, 23.3, 20.0],  # 18.9 +/- 4.2
        "cisc": [16.7, 16.7, 20.0],
        "core": [13.3, 23.3, 20.0],
    },
    ("qwen-math-1.5b", "math_l4"): {
        "base": [31.5, 31.5, 31.5],
        "majority": [60.9, 60.9, 60.9],
        "ec": [61.5, 61.5, 61.5],
        "cisc": [62.8, 62.8, 62.8],
        "core": [65.9, 65.9, 65.9],
    },
    ("mistral", "aime"): {
        "base": [0.7, 0.7, 0.7],
        "majority": [0.0, 3.3333, 3.3333],  # 2.2 +/- 1.6: the paper's population std
        "ec": [0.0, 0.0, 3.3333],
        "cisc": [0.0, 0.0, 0.0],
        "core": [0.0, 0.0, 0.0],
    },
    ("mistral", "math_l4"): {
        "base": [36.1, 36.1, 36.1],
        "majority": [54.4, 54.4, 54.4],
        "ec": [52.6, 52.6, 52.6],
        "cisc": [54.7, 54.7, 54.7],
        "core": [55.7, 55.7, 55.7],
    },
}

CONFIG = {
    "models": {
        "qwen-math-1.5b": {"source": "hub", "family": "Math-specialized"},
        "mistral": {"source": "hub", "family": "Instruct"},
    },
    "benchmarks": {"aime": {"source": "synthetic"}, "math_l4": {"source": "synthetic"}},
    "arms": ["majority", "ec", "cisc", "core"],
    "seeds": [0, 1, 2],
    "report": {
        "tables": {"table1": ["qwen-math-1.5b"], "table3": ["mistral"], "table9": ["qwen-math-1.5b", "mistral"]},
        "labels": {"qwen-math-1.5b": "Qwen2.5-Math-1.5B", "math_l4": "MATH-L4", "aime": "AIME"},
    },
}


def write_grid(results: Path, grid=PAPER) -> None:
    """One evaluation file per cell whose single question's accuracy is the printed value."""
    for (model, bench), arms in grid.items():
        for arm, values in arms.items():
            for seed, value in enumerate(values):
                k = 1_000_000
                n_correct = round(value / 100.0 * k)
                io.write_json(tables.eval_path(results, model, bench, arm, seed),
                              {"pass_at_1": n_correct / k, "k": k,
                               "per_question": [{"id": "q0", "n_correct": n_correct, "k": k, "answers": []}]})


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    write_grid(root)
    return root


def build(results: Path, name: str = "table9", config=CONFIG) -> pd.DataFrame:
    spec = tables.table_spec(config, name)
    frame = tables.load_eval(tables.table_inputs(config, name, results))
    return tables.build_table(tables.summarise(frame), spec, tables.compare_to_base(frame, spec, n_resamples=200))


def test_means_stds_and_deltas_match_the_paper(results):
    table = build(results).set_index(["model", "benchmark"])
    row = table.loc[("mistral", "aime")]
    assert round(row["majority_mean"], 1) == 2.2
    assert round(row["majority_std"], 1) == 1.6  # population std over seeds, as printed
    assert row["delta_majority"] == pytest.approx(2.2222 - 0.7, abs=1e-3)
    assert row["best"] == "majority"  # the paper bolds Majority's +1.5 here
    row = table.loc[("qwen-math-1.5b", "aime")]
    assert round(row["ec_mean"], 1) == 18.9 and round(row["ec_std"], 1) == 4.2
    assert row["best"] == "majority"  # +14.4 bold in the paper
    assert table.loc[("qwen-math-1.5b", "math_l4"), "delta_core"] == pytest.approx(34.4)
    assert table.loc[("qwen-math-1.5b", "math_l4"), "best"] == "core"


def test_mean_delta_row_is_the_mean_over_rows_and_marks_the_best(results):
    table = build(results)
    body, mean = table.iloc[:-1], table.iloc[-1]
    assert mean["model"] == tables.MEAN_ROW_LABEL
    for arm in ("majority", "ec", "cisc", "core"):
        assert mean[f"delta_{arm}"] == pytest.approx(body[f"delta_{arm}"].mean())
    deltas = {arm: mean[f"delta_{arm}"] for arm in ("majority", "ec", "cisc", "core")}
    assert mean["best"] == max(deltas, key=deltas.get)


def test_rows_follow_config_order_and_family(results):
    table = build(results)
    assert list(zip(table["model"], table["benchmark"]))[:-1] == [
        ("qwen-math-1.5b", "aime"), ("qwen-math-1.5b", "math_l4"), ("mistral", "aime"), ("mistral", "math_l4"),
    ]
    assert list(table["family"])[:-1] == ["Math-specialized"] * 2 + ["Instruct"] * 2
    only = build(results, "table3")
    assert set(only["model"]) == {"mistral", tables.MEAN_ROW_LABEL}


def test_ties_are_all_marked_and_near_ties_are_not(tmp_path):
    grid = {("qwen-math-1.5b", "aime"): {
        "base": [10.0] * 3, "majority": [30.0] * 3, "ec": [30.0] * 3, "cisc": [29.0] * 3, "core": [29.999] * 3,
    }}
    write_grid(tmp_path / "r", grid)
    config = {**CONFIG, "benchmarks": {"aime": {}}}
    table = build(tmp_path / "r", "table1", config)
    assert table.iloc[0]["best"] == "majority|ec"  # 29.999 rounds to 30.0 but is not best
    md = tables.to_markdown(table, tables.table_spec(config, "table1"))
    body_line = md.splitlines()[2]
    assert body_line.count("**") == 4 and "**+20.0**" in body_line and "+20.0 " in body_line


def test_markdown_and_latex_layout(results):
    spec = tables.table_spec(CONFIG, "table9")
    table = build(results)
    md = tables.to_markdown(table, spec)
    lines = md.strip().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["Family", "Model", "Benchmark", "Base", "Majority", "EC", "CISC", "CoRE",
                      "Δ Majority", "Δ EC", "Δ CISC", "Δ CoRE"]
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    assert first[:5] == ["Math-specialized", "Qwen2.5-Math-1.5B", "AIME", "5.6 ± 0.0", "20.0 ± 5.5"]
    second = [c.strip() for c in lines[3].strip("|").split("|")]
    assert second[:3] == ["", "", "MATH-L4"]  # family and model only on their first row
    assert lines[-1].startswith("|") and tables.MEAN_ROW_LABEL in lines[-1]
    # One best mark per row (no ties in this grid): 4 rows + the mean row.
    assert md.count("**") == 2 * 5

    tex = tables.to_latex(table, spec, caption="A caption with 50% & an_underscore")
    assert tex.count("\\mathbf{") == 5
    assert "\\begin{tabular}{lllrrrrrrrrr}" in tex
    assert "qwen-math-1.5b" not in tex and "Qwen2.5-Math-1.5B" in tex
    assert "mistral" in tex  # unlabelled keys print as-is
    assert "50\\% \\& an\\_underscore" in tex
    assert tex.count("\\midrule") == 2  # under the header and above the Mean-Delta row
    assert "$\\pm$" in tex and "±" not in tex


def test_single_seed_prints_no_spread(tmp_path):
    grid = {("mistral", "aime"): {arm: [v] for arm, v in
                                  {"base": 1.0, "majority": 2.0, "ec": 3.0, "cisc": 4.0, "core": 5.0}.items()}}
    write_grid(tmp_path / "r", grid)
    config = {**CONFIG, "benchmarks": {"aime": {}}, "seeds": [0]}
    table = build(tmp_path / "r", "table3", config)
    md = tables.to_markdown(table, tables.table_spec(config, "table3"))
    assert "±" not in md and "| 5.0 " in md


def test_write_table_is_deterministic_and_csv_is_numeric(results, tmp_path):
    config = {**CONFIG}
    first = tables.make_table(config, "table9", results, tmp_path / "a" / "table9")
    second = tables.make_table(config, "table9", results, tmp_path / "b" / "table9")
    assert [p.suffix for p in first] == [".csv", ".md", ".tex"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()
    frame = pd.read_csv(first[0])
    assert frame["core_mean"].dtype.kind == "f" and frame["core_n"].iloc[0] == 3
    assert frame["model"].iloc[-1] == tables.MEAN_ROW_LABEL


def test_subset_of_arms(tmp_path):
    grid = {("mistral", "aime"): {"base": [1.0], "majority": [2.0], "core": [5.0]}}
    write_grid(tmp_path / "r", grid)
    config = {**CONFIG, "benchmarks": {"aime": {}}, "seeds": [0], "arms": ["core", "majority"]}
    table = build(tmp_path / "r", "table3", config)
    assert [c for c in table.columns if c.startswith("delta_") and not c.endswith(("_lo", "_hi"))] == [
        "delta_majority", "delta_core"]


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (lambda r: (r / "eval/mistral/aime/core/seed2.json").unlink(), FileNotFoundError, "seed2.json"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"pass_at_1": 1.5}), ValueError, r"\[0, 1\]"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"pass_at_1": "high"}), ValueError, "number"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"k": 16}), ValueError, "pass_at_1"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"pass_at_1": 0.5, "per_question": []}),
         ValueError, "per_question"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {
            "pass_at_1": 0.5, "per_question": [{"id": "q0", "n_correct": 1, "k": 4}]}), ValueError, "not the mean"),
    ],
)
def test_bad_evaluation_files_are_named(results, mutate, error, message):
    mutate(results)
    with pytest.raises(error, match=message):
        build(results)


def test_missing_cells_and_bad_config_are_named(results):
    spec = tables.table_spec(CONFIG, "table9")
    summary = tables.summarise(tables.load_eval(tables.table_inputs(CONFIG, "table9", results)))
    with pytest.raises(ValueError, match="mistral/math_l4/ec"):
        tables.build_table(summary.drop(index=("mistral", "math_l4", "ec")), spec)
    with pytest.raises(KeyError, match="no table 'table2'"):
        tables.table_spec(CONFIG, "table2")
    bad = {**CONFIG, "report": {"tables": {"table1": ["nope"]}}}
    with pytest.raises(ValueError, match="nope"):
        tables.table_spec(bad, "table1")
    with pytest.raises(ValueError, match="look like 'table1'"):
        tables.report_section({**CONFIG, "report": {"tables": {"main": ["mistral"]}}})
    with pytest.raises(ValueError, match="unknown arm"):
        tables.parse_eval_path("results/eval/m/b/grpo/seed0.json")
    with pytest.raises(ValueError, match="not an evaluation file"):
        tables.parse_eval_path("results/eval/m/b/core/0.json")


def test_default_report_section_puts_every_model_in_table1():
    config = {k: v for k, v in CONFIG.items() if k != "report"}
    report = tables.report_section(config)
    assert report["tables"] == {"table1": ["qwen-math-1.5b", "mistral"]}
    assert report["fig5a_benchmarks"] == ["math_l4", "math_l5"] and report["std_ddof"] == 0


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "concord", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_builds_a_table_from_a_validated_config_file(tmp_path):
    write_grid(tmp_path / "results")
    config = {**CONFIG, "engine": {}, "rollouts": {}, "consensus": {}}
    config["models"] = {k: {"source": "tiny-random", "family": v["family"]} for k, v in CONFIG["models"].items()}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proc = _cli("table", "--table", "table3", "--config", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "results/tables/table3.md").read_text()
    assert md.startswith("**Table 3.** Instruct.")
    # Registration in the manifest is the rule's job (audited(...)), not the command's.
    assert not (tmp_path / "results/.manifest").exists()

    proc = _cli("table", "--table", "table2", "--config-json", json.dumps(CONFIG), cwd=tmp_path)
    assert proc.returncode != 0 and "no table 'table2'" in proc.stderr


def test_no_bold_when_every_arm_ties_and_one_seed_caption_has_no_spread(tmp_path):
    grid = {("mistral", "aime"): {arm: [20.0] for arm in ("majority", "ec", "cisc", "core")} | {"base": [10.0]}}
    write_grid(tmp_path / "r", grid)
    config = {**CONFIG, "benchmarks": {"aime": {}}, "seeds": [0]}
    written = tables.make_table(config, "table3", tmp_path / "r", tmp_path / "out" / "table3")
    table = pd.read_csv(written[0], keep_default_na=False)
    assert list(table["best"]) == ["", ""]  # the cell row and the Mean-Delta row
    md, tex = written[1].read_text(), written[2].read_text()
    assert "**+" not in md and "\\mathbf" not in tex
    assert "one seed" in md and "±" not in md and "\\pm" not in tex


# ------------------------------------------------------------------ controls: paired tests, zero-update, identical models
def _write_cell(results: Path, model: str, bench: str, arm: str, seed: int, correct: list[int], k: int = 4,
                answers: list[list[str]] | None = None, sha: str | None = None) -> None:
    per_question = [{"id": f"q{i}", "n_correct": c, "k": k, "answers": (answers or [[str(c)] * k] * len(correct))[i]}
                    for i, c in enumerate(correct)]
    io.write_json(tables.eval_path(results, model, bench, arm, seed), {
        "pass_at_1": sum(c / k for c in correct) / len(correct), "k": k, "per_question": per_question,
        "provenance": {"model_sha256": sha}})


CONTROL_CONFIG = {**CONFIG, "benchmarks": {"aime": {}}, "seeds": [0, 1],
                  "arms": ["majority", "cisc", "core", "zero_update"]}
BASE = [0, 1, 2, 0, 4, 1, 0, 3, 2, 1, 0, 2, 1, 0, 4, 2, 1, 3, 0, 1]


def _control_grid(results: Path, zero_differs: bool = False) -> None:
    for seed in (0, 1):
        _write_cell(results, "mistral", "aime", "base", seed, BASE)
        zero = list(BASE) if not zero_differs else [min(4, c + 1) for c in BASE]
        _write_cell(results, "mistral", "aime", "zero_update", seed, zero, sha=f"zero{seed}")
        # Majority and CISC trained one model (same weights hash in every seed); CoRE its own.
        _write_cell(results, "mistral", "aime", "majority", seed, [min(4, c + 1) for c in BASE], sha=f"same{seed}")
        _write_cell(results, "mistral", "aime", "cisc", seed, [min(4, c + 1) for c in BASE], sha=f"same{seed}")
        _write_cell(results, "mistral", "aime", "core", seed, [min(4, c + (i % 2)) for i, c in enumerate(BASE)],
                    sha=f"core{seed}")


def test_every_delta_carries_its_paired_interval_and_p_value(tmp_path):
    from concord import stats

    _control_grid(tmp_path / "r")
    written = tables.make_table(CONTROL_CONFIG, "table3", tmp_path / "r", tmp_path / "out" / "table3")
    table = pd.read_csv(written[0], keep_default_na=False)
    row = table.iloc[0]
    # The interval resamples questions and seeds of the (questions x seeds) differences, in points;
    # both seeds here give the same answers, so it is the question bootstrap (scipy's, up to its
    # resampling noise).
    diffs = [25.0 * (min(4, c + (i % 2)) - c) for i, c in enumerate(BASE)]
    _, lo, hi = stats.bootstrap_questions_and_seeds([np.column_stack([diffs, diffs])], n_resamples=2000, seed=0)
    _, lo_q, hi_q = stats.paired_bootstrap(diffs, [0.0] * len(diffs), n_resamples=2000, seed=0)
    assert (lo, hi) == pytest.approx((lo_q, hi_q), abs=2.5)
    row = {k: (float(v) if k.startswith(("delta_", "p_")) else v) for k, v in row.items()}  # the mean row blanks p
    assert (row["delta_core_lo"], row["delta_core_hi"]) == pytest.approx((lo, hi), abs=1e-6)
    assert row["delta_core_lo"] <= row["delta_core"] <= row["delta_core_hi"]
    assert row["p_core"] == pytest.approx(stats.sign_flip_test(diffs, n_resamples=2000, seed=0), abs=1e-6)
    assert row["p_majority"] < 0.01 and row["p_core"] < 0.05  # both are real differences
    # The zero-update control: Δ exactly 0, interval [0, 0], p = 1; never "best".
    assert (row["delta_zero_update"], row["delta_zero_update_lo"], row["delta_zero_update_hi"]) == (0.0, 0.0, 0.0)
    assert row["p_zero_update"] == 1.0 and "zero_update" not in row["best"]
    md, tex = written[1].read_text(), written[2].read_text()
    assert f"[{lo:+.1f}, {hi:+.1f}]" in md and "\\scriptsize" in tex
    header = [c.strip() for c in md.split("\n\n", 1)[1].splitlines()[0].strip("|").split("|")]
    assert header[3:5] == ["Base", "Zero-update"] and "Δ Zero-update" in header
    # The Mean-Delta row has its own (stratified) interval; with one cell it is the cell's.
    mean = table.iloc[-1]
    assert (float(mean["delta_core_lo"]), float(mean["delta_core_hi"])) == pytest.approx((lo, hi), abs=1e-6)


def test_zero_update_reproducing_base_and_identical_models_are_stated(tmp_path):
    _control_grid(tmp_path / "r")
    written = tables.make_table(CONTROL_CONFIG, "table3", tmp_path / "r", tmp_path / "out" / "table3")
    table = pd.read_csv(written[0], keep_default_na=False)
    assert table.iloc[0]["zero_update_equals_base"] in (True, "True")
    assert table.iloc[0]["same_model_cisc"] == "majority" and table.iloc[0]["same_model_core"] == ""
    md = written[1].read_text()
    assert "reproduces Base exactly" in md
    assert "CISC (≡ Majority) trained the same weights as Majority" in md and "(≡ Majority)" in md.split("\n\n", 1)[1]
    assert "$\\equiv$" in written[2].read_text()

    _control_grid(tmp_path / "bad", zero_differs=True)
    written = tables.make_table(CONTROL_CONFIG, "table3", tmp_path / "bad", tmp_path / "out2" / "table3")
    assert "Zero-update DIFFERS from Base on mistral/AIME" in written[1].read_text()  # unlabelled keys as-is
    assert pd.read_csv(written[0], keep_default_na=False).iloc[0]["zero_update_equals_base"] in (False, "False")


def test_an_arm_evaluated_on_other_questions_than_base_is_refused(tmp_path):
    _control_grid(tmp_path / "r")
    _write_cell(tmp_path / "r", "mistral", "aime", "core", 1, BASE[:-1])
    with pytest.raises(ValueError, match="different questions|other questions"):
        tables.make_table(CONTROL_CONFIG, "table3", tmp_path / "r", tmp_path / "out" / "table3")
