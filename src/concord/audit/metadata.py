"""What the manifest takes from Snakemake's own metadata: per-output records (rule, code, params,
input set, software stack), which outputs are ``temp()``, and each rule's conda env."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from concord import provenance
from concord.audit.layout import _relative_to

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
