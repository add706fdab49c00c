"""The rehearsal of the paper configs on one CPU node (scripts/rehearse.sh, config/rehearsal.yaml).

Fast: the generated benchmark files pass each paper's own loader and its count check; the rule
sets of a dry run and of a run log are read as Snakemake prints them; ``subset`` keeps keys.
Slow: the overlay plans exactly the rules of the paper plan (the three paper configs through the
project's Slurm profile, dry runs), and the CI subset of ``scripts/rehearse.sh --ci`` runs on the
session's local Slurm: the model built by rule ``model``, ``vllm serve`` on loopback and one
SC-MoA run against the served endpoint, each rule a Slurm job.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from concord import rehearsal
from concord.data import prepare_benchmark
from concord.papers.fmv.data import load_livecodebench
from concord.papers.scmoa import loaders
from concord.preflight import ConfigError, apply_subset
from support import REPO
from support.snakemake import job_env

PAPER_CONFIGS = ["config/paper.yaml", "config/paper_fmv.yaml", "config/paper_scmoa.yaml"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rehearsal-data")
    rehearsal.write_inputs(root)
    return root


def test_generated_files_pass_each_papers_loader_at_the_papers_sizes(inputs):
    # CoRE: the Hub datasets' rows, read from local files by the same normalisers.
    math = prepare_benchmark({"source": "hub", "dataset": "math500", "path": str(inputs / "core/math500.jsonl")})
    assert len(math) == 500 and {r["source"] for r in math} == {"MATH-500"}
    l4 = prepare_benchmark({"source": "hub", "dataset": "math_l4", "path": str(inputs / "core/math500.jsonl")})
    assert l4 and all(r["level"] == 4 for r in l4)
    assert len(prepare_benchmark({"source": "hub", "dataset": "aime2024", "path": str(inputs / "core/aime2024.jsonl")})) == 30
    amc = prepare_benchmark({"source": "hub", "dataset": "amc", "path": str(inputs / "core/amc.jsonl")})
    assert len(amc) == 83 and all("." not in r["answer"] for r in amc)  # AMC's float answers read as integers
    gpqa = prepare_benchmark({"source": "hub", "dataset": "gpqa_diamond", "path": str(inputs / "gpqa/gpqa_diamond.csv")})
    assert len(gpqa) == 198 and {r["answer"] for r in gpqa} <= set("ABCD") and "(D)" in gpqa[0]["prompt"]
    # FMV: LiveCodeBench v6 from its shard directory (the documented count, 175, is checked).
    lcb = load_livecodebench(inputs / "livecodebench", version="v6")
    assert len(lcb) == 175 and {r["mode"] for r in lcb} == {"stdin", "call"}
    # SC-MoA: every format at the size the paper prints (PAPER_COUNTS).
    counts = {
        "bbh3": len(loaders.load("bbh", inputs / "bbh", subset="bbh3")),
        "bbh_full": len(loaders.load("bbh", inputs / "bbh", subset="bbh_full")),
        "mmlu_ml": len(loaders.load("mmlu_ml", inputs / "mmlu/machine_learning_test.csv")),
        "gpqa_diamond": len(loaders.load("gpqa_diamond", inputs / "gpqa/gpqa_diamond.csv")),
        "aime": len(loaders.load("aime", inputs / "aime/aime_2022_2024.jsonl")),
        "lcb_hard": len(loaders.load("livecodebench", inputs / "livecodebench/code_generation_lite_release_v6.jsonl",
                                     **{k: v for k, v in loaders.LCB_HARD_WINDOW.items() if k != "difficulty"})),
    }
    assert counts == loaders.PAPER_COUNTS


def test_generated_code_problems_are_solvable_by_their_tests(inputs):
    """Every test's expected output is what the statement asks for (a + b, a - b, ...)."""
    for record in load_livecodebench(inputs / "livecodebench", version="v6")[:8]:
        title = record["gold"]["title"].split()[0]
        op = {"Sum": lambda a, b: a + b, "Difference": lambda a, b: a - b, "Product": lambda a, b: a * b,
              "Larger": max}[title]
        for given, want in zip(record["inputs"], record["gold"]["outputs"]):
            a, b = (int(x) for x in given.split())
            assert int(want) == op(a, b)


def test_local_hub_copy_must_exist_and_have_a_known_format(tmp_path):
    from concord.data import DataError

    with pytest.raises(DataError, match="not found"):
        prepare_benchmark({"source": "hub", "dataset": "math500", "path": str(tmp_path / "none.jsonl")})
    (tmp_path / "rows.txt").write_text("x")
    with pytest.raises(DataError, match="jsonl, .csv or .parquet"):
        prepare_benchmark({"source": "hub", "dataset": "math500", "path": str(tmp_path / "rows.txt")})


DRY_RUN = """Job stats:
job                 count
----------------  -------
data                    6
scmoa_report_table36_trace_ablation    2
all                     1
total                   9

Reasons:
"""


def test_plan_and_ran_rules_read_snakemakes_own_output(tmp_path):
    assert rehearsal.plan_rules(DRY_RUN) == {"data", "scmoa_report_table36_trace_ablation", "all"}
    with pytest.raises(rehearsal.RehearsalError, match="Job stats"):
        rehearsal.plan_rules("Building DAG of jobs...\nNothing to be done.")
    log = tmp_path / "run.snakemake.log"
    log.write_text("localrule data:\n    jobid: 2\nFinished jobid: 2 (Rule: data)\nrule train:\n    jobid: 5\n"
                   "Error in rule train:\nFinished jobid: 0 (Rule: all)\n")
    ran = rehearsal.ran_rules([log])
    assert ran == {"data", "all"}  # a rule whose job failed did not run
    assert rehearsal.compare({"data", "train", "all"}, ran) == ["train"]


def test_subset_keeps_only_the_named_keys_and_names_a_wrong_one():
    config = {"models": {"a": {}, "b": {}}, "benchmarks": {"x": {}, "y": {}}, "fmv": {"models": {"f": {}, "g": {}}},
              "subset": {"models": ["b"], "fmv_models": ["g"]}}
    apply_subset(config)
    assert list(config["models"]) == ["b"] and list(config["benchmarks"]) == ["x", "y"]
    assert list(config["fmv"]["models"]) == ["g"]
    with pytest.raises(ConfigError, match=r"subset.benchmarks: \['z'\]"):
        apply_subset({"benchmarks": {"x": {}}, "subset": {"benchmarks": ["z"]}})


def _paper_plan_rules(workdir: Path) -> tuple[set[str], set[str]]:
    """(rules of the paper plan, rules of the rehearsal plan): the dry runs scripts/rehearse.sh makes."""
    data = workdir / "data" / "rehearsal"
    rehearsal.write_inputs(data)
    fill = ["--config", f"fmv={{benchmarks: {{lcb_v6: {{path: {data / 'livecodebench'}}}}}}}",
            "scmoa={endpoints: {" + ", ".join(f"{k}: {{base_url: 'http://gpu-node:8000/v1'}}" for k in
                                              ("gpt-oss-120b", "llama-3.3-70b", "llama-3.1-8b", "gpt-oss-20b"))
            + f"}}, benchmarks: {{bbh3: {{path: {data / 'bbh'}}}, bbh_full: {{path: {data / 'bbh'}}}, "
            f"mmlu_ml: {{path: {data / 'mmlu/machine_learning_test.csv'}}}, gpqa_diamond: {{path: {data / 'gpqa/gpqa_diamond.csv'}}}, "
            f"aime: {{path: {data / 'aime/aime_2022_2024.jsonl'}}}, "
            f"lcb_hard: {{path: {data / 'livecodebench/code_generation_lite_release_v6.jsonl'}}}}}}}"]
    cluster = ["--default-resources", "slurm_account=concord", "slurm_partition=local", "--sdm", "env-modules"]
    base = [os.sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
            "-n", "--nolock", "--profile", str(REPO / "slurm")]
    out = []
    for extra in ([*cluster, *fill], ["--configfile", *PAPER_CONFIGS, "config/rehearsal.yaml", *cluster]):
        proc = subprocess.run([*base, *extra], cwd=REPO, env=job_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        out.append(rehearsal.plan_rules(proc.stdout))
    return out[0], out[1]


@pytest.mark.slow
def test_the_overlay_plans_every_rule_of_the_paper_plan(tmp_path):
    paper, rehearsed = _paper_plan_rules(tmp_path)
    # The rules only the paper grid plans: GPQA, FMV-TTRL, SC-MoA's setups, the cross-run figures.
    assert {"train", "fmv_train", "fmv_gencluster", "scmoa_crossrun", "scmoa_report_table37_information_ladder",
            "scmoa_report_tables29_30_synthesis_vs_vote", "figure5a", "table3", "scorecard"} <= paper
    assert rehearsed == paper


@pytest.mark.slow
def test_ci_subset_runs_an_sc_moa_job_against_vllm_serve_through_slurm(slurm_cluster, tmp_path):
    if not (REPO / ".venv-vllm" / "bin" / "python").exists() or shutil.which("rsync") is None:
        pytest.skip("needs .venv-vllm (scripts/setup_vllm.sh) and rsync")
    layout, _ = slurm_cluster
    work = tmp_path / "rehearsal"
    env = {**job_env(), "SLURM_CONF": str(layout.slurm_conf), "CONCORD_REHEARSAL_DIR": str(work)}
    proc = subprocess.run(["bash", "scripts/rehearse.sh", "--ci"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    run = (work / "run.txt").read_text()
    jobs = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S+/rule_(\w+?)/", run))
    assert "scmoa_run" in jobs.values(), run[-3000:]
    model_jobs = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S+/rule_(\w+?)/",
                                 (work / "run-model.txt").read_text()))
    assert "model" in model_jobs.values()
    # The SC-MoA run's calls reached the served endpoint (vLLM's OpenAI-compatible server).
    served = (work / "results/logs/rehearsal/vllm-serve.log").read_text()
    assert len(re.findall(r"POST /v1/chat/completions HTTP/1.1\" 200", served)) >= 3, served[-2000:]
    records = json.loads((work / "results/scmoa/gpt-oss-120b/bbh_full@full_bbh/records.json").read_text())
    assert records
