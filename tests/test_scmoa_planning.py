"""The SC-MoA rules' planning, as pure functions of the config (concord.papers.scmoa.planning)."""

from __future__ import annotations

import json
import shlex

import pytest

from concord.papers.scmoa import report
from concord.papers.scmoa.planning import NAMED_TARGETS, ScmoaPlan

CONFIG = {
    "models": {"local": {}},
    "engine": {"backend": "hf", "batch_size": 4},
    "scmoa": {
        "models": ["big", "local"],
        "n": 5, "k": 2, "roles": {"aggregate": "big"},
        "server": {"base_url": "http://node:8000/v1", "served_names": {"big": "org/Big"}},
        "benchmarks": {"gpqa": {"format": "gpqa_diamond", "path": "/data/gpqa.csv", "limit": 20},
                       "syn": {"benchmark": "synthetic"}},
        "setups": {"main": {}, "mech": {"n": 4, "k": 5, "benchmarks": ["gpqa"]}},
    },
}


def test_setups_overlay_the_sections_settings_and_name_their_cells():
    plan = ScmoaPlan(CONFIG, "res", ["local"])
    assert plan.cells() == [("gpqa", "gpqa", "main"), ("syn", "syn", "main"), ("gpqa@mech", "gpqa", "mech")]
    assert plan.cell_settings("gpqa@mech")["n"] == 4 and plan.cell_settings("gpqa")["n"] == 5
    assert plan.cell_settings("gpqa@mech")["roles"] == {"aggregate": "big"}


def test_endpoints_and_backend_arguments():
    plan = ScmoaPlan(CONFIG, "res", ["local"])
    assert plan.endpoints["big"]["model"] == "org/Big" and plan.endpoints["local"]["model"] == "local"
    args = shlex.split(plan.backend_args("big", "gpqa"))
    assert args[:2] == ["--model", "big"] and "--model-path" not in args
    assert json.loads(args[args.index("--endpoints") + 1])["big"]["base_url"] == "http://node:8000/v1"
    assert plan.model_input("big") == [] and plan.on_server("local")


def test_data_arguments_follow_the_benchmark_entry():
    plan = ScmoaPlan(CONFIG, "res", ["local"])
    assert plan.data_input("syn") == ["res/data/synthetic.jsonl"]
    assert shlex.split(plan.data_args("gpqa", ["/data/gpqa.csv"])) == [
        "--format", "gpqa_diamond", "--input", "/data/gpqa.csv", "--limit", "20", "--seed", "0"]


def test_unserved_roles_and_clashing_setups_are_refused():
    bad = {**CONFIG, "scmoa": {**CONFIG["scmoa"], "roles": {"aggregate": "nowhere"}}}
    with pytest.raises(ValueError, match="roles.aggregate .* 'nowhere'"):
        ScmoaPlan(bad, "res", ["local"])
    clash = {**CONFIG, "scmoa": {**CONFIG["scmoa"], "setups": {"main": {}, "table1": {}}}}
    with pytest.raises(ValueError, match="scmoa_table1 would clash"):
        ScmoaPlan(clash, "res", ["local"])


def test_targets_cover_every_cell_and_named_targets_pick_stems():
    plan = ScmoaPlan(CONFIG, "res", ["local"])
    targets = plan.targets()
    assert "res/scmoa/big/gpqa@mech/analysis/summary.json" in targets
    assert f"res/scmoa/crossrun/{report.CROSSRUN_TABLE}.csv" in targets
    named = plan.targets(stems=NAMED_TARGETS["scmoa_table1"])
    assert sorted(named) == sorted(f"res/scmoa/{m}/{c}/analysis/accuracy.{ext}" for m in ("big", "local")
                                   for c in ("gpqa", "syn", "gpqa@mech") for ext in ("csv", "md", "tex"))
