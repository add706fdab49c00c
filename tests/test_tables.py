"""Tables 1-3 from evaluation JSONs: numbers, layout, formats, errors, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    for (model, bench), arms in grid.items():
        for arm, values in arms.items():
            for seed, value in enumerate(values):
                io.write_json(tables.eval_path(results, model, bench, arm, seed),
                              {"pass_at_1": value / 100.0, "k": 16, "per_question": []})


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    write_grid(root)
    return root


def build(results: Path, name: str = "table9", config=CONFIG) -> pd.DataFrame:
    spec = tables.table_spec(config, name)
    return tables.build_table(tables.summarise(tables.load_eval(tables.table_inputs(config, name, results))), spec)


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
    assert [c for c in table.columns if c.startswith("delta_")] == ["delta_majority", "delta_core"]


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (lambda r: (r / "eval/mistral/aime/core/seed2.json").unlink(), FileNotFoundError, "seed2.json"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"pass_at_1": 1.5}), ValueError, r"\[0, 1\]"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"pass_at_1": "high"}), ValueError, "number"),
        (lambda r: io.write_json(r / "eval/mistral/aime/core/seed2.json", {"k": 16}), ValueError, "pass_at_1"),
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
