"""Commands shared by every paper: materialise a model directory, normalise a benchmark."""

from __future__ import annotations

import logging

from concord.cli._common import json_arg

log = logging.getLogger("concord.cli")


def register(subparsers) -> None:
    p = subparsers.add_parser("model", help="materialise a model directory (convert SmolLM2 GGUF, link, download)")
    p.add_argument("--spec", type=json_arg, required=True, help="the config's models.<key> entry as JSON")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_model)

    p = subparsers.add_parser("data", help="normalise a benchmark to the common JSONL schema")
    p.add_argument("--spec", type=json_arg, required=True, help="the config's benchmarks.<key> entry as JSON")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_data)


def cmd_model(args) -> int:
    from concord.models import prepare_model

    prepare_model(args.spec, args.out)
    return 0


def cmd_data(args) -> int:
    from concord.data import prepare_benchmark, write_questions

    records = prepare_benchmark(args.spec)
    write_questions(args.out, records)
    log.info("wrote %d questions to %s", len(records), args.out)
    return 0
