"""`python -m concord audit register|record|verify`: the run manifest (see concord.audit).

* ``audit register --outputs ... [--inputs ...]`` -- a job's content hashes (every
  rule's command ends with it: ``audited()`` in rules/common.smk).
* ``audit record [results]`` -- merge the sidecars with Snakemake's metadata into
  ``results/manifest.json`` (the workflow's ``onsuccess`` does this after every run).
* ``audit verify [results]`` -- re-hash the tree and, when a Snakefile is at hand, re-plan the
  workflow with the current config; report missing, modified, stale artifacts. Exit codes:
  0 clean, 2 cannot verify, 3 stale only, 4 missing or modified, 5 untracked (``--strict``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def run_register(args: argparse.Namespace) -> int:
    from concord import audit

    written = audit.register(args.outputs, rule=args.rule, inputs=args.inputs, results_dir=args.results)
    print(f"audit: registered {len(written)} output(s)", file=sys.stderr)
    return 0


def _snakefile(args: argparse.Namespace) -> Path | None:
    if args.no_plan:
        return None
    if args.snakefile is not None:
        return args.snakefile
    default = Path("Snakefile")
    return default if default.is_file() else None


def _facts_from_snakefile(snakefile: Path, results: Path, configfiles) -> object:
    """Snakemake's metadata for the registered outputs and the rules' temp()/conda facts,
    read through a planned workflow (the same objects the onsuccess handler has)."""
    from snakemake.persistence.file import FilePersistence

    from concord import audit
    from concord.audit.metadata import _read_records, _rule_facts

    targets = audit.sidecar_targets(results)
    # Rules (temp flags, conda env files) come from the Snakefile; records from .snakemake/.
    api_plan_rules = _load_rules(snakefile, configfiles)
    temp_patterns, conda_envs = _rule_facts(api_plan_rules)
    persistence = FilePersistence(nolock=True, path=Path(".snakemake").resolve())
    return audit.WorkflowFacts(_read_records(persistence, targets), temp_patterns, conda_envs)


def _load_rules(snakefile: Path, configfiles):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
    )

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        wf_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                              config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles]),
                              snakefile=snakefile.resolve(), workdir=Path.cwd())
        return list(wf_api._workflow.rules)


def run_record(args: argparse.Namespace) -> int:
    from concord import audit

    config = json.loads(args.config_json) if args.config_json else None
    snakefile = _snakefile(args)
    try:
        facts = _facts_from_snakefile(snakefile, args.results, args.configfile) if snakefile else None
        path = audit.write_manifest(args.results, config=config, facts=facts)
    except (FileNotFoundError, ValueError) as exc:
        print(f"audit record: {exc}", file=sys.stderr)
        return audit.EXIT_CANNOT_VERIFY
    print(f"audit: wrote {path}", file=sys.stderr)
    return 0


def _config_file_from_json(text: str) -> Path:
    """The effective config of a running workflow (`snakemake audit`) as a file to plan with."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config-json is not valid JSON: {exc.msg}") from None
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="concord-audit-config-", delete=False) as handle:
        json.dump(config, handle)
    return Path(handle.name)


def run_verify(args: argparse.Namespace) -> int:
    from concord import audit

    snakefile = _snakefile(args)
    configfiles = list(args.configfile)
    effective = None
    try:
        if args.config_json:
            effective = _config_file_from_json(args.config_json)
            configfiles.append(effective)
        plan = audit.plan(snakefile, configfiles=configfiles, targets=args.targets) if snakefile else None
        report = audit.verify(args.results, manifest_path=args.manifest, plan=plan)
    except (FileNotFoundError, ValueError, audit.PlanError) as exc:
        print(f"audit verify: {exc}", file=sys.stderr)
        return audit.EXIT_CANNOT_VERIFY
    finally:
        if effective is not None:
            effective.unlink(missing_ok=True)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return report.exit_code(strict=args.strict)


def _plan_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snakefile", type=Path, help="workflow to re-plan with (default: ./Snakefile if present)")
    parser.add_argument("--configfile", type=Path, nargs="+", default=[],
                        help="config file(s) to plan with, as for snakemake (default: the embedded one)")
    parser.add_argument("--config-json", help="the full effective config as JSON (what `snakemake audit` passes)")
    parser.add_argument("--no-plan", action="store_true",
                        help="manifest only: check content and inputs, not config/code changes")


def register(subparsers) -> None:
    from concord.audit import EXIT_CODES

    parser = subparsers.add_parser("audit", help="run manifest: register, record and verify artifacts")
    sub = parser.add_subparsers(dest="audit_command", metavar="ACTION", required=True)

    reg = sub.add_parser("register", help="record a job's outputs (sha256, inputs' sha256, env) in sidecars")
    reg.add_argument("--rule", help="producing rule, for outputs made outside Snakemake (else read from its metadata)")
    reg.add_argument("--outputs", nargs="+", required=True, type=Path)
    reg.add_argument("--inputs", nargs="*", default=[], type=Path)
    reg.add_argument("--results", type=Path, default=Path("results"))
    reg.set_defaults(func=run_register)

    rec = sub.add_parser("record", help="merge sidecars and Snakemake's metadata into <results>/manifest.json")
    rec.add_argument("results", nargs="?", type=Path, default=Path("results"))
    _plan_args(rec)
    rec.set_defaults(func=run_record)

    codes = "; ".join(f"{k}: {v}" for k, v in EXIT_CODES.items())
    ver = sub.add_parser("verify", help="check a results tree against its manifest and the current workflow",
                         description=f"Exit codes -- {codes}.")
    ver.add_argument("results", nargs="?", type=Path, default=Path("results"))
    ver.add_argument("--manifest", type=Path, help="manifest file (default: <results>/manifest.json)")
    ver.add_argument("--json", action="store_true", help="print the report as JSON")
    ver.add_argument("--strict", action="store_true", help="also fail (exit 5) on untracked files")
    ver.add_argument("--targets", nargs="*", default=[], help="plan only these targets (default: rule all)")
    _plan_args(ver)
    ver.set_defaults(func=run_verify)
