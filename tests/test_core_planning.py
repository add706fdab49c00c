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
