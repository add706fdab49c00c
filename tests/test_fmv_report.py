"""FMV tables over seeds (mean and bootstrap SE over questions and seeds), their labels, and each
job's settings resolved from config/paper_fmv.yaml (budgets, engine context, judge)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from concord.papers.fmv import report, settings
from concord.stats import bootstrap_se, bootstrap_se_seeds_questions

ROOT = Path(__file__).resolve().parents[1]


def test_two_way_bootstrap_holds_question_and_seed_noise():
    rng = np.random.default_rng(0)
    questions = rng.random(60)
    one_seed = bootstrap_se_seeds_questions(questions[None, :], 4000, 1)
    assert one_seed == pytest.approx(bootstrap_se(questions, 4000, 1), rel=0.1)
    # identical seeds add nothing; seeds that disagree add their spread
    same = np.tile(questions, (3, 1))
    assert bootstrap_se_seeds_questions(same, 4000, 1) == pytest.approx(one_seed, rel=0.1)
    shifted = questions[None, :] + np.array([[-0.2], [0.0], [0.2]])
    assert bootstrap_se_seeds_questions(shifted, 4000, 1) > 1.5 * one_seed
    # only seed noise: the SE of a mean of 3 seed means (bootstrap: population sd / sqrt(3))
    only_seeds = np.array([[0.2] * 10, [0.5] * 10, [0.8] * 10])
    assert bootstrap_se_seeds_questions(only_seeds, 20000, 2) == pytest.approx(np.std([0.2, 0.5, 0.8]) / np.sqrt(3),
                                                                              rel=0.05)
    assert bootstrap_se_seeds_questions(only_seeds, 100, 3) == bootstrap_se_seeds_questions(only_seeds, 100, 3)
    with pytest.raises(ValueError, match="at least 2 questions"):
        bootstrap_se_seeds_questions([[0.5]])


def _metrics(values, ids=("a", "b", "c", "d")):
    return pd.DataFrame({"question_id": list(ids), "mean": values, "fmv": values, "best": values})


def test_tables_pool_seeds_and_label_training_budgets():
    seeds = [_metrics([1.0, 0.0, 0.5, 0.5]), _metrics([0.5, 0.5, 0.0, 1.0], ids=("d", "c", "b", "a"))]
    frame = report.table2([("Base", seeds[:1]), (report.ttrl_label("fmv", 128), seeds)], 64, 500, 0)
    assert frame["n_seeds"].tolist() == [1, 2]
    assert frame["mean"].tolist() == pytest.approx([0.5, 0.5 * (0.5 + 0.5)])
    assert frame["mean_se"].iloc[1] > 0
    display = report.table2_display(frame)
    assert display["Training Method"].iloc[1] == "+ Joint (trained with N = 128 roll-outs)"
    assert list(display.columns) == ["Training Method", "mean@64 (%)", "FMV (%)", "best@64 (%)", "Steps"]
    t1 = report.table1({"base": {"train": seeds, "holdout": seeds}}, {"base": "Base"}, 64, 500, 0)
    assert t1["train_mean"].iloc[0] == pytest.approx(0.5) and t1["n_seeds"].iloc[0] == 2 and t1["arm"].iloc[0] == "base"
    with pytest.raises(ValueError, match="seeds disagree"):
        report.table2([("x", [seeds[0], _metrics([1, 1, 1], ids=("a", "b", "c"))])], 64, 500, 0)


def _provenance(steps=3, max_steps=3, train_questions=4, patience=None, validation_questions=4):
    return {"steps": steps, "max_steps": max_steps, "train_questions": train_questions,
            "validation_questions": validation_questions,
            "early_stopping": {"patience": patience, "stopped_at": steps if patience else None}}


def test_tables_say_how_each_row_was_selected_and_which_questions_each_column_covers():
    four = [_metrics([1.0, 0.0, 0.5, 0.5])]
    two = [_metrics([1.0, 0.0], ids=("a", "b"))]
    label = report.ttrl_label("fmv", 8)
    t2 = report.table2([("Base", four), (label, four + four)], 8, 200, 0,
                       {label: [_provenance(), _provenance()]})
    assert t2["selection"].tolist() == [report.NOT_TRAINED, "fixed budget of 3 step(s), no labels"]
    assert t2["steps"].tolist() == ["0", "3"] and t2["questions"].tolist() == [4, 4]
    assert report.table_note(t2, 2) == ("Checkpoint selection: fixed budget of 3 step(s), no labels. Questions: every "
                                        "row on all 4 questions, which the trained rows trained on.")
    # A run that early-stopped on a validation split is named as label-based, never passed off as label-free.
    t2 = report.table2([(label, four)], 8, 200, 0, {label: [_provenance(steps=2, patience=1)]})
    assert t2["selection"].iloc[0] == "early stopping on hidden tests of 4 validation question(s) (label-based)"
    # A "full" row that trained on fewer questions than it is scored on is refused.
    with pytest.raises(ValueError, match="trained on 3 questions but is scored on 4"):
        report.table2([(label, four)], 8, 200, 0, {label: [_provenance(train_questions=3)]})
    t1 = report.table1({"base": {"train": two, "holdout": four}, "fmv": {"train": two, "holdout": four}},
                       {"base": "Base"}, 8, 200, 0, {"fmv": [_provenance(train_questions=2)]})
    assert t1[["train_questions", "holdout_questions", "trained_questions"]].values.tolist() == [[2, 4, 0], [2, 4, 2]]
    assert "Train: the 2 questions every trained row trained on; Hold-Out: the 4 questions no run saw" in \
        report.table_note(t1, 1)
    assert report.table1_display(t1)["Steps"].tolist() == ["0", "3"]
    with pytest.raises(ValueError, match="trained on 4 questions, but the train column holds 2"):
        report.table1({"fmv": {"train": two, "holdout": four}}, {}, 8, 200, 0, {"fmv": [_provenance()]})


def test_fmv_ttrl_refuses_label_based_stopping():
    from concord.papers.fmv.ttrl import check_stopping_rule

    assert check_stopping_rule({"early_stopping_patience": None, "validation_fraction": None}) == \
        "fixed step budget, no labels"
    with pytest.raises(ValueError, match="early_stopping_patience: null"):
        check_stopping_rule({"early_stopping_patience": 3})
    with pytest.raises(ValueError, match="validation_fraction"):
        check_stopping_rule({"validation_fraction": 0.2})


def _paper_fmv():
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "config" / "paper_fmv.yaml").read_text())
    return {**config, **overlay}


def test_default_config_runs_fmv_ttrl_for_one_epoch_at_the_candidates_budget():
    """The embedded default trains both FMV arms (Tables 1-2): a fixed one-epoch budget, no label
    selection, roll-outs as long as the candidates (at 24 tokens 6 of 64 roll-outs were valid
    programs, at 64 tokens 30 of 64), and no step at learning rate 0."""
    from concord.config import resolve
    from concord.papers.fmv.ttrl import check_stopping_rule
    from concord.rl.run import total_steps

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    ttrl = settings.section(config, "ttrl")
    assert ttrl["enabled"] and ttrl["arms"] == ["fmv", "fmv_pointwise"]
    training = resolve("training", {**config["training"], **ttrl["training"]})
    assert check_stopping_rule(training) == "fixed step budget, no labels" and training["eval_every"] == 0
    assert training["max_completion_length"] == settings.section(config, "sampling")["max_new_tokens"]
    assert training["max_steps"] is None and training["epochs"] == 1
    n = len(config["fmv"]["benchmarks"]["humaneval"]["task_ids"])
    assert (total_steps(n // 2, training), total_steps(n, training)) == (2, 4)  # every question once
    assert training["warmup_ratio"] == 0.0 and training["lr_scheduler"] == "constant_with_warmup"
    off = yaml.safe_load((ROOT / "config" / "default_no_fmv_ttrl.yaml").read_text())
    assert off == {"fmv": {"ttrl": {"enabled": False}}}


def test_paper_fmv_config_resolves_to_the_papers_budgets_judge_and_context():
    config = _paper_fmv()
    budgets = {m: settings.generation_budget(config, m) for m in settings.section(config)["models"]}
    assert budgets == {"qwen3-4b-instruct-2507": 8192, "qwen3-30b-a3b-instruct-2507": 8192,
                       "qwen3-4b-thinking-2507": 16384, "qwen3-30b-a3b-thinking-2507": 16384}
    for model, budget in budgets.items():
        sampling = settings.sampling_settings(config, model)
        assert (sampling["n"], sampling["temperature"], sampling["top_p"]) == (64, 0.6, 0.95)  # Appendix A
        engine = settings.generation_engine(config, model)
        assert engine["max_model_len"] == sampling["max_prompt_tokens"] + budget
        assert settings.thinking(config, model) == ("thinking" in model)
        judge = settings.judge_settings(config, model)["judge"]
        # GenCluster's judge is the generating model; its budget leaves room for its reasoning
        assert judge["model"] == model and judge["max_new_tokens"] == budget and judge["thinking"] == ("thinking" in model)
        assert judge["engine"]["max_model_len"] == judge["max_prompt_tokens"] + budget
    gencluster = settings.section(config, "gencluster")
    assert gencluster["rounds"] >= 1 and gencluster["max_clusters"] is None
    bench = settings.section(config)["benchmarks"]["lcb_v6"]
    assert bench["version"] == "v6" and "start_date" not in bench  # LiveCodeBench's own release definition
    assert settings.section(config)["seeds"] == [0, 1, 2]
    assert settings.section(config, "ttrl")["table1_n_vote"] == {"fmv": 128, "fmv_pointwise": 32}
    assert settings.section(config, "ttrl")["table2_n_vote"] == [32, 128]
    # a fixed budget that no label chooses (test time has none); validation is a curve only
    from concord.config import resolve
    from concord.papers.fmv.ttrl import check_stopping_rule

    training = resolve("training", {**config["training"], **settings.section(config, "ttrl")["training"]})
    assert training["validation_fraction"] is None and training["early_stopping_patience"] is None
    assert check_stopping_rule(training) == "fixed step budget, no labels" and training["eval_every"] > 0
    assert training["epochs"] == 10 and training["max_steps"] is None
    assert (training["learning_rate"], training["lr_scheduler"], training["beta"]) == (1e-6, "constant_with_warmup", 0.0)
    assert (training["epsilon"], training["epsilon_high"], training["prompts_per_step"]) == (0.2, 0.32, 8)
    assert training["val_max_new_tokens"] == training["max_completion_length"] == budgets["qwen3-4b-instruct-2507"]


def test_settings_name_unknown_models_and_keys():
    config = {"models": {"m": {"source": "tiny-random"}}, "fmv": {"gencluster": {"judge": {"model": "judge-x"}}}}
    assert settings.generation_budget(config, "m") == 8192 and not settings.thinking(config, "m")
    with pytest.raises(KeyError, match="'judge-x' is in neither fmv.models nor models"):
        settings.judge_settings(config, "m")
    with pytest.raises(ValueError, match=r"unknown key\(s\) 'budget' in config section 'fmv.sampling'"):
        settings.section({"fmv": {"sampling": {"budget": 3}}}, "sampling")


def test_validation_curves_pool_seeds_and_plot(tmp_path):
    from concord import io

    seed0 = pd.DataFrame({"step": [0, 2, 4], "val_pass_at_1": [0.30, 0.40, 0.38]})
    seed1 = pd.DataFrame({"step": [0, 2], "val_pass_at_1": [0.32, 0.36]})  # stopped earlier
    frame = report.validation_frame({"Joint (N = 128)": [seed0, seed1], "Pointwise (N = 32)": [seed1]})
    joint = frame[frame["run"] == "Joint (N = 128)"]
    assert joint["step"].tolist() == [0, 2, 4] and joint["n_seeds"].tolist() == [2, 2, 1]
    assert joint["val_pass_at_1"].tolist() == pytest.approx([0.31, 0.38, 0.38])
    assert joint["max"].iloc[1] == pytest.approx(0.40) and joint["min"].iloc[1] == pytest.approx(0.36)
    paths = io.save_figure(report.validation_figure(frame), tmp_path / "validation")
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"] and all(p.stat().st_size > 0 for p in paths)


def test_validation_command_plots_every_runs_curve(tmp_path):
    from concord.cli import main

    paths = []
    for seed, values in enumerate(([0.30, 0.36, 0.35], [0.28, 0.33])):
        p = tmp_path / f"seed{seed}.csv"
        pd.DataFrame({"step": [0, 4, 8][: len(values)], "val_pass_at_1": values, "val_k": 8,
                      "val_questions": 17}).to_csv(p, index=False)
        paths.append(p)
    stem = tmp_path / "figures" / "ttrl_validation"
    label = report.ttrl_label("fmv", 128) + ", half"
    assert main(["fmv-validation", "--curve", f"{label}={paths[0]}", "--curve", f"{label}={paths[1]}",
                 "--out-stem", str(stem)]) == 0
    table = pd.read_csv(stem.with_suffix(".csv"))
    assert table["step"].tolist() == [0, 4, 8] and table["n_seeds"].tolist() == [2, 2, 1]
    assert all(stem.with_suffix(s).stat().st_size > 0 for s in (".png", ".pdf", ".md", ".tex"))
    empty = tmp_path / "empty.csv"
    pd.DataFrame({"step": [], "val_pass_at_1": []}).to_csv(empty, index=False)
    with pytest.raises(SystemExit, match="hold no validation"):
        main(["fmv-validation", "--curve", f"x={empty}", "--out-stem", str(stem)])
    with pytest.raises(SystemExit, match="validation curve not found"):
        main(["fmv-validation", "--curve", f"x={tmp_path / 'nope.csv'}", "--out-stem", str(stem)])


def test_fmv_figures_are_titled_with_model_and_benchmark():
    left = pd.DataFrame({"model": ["SmolLM2"] * 2, "method": ["mean", "fmv"], "n": [8, 8], "accuracy": [0.3, 0.5],
                         "se": [0.1, 0.1], "n_questions": [8, 8], "n_seeds": [1, 1]})
    assert report.figure2_left(left, title="SmolLM2 on HumanEval").axes[0].get_title() == "SmolLM2 on HumanEval"
    right = pd.DataFrame({"model": ["SmolLM2"] * 2, "method": ["fmv", "fmv"], "n": [1, 2], "accuracy": [0.3, 0.5],
                          "se": [0.1, 0.1], "n_seeds": [1, 1]})
    assert report.figure2_right(right, title="SmolLM2 on HumanEval").axes[0].get_title() == "SmolLM2 on HumanEval"
    curve = report.validation_frame({"Joint": [pd.DataFrame({"step": [0, 1], "val_pass_at_1": [0.2, 0.3]})]})
    ax = report.validation_figure(curve, title="SmolLM2 on HumanEval").axes[0]
    assert ax.get_title() == "SmolLM2 on HumanEval"
    assert all(float(t).is_integer() for t in ax.get_xticks())  # training steps


def test_tables_1_2_standard_error_is_over_questions():
    # Seeds that disagree only by a constant leave the SE over questions unchanged: the paper's
    # "bootstrapped standard error of the mean" is over questions, not seeds.
    rng = np.random.default_rng(5)
    questions = rng.uniform(0, 1, 60)
    frames = [pd.DataFrame({"question_id": range(60), "mean": np.clip(questions + d, 0, 1)}) for d in (-0.1, 0.0, 0.1)]
    mean, se = report.mean_and_se(frames, "mean", 4000, 1)
    assert mean == pytest.approx(np.mean([f["mean"].mean() for f in frames]))
    assert se == pytest.approx(bootstrap_se(np.mean([f["mean"] for f in frames], axis=0), 4000, 1))
    assert se == pytest.approx(np.std(questions) / np.sqrt(60), rel=0.2)
