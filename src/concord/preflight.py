"""Checks that run while the workflow is planned (also on ``snakemake -n``), so that a bad config
fails in seconds with a few lines instead of inside a job hours later, or with the whole schema.

* :func:`validate_config` -- the JSON-schema check Snakemake's ``validate`` does (defaults
  filled), but a failure reads as the failing key, the schema rule it broke and what is allowed
  (Snakemake's own message prints the whole schema and the whole config: ~1,500 lines).
* :func:`check_paths` -- every file a config names (``path:`` of a benchmark in any section,
  ``id:`` of a ``source: local`` model) must exist when the workflow is planned.
* :func:`check_context_budgets` -- every training job's prompt budget plus completion budget fits
  its model's positions (vLLM refuses to start otherwise, and HF would run past them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config the workflow cannot run with; the message names the key and the fix."""


# ------------------------------------------------------------------ schema errors


def _key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _allowed(error) -> str:
    """What the broken schema rule allows, in words."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    rule, value = error.validator, error.validator_value
    if rule == "additionalProperties":
        keys = sorted((schema.get("properties") or {}).keys())
        return "keys " + ", ".join(keys) if keys else "no other keys"
    if rule == "enum":
        return "one of " + ", ".join(_short(v) for v in value)
    if rule == "const":
        return f"exactly {_short(value)}"
    if rule in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                "minItems", "maxItems", "minProperties", "maxProperties", "multipleOf"):
        kind = schema.get("type")
        return f"{kind + ', ' if isinstance(kind, str) else ''}{rule} {value}"
    if rule == "type":
        return f"a value of type {value if isinstance(value, str) else ' or '.join(value)}"
    if rule == "pattern":
        return f"a string matching {value}"
    if rule == "required":
        return "these keys present: " + ", ".join(value)
    if rule == "uniqueItems":
        return "no repeated items"
    described = schema.get("description")
    return " ".join(str(described).split()) if described else f"{rule}: {_short(value)}"


def _headline(error) -> str:
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set((error.schema.get("properties") or {}).keys()) if isinstance(error.schema, Mapping) else set()
        unknown = sorted(k for k in error.instance if k not in allowed)
        names = ", ".join(repr(k) for k in unknown) or "?"
        return f"unknown key {names} at {where}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    return f"{where} = {_short(error.instance)}: {error.message if len(error.message) < 160 else error.validator}"


def describe_schema_error(error, schema_file: str | os.PathLike = "config/schema.yaml") -> str:
    """Three lines: the failing key and value, the schema rule it broke, what is allowed."""
    from jsonschema.exceptions import best_match

    if error.context:  # oneOf/anyOf: the branch that came closest says the most
        error = best_match(error.context)
    rule_at = " > ".join(str(p) for p in error.absolute_schema_path) or "<root>"
    return (
        f"Invalid config: {_headline(error)}\n"
        f"  rule broken: {error.validator} ({schema_file}: {rule_at})\n"
        f"  allowed: {_allowed(error)}"
    )


def validate_config(config: dict, schema_file: str | os.PathLike) -> None:
    """Validate (and fill defaults into) ``config`` like ``snakemake.utils.validate``; raise
    :class:`ConfigError` with :func:`describe_schema_error`'s three lines on failure."""
    from jsonschema.exceptions import ValidationError
    from snakemake.utils import validate

    try:
        validate(config, str(schema_file))
    except Exception as exc:  # Snakemake re-raises the ValidationError as a WorkflowError (a string)
        cause = exc
        while cause is not None and not isinstance(cause, ValidationError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise ConfigError(describe_schema_error(cause, schema_file)) from None


def apply_subset(config: dict) -> None:
    """Drop every key of ``models``, ``benchmarks`` and ``fmv.models`` that ``subset`` does not
    keep (in place; no ``subset``: nothing changes). A kept key the config lacks is an error."""
    subset = config.get("subset") or {}
    places = {"models": ("models",), "benchmarks": ("benchmarks",), "fmv_models": ("fmv", "models")}
    for name, where in places.items():
        keep = subset.get(name)
        if not keep:
            continue
        parent = config
        for key in where[:-1]:
            parent = parent.get(key) or {}
        section = parent.get(where[-1]) or {}
        missing = [k for k in keep if k not in section]
        if missing:
            raise ConfigError(f"subset.{name}: {missing} not among the keys of {'.'.join(where)} ({sorted(section)})")
        parent[where[-1]] = {k: section[k] for k in keep}


# ------------------------------------------------------------------ paths


def _named_paths(node: Any, where: tuple = ()) -> Iterator[tuple[str, str]]:
    """(config key, path) of every ``path:`` value and every ``source: local`` model ``id``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "path" and isinstance(value, str) or key == "id" and node.get("source") == "local" and isinstance(value, str):
                yield _key_path(where + (key,)), value
            else:
                yield from _named_paths(value, where + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _named_paths(value, where + (i,))


def missing_paths(config: Mapping, workdir: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """(config key, path) of every named file or directory that does not exist."""
    base = Path(workdir) if workdir is not None else Path.cwd()
    return [(key, path) for key, path in _named_paths(config)
            if not (Path(path) if os.path.isabs(path) else base / path).exists()]


def check_paths(config: Mapping, workdir: str | os.PathLike | None = None) -> None:
    """Raise :class:`ConfigError` naming every config path that does not exist."""
    missing = missing_paths(config, workdir)
    if missing:
        base = Path(workdir) if workdir is not None else Path.cwd()
        lines = [f"  {key}: {path}" for key, path in missing]
        raise ConfigError(
            f"the config names {len(missing)} file(s) or directories that do not exist "
            f"(relative paths are read from {base}):\n" + "\n".join(lines)
            + "\nFix the path in the config, or put the data there before planning."
        )


# ------------------------------------------------------------------ context budgets


def training_sections(config: Mapping) -> list[tuple[str, dict, list]]:
    """(name, training section, model specs) of every training the config plans: the CoRE
    ``training`` over ``models``; with FMV-TTRL on, ``fmv.ttrl.training`` over it, on FMV's models."""
    models = dict(config.get("models") or {})
    out = [("training", dict(config.get("training") or {}), list(models.items()))]
    fmv = config.get("fmv") or {}
    ttrl = fmv.get("ttrl") or {}
    if ttrl.get("enabled"):
        fmv_models = dict(fmv.get("models") or models)
        chosen = ttrl.get("model")
        specs = [(k, v) for k, v in fmv_models.items() if chosen is None or k == chosen]
        out.append(("fmv.ttrl.training", {**(config.get("training") or {}), **(ttrl.get("training") or {})}, specs))
    return out


def check_context_budgets(config: Mapping, workdir: str | os.PathLike | None = None) -> None:
    """Raise :class:`ConfigError` naming every (training, model) whose context budget
    (``max_prompt_length`` + the longest completion budget) exceeds the model's positions.

    Positions come from :func:`concord.models.known_positions` (hub models: their optional
    ``max_positions``; otherwise the job checks when it loads the model)."""
    from concord.models import known_positions
    from concord.rl.settings import context_budget, resolve_training

    problems = []
    for name, training, specs in training_sections(config):
        cfg, _ = resolve_training(training, config.get("evaluation"))
        need = context_budget(cfg)
        for key, spec in specs:
            positions = known_positions(dict(spec or {}), workdir)
            if positions is not None and need > positions:
                problems.append(f"  {name}: max_prompt_length {cfg['max_prompt_length']} + completion budget "
                                f"{need - int(cfg['max_prompt_length'])} = {need} tokens > {positions} positions of model {key}")
    if problems:
        raise ConfigError("training context exceeds the model's positions (vLLM would refuse to start; the model "
                          "cannot attend past them):\n" + "\n".join(problems)
                          + "\nLower training.max_prompt_length or the completion budgets (max_completion_length, "
                          "val_max_new_tokens / evaluation.max_new_tokens).")
