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
import os
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
    launched_as_rank = _launched_as_rank()  # read first: TRL's colocated vLLM sets WORLD_SIZE=1 in-process
    try:
        result = args.func(args)
    finally:
        if launched_as_rank:
            _close_process_group()
    return int(result or 0)


def _launched_as_rank() -> bool:
    """Whether a multi-process launcher (torchrun, accelerate) started this process as one of
    several ranks: the process then ends with the command, so the group is its own to close."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _close_process_group() -> None:
    """Destroy the torch.distributed group a rank's command left open. At interpreter exit an
    open gloo group's threads can abort a rank whose work is done ("terminate called without an
    active exception", SIGABRT), which torchrun reports as a failed rank. Only for launched ranks:
    an in-process caller (a test, a notebook) may still hold a colocated vLLM engine that uses
    the group after the command returns."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
        dist.destroy_process_group()
        logging.getLogger(__name__).info("rank %d closed its process group", rank)
