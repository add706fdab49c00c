"""mean@k evaluation of a real (tiny) model, and Figure 3's curves and steps-saved table."""

from __future__ import annotations

import json
import math

import pytest
import torch

from concord.papers.core.curves import (
    figure3,
    first_step_reaching,
    load_curves,
    mean_curves,
    parse_cells,
    steps_saved,
    steps_saved_table,
)
from concord.data import write_questions
from concord.papers.core.evaluation import evaluate, grade_samples, mean_at_k
from concord.io import read_json, read_jsonl, write_jsonl

QUESTIONS = [
    {"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i % 3 + 1), "level": 1 + i % 2, "subject": "arith",
     "source": "test"}
    for i in range(3)
]


def test_grade_samples_and_mean_at_k():
    rec = grade_samples({"id": 7, "answer": "1/2"}, ["\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "no box", "\\boxed{2}"])
    assert rec["id"] == "7" and rec["k"] == 4 and rec["n_correct"] == 2
    assert rec["answers"] == ["0.5", "\\frac{1}{2}", None, "2"] and rec["correct"] == [True, True, False, False]
    assert mean_at_k([{"n_correct": 2, "k": 4}, {"n_correct": 4, "k": 4}]) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no questions"):
        mean_at_k([])


@pytest.mark.slow
def test_evaluate_a_model_directory_with_mean_at_k(tmp_path, monkeypatch, boxed_model_dir):
    torch.set_num_threads(1)
    monkeypatch.setenv("CONCORD_RESULTS_DIR", str(tmp_path))
    model = boxed_model_dir  # conftest's session-wide boxed tiny model (read-only)
    write_questions(tmp_path / "questions.jsonl", QUESTIONS)
    out = tmp_path / "eval" / "tiny" / "synthetic" / "base" / "seed0.json"
    ev = {"k": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 12}
    result = evaluate(model_dir=model, questions_path=tmp_path / "questions.jsonl", out_path=out, seed=0,
                      evaluation=ev, engine={"backend": "hf", "dtype": "float32", "threads": 1})
    saved = read_json(out)
    assert saved["pass_at_1"] == pytest.approx(result["pass_at_1"])
    assert saved["k"] == 4 and saved["n_questions"] == 3 and len(saved["per_question"]) == 3
    for q, rec in zip(QUESTIONS, saved["per_question"]):
        # Integer answers: the library's equivalence must agree with plain string equality here.
        assert rec["n_correct"] == sum(a == q["answer"] for a in rec["answers"])
        assert all(a is not None for a in rec["answers"])  # the tiny model always boxes
    assert saved["pass_at_1"] == pytest.approx(sum(r["n_correct"] / 4 for r in saved["per_question"]) / 3)
    assert 0 < saved["pass_at_1"] < 1  # answers are spread over 1..3: some right, some wrong
    assert saved["provenance"]["step"] == "evaluate" and saved["provenance"]["seed"] == 0
    assert saved["sampling"] == {"k": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 12, "seed": 0}
    # Fixed seed => identical result.
    again = evaluate(model_dir=model, questions_path=tmp_path / "questions.jsonl", out_path=tmp_path / "again.json",
                     seed=0, evaluation=ev, engine={"backend": "hf", "dtype": "float32", "threads": 1})
    assert again["per_question"] == result["per_question"]
    # The contract's path parses for the tables.
    from concord.papers.core.tables import load_eval

    frame = load_eval([out])
    assert frame.loc[0, "arm"] == "base" and frame.loc[0, "pass_at_1"] == pytest.approx(saved["pass_at_1"])


# --------------------------------------------------------------------------- Figure 3
CURVES = {  # arm -> seed -> validation pass@1 at steps 0, 2, 4, 6, 8
    "majority": {0: [0.1, 0.2, 0.3, 0.4, 0.4], 1: [0.1, 0.2, 0.3, 0.4, 0.4]},
    "core": {0: [0.1, 0.3, 0.4, 0.45, 0.5], 1: [0.1, 0.3, 0.4, 0.45, 0.5]},
}


def _write_logs(root, curves=CURVES, model="m", bench="b"):
    dirs = []
    for arm, seeds in curves.items():
        for seed, values in seeds.items():
            d = root / "train" / model / bench / arm / f"seed{seed}"
            rows = [{"step": 2 * i, "val_pass_at_1": v, **({"loss": 0.0} if i else {})} for i, v in enumerate(values)]
            rows.insert(2, {"step": 3, "loss": 0.1})  # a step without validation is skipped
            write_jsonl(d / "log.jsonl", rows)
            dirs.append(d)
    return dirs


def test_steps_saved_against_majority_plateau(tmp_path):
    curves = mean_curves(load_curves(_write_logs(tmp_path)))
    assert sorted(curves["step"].unique()) == [0, 2, 4, 6, 8]
    table = steps_saved_table(curves)
    row = table.iloc[0]
    assert row["majority_plateau"] == pytest.approx(0.4)
    assert row["majority_steps"] == 6 and row["core_steps"] == 4
    assert row["steps_saved_pct"] == pytest.approx(100 * (1 - 4 / 6))
    assert row["n_seeds"] == 2
    # A wider plateau window averages Majority's last points.
    assert steps_saved_table(curves, plateau_window=3).iloc[0]["majority_plateau"] == pytest.approx(0.4 * 2 / 3 + 0.1)


def test_steps_saved_is_undefined_when_core_never_gets_there():
    import pandas as pd

    maj = pd.DataFrame({"step": [0, 1, 2], "mean": [0.1, 0.3, 0.5]})
    core = pd.DataFrame({"step": [0, 1, 2], "mean": [0.1, 0.2, 0.3]})
    res = steps_saved(maj, core)
    assert res["core_steps"] is None and math.isnan(res["steps_saved_pct"])
    flat = pd.DataFrame({"step": [0, 1], "mean": [0.2, 0.2]})
    assert math.isnan(steps_saved(flat, flat)["steps_saved_pct"])  # plateau already at step 0
    assert first_step_reaching([0, 5, 10], [0.1, 0.2, 0.3], 0.2) == 5


def test_figure3_command_writes_figure_and_tables(tmp_path, monkeypatch):
    from concord.cli import main

    monkeypatch.setenv("CONCORD_RESULTS_DIR", str(tmp_path))
    dirs = _write_logs(tmp_path)
    fig, table = tmp_path / "figures" / "figure3.png", tmp_path / "tables" / "figure3_steps_saved.csv"
    assert main(["figure3", "--logs", *map(str, dirs), "--figure", str(fig), "--table", str(table),
                 "--labels", json.dumps({"m": "Model M"})]) == 0
    for path in (fig, fig.with_suffix(".pdf"), table, table.with_suffix(".md"), table.with_suffix(".tex")):
        assert path.stat().st_size > 0, path
    assert "33" in table.with_suffix(".md").read_text()
    with pytest.raises(ValueError, match=r"needs the training logs of arm\(s\) \['core'\]"):
        figure3([d for d in dirs if "/core/" not in str(d)], figure=fig, table=table)
    with pytest.raises(ValueError, match="not a training log"):
        load_curves([tmp_path / "elsewhere" / "log.jsonl"])


def test_figure3_names_its_protocols_and_marks_base_under_the_evaluation_protocol(tmp_path):
    """The curves' step 0 is the untrained policy under the validation protocol (mean@2 on 8
    questions, fp32 here); Base under the evaluation protocol (mean@4 on 24, its dtype) is its
    own, labelled point -- never passed off as the curve's start."""
    from concord.io import write_json

    dirs = _write_logs(tmp_path)
    for d in dirs:
        rows = [{**r, "val_k": 2, "val_questions": 8} if "val_pass_at_1" in r else r for r in read_jsonl(d / "log.jsonl")]
        write_jsonl(d / "log.jsonl", rows)
        write_json(d / "provenance.json", {"dtype": "float32"})
    base = []
    for seed, value in ((0, 0.25), (1, 0.35)):
        path = tmp_path / "eval" / "m" / "b" / "base" / f"seed{seed}.json"
        write_json(path, {"pass_at_1": value, "k": 4, "n_questions": 24, "provenance": {"numeric": {"dtype": "bfloat16"}}})
        base.append(path)
    fig, table = tmp_path / "figures" / "figure3.png", tmp_path / "tables" / "figure3_steps_saved.csv"
    figure3(dirs, figure=fig, table=table, base_evals=base)
    caption = table.with_suffix(".md").read_text()
    assert "Validation points (step 0 = the untrained policy): m/b mean@2 on 8 q, fp32" in caption
    assert "Base under the evaluation protocol (the star at step 0, Tables 1-3): m/b 30.0% (mean@4 on 24 q, bf16)" in caption
    with pytest.raises(ValueError, match="base model's evaluation"):
        figure3(dirs, figure=fig, table=table, base_evals=[tmp_path / "eval/m/b/core/seed0.json"])


def test_figure3_cells_are_checked_against_the_config():
    assert parse_cells([], ["m1", "m2"], ["b"]) == [("m1", "b"), ("m2", "b")]
    assert parse_cells(["m2/b"], ["m1", "m2"], ["b"]) == [("m2", "b")]
    with pytest.raises(ValueError, match="'m3/b' is not a configured"):
        parse_cells(["m3/b"], ["m1", "m2"], ["b"])
