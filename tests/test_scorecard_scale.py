"""The setting a number is judged in includes its scale: a paper-scale CoRE tree (config/paper.yaml,
tables and Appendix H laid out as rules/core/*.smk write them) is judged cell by cell, and the same
tree on fewer questions, fewer seeds or a capped training is a "different setting" that names the
difference."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from concord.scorecard import build, core_families, load_printed
from concord.scorecard.compare import setting_differences

REPO = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())
ARMS = ("base", "majority", "ec", "cisc", "core")
PRINTED = {c.measure: c for c in load_printed("core")}


def _tables(root: Path, seeds: int = 3) -> list[Path]:
    """Tables 1-3 as concord's table writer lays them out, with the printed means and stds."""
    paths = []
    for table, cells in core_families(PRINTED.values()).items():
        rows = []
        for model, bench in sorted(cells):
            row = {"family": "F", "model": model, "benchmark": bench}
            for arm in ARMS:
                cell = PRINTED[f"pass_at_1:{model}:{bench}:{arm}"]
                row.update({f"{arm}_mean": cell.value, f"{arm}_std": cell.spread or 0.0, f"{arm}_n": seeds})
            for arm in ARMS[1:]:
                row[f"delta_{arm}"] = PRINTED[f"delta:{model}:{bench}:{arm}"].value
            rows.append(row)
        rows.append({"family": "", "model": "Mean Δ vs. Base", "benchmark": ""})
        path = root / f"tables/{table}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        paths.append(path)
    return paths


def _recovery(root: Path) -> Path:
    """Appendix H's summary as rule recovery writes it (analysis/{model}/{benchmark}/recovery.json)."""
    out = root / "analysis/qwen2.5-math-7b/math_l4"
    out.mkdir(parents=True)
    (out / "recovery.json").write_text(json.dumps({
        "n_questions": 20, "recovered": 8, "outnumbering_ratio": 2.5, "coherence_advantage": 1.2,
        "confidence_gap_nats": 0.31, "tau": 0.25, "n_questions_total": 128, "majority_accuracy": 0.73,
        "majority_wrong": 35, "recovered_total": 10, "regressions": 4, "net": 6, "recovered_confidence_gap_nats": 0.78,
        "recovered_reward_gap": 0.89, "mean_gate_recovered": 0.42, "mean_gate_all_questions": 0.6}))
    rows = [{"question_id": i, "majority_correct": False, "core_correct": True, "cisc_correct": False,
             "ec_correct": False, "core_gate": 0.42 + d, "confidence_gap": 0.78 + d, "reward_gap": 0.89 + d}
            for i, d in enumerate([-0.1, 0.1] * 5)]
    pd.DataFrame(rows).to_csv(out / "recovery_questions.csv", index=False)
    return out / "recovery.json"


def _verdicts(tmp_path: Path, config: dict, seeds: int = 3, questions: dict | None = None) -> pd.DataFrame:
    root = tmp_path / "results"
    files = _tables(root, seeds) + [_recovery(root)]
    for bench, n in (questions or {}).items():
        data = root / f"data/{bench}.jsonl"
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(n)))
    out = tmp_path / "scorecard"
    build(files, root, config, out)
    return pd.read_csv(out / "core.csv", keep_default_na=False).set_index("id")


def test_a_paper_scale_core_tree_is_judged_everywhere(tmp_path):
    frame = _verdicts(tmp_path, PAPER)
    tables = frame[frame.index.str.match(r"t[123]\.")]
    assert len(tables) == 42 * 9 + 3 * 4 and set(tables["verdict"]) == {"within"}
    # Every judged row records the run's scale beside its number.
    row = frame.loc["t1.qwen2.5-math-1.5b.amc.core"]
    for key in ("n_questions=83", "seeds=3", "epochs=30", "eval_k=16"):
        assert key in row["reproduced_setting"], key
    # Appendix H: every number judged, within.
    appendix = frame[frame.index.str.startswith("appH.")]
    assert len(appendix) == 8 and set(appendix["verdict"]) == {"within"}, appendix["verdict"].to_dict()
    # The text's CoRE-vs-Majority gaps follow from the printed means (one rounding of each).
    gaps = frame[frame.index.str.startswith("s5.core_minus_majority.")]
    assert len(gaps) == 11 and set(gaps["verdict"]) == {"within"}, gaps["verdict"].to_dict()
    # Figure 4's factor exp(-0.31 / 0.25) = 0.29 from the one analysis; §3.3's 3.3 is analytic, never a run's.
    assert frame.loc["s6.threshold_factor", "verdict"] == "within"
    assert frame.loc["s33.threshold_8v24", "verdict"] == "not run"


def test_fewer_questions_seeds_or_steps_are_a_different_setting_with_the_difference_named(tmp_path):
    config = json.loads(json.dumps(PAPER))
    config["training"]["max_steps"] = 40
    frame = _verdicts(tmp_path, config, seeds=1, questions={"amc": 24})
    row = frame.loc["t1.qwen2.5-math-1.5b.amc.core"]
    assert row["verdict"] == "different setting"
    differences = row["setting_differences"]
    assert "questions: 24 (paper: 83) -- fewer than the paper" in differences
    assert "seeds (at least): 1 (paper: 3) -- fewer than the paper" in differences
    assert "training epochs: max_steps=40 (paper: 30)" in differences
    assert row["difference"] == ""  # a different setting shows no difference
    # Base is not trained: only its question count differs.
    assert frame.loc["t1.qwen2.5-math-1.5b.amc.base", "setting_differences"] == "questions: 24 (paper: 83) -- fewer than the paper"
    # Other benchmarks keep their full size (read from the config: hub datasets, no cap).
    math500 = frame.loc["t1.qwen2.5-math-1.5b.math500.core", "setting_differences"]
    assert "questions" not in math500 and "seeds (at least): 1 (paper: 3)" in math500


def test_more_seeds_than_the_paper_is_the_papers_setting():
    assert setting_differences({"seeds": "3"}, {"seeds": "5"}) == []
    assert setting_differences({"seeds": "3"}, {"seeds": "2"}) == ["seeds (at least): 2 (paper: 3) -- fewer than the paper"]
    assert setting_differences({"n_questions": "198"}, {"n_questions": "200"}) == ["questions: 200 (paper: 198)"]


@pytest.mark.parametrize("bench,count", [("amc", 83), ("math_l4", 128), ("gpqa_diamond", 198)])
def test_question_counts_come_from_the_evaluation_files_first(tmp_path, bench, count):
    from concord.scorecard.readers import CoreQuestions

    root = tmp_path / "results"
    path = root / f"eval/m/{bench}/base/seed0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pass_at_1": 0.5, "k": 16, "n_questions": count - 1, "per_question": []}))
    assert CoreQuestions(root, PAPER)(bench) == (str(count - 1), f"eval/m/{bench}/base/seed0.json")
    assert CoreQuestions(tmp_path / "none", PAPER)(bench)[0] == str(count)  # the uncapped hub benchmark
