"""What a Slurm partition can ever run, and which planned jobs it never will.

Slurm leaves a job that asks for more CPUs, memory or GPUs than any node of its partition has
PENDING forever (reason `PartitionConfig`) unless the site sets `EnforcePartLimits`; the executor
plugin then waits on it for as long as the run lasts. `check_jobs` compares every planned job's
request, computed the way snakemake-executor-plugin-slurm 2.8 builds its `sbatch` line (`--mem`
from `mem_mb`, `--cpus-per-task` from `cpus_per_task` or the rule's threads, `--gpus` from `gpu`
or a `gres=gpu:N`, `-t` from `runtime`), with the largest node of the partition as
`scontrol show node` / `scontrol show partition` report them, and names each rule that can never
start and the limit it exceeds. The workflow calls it before the first submission
(`rules/cluster.smk`).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Iterable, Mapping


class ClusterLimitError(RuntimeError):
    """Planned jobs that no node of their partition can ever run (the message lists them)."""


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int
    gpus: int
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    max_time_min: float | None  # None: unlimited
    max_mem_per_node_mb: int | None
    max_cpus_per_node: int | None
    nodes: tuple[Node, ...] = field(default_factory=tuple)

    @property
    def largest(self) -> dict[str, float]:
        """The most any single job can get on this partition, per resource."""
        cpus = max((n.cpus for n in self.nodes), default=0)
        mem = max((n.memory_mb for n in self.nodes), default=0)
        if self.max_cpus_per_node is not None:
            cpus = min(cpus, self.max_cpus_per_node)
        if self.max_mem_per_node_mb is not None:
            mem = min(mem, self.max_mem_per_node_mb)
        return {"cpus": cpus, "mem_mb": mem, "gpus": max((n.gpus for n in self.nodes), default=0),
                "runtime": float("inf") if self.max_time_min is None else self.max_time_min}


@dataclass(frozen=True)
class Request:
    """What one job asks Slurm for (one node, one task)."""

    rule: str
    partition: str | None
    cpus: int
    mem_mb: int
    gpus: int
    runtime: float  # minutes; 0 when unset


def _fields(line: str) -> dict[str, str]:
    # `scontrol show -o` prints `Key=Value` pairs separated by spaces; values have no spaces
    # except OS= (which we do not read).
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))


def _mb(value: str) -> int | None:
    if not value or value.upper() == "UNLIMITED":
        return None
    match = re.fullmatch(r"(\d+)([KMGT]?)", value.upper())
    if not match:
        return None
    scale = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[match[2]]
    return int(int(match[1]) * scale)


def parse_time_minutes(value: str) -> float | None:
    """Slurm's time formats (`UNLIMITED`, `MM`, `MM:SS`, `HH:MM:SS`, `D-HH[:MM[:SS]]`) in minutes."""
    if not value or value.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if not days:
        # MM, MM:SS, HH:MM:SS
        minutes = {1: lambda p: p[0], 2: lambda p: p[0] + p[1] / 60,
                   3: lambda p: 60 * p[0] + p[1] + p[2] / 60}[len(parts)](parts)
        return float(minutes)
    hours, mins, secs = (parts + [0, 0])[:3]
    return float(1440 * int(days) + 60 * hours + mins + secs / 60)


def gpu_count(gres: str) -> int:
    """GPUs in a Gres string such as `gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:2,shard:8`."""
    total = 0
    for item in re.sub(r"\([^)]*\)", "", gres or "").split(","):
        parts = item.split(":")
        if parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def parse_nodes(text: str) -> list[Node]:
    nodes = []
    for line in text.splitlines():
        f = _fields(line)
        if "NodeName" not in f:
            continue
        nodes.append(Node(f["NodeName"], int(f.get("CPUTot") or f.get("CPUs") or 0), _mb(f.get("RealMemory", "0")) or 0,
                          gpu_count(f.get("Gres", "")), tuple(p for p in f.get("Partitions", "").split(",") if p)))
    return nodes


def parse_partitions(text: str, nodes: Iterable[Node]) -> dict[str, Partition]:
    nodes = list(nodes)
    partitions = {}
    for line in text.splitlines():
        f = _fields(line)
        if "PartitionName" not in f:
            continue
        name = f["PartitionName"]
        max_cpus = f.get("MaxCPUsPerNode", "UNLIMITED")
        partitions[name] = Partition(
            name=name, default=f.get("Default") == "YES", max_time_min=parse_time_minutes(f.get("MaxTime", "")),
            max_mem_per_node_mb=_mb(f.get("MaxMemPerNode", "UNLIMITED")),
            max_cpus_per_node=None if max_cpus.upper() == "UNLIMITED" else int(max_cpus),
            nodes=tuple(n for n in nodes if name in n.partitions))
    return partitions


def query_partitions(timeout: float = 15) -> dict[str, Partition]:
    """Every partition with its nodes, from the controller (`scontrol show -o`)."""
    def scontrol(*args: str) -> str:
        proc = subprocess.run(["scontrol", "-o", "show", *args], capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise ClusterLimitError(f"scontrol show {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    return parse_partitions(scontrol("partition"), parse_nodes(scontrol("node")))


def request_of(rule: str, resources: Mapping, threads: int) -> Request:
    """A job's request as the executor plugin turns its resources into `sbatch` options."""
    cpus = resources.get("cpus_per_task") or threads or 1
    gpus = int(resources.get("gpu") or 0) or gpu_count(str(resources.get("gres") or ""))
    if gpus and resources.get("cpus_per_gpu") and not resources.get("cpus_per_task"):
        cpus = gpus * int(resources["cpus_per_gpu"])
    mem = resources.get("mem_mb") or 0
    if resources.get("mem_mb_per_cpu"):
        mem = int(resources["mem_mb_per_cpu"]) * int(cpus)
    return Request(rule=rule, partition=resources.get("slurm_partition") or None, cpus=int(cpus),
                   mem_mb=int(mem), gpus=int(gpus), runtime=float(resources.get("runtime") or 0))


def problems(requests: Iterable[Request], partitions: Mapping[str, Partition]) -> list[str]:
    """One line per rule (first offending job) that its partition can never run."""
    default = next((p.name for p in partitions.values() if p.default), None)
    lines, seen = [], set()
    for req in requests:
        name = req.partition or default
        if req.rule in seen:
            continue
        part = partitions.get(name) if name else None
        if part is None:
            known = ", ".join(sorted(partitions)) or "none"
            lines.append(f"rule {req.rule}: partition '{name}' does not exist (partitions: {known})")
            seen.add(req.rule)
            continue
        cap = part.largest
        over = [f"{what} {asked:g} > {cap[key]:g}" for what, key, asked in (
            ("CPUs", "cpus", req.cpus), ("mem_mb", "mem_mb", req.mem_mb), ("GPUs", "gpus", req.gpus),
            ("runtime (min)", "runtime", req.runtime)) if asked > cap[key]]
        if over:
            lines.append(f"rule {req.rule}: asks {', '.join(over)} (the most one node of partition "
                         f"'{part.name}' offers)")
            seen.add(req.rule)
    return lines


def check_jobs(requests: Iterable[Request], partitions: Mapping[str, Partition] | None = None) -> None:
    """Raise ClusterLimitError naming every rule whose jobs can never start."""
    found = problems(list(requests), query_partitions() if partitions is None else partitions)
    if found:
        raise ClusterLimitError(
            "these jobs can never start on this cluster (Slurm would leave them PENDING):\n  "
            + "\n  ".join(found)
            + "\nlower the request (e.g. --set-resources RULE:mem_mb=N, RULE:runtime=MIN), or choose a partition "
            "whose nodes are large enough (--default-resources is replaced whole: use "
            "--set-resources RULE:slurm_partition=NAME)")


def min_job_age_s(timeout: float = 15) -> int | None:
    """The controller's MinJobAge (how long squeue still lists a finished job), None if unknown."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"^MinJobAge\s*=\s*(\d+)", out, re.M)
    return int(match[1]) if match else None


def status_command_summary(settings) -> str:
    """Which status command the executor plugin will use and why (it silently switches from
    squeue to sacct when MinJobAge < 3 x the first-check delay, and sacct fails without
    accounting)."""
    import shutil

    command = getattr(settings, "status_command", None) or "sacct"
    first = int(getattr(settings, "init_seconds_before_status_checks", None) or 40)
    age = min_job_age_s()
    if command == "squeue":
        if (age is None or age < 3 * first) and shutil.which("sacct"):
            return (f"slurm status checks: sacct (the plugin falls back from squeue: MinJobAge {age} s < 3 x {first} s; "
                    "without accounting lower slurm-init-seconds-before-status-checks)")
        return (f"slurm status checks: squeue (works with and without accounting; MinJobAge {age} s >= 3 x {first} s "
                f"first-check delay); with accounting, --slurm-status-command sacct also reports failure reasons")
    return ("slurm status checks: sacct (needs accounting: slurmdbd; without it use "
            "--slurm-status-command squeue)")
