"""The CoRE rules' planning, as pure functions of the config (concord.papers.core.planning)."""

from __future__ import annotations

from concord.papers.core.planning import CorePlan

CONFIG = {
    "models": {"m": {}}, "benchmarks": {"amc": {}, "aime": {}}, "arms": ["majority", "core", "zero_update"],
    "seeds": [0, 1], "control_seeds": [0], "training": {"figure3_cells": ["m/amc"]},
}


def test_runs_and_evaluations_of_every_arm_and_its_seeds():
    plan = CorePlan(CONFIG, "res")
    assert plan.eval_model_dir("m", "amc", "base", 1) == "res/models/m"
    assert plan.eval_model_dir("m", "amc", "core", 1) == "res/train/m/amc/core/seed1/model"
    train = plan.train_targets()
    assert "res/train/m/amc/zero_update/seed0/log.jsonl" in train
    assert "res/train/m/amc/zero_update/seed1/log.jsonl" not in train  # the control runs its control seeds
    assert len(plan.eval_targets()) == 2 * (2 + 2 + 2 + 1)


def test_figure3_reads_the_curves_of_its_cells():
    plan = CorePlan(CONFIG, "res")
    assert plan.figure3_cells() == [("m", "amc")]
    assert plan.figure3_inputs() == [f"res/train/m/amc/{a}/seed{s}/log.jsonl" for a in ("majority", "core")
                                     for s in (0, 1)]
    assert plan.figure3_targets() == ["res/figures/figure3.png", "res/tables/figure3_steps_saved.csv"]
    assert CorePlan({**CONFIG, "arms": ["core"]}, "res").figure3_targets() == []


def test_a_config_without_core_arms_plans_nothing():
    assert CorePlan({"models": {"m": {}}, "benchmarks": {"amc": {}}}, "res").targets() == []
    assert CorePlan(CONFIG, "res").figure2_targets() == ["res/figures/figure2/m_amc_seed0.png",
                                                         "res/figures/figure2/m_aime_seed0.png"]


def test_curve_ends_from_evaluation_read_the_arms_evaluations_under_the_same_protocol_only():
    import pytest
    import yaml

    from concord.papers.core.planning import check_ends_from_evaluation

    default = yaml.safe_load(open("config/config.yaml", encoding="utf-8"))
    plan = CorePlan(default, "res")  # the default's protocols agree, so planning accepts it
    assert plan.ends_from_evaluation
    assert plan.figure3_arm_eval_inputs() == [f"res/eval/smollm2-135m/synthetic/{a}/seed0.json" for a in ("majority", "core")]
    assert CorePlan(CONFIG, "res").figure3_arm_eval_inputs() == []  # off: the logs hold every point
    for section, key, value, named in [
        ("training", "val_k", 2, "training.val_k = evaluation.k"),
        ("training", "validation_fraction", 0.5, "validation_fraction"),
        ("evaluation", "max_questions", 12, "training.val_questions = evaluation.max_questions"),
        ("engine", "backend", "vllm", "engine.backend = hf"),
        ("engine", "batch_size", 32, "training.val_batch_size = engine.batch_size"),
        ("training", "use_vllm", True, "training.use_vllm"),
    ]:
        sections = {s: dict(default[s]) for s in ("training", "evaluation", "engine")}
        sections[section][key] = value
        with pytest.raises(ValueError, match="ends_from_evaluation.*" + named.replace(".", r"\.").replace("=", "=")):
            check_ends_from_evaluation(sections["training"], sections["evaluation"], sections["engine"])
