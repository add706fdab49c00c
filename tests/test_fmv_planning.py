"""The FMV rules' planning, as pure functions of the config (concord.papers.fmv.planning)."""

from __future__ import annotations

import shlex

import pytest

from concord.papers.fmv.planning import TRAIN_RUN, FmvPlan, label_path_args, parse_policy
from concord.papers.fmv.report import ttrl_label

CONFIG = {
    "models": {"core-model": {"source": "x"}},
    "report": {"labels": {"qwen": "Qwen3-4B", "lcb": "LiveCodeBench"}},
    "training": {"eval_every": 0, "lr": 1e-6},
    "fmv": {
        "models": {"qwen": {"source": "hub"}, "judge": {"source": "hub", "label": "Judge"}},
        "benchmarks": {"lcb": {"source": "livecodebench"}, "he": {"source": "humaneval"}},
        "seeds": [0, 1],
        "ttrl": {"training": {"eval_every": 5, "n_train": 16}, "table2_n_vote": [32, 128]},
    },
}


def plan(config=CONFIG) -> FmvPlan:
    return FmvPlan(config, "res", ["core-model"])


def test_models_benchmarks_and_the_ttrl_cell_come_from_the_fmv_section():
    p = plan()
    assert p.models == ["qwen", "judge"] and p.fmv_only_models == ["qwen", "judge"]
    assert p.benchmarks == ["lcb", "he"] and p.enabled
    assert (p.tt_model, p.tt_bench) == ("qwen", "lcb")
    assert p.label("qwen") == "Qwen3-4B" and p.label("judge") == "Judge" and p.label("other") == "other"
    # Without fmv.models the CoRE models run; without benchmarks FMV is off.
    bare = FmvPlan({"models": {"m": {}}, "fmv": {}}, "res", ["m"])
    assert bare.models == ["m"] and bare.fmv_only_models == [] and not bare.enabled and bare.targets() == []


def test_the_training_run_template_is_the_one_place_its_path_is_written():
    p = plan()
    assert p.train_run("qwen", "lcb", "fmv", "half", 128, 0) == "res/fmv/train/qwen/lcb/fmv-half-n128/seed0"
    assert p.train_run_pattern() == TRAIN_RUN.format(fmv="res/fmv", cmodel="{cmodel}", cbench="{cbench}",
                                                     carm="{carm}", split="{split}", nvote="{nvote}", seed="{seed}")
    assert p.policy_model("qwen", "lcb", "ttrl-fmv_pointwise-full-n32", 1) == \
        "res/fmv/train/qwen/lcb/fmv_pointwise-full-n32/seed1/model"
    assert p.policy_model("qwen", "lcb", "base", 1) == "res/models/qwen"
    assert parse_policy("ttrl-fmv_pointwise-half-n32") == ("ttrl", "fmv_pointwise", "half", 32)


def test_training_overrides_cap_the_trained_share_at_the_budget():
    p = plan()
    assert p.train_overrides(32) == {"eval_every": 5, "lr": 1e-6, "n_train": 16, "n_vote": 32, }
    assert p.train_overrides(8)["n_train"] == 8
    assert p.training_validates()


def test_table1_reads_each_policy_once_per_seed_for_both_halves():
    execs = plan().table1_execs()
    assert len(execs) == 2 * (2 + 2 * 2)
    assert execs[:2] == [("base:train", "res/fmv/exec/qwen/lcb/base/seed0/all.parquet"),
                         ("base:holdout", "res/fmv/exec/qwen/lcb/base/seed0/all.parquet")]
    assert ("fmv:holdout", "res/fmv/exec/qwen/lcb/ttrl-fmv-half-n128/seed1/all.parquet") in execs
    assert ("fmv_pointwise:train", "res/fmv/exec/qwen/lcb/ttrl-fmv_pointwise-half-n32/seed0/all.parquet") in execs
    assert plan().table1_provenance()[0] == ("fmv", "res/fmv/train/qwen/lcb/fmv-half-n128/seed0/provenance.json")
    assert plan().table1_labels() == {"base": "Base (Qwen3-4B)", "fmv": ttrl_label("fmv", 128),
                                      "fmv_pointwise": ttrl_label("fmv_pointwise", 32)}


def test_an_arm_without_a_table1_budget_is_named():
    config = {**CONFIG, "fmv": {**CONFIG["fmv"], "ttrl": {"arms": ["fmv"], "table1_n_vote": {"fmv_pointwise": 32}}}}
    with pytest.raises(ValueError, match="no budget for arm 'fmv'"):
        plan(config).table1_execs()


def test_table2_rows_follow_the_papers_order_and_every_seed():
    rows = plan().table2_execs()
    labels = list(dict.fromkeys(label for label, _ in rows))
    assert labels == ["Base (Qwen3-4B)", ttrl_label("fmv", 32), ttrl_label("fmv_pointwise", 32),
                      ttrl_label("fmv", 128), ttrl_label("fmv_pointwise", 128)]
    assert len(rows) == 5 * 2
    assert [p for label, p in plan().table2_provenance() if label == ttrl_label("fmv", 128)] == [
        f"res/fmv/train/qwen/lcb/fmv-full-n128/seed{s}/provenance.json" for s in (0, 1)]


def test_validation_curves_cover_every_training_run_of_both_tables():
    curves = plan().validation_curves()
    assert len(curves) == (2 + 2 * 2) * 2
    assert curves[0] == (f"{ttrl_label('fmv', 128)} on the train half",
                         "res/fmv/train/qwen/lcb/fmv-half-n128/seed0/validation.csv")


def test_targets_and_arguments():
    assert plan().targets() == [
        "res/fmv/figures/lcb/figure2_left.png", "res/fmv/figures/lcb/figure2_right.png",
        "res/fmv/figures/he/figure2_left.png", "res/fmv/figures/he/figure2_right.png",
        "res/fmv/tables/table1.csv", "res/fmv/tables/table2.csv", "res/fmv/figures/ttrl_validation.png"]
    args = label_path_args("--exec", [("+ Joint (N = 32)", "a b.parquet")])
    assert shlex.split(args) == ["--exec", "+ Joint (N = 32)=a b.parquet"]
    assert plan().analysis_inputs("qwen", "lcb", 1)["gencluster"] == "res/fmv/gencluster/qwen/lcb/seed1.json"
