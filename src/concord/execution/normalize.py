"""Trusted-side normalisation: what a runner event becomes as an :class:`Outcome`.

Runs in the parent only. A call-mode return value arrives as text from the candidate's process;
it is parsed here by a restricted literal parser (never ``eval``) and rendered again by the
harness's encoder, so whatever the candidate's process wrote, the recorded output is either the
canonical text of a plain value or marked ``repr:`` (grades as wrong).
"""

from __future__ import annotations

import ast
import json
import math
from decimal import Decimal
from fractions import Fraction

from concord.execution.harness import _encoder
from concord.execution.outcome import REPR_PREFIX, STATUSES, Outcome

__all__ = ["normalize_stdout", "normalize_value", "parse_value", "canonical_value", "to_outcome", "parse_call_input"]

_render = _encoder(1 << 62)


def normalize_stdout(text: str) -> str:
    """LiveCodeBench's view of a stdout (``get_stripped_lines``): the stripped text, each line stripped."""
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def normalize_value(value) -> str:
    """The recorded output of a call-mode return value: its canonical literal text (what the
    vote compares exactly), or ``repr:`` + its repr when it has no literal form."""
    try:
        plain, text = _render(value)
    except (RecursionError, MemoryError, ValueError):
        return REPR_PREFIX + "<unrepresentable>"
    return text if plain else REPR_PREFIX + text


def parse_call_input(text: str) -> list:
    """LiveCodeBench functional input: one JSON value per line, one line per argument."""
    return [json.loads(line) for line in text.split("\n") if line.strip()]


_NAMES = {"inf": math.inf, "nan": math.nan}


def _build(node: ast.AST):
    if isinstance(node, ast.Constant) and node.value is not Ellipsis:
        return node.value
    if isinstance(node, ast.List):
        return [_build(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_build(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("dict unpacking is not a literal")
        return {_build(k): _build(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _build(node.operand)
        if type(value) not in (int, float, complex):
            raise ValueError("sign on a non-number")
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):  # complex: (1+2j)
        left, right = _build(node.left), _build(node.right)
        if type(left) not in (int, float) or type(right) is not complex:
            raise ValueError("arithmetic is not a literal")
        return left + right if isinstance(node.op, ast.Add) else left - right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_build(a) for a in node.args]
        name = node.func.id
        if name == "Fraction" and len(args) == 2 and all(type(a) is int for a in args):
            return Fraction(*args)
        if name == "Decimal" and len(args) == 1 and type(args[0]) is str:
            return Decimal(args[0])
        if name in ("set", "frozenset") and not args:
            return set() if name == "set" else frozenset()
        if name == "frozenset" and len(args) == 1 and type(args[0]) is set:
            return frozenset(args[0])
    raise ValueError(f"not a plain value: {type(node).__name__}")


def parse_value(text: str):
    """The plain value written as ``text`` (Python literal syntax plus ``inf``/``nan``,
    ``Fraction(n, d)``, ``Decimal('s')``, ``set()``, ``frozenset(...)``); ValueError otherwise."""
    try:
        return _build(ast.parse(text, mode="eval").body)
    except (SyntaxError, TypeError, RecursionError, MemoryError, ArithmeticError) as exc:
        raise ValueError(f"not a plain value: {type(exc).__name__}") from None


def canonical_value(text: str) -> str | None:
    """The canonical text of the plain value ``text`` denotes, or None when it denotes none."""
    try:
        return _render(parse_value(text))[1]
    except (ValueError, RecursionError, MemoryError):
        return None


def to_outcome(event: dict, mode: str) -> Outcome:
    """A runner event as an Outcome; anything malformed is an error, never an ``ok``."""
    status, raw, error = event.get("status"), event.get("raw"), event.get("error")
    if status not in STATUSES:
        return Outcome("error", None, "malformed result")
    error = error[:1000] if isinstance(error, str) else None
    if status != "ok":
        return Outcome(status, None, error or status)
    if not isinstance(raw, str):
        return Outcome("error", None, "malformed result")
    if mode == "stdin":
        return Outcome("ok", normalize_stdout(raw))
    if mode == "humaneval":
        return Outcome("ok", "passed") if raw == "passed" else Outcome("error", None, "malformed result")
    text = canonical_value(raw) if event.get("plain") is True else None
    return Outcome("ok", text if text is not None else REPR_PREFIX + raw)
