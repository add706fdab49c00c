"""`python -m concord table|figure`: the paper's Tables 1-3 and Figures 4, 5a, 5b.

Both commands read the workflow config (``--config-json`` from a Snakemake rule, or
``--config config/config.yaml`` by hand), and build the artifact from the results tree
(the rule's ``audited()`` suffix registers it in the run manifest).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from concord.config import SCHEMA_PATH as DEFAULT_SCHEMA
from concord.config import config_from_cli

log = logging.getLogger(__name__)



def add_config_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--config-json", help="the workflow config (or the needed sections) as a JSON string")
    group.add_argument("--config", type=Path, help="a workflow config YAML (validated, defaults filled)")
    parser.add_argument("--schema", type=Path, default=DEFAULT_SCHEMA, help="config schema for --config")


def config_from_args(args: argparse.Namespace) -> dict:
    return config_from_cli(args.config_json, args.config, args.schema)


def _common(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser)
    parser.add_argument("--results", type=Path, default=Path("results"), help="results tree (default: results)")
    parser.add_argument("--out", type=Path, help="output stem (default: <results>/tables|figures/<name>)")


def run_table(args: argparse.Namespace) -> int:
    from concord.papers.core import tables

    config = config_from_args(args)
    stem = args.out or args.results / "tables" / args.table
    written = tables.make_table(config, args.table, args.results, stem)
    log.info("wrote %s", ", ".join(map(str, written)))
    return 0


def run_figure(args: argparse.Namespace) -> int:
    from concord.papers.core import figures as plots

    config = config_from_args(args)
    stem = args.out or args.results / "figures" / args.figure
    written = plots.make_figure(config, args.figure, args.results, stem)
    log.info("wrote %s", ", ".join(map(str, written)))
    return 0


def register(subparsers) -> None:
    table = subparsers.add_parser("core-table", aliases=["table"], help="build one of the paper's tables (CSV, Markdown, LaTeX)")
    table.add_argument("--table", required=True, help="table name from config report.tables, e.g. table1")
    _common(table)
    table.set_defaults(func=run_table)

    figure = subparsers.add_parser("core-figure", aliases=["figure"], help="draw one of the paper's figures (PNG, PDF, CSV)")
    figure.add_argument("--figure", required=True, choices=["figure4", "figure5a", "figure5b"])
    _common(figure)
    figure.set_defaults(func=run_figure)
