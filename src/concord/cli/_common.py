"""Helpers shared by CLI commands: JSON parameters passed by rules."""

from __future__ import annotations

import json
from typing import Any


def json_arg(text: str) -> Any:
    """argparse ``type=`` for a JSON object passed by a rule (``{params.x:q}``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg}: {text[:200]!r}") from None
