"""``audit verify``: re-hash a results tree against its manifest, compare each record with the
re-planned workflow, and let staleness flow downstream along the recorded inputs."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from concord import hardware, provenance
from concord.audit.layout import _artifact_files, _relative_to, _resolve_ref
from concord.audit.manifest import load_manifest
from concord.audit.planning import Plan, PlannedOutput
from concord.audit.report import AuditReport

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
    hashes = _Hashes()
    _check_machines(report, artifacts)
    for rel, entry in artifacts.items():
        now = hashes(results / rel)
        if now is None:
            (report.intermediate if entry.get("intermediate") else report.missing).append(rel)
        elif now != entry["sha256"]:
            report.modified.append(rel)
        reasons = _input_reasons(entry, artifacts, results, work, hashes)
        if plan is not None and entry.get("rule"):
            planned = plan.lookup(entry.get("target") or rel, results)
            if planned is None:
                report.unplanned.append(rel)
            else:
                reasons += _plan_reasons(entry, planned)
        if reasons:
            report.stale[rel] = reasons
    _flow_downstream(report, artifacts)
    if plan is not None:
        report.pending = _pending(plan, artifacts, results)
    dirs = [p for p, e in artifacts.items() if e.get("kind") == "dir"]
    report.untracked = [p for p in _artifact_files(results, dirs) if p not in artifacts]
    report.stale = dict(sorted(report.stale.items()))
    return report


class _Hashes:
    """Each path's current sha256 (None: gone), hashed once however many entries name it."""

    def __init__(self) -> None:
        self._cache: dict[Path, str | None] = {}

    def __call__(self, path: Path) -> str | None:
        if path not in self._cache:
            self._cache[path] = provenance.sha256_path(path) if path.exists() else None
        return self._cache[path]


def _check_machines(report: AuditReport, artifacts: Mapping[str, Mapping]) -> None:
    """Name the artifacts made on another processor or with other accelerators than this machine's."""
    here = hardware.processor()
    report.this_processor = hardware.processor_label(here)
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
            report.other_processor.setdefault(hardware.processor_label(recorded), []).append(rel)


def _input_reasons(entry: Mapping, artifacts: Mapping[str, Mapping], results: Path, work: Path,
                   hashes: _Hashes) -> list[str]:
    """Why an artifact is stale by its inputs: one gone or changed since it was registered."""
    reasons = []
    for ref in entry.get("inputs", []):
        name = ref["path"] if ref["root"] == "results" else f"{ref['root']}:{ref['path']}"
        if ref["root"] == "results" and _removed_intermediate(ref["path"], artifacts, results):
            continue  # its recorded hash stands; its own entry is checked above
        got = hashes(_resolve_ref(ref, results, work))
        if got is None:
            reasons.append(f"input {name} is gone")
        elif got != ref["sha256"]:
            reasons.append(f"input {name} changed")
    return reasons


def _removed_intermediate(rel: str, artifacts: Mapping[str, Mapping], results: Path) -> bool:
    entry = artifacts.get(rel)
    return bool(entry and entry.get("intermediate")) and not (results / rel).exists()


def _flow_downstream(report: AuditReport, artifacts: Mapping[str, Mapping]) -> None:
    """Staleness flows downstream: anything built from a broken artifact is broken too."""
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


def _pending(plan: Plan, artifacts: Mapping[str, Mapping], results: Path) -> list[str]:
    """Outputs the workflow plans inside the tree that were never built (``temp()`` ones aside)."""
    recorded = {os.path.abspath(results / rel) for rel in artifacts}
    inside = os.path.abspath(results) + os.sep
    pending = []
    for target, planned in plan.outputs.items():
        path = os.path.abspath(plan.workdir / target)
        if path.startswith(inside) and path not in recorded and not planned.temp:
            pending.append(_relative_to(Path(path), results))
    return sorted(pending)
