"""One config resolver for every command: schema defaults, dotted section paths, loud unknown keys.

``config/schema.yaml`` is the single source of every default. The Snakefile validates the whole
config against it (filling defaults); commands that receive one section as JSON from a rule, or
library calls made by hand, resolve it here the same way, so no command keeps a default of its
own::

    >>> resolve("training", {"lr": 1e-6})["lr"]
    1e-06
    >>> resolve("fmv.sampling", {})["max_new_tokens"]  # a nested section by dotted path
    8192
"""

from __future__ import annotations

import difflib
import functools
import os
from pathlib import Path
from typing import Any, Mapping

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


@functools.lru_cache(maxsize=4)
def _schema(path: str) -> dict:
    import yaml

    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def section_schema(path: str, schema_path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """The JSON schema of a (dotted) config section, e.g. ``"fmv.sampling"``."""
    node = _schema(str(schema_path))
    walked = []
    for part in path.split("."):
        props = node.get("properties") or {}
        if part not in props:
            where = ".".join(walked) or "the top level"
            raise KeyError(f"config/schema.yaml has no section '{path}' ({part!r} is not a key of {where})")
        node = props[part]
        walked.append(part)
    return node


def _defaults(node: Mapping[str, Any]) -> dict:
    out = {}
    for key, spec in (node.get("properties") or {}).items():
        if "default" in spec:
            out[key] = spec["default"]
        elif spec.get("type") == "object" and spec.get("properties"):
            nested = _defaults(spec)
            if nested:
                out[key] = nested
    return out


def section_defaults(path: str, schema_path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """Defaults of a (dotted) config section, read from config/schema.yaml."""
    return _defaults(section_schema(path, schema_path))


def resolve(path: str, values: Mapping[str, Any] | None, schema_path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """Schema defaults of section ``path`` overlaid with ``values``.

    Args:
        path: the section, dotted for nested ones (``"training"``, ``"fmv.sampling"``).
        values: what the config (or the caller) sets; ``None`` means nothing.
        schema_path: the schema to read (the repository's by default).

    Raises:
        ValueError: a key the schema does not know (with close matches), so a typo is never
            silently ignored.
    """
    node = section_schema(path, schema_path)
    values = dict(values or {})
    known = set(node.get("properties") or {})
    if known and node.get("additionalProperties", True) is False:
        unknown = sorted(set(values) - known)
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"unknown key(s) {', '.join(hints)} in config section '{path}'; known keys: {', '.join(sorted(known))}"
            )
    return {**section_defaults(path, schema_path), **values}


def resolve_section(name: str, values: Mapping[str, Any] | None, schema_path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """:func:`resolve` under its first release's name."""
    return resolve(name, values, schema_path)


def load_config(path: str | os.PathLike, schema: str | os.PathLike | None = SCHEMA_PATH) -> dict:
    """Read a config YAML the way the Snakefile does: schema-validated, defaults filled in."""
    import yaml
    from snakemake.utils import validate

    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"config file not found: {path}")
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if schema and Path(schema).is_file():
        validate(config, str(schema), set_default=True)
    return config


def config_from_cli(config_json: str | None, config_path: str | os.PathLike | None,
                    schema: str | os.PathLike | None = SCHEMA_PATH) -> dict:
    """The workflow config a command was given: ``--config-json`` (what a rule passes) or
    ``--config`` (a YAML file, validated as the Snakefile does)."""
    import json

    if config_json is not None:
        try:
            config = json.loads(config_json)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--config-json is not valid JSON: {exc.msg}") from None
        if not isinstance(config, dict):
            raise SystemExit("--config-json must be a JSON object (the workflow config)")
        return config
    return load_config(config_path, schema)
