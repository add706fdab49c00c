"""`python -m concord <command> ...`: the one entry point every Snakemake rule calls.

Each module in this package that defines ``register(subparsers)`` contributes its own
commands, so the library's parts (data, roll-outs, training, code, SC-MoA, reports, audit)
plug in without editing a central list. A command's handler is stored as ``func`` on its
parser and receives the parsed namespace; it returns an exit code (or None for 0).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys


def build_parser() -> argparse.ArgumentParser:
    import concord.papers  # noqa: F401  (registers every paper's named operators)

    parser = argparse.ArgumentParser(prog="concord", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from concord.cli._logs import quiet_bars

    quiet_bars()  # before any library imports tqdm
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    result = args.func(args)
    return int(result or 0)
