"""`python -m concord scorecard`: every printed number of the three papers beside the run's.

Reads the produced table files given as arguments (paths inside ``--results``; Snakemake passes
exactly the ones the config produces), compares them with the printed numbers shipped in
``concord/scorecard/printed``, links docs/fidelity.md, and writes ``<out-dir>/{summary,core,fmv,
scmoa}.{md,html}`` plus a CSV per paper and ``summary.json``. The rule registers the outputs in
the run manifest (``audited()`` in rules/common.smk).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)

def _config(args: argparse.Namespace) -> dict:
    from concord.config import config_from_cli

    return config_from_cli(args.config_json, args.config)


def run_scorecard(args: argparse.Namespace) -> int:
    from concord import scorecard

    config = _config(args)
    fidelity_text = None
    if args.fidelity is not None:
        if not args.fidelity.is_file():
            raise SystemExit(f"--fidelity {args.fidelity}: no such file (omit the option to build without it)")
        fidelity_text = args.fidelity.read_text(encoding="utf-8")
    out_dir = args.out_dir or args.results / "scorecard"
    try:
        scorecard.build(args.tables, args.results, config, out_dir, fidelity_text=fidelity_text)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"scorecard: {exc}") from None
    summary = json.loads((Path(out_dir) / "summary.json").read_text(encoding="utf-8"))
    for paper, counts in summary["papers"].items():
        log.info("%s: %d printed, %d within, %d outside, %d different setting, %d analogue computed, %d not run",
                 paper, counts["printed"], counts["within"], counts["outside"], counts["different setting"],
                 counts["analogue computed"], counts["not run"])
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("scorecard", help="printed vs reproduced numbers of the three papers, with verdicts",
                              description=__doc__.splitlines()[0])
    p.add_argument("tables", nargs="*", type=Path, help="produced table files inside --results (any subset)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--config-json", help="the workflow config as a JSON string (what the rule passes)")
    group.add_argument("--config", type=Path, help="a workflow config YAML (validated, defaults filled)")
    p.add_argument("--results", type=Path, default=Path("results"), help="results tree (default: results)")
    p.add_argument("--out-dir", type=Path, help="output folder (default: <results>/scorecard)")
    p.add_argument("--fidelity", type=Path, help="docs/fidelity.md, to link rows to recorded choices")
    p.set_defaults(func=run_scorecard)
