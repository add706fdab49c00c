"""Helpers shared by CLI commands: JSON parameters from rules, provenance, manifest entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def json_arg(text: str) -> Any:
    """argparse ``type=`` for a JSON object passed by a rule (``{params.x:q}``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg}: {text[:200]!r}") from None


def register_outputs(outputs, *, rule: str, inputs=(), config=None) -> None:
    """Record produced files' content hashes in the results manifest.

    Transitional: every rule's command now ends with the registration (``audited()`` in
    rules/common.smk), and the config subset comes from Snakemake's params, so ``config`` is
    not recorded here."""
    from concord.audit import register

    register([str(p) for p in outputs], rule=rule, inputs=[str(p) for p in inputs])


def ensure_parent(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
