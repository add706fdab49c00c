"""`python -m concord audit register|record|verify`: the run manifest.

* ``audit register --rule R --outputs ... [--inputs ...]`` -- record outputs' sidecars (for
  rules whose command does not call :func:`concord.audit.register` itself).
* ``audit record [results]`` -- merge sidecars into ``results/manifest.json``.
* ``audit verify [results]`` -- report missing, modified and stale artifacts; exit 1 if any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from concord.cli.report import DEFAULT_SCHEMA, load_config


def _optional_config(args: argparse.Namespace):
    if getattr(args, "config_json", None) is not None:
        try:
            return json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--config-json is not valid JSON: {exc.msg}") from None
    if getattr(args, "config", None) is not None:
        return load_config(args.config, args.schema)
    return None


def _config_args(parser: argparse.ArgumentParser, help_suffix: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--config-json", help=f"config (or the sections read) as JSON; {help_suffix}")
    group.add_argument("--config", type=Path, help=f"config YAML (validated, defaults filled); {help_suffix}")
    parser.add_argument("--schema", type=Path, default=DEFAULT_SCHEMA, help="config schema for --config")


def run_register(args: argparse.Namespace) -> int:
    from concord import audit

    written = audit.register(
        args.outputs,
        rule=args.rule,
        inputs=args.inputs,
        config=_optional_config(args),
        conda_env=args.conda_env,
        results_dir=args.results,
    )
    print(f"registered {len(written)} artifact(s) of rule {args.rule}", file=sys.stderr)
    return 0


def run_record(args: argparse.Namespace) -> int:
    from concord import audit

    path = audit.write_manifest(args.results, config=_optional_config(args))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from concord import audit

    try:
        report = audit.verify(args.results, manifest_path=args.manifest, config=_optional_config(args))
    except (FileNotFoundError, ValueError) as exc:
        print(f"audit verify: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    if not report.ok or (args.strict and report.untracked):
        return 1
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("audit", help="run manifest: register, record and verify artifacts")
    sub = parser.add_subparsers(dest="audit_command", metavar="ACTION", required=True)

    reg = sub.add_parser("register", help="record outputs (sha256 + provenance) in their manifest sidecars")
    reg.add_argument("--rule", required=True, help="producing rule (Snakemake: {rule})")
    reg.add_argument("--outputs", nargs="+", required=True, type=Path)
    reg.add_argument("--inputs", nargs="*", default=[], type=Path)
    reg.add_argument("--conda-env", help="the rule's conda env file")
    reg.add_argument("--results", type=Path, default=Path("results"))
    _config_args(reg, "hash recorded for staleness checks")
    reg.set_defaults(func=run_register)

    rec = sub.add_parser("record", help="merge sidecars into <results>/manifest.json")
    rec.add_argument("results", nargs="?", type=Path, default=Path("results"))
    _config_args(rec, "stored as the run's config")
    rec.set_defaults(func=run_record)

    ver = sub.add_parser("verify", help="check a results tree against its manifest (exit 1 on problems)")
    ver.add_argument("results", nargs="?", type=Path, default=Path("results"))
    ver.add_argument("--manifest", type=Path, help="manifest file (default: <results>/manifest.json)")
    ver.add_argument("--json", action="store_true", help="print the report as JSON")
    ver.add_argument("--strict", action="store_true", help="also fail on untracked files")
    _config_args(ver, "judge staleness against it (default: the manifest's config)")
    ver.set_defaults(func=run_verify)
