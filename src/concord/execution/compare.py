"""Grading one output against a benchmark's expected output, as LiveCodeBench's harness does.

``lcb_runner/evaluation/testing_util.py``: call-based answers are compared with Python ``==``
after turning a *top-level* tuple into a list (so ``Fraction(5, 2) == 2.5`` and ``2 == 2.0``,
but a nested tuple never equals a JSON list); standard-input answers line by line after
stripping, a line matching when equal as text or as a list of ``Decimal`` tokens. The FMV vote
does not use this: it compares recorded outputs for exact equality (``docs/fidelity.md``).
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation

from concord.execution import literals
from concord.execution.normalize import normalize_stdout
from concord.execution.outcome import REPR_PREFIX, normalize_mode

__all__ = ["outputs_match", "call_output_matches", "stdin_output_matches"]


def outputs_match(expected: str, output: str | None, mode: str) -> bool:
    """LiveCodeBench's verdict for one test: does a recorded ``output`` match ``expected`` (the
    benchmark's raw expected output)? ``humaneval`` outputs pass when the check passed."""
    if output is None:
        return False
    mode = normalize_mode(mode)
    if mode == "call":
        return call_output_matches(expected, output)
    if mode == "humaneval":
        return output == "passed"
    return stdin_output_matches(expected, output)


def call_output_matches(expected: str, output: str) -> bool:
    """``prediction == json.loads(expected)`` after LiveCodeBench's top-level tuple-to-list,
    decided on the parsed tree of the recorded output (:func:`literals.equals_json`: iterative,
    no candidate container is built or hashed)."""
    if output.startswith(REPR_PREFIX):
        return False  # no literal form: not a value LiveCodeBench's == could equate with JSON
    try:
        tree = literals.parse(output)
        want = json.loads(expected)
    except (ValueError, RecursionError):
        return False
    return literals.equals_json(tree, want)


def stdin_output_matches(expected: str, output: str) -> bool:
    want = normalize_stdout(expected).split("\n")
    got = normalize_stdout(output).split("\n")
    if len(want) != len(got):
        return False
    for a, b in zip(got, want):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] != [Decimal(x) for x in b.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True
