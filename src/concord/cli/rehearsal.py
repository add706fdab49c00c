"""`python -m concord rehearsal-data` and `rehearsal-check`: the inputs and the verdict of the
rehearsal of the paper configs on one CPU node (scripts/rehearse.sh, config/rehearsal.yaml).

    python -m concord rehearsal-data --out data/rehearsal
    python -m concord rehearsal-check --plan plan.txt [plan2.txt ...] --logs .snakemake/log/*.log

``rehearsal-check`` reads the rule names of the paper plan (the ``Job stats`` table of each
``snakemake --profile slurm -n`` output given) and of the jobs that finished (Snakemake's run
logs), prints both and exits 1 naming every planned rule that never ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run_data(args: argparse.Namespace) -> int:
    from concord.rehearsal import write_inputs

    paths = write_inputs(args.out, seed=args.seed)
    print(json.dumps(paths, indent=1))
    return 0


def run_check(args: argparse.Namespace) -> int:
    from concord.rehearsal import RehearsalError, compare, plan_rules, ran_rules

    try:
        planned = set().union(*(plan_rules(Path(p).read_text(encoding="utf-8")) for p in args.plan))
    except (OSError, RehearsalError) as exc:
        print(f"rehearsal-check: {exc}", file=sys.stderr)
        return 2
    ran = ran_rules(args.logs)
    missing = compare(planned, ran)
    report = {"planned": sorted(planned), "ran": sorted(ran), "missing": missing}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"paper plan: {len(planned)} rules; ran: {len(ran & planned)} of them"
          + (f" (and {len(ran - planned)} outside the plan: {', '.join(sorted(ran - planned))})" if ran - planned else ""))
    if missing:
        print(f"NEVER RAN: {', '.join(missing)}")
        return 1
    print("every rule of the paper plan ran at least once")
    return 0


def register(subparsers) -> None:
    data = subparsers.add_parser("rehearsal-data", help="write the rehearsal's benchmark files (each in its own format)",
                                 description=__doc__.split("\n\n")[0])
    data.add_argument("--out", type=Path, required=True, help="directory to write into")
    data.add_argument("--seed", type=int, default=0)
    data.set_defaults(func=run_data)
    check = subparsers.add_parser("rehearsal-check", help="did every rule of the paper plan run?",
                                  description=__doc__.split("\n\n")[0])
    check.add_argument("--plan", nargs="+", required=True, help="outputs of `snakemake -n` (the paper plan)")
    check.add_argument("--logs", nargs="+", required=True, help="Snakemake run logs (.snakemake/log/*.log)")
    check.add_argument("--json", help="also write planned/ran/missing here")
    check.set_defaults(func=run_check)
