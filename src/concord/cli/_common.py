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




def ensure_parent(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
