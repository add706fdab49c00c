"""`python -m concord slurm-budget`: the GPU-hours a grid will ask for, before anything is submitted.

    python -m concord slurm-budget --configfile config/paper.yaml [--gpu-type h100-80gb]

Plans the workflow (every job, as `snakemake -n --forceall` would) with the given config files
and prints GPU-hours per paper and per rule, jobs, GPUs per job, and the largest runtime and
memory request of each rule (concord.cluster.budget; throughput assumptions in the `cluster`
section of config/schema.yaml).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run_budget(args: argparse.Namespace) -> int:
    from concord.cluster import budget

    overrides = json.loads(args.config_json) if args.config_json else {}
    if args.gpu_type:
        overrides.setdefault("cluster", {})["gpu_type"] = args.gpu_type
    try:
        config, jobs, on_gpu = budget.planned_jobs(args.snakefile, args.configfile, overrides)
        estimates = budget.grid(config, [(r, wc, g) for r, wc, g in jobs], on_gpu)
    except budget.BudgetError as exc:
        print(f"slurm-budget: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # Snakemake raises WorkflowError, SystemExit, ... on a bad plan
        print(f"slurm-budget: the workflow does not plan: {str(exc).strip()[-2000:]}", file=sys.stderr)
        return 2
    print(budget.summary(estimates))
    if not on_gpu:
        print("(engine.backend is not vllm: these jobs run on CPU; GPU-hours count cluster.rehearse_gpus only)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("slurm-budget", help="estimated GPU-hours per paper and rule of a grid",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, nargs="+", default=[],
                        help="config file(s), as for snakemake (default: the embedded one)")
    parser.add_argument("--snakefile", type=Path, default=Path("Snakefile"))
    parser.add_argument("--gpu-type", help="a row of cluster.throughput (default: cluster.gpu_type)")
    parser.add_argument("--config-json", help="config overrides as JSON (like snakemake --config)")
    parser.set_defaults(func=run_budget)
