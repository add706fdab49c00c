"""The run manifest: what every artifact is, who made it from what, and whether it still holds.

Snakemake already records, for every output it produced (``.snakemake/metadata``, what
``--summary`` and ``--list-changes`` read): the producing rule, the rule's code, its params (in
this workflow: the config subset the rule reads, passed as JSON params), the set of input files
and the software stack. The audit keeps no second copy of that by hand; it adds only what
Snakemake lacks:

1. **register** (job time) -- every rule's shell command ends with
   ``python -m concord audit register --rule {rule} --outputs {output} --inputs {input}``
   (``audited()`` in rules/common.smk). It writes one sidecar per output at
   ``<results>/.manifest/<relpath>.json`` (atomically): the output's sha256 (a directory hashed
   the same way here and at verification), its size, its inputs' sha256, the code version and
   the Python environment. Hashing at job time also covers intermediate outputs (``temp()``)
   that Snakemake removes later.
2. **record** (after a successful run: the workflow's ``onsuccess``; also ``snakemake audit``)
   merges each sidecar with Snakemake's metadata record of the same output into
   ``<results>/manifest.json``, the file a reviewer reads without Snakemake.
3. **verify** (``python -m concord audit verify results``, or ``snakemake audit``) re-hashes
   the tree: *missing* and *modified* artifacts against their recorded sha256, *stale* ones
   whose inputs changed, and -- re-planning the workflow with the current config through
   Snakemake's API (:func:`plan`) -- artifacts whose rule, code, params (config subset), input
   set or software stack differ from the record; staleness then flows downstream along the
   recorded inputs. A removed intermediate (``temp()``) is reported as such, never as missing.
   Every sidecar also records the processor the job ran on (:func:`concord.hardware.processor`:
   CPU model, instruction set torch dispatched to, native bf16); a tree produced on another
   processor is named as such (*other processor*, its own exit code), neither clean nor stale:
   its files are intact, but a rerun here may print other numbers (README, "Auditing results").
   The GPUs a job saw (:func:`concord.hardware.accelerators`: models, count, CUDA, driver) are
   recorded and compared the same way: a tree made on other accelerators takes the same exit code.

Exit codes of ``audit verify``: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from concord import hardware, io, provenance

MANIFEST_DIR = ".manifest"
MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 2
# Not artifacts: the audit's own files, the tree's README, jobs' logs and Snakemake's benchmark
# records (diagnostics, written around the job), resumable state and the HTML report.
EXCLUDED_TOP_LEVEL = frozenset({MANIFEST_DIR, MANIFEST_NAME, "README.md", ".gitignore", ".gitkeep", "logs",
                                "benchmarks", "report.html"})
RESULTS_ENV = "CONCORD_RESULTS_DIR"

EXIT_OK, EXIT_CANNOT_VERIFY, EXIT_STALE, EXIT_MODIFIED, EXIT_UNTRACKED, EXIT_OTHER_PROCESSOR = 0, 2, 3, 4, 5, 6
EXIT_CODES = {
    EXIT_OK: "verified: nothing missing, modified or stale, produced on this processor and accelerators",
    EXIT_CANNOT_VERIFY: "cannot verify (no or unreadable manifest, workflow does not plan, bad arguments)",
    EXIT_STALE: "stale only: every recorded artifact is intact, but inputs, config, code or env changed since",
    EXIT_MODIFIED: "missing or modified artifacts: the tree differs from its record",
    EXIT_UNTRACKED: "with --strict: files nobody registered",
    EXIT_OTHER_PROCESSOR: ("intact and current, but produced on another processor (CPU model, instruction set or "
                           "native bf16 differ) or with other accelerators (GPU model, count, CUDA or driver): a "
                           "rerun here may print other numbers"),
}


# ------------------------------------------------------------------ paths


def default_results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV, "results"))


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return None


def sidecar_path(results_dir: str | Path, relpath: str) -> Path:
    return Path(results_dir) / MANIFEST_DIR / f"{relpath}.json"


def _input_ref(path: Path, results_dir: Path, workdir: Path) -> dict:
    """Where an input lives: inside the results tree (portable) or relative to the workdir."""
    rel = _relative_to(path, results_dir)
    if rel is not None:
        return {"root": "results", "path": rel}
    rel = _relative_to(path, workdir)
    return {"root": "workdir", "path": rel if rel is not None else str(Path(path).resolve())}


def _resolve_ref(ref: Mapping, results_dir: Path, workdir: Path) -> Path:
    base = results_dir if ref["root"] == "results" else workdir
    return base / ref["path"]


# ------------------------------------------------------------------ register (job time)


def _recorded_input_hash(path: Path, results: Path) -> str:
    """An input's sha256: reused from its own sidecar while its files are untouched since (a
    model directory is not re-read by every job that loads it), else hashed now."""
    rel = _relative_to(path, results)
    if rel is not None:
        sidecar = sidecar_path(results, rel)
        if sidecar.is_file():
            try:
                entry = io.read_json(sidecar)
            except (json.JSONDecodeError, OSError):
                entry = {}
            if entry.get("signature") and entry.get("signature") == provenance.stat_signature(path):
                return entry["sha256"]
    return provenance.sha256_path(path)


def register(
    outputs: Iterable[str | os.PathLike],
    *,
    rule: str | None = None,
    inputs: Iterable[str | os.PathLike] = (),
    results_dir: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
) -> list[Path]:
    """Record each output's content hash, its inputs' hashes, code version and env in its sidecar.

    ``outputs`` must lie inside ``results_dir`` (default ``$CONCORD_RESULTS_DIR`` or
    ``results``); files and directories are both fine. ``inputs`` may lie anywhere (inside the
    results tree they are stored relative to it, so a copied tree still verifies). Each output is
    also stored under the name the workflow gave it (``target``): the key of Snakemake's own
    metadata record, merged in by :func:`build_manifest` (which also supplies the producing rule;
    ``rule`` names it for outputs made outside Snakemake). Returns the sidecar paths.
    """
    results = Path(results_dir) if results_dir is not None else default_results_dir()
    work = Path(workdir) if workdir is not None else Path.cwd()
    input_records = []
    for item in dict.fromkeys(str(i) for i in inputs):  # a file named twice is hashed once
        path = Path(item)
        if not path.exists():
            raise FileNotFoundError(f"register: input does not exist: {item}")
        input_records.append({**_input_ref(path, results, work), "sha256": _recorded_input_hash(path, results)})
    env = provenance.environment()
    written = []
    for out in outputs:
        path = Path(out)
        rel = _relative_to(path, results)
        if rel is None:
            raise ValueError(f"register: output {out} is not inside the results directory {results}")
        if not path.exists():
            raise FileNotFoundError(f"register: output does not exist: {out}")
        entry = {
            "path": rel,
            "target": str(out),
            "kind": "dir" if path.is_dir() else "file",
            "sha256": provenance.sha256_path(path),
            "size": provenance.size_of(path),
            "signature": provenance.stat_signature(path),
            "rule": rule,
            "inputs": input_records,
            "code_version": provenance.code_version(),
            "env": env,
            "processor": hardware.processor(),
            "accelerators": hardware.accelerators(),
            "registered_at": time.time(),
        }
        written.append(io.write_json(sidecar_path(results, rel), entry))
    return written


def register_command(results_dir: str = "results") -> str:
    """The shell suffix that registers a Snakemake job's declared outputs (rules/common.smk
    appends it to every rule's command through ``audited()``). Snakemake fills ``{input}`` and
    ``{output}`` when it formats the command."""
    import shlex

    # No --rule: the producing rule is read from Snakemake's own record of the output at record time.
    return (
        f" && python -m concord audit register --results {shlex.quote(str(results_dir))}"
        " --outputs {output:q} --inputs {input:q}"
    )


# ------------------------------------------------------------------ Snakemake's metadata


@dataclass
class WorkflowFacts:
    """What the manifest takes from Snakemake: its per-output metadata records, which outputs
    are ``temp()`` (regexes of the rules' output patterns) and each rule's conda env file."""

    records: Mapping[str, Any] = field(default_factory=dict)  # target -> Snakemake MetadataRecord
    temp_patterns: list[str] = field(default_factory=list)
    conda_envs: Mapping[str, str] = field(default_factory=dict)  # rule -> env file

    def is_temp(self, target: str) -> bool:
        return any(re.fullmatch(p, target) for p in self.temp_patterns)


def _read_records(persistence, targets: Iterable[str]) -> dict[str, Any]:
    # PersistenceBase._read_record(key) is what `--summary` reads (key = the output as the rule
    # names it); it serves the file and the database backends alike.
    out = {}
    for target in targets:
        record = persistence._read_record(target)
        if record is not None:
            out[target] = record
    return out


def _rule_facts(rules) -> tuple[list[str], dict[str, str]]:
    from snakemake.io import is_flagged

    temp_patterns, conda_envs = [], {}
    for rule in rules:
        for pattern in rule.output:
            if is_flagged(pattern, "temp"):
                temp_patterns.append(pattern.regex().pattern)
        env = rule.conda_env
        if isinstance(env, str):
            conda_envs[rule.name] = env if os.path.isabs(env) else os.path.normpath(os.path.join(str(rule.basedir), env))
        elif env is not None and hasattr(env, "get_path_or_uri"):
            conda_envs[rule.name] = str(env.get_path_or_uri())
    return temp_patterns, conda_envs


def workflow_facts(workflow, targets: Iterable[str]) -> WorkflowFacts:
    """Facts from a live Snakemake ``workflow`` object (the Snakefile's ``onsuccess`` handler)."""
    temp_patterns, conda_envs = _rule_facts(workflow.rules)
    return WorkflowFacts(_read_records(workflow.persistence, targets), temp_patterns, conda_envs)


def _params_sha256(params: list | None) -> str | None:
    return None if params is None else provenance.config_hash(list(params))


def _code_sha256(code: str | None) -> str | None:
    return None if code is None else hashlib.sha256(code.encode()).hexdigest()


def _conda_env_entry(rule: str | None, record, facts: WorkflowFacts, workdir: Path) -> dict | None:
    env_file = facts.conda_envs.get(rule or "")
    entry: dict[str, Any] = {}
    if env_file:
        rel = _relative_to(Path(env_file), workdir)
        entry["file"] = rel if rel is not None and not rel.startswith("..") else env_file
        if Path(env_file).is_file():
            entry["sha256"] = provenance.sha256_file(env_file)
    if record is not None and record.conda_env:  # the env file Snakemake deployed (--use-conda)
        entry["deployed_sha256"] = hashlib.sha256(base64.b64decode(record.conda_env)).hexdigest()
    return entry or None


# ------------------------------------------------------------------ record


def _read_sidecars(results: Path) -> dict[str, dict]:
    root = results / MANIFEST_DIR
    entries: dict[str, dict] = {}
    if not root.is_dir():
        return entries
    for sidecar in sorted(root.rglob("*.json")):
        if sidecar.name.startswith("."):
            continue  # an atomic write still in flight
        try:
            entry = io.read_json(sidecar)
        except json.JSONDecodeError as exc:
            raise ValueError(f"corrupt manifest sidecar {sidecar}: {exc.msg}") from exc
        entries[entry["path"]] = entry
    return entries


def _artifact_files(results: Path, covered_dirs: Iterable[str]) -> list[str]:
    """Every file of the tree (relative), minus audit files, diagnostics, temporaries, registered dirs."""
    covered = tuple(f"{d.rstrip('/')}/" for d in covered_dirs)
    files = []
    for path in results.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(results).as_posix()
        parts = rel.split("/")
        if parts[0] in EXCLUDED_TOP_LEVEL or any(p.startswith(".") for p in parts):
            continue
        if rel.startswith(covered):
            continue
        files.append(rel)
    return sorted(files)


def _manifest_entry(sidecar: dict, facts: WorkflowFacts, results: Path, workdir: Path) -> dict:
    target = sidecar.get("target") or str(results / sidecar["path"])
    record = facts.records.get(target)
    rule = record.rule if record is not None and record.rule else sidecar.get("rule")
    intermediate = facts.is_temp(target)
    return {
        "path": sidecar["path"],
        "kind": sidecar["kind"],
        "sha256": sidecar["sha256"],
        "size": sidecar.get("size"),
        "intermediate": intermediate,
        "present": (results / sidecar["path"]).exists(),
        "rule": rule,
        "target": target,
        "inputs": sidecar.get("inputs", []),
        # From Snakemake's record: the config subset (the rule's params), the rule's code, the
        # set of input files and the software stack, exactly as its rerun triggers compare them.
        "params": list(record.params) if record is not None and record.params is not None else None,
        "params_sha256": _params_sha256(record.params if record is not None else None),
        "code_sha256": _code_sha256(record.code if record is not None else None),
        "shellcmd": record.shellcmd if record is not None else None,
        "input_set": list(record.input) if record is not None and record.input is not None else None,
        "software_stack_hash": record.software_stack_hash if record is not None else None,
        "conda_env": _conda_env_entry(rule, record, facts, workdir),
        "code_version": sidecar.get("code_version"),
        "env": sidecar.get("env"),
        "processor": sidecar.get("processor"),
        "accelerators": sidecar.get("accelerators"),
        "started": record.starttime if record is not None else None,
        "finished": record.endtime if record is not None else sidecar.get("registered_at"),
        "snakemake_metadata": record is not None,
    }


def build_manifest(
    results_dir: str | os.PathLike,
    config: Any = None,
    facts: WorkflowFacts | None = None,
    workdir: str | os.PathLike | None = None,
) -> dict:
    """Merge every sidecar with Snakemake's record of the same output into one manifest dict.

    Files nobody registered are not entered (``audit verify`` lists them as untracked).
    """
    results = Path(results_dir)
    if not results.is_dir():
        raise FileNotFoundError(f"results directory does not exist: {results}")
    work = Path(workdir) if workdir is not None else Path.cwd()
    facts = facts or WorkflowFacts()
    artifacts = {rel: _manifest_entry(sidecar, facts, results, work) for rel, sidecar in _read_sidecars(results).items()}
    return {
        "format": FORMAT_VERSION,
        "code_version": provenance.code_version(),
        "recorded_at": time.time(),
        "config": config,
        "config_hash": provenance.config_hash(config) if config is not None else None,
        "exit_codes": {str(k): v for k, v in EXIT_CODES.items()},
        "artifacts": dict(sorted(artifacts.items())),
    }


def sidecar_targets(results_dir: str | os.PathLike) -> list[str]:
    """The workflow's names of every registered output (keys of Snakemake's metadata)."""
    results = Path(results_dir)
    return [s.get("target") or str(results / rel) for rel, s in _read_sidecars(results).items()]


def write_manifest(
    results_dir: str | os.PathLike,
    config: Any = None,
    facts: WorkflowFacts | None = None,
    workdir: str | os.PathLike | None = None,
) -> Path:
    """Write ``<results>/manifest.json`` (atomically) and return its path."""
    manifest = build_manifest(results_dir, config, facts, workdir)
    return io.write_json(Path(results_dir) / MANIFEST_NAME, manifest)


def record_from_workflow(workflow, config: Any, results_dir: str | os.PathLike) -> Path:
    """The Snakefile's ``onsuccess`` step: manifest = sidecars + this workflow's metadata."""
    facts = workflow_facts(workflow, sidecar_targets(results_dir))
    return write_manifest(results_dir, config=config, facts=facts)


# ------------------------------------------------------------------ plan (Snakemake's API)


@dataclass(frozen=True)
class PlannedOutput:
    """What the workflow, planned with the current config and code, says about one output."""

    rule: str
    params: tuple[str, ...]
    code_sha256: str | None
    input_set: tuple[str, ...]
    software_stack_hash: str | None
    temp: bool
    param_names: tuple[tuple[str, str], ...] = ()  # (serialized value, the rule's name for it)


@dataclass
class Plan:
    outputs: dict[str, PlannedOutput]  # output name as the workflow gives it (Snakemake's key)
    workdir: Path

    def lookup(self, target: str, results: Path) -> PlannedOutput | None:
        if target in self.outputs:
            return self.outputs[target]
        wanted = os.path.abspath(results / target) if not os.path.isabs(target) else target
        return self._by_abspath().get(os.path.abspath(wanted))

    def _by_abspath(self) -> dict[str, PlannedOutput]:
        if not hasattr(self, "_abs"):
            self._abs = {os.path.abspath(self.workdir / k): v for k, v in self.outputs.items()}
        return self._abs


class PlanError(RuntimeError):
    """The workflow could not be planned (bad config, missing Snakefile, ...)."""


def plan(
    snakefile: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    configfiles: Iterable[str | os.PathLike] = (),
    targets: Iterable[str] = (),
) -> Plan:
    """Plan the workflow (as ``snakemake -n`` would) and read, for every output of every job in
    the DAG, what Snakemake's rerun triggers compare with its metadata: rule, params, code, input
    set, software stack -- computed by Snakemake itself (the persistence layer behind
    ``--summary`` and ``--list-changes``), not re-derived here."""
    import contextlib
    import io as _io

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
    )

    snakefile = Path(snakefile).resolve()
    work = Path(workdir).resolve() if workdir is not None else Path.cwd().resolve()
    if not snakefile.is_file():
        raise PlanError(f"no Snakefile at {snakefile}")
    import logging

    captured = _io.StringIO()
    snakemake_logger = logging.getLogger("snakemake")
    level = snakemake_logger.level
    snakemake_logger.setLevel(logging.WARNING)  # its INFO lines ("Building DAG of jobs...") are noise here
    try:
        with contextlib.redirect_stdout(captured), SnakemakeApi(
            OutputSettings(quiet={Quietness.ALL}, show_failed_logs=False)
        ) as api:
            wf_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles]),
                snakefile=snakefile,
                workdir=work,
            )
            dag_api = wf_api.dag(dag_settings=DAGSettings(targets=set(targets)))
            # The same calls DAGApi.list_changes/summary make, done once for every change type.
            workflow = dag_api.workflow_api._workflow
            workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            persistence, dag = workflow.persistence, workflow.dag
            outputs = {}
            for job in dag.jobs:
                code = persistence._code(job.rule)
                # Snakemake records params as sorted serialized values, without their names;
                # keep the names so a changed scalar is reported as "n_resamples: 500 -> 400".
                names = []
                for name, value in job.params.items():
                    serialized = persistence._serialize_param(value)
                    if isinstance(serialized, str):
                        names.append((serialized, name))
                planned = PlannedOutput(
                    rule=job.rule.name,
                    params=tuple(persistence._params(job)),
                    code_sha256=_code_sha256(code),
                    input_set=tuple(str(p) for p in persistence._input(job)),
                    software_stack_hash=persistence._software_stack_hash(job),
                    temp=False,
                    param_names=tuple(names),
                )
                for f in job.output:
                    outputs[str(f)] = PlannedOutput(**{**planned.__dict__, "temp": bool(f.is_temp)})
    except PlanError:
        raise
    except BaseException as exc:  # Snakemake raises WorkflowError, SystemExit, ... on a bad plan
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = str(exc).strip() or type(exc).__name__
        raise PlanError(f"the workflow does not plan: {detail[-2000:]}") from None
    finally:
        snakemake_logger.setLevel(level)
    return Plan(outputs=outputs, workdir=work)


# ------------------------------------------------------------------ verify


@dataclass
class AuditReport:
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # artifact -> reasons
    intermediate: list[str] = field(default_factory=list)  # temp() outputs removed after use: fine
    pending: list[str] = field(default_factory=list)  # planned outputs never built
    unplanned: list[str] = field(default_factory=list)  # recorded, no longer produced by the workflow
    untracked: list[str] = field(default_factory=list)
    planned: bool = False
    # artifacts produced on a processor other than this one: label of that processor -> paths
    other_processor: dict[str, list[str]] = field(default_factory=dict)
    no_processor: list[str] = field(default_factory=list)  # recorded before processors were
    this_processor: str = ""
    # artifacts produced with other accelerators (GPU models, count, CUDA, driver): label -> paths
    other_accelerators: dict[str, list[str]] = field(default_factory=dict)
    these_accelerators: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.modified or self.stale or self.pending)

    def exit_code(self, strict: bool = False) -> int:
        if self.missing or self.modified:
            return EXIT_MODIFIED
        if self.stale or self.pending:
            return EXIT_STALE
        if self.other_processor or self.other_accelerators:
            return EXIT_OTHER_PROCESSOR
        if strict and self.untracked:
            return EXIT_UNTRACKED
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"checked": self.checked, "ok": self.ok, "planned": self.planned, "missing": self.missing,
                "modified": self.modified, "stale": self.stale, "intermediate": self.intermediate,
                "pending": self.pending, "unplanned": self.unplanned, "untracked": self.untracked,
                "this_processor": self.this_processor, "other_processor": self.other_processor,
                "no_processor": self.no_processor, "these_accelerators": self.these_accelerators,
                "other_accelerators": self.other_accelerators}

    def format(self, limit: int = 50) -> str:
        lines = [f"checked {self.checked} artifact(s): "
                 f"{len(self.missing)} missing, {len(self.modified)} modified, {len(self.stale)} stale, "
                 f"{len(self.untracked)} untracked, {len(self.intermediate)} intermediate removed"
                 + (f", {len(self.pending)} pending" if self.pending else "")
                 + ("" if self.planned else " (not re-planned: config/code changes not checked)")]
        for label, paths in self.other_processor.items():
            lines.append(f"OTHER PROCESSOR: {len(paths)} artifact(s) produced on {label}, not on this machine's "
                         f"{self.this_processor}; their numbers may differ from a rerun here (README: Auditing results)")
        for label, paths in self.other_accelerators.items():
            lines.append(f"OTHER ACCELERATORS: {len(paths)} artifact(s) produced with {label}, not with this machine's "
                         f"{self.these_accelerators}; their numbers may differ from a rerun here (README: Auditing results)")
        if self.no_processor:
            lines.append(f"{len(self.no_processor)} artifact(s) record no processor (registered by an older concord)")
        rows = [f"MISSING   {p}" for p in self.missing] + [f"MODIFIED  {p}" for p in self.modified]
        rows += [f"STALE     {p}: {'; '.join(r)}" for p, r in self.stale.items()]
        rows += [f"PENDING   {p}: planned, never built" for p in self.pending]
        rows += [f"UNPLANNED {p}: no longer produced by the workflow" for p in self.unplanned]
        rows += [f"UNTRACKED {p}" for p in self.untracked]
        if len(rows) > limit:
            rows = rows[:limit] + [f"... {len(rows) - limit} more (--json lists all)"]
        return "\n".join(lines + rows)


def _literal(param: str) -> Any:
    try:
        value = ast.literal_eval(param)
    except (ValueError, SyntaxError):
        return param
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_leaves(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix or "(value)": value}


def describe_params_change(old: Iterable[str], new: Iterable[str], limit: int = 3,
                           names: Mapping[str, str] | None = None) -> str:
    """Which config values differ between two Snakemake params lists, as ``key: old -> new``.
    ``names`` maps a serialized new value to its param name (Snakemake records none); one value
    replaced by one other takes that name on both sides."""
    old, new = list(old), list(new)
    names = dict(names or {})
    gone = [p for p in old if p not in new]
    came = [p for p in new if p not in old]
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    def leaves(param: str, name: str) -> dict[str, Any]:
        value = _literal(param)  # a mapping names its own keys (the config section's)
        return _leaves(value, "" if isinstance(value, Mapping) else name)

    for p in gone:
        before.update(leaves(p, names.get(came[0], "") if len(gone) == len(came) == 1 else ""))
    for p in came:
        after.update(leaves(p, names.get(p, "")))
    keys = sorted(k for k in set(before) | set(after) if before.get(k, "<absent>") != after.get(k, "<absent>"))
    shown = [f"{k}: {json.dumps(before.get(k, '<absent>'), default=str)} -> {json.dumps(after.get(k, '<absent>'), default=str)}"
             for k in keys[:limit]]
    if len(keys) > limit:
        shown.append(f"and {len(keys) - limit} more")
    return ", ".join(shown) if shown else "params changed"


def _plan_reasons(entry: Mapping, planned: PlannedOutput) -> list[str]:
    reasons = []
    if entry.get("rule") and planned.rule != entry["rule"]:
        reasons.append(f"now produced by rule {planned.rule} (recorded: {entry['rule']})")
    if entry.get("params") is not None and sorted(entry["params"]) != sorted(planned.params):
        change = describe_params_change(entry["params"], planned.params, names=dict(planned.param_names))
        reasons.append(f"config changed ({change})")
    if entry.get("code_sha256") and planned.code_sha256 and entry["code_sha256"] != planned.code_sha256:
        reasons.append(f"code of rule {planned.rule} changed")
    if entry.get("input_set") is not None and sorted(entry["input_set"]) != sorted(planned.input_set):
        reasons.append("set of input files changed")
    stack = entry.get("software_stack_hash")
    if stack and planned.software_stack_hash and stack != planned.software_stack_hash:
        reasons.append("software environment changed")
    return reasons


def load_manifest(results_dir: str | os.PathLike, manifest_path: str | os.PathLike | None = None) -> dict:
    results = Path(results_dir)
    manifest_file = Path(manifest_path) if manifest_path is not None else results / MANIFEST_NAME
    if not manifest_file.is_file():
        raise FileNotFoundError(f"no manifest at {manifest_file}; run the workflow (or `snakemake audit`) first")
    try:
        manifest = io.read_json(manifest_file)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{manifest_file} is not valid JSON: {exc.msg}") from None
    if manifest.get("format") != FORMAT_VERSION:
        raise ValueError(f"{manifest_file}: unsupported manifest format {manifest.get('format')!r} "
                         f"(this code reads format {FORMAT_VERSION}); rerun the workflow to re-record it")
    return manifest


def _processor_label(p: Mapping[str, Any]) -> str:
    isa = p.get("torch_cpu_capability") or "?"
    bf16 = "native bf16" if p.get("native_bf16") else "no native bf16"
    return f"{p.get('cpu_model') or p.get('machine') or 'unknown CPU'} ({isa}, {bf16})"


def verify(
    results_dir: str | os.PathLike,
    manifest_path: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    plan: Plan | None = None,
) -> AuditReport:
    """Check a results tree against its manifest (and, given a :func:`plan`, against the
    workflow as it is configured now)."""
    results = Path(results_dir)
    manifest = load_manifest(results, manifest_path)
    artifacts: dict[str, dict] = manifest["artifacts"]
    work = Path(workdir) if workdir is not None else (plan.workdir if plan is not None else Path.cwd())
    report = AuditReport(checked=len(artifacts), planned=plan is not None)

    hash_cache: dict[Path, str | None] = {}

    def current_hash(path: Path) -> str | None:
        if path not in hash_cache:
            hash_cache[path] = provenance.sha256_path(path) if path.exists() else None
        return hash_cache[path]

    def removed_intermediate(rel: str) -> bool:
        entry = artifacts.get(rel)
        return bool(entry and entry.get("intermediate")) and not (results / rel).exists()

    here = hardware.processor()
    report.this_processor = _processor_label(here)
    here_gpus = hardware.accelerators()
    report.these_accelerators = hardware.accelerator_label(here_gpus)
    for rel, entry in artifacts.items():
        recorded_gpus = entry.get("accelerators")
        if recorded_gpus is not None and recorded_gpus != here_gpus:
            report.other_accelerators.setdefault(hardware.accelerator_label(recorded_gpus), []).append(rel)
        recorded = entry.get("processor")
        if recorded is None:
            report.no_processor.append(rel)
        elif recorded != here:
            report.other_processor.setdefault(_processor_label(recorded), []).append(rel)
        now = current_hash(results / rel)
        if now is None:
            (report.intermediate if entry.get("intermediate") else report.missing).append(rel)
        elif now != entry["sha256"]:
            report.modified.append(rel)
        reasons = []
        for ref in entry.get("inputs", []):
            name = ref["path"] if ref["root"] == "results" else f"{ref['root']}:{ref['path']}"
            if ref["root"] == "results" and removed_intermediate(ref["path"]):
                continue  # its recorded hash stands; its own entry is checked above
            got = current_hash(_resolve_ref(ref, results, work))
            if got is None:
                reasons.append(f"input {name} is gone")
            elif got != ref["sha256"]:
                reasons.append(f"input {name} changed")
        if plan is not None and entry.get("rule"):
            planned = plan.lookup(entry.get("target") or rel, results)
            if planned is None:
                report.unplanned.append(rel)
            else:
                reasons += _plan_reasons(entry, planned)
        if reasons:
            report.stale[rel] = reasons

    # Staleness flows downstream: anything built from a broken artifact is broken too.
    broken = set(report.missing) | set(report.modified) | set(report.stale)
    changed = True
    while changed:
        changed = False
        for rel, entry in artifacts.items():
            if rel in report.stale:
                continue
            upstream = [r["path"] for r in entry.get("inputs", []) if r["root"] == "results" and r["path"] in broken]
            if upstream:
                report.stale[rel] = [f"upstream {u} is missing, modified or stale" for u in upstream]
                broken.add(rel)
                changed = True

    if plan is not None:
        recorded = {os.path.abspath(results / rel) for rel in artifacts}
        inside = os.path.abspath(results) + os.sep
        for target, planned in plan.outputs.items():
            path = os.path.abspath(plan.workdir / target)
            if path.startswith(inside) and path not in recorded and not planned.temp:
                report.pending.append(_relative_to(Path(path), results))
        report.pending.sort()

    dirs = [p for p, e in artifacts.items() if e.get("kind") == "dir"]
    report.untracked = [p for p in _artifact_files(results, dirs) if p not in artifacts]
    report.stale = dict(sorted(report.stale.items()))
    return report
