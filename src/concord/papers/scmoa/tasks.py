"""What SC-MoA needs to know about a task: how to read a reply, cluster, and score (Appendix J.6).

* QA: the payload is the extracted answer (last ``Answer: ...`` line, else the last ``\\boxed{}``);
  proposals cluster by J.6's normalised string match (lower-cased, stripped); the option
  ``clustering="equivalence"`` also merges mathematically equal answers and option letters
  ("(B)" = "b", "1/2" = "0.5") through :mod:`concord.answers`. The quality score of a proposal is
  its agreement fraction over the N perturbations (0 for a reply without an answer, which agrees
  with nothing); the score used to pick the best of k samples is 1.0 for a reply that carries an
  answer and 0.0 for one that does not. The override never fires on QA (``override = False``:
  every answer scores 1.0, Section 4 and Appendix N).
* Code: the payload is the last ```python``` block; proposals cluster by public-test pass
  signature (the set of public tests passed); quality and verification score are the public-test
  pass rate. Programs run through :mod:`concord.execution`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from concord.papers.scmoa import prompts

_ANSWER_LINE = re.compile(r"(?im)^[ \t>*#_]*(?:final\s+)?answer\s*[:\uff1a]\s*(.+?)\s*$")
_ANSWER_IS = re.compile(r"(?i)\b(?:final\s+)?answer\s+(?:to\s+(?:this|the)\s+(?:question|problem)\s+)?is\s*[:=]?\s*(.+?)\s*(?:\.(?:\s|$)|\n|$)")
#: The answer-format placeholder of the J.3/J.4 prompts, which small models sometimes echo.
_PLACEHOLDERS = {"$value", "value"}
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)


class Task(Protocol):
    kind: str
    override: bool  # whether Phase 5's score-based override can fire (code: yes; QA: never)
    personas: dict[str, str]
    cot_template: str
    refine_system: str
    aggregate_system: str
    aggregate_system_pre: str  # Section 3: pre-refinement synthesis (no refinement step)

    def extract(self, text: str) -> str | None: ...
    def prepare(self, payloads: Sequence[str | None]) -> None: ...
    def group(self, payloads: Sequence[str | None]) -> list[int]: ...
    def score(self, payload: str | None) -> float: ...
    def quality(self, payloads: Sequence[str | None]) -> list[float]: ...
    def describe(self, payload: str | None) -> str: ...
    def failure_analysis(self, payload: str | None, reference: str | None) -> str | None: ...


def labels_from_keys(keys: Sequence[Any]) -> list[int]:
    """Cluster ids numbered by first occurrence; a ``None`` key is a cluster of its own."""
    ids: dict[Any, int] = {}
    out = []
    for key in keys:
        if key is None:
            out.append(len(ids))
            ids[object()] = len(ids)
            continue
        if key not in ids:
            ids[key] = len(ids)
        out.append(ids[key])
    return out


# ----------------------------------------------------------------------------------------- QA


def extract_answer(text: str) -> str | None:
    """The answer a reply commits to: its last ``Answer:`` line, else its last ``\\boxed{}``,
    else its last "the answer is X" sentence."""
    if not text:
        return None
    for raw in reversed(_ANSWER_LINE.findall(text)):
        value = _clean_answer(raw)
        if value and value.lower() not in _PLACEHOLDERS:
            return value
    from concord.answers import extract_boxed

    boxed = extract_boxed(text)
    if boxed and boxed.strip():
        return boxed.strip()
    for raw in reversed(_ANSWER_IS.findall(text)):
        value = _clean_answer(raw)
        if value and value.lower() not in _PLACEHOLDERS:
            return value
    return None


def _clean_answer(raw: str) -> str:
    # Math delimiters (even unbalanced, as in "$9") and emphasis are presentation, not the value.
    value = raw.strip().strip("*_` ").strip("$").strip()
    if value.startswith("\\boxed{") and value.endswith("}"):
        value = value[len("\\boxed{"):-1].strip()
    return value.rstrip(".").strip()


def j6_key(answer: str | None) -> str | None:
    """J.6 clustering key: the extracted answer lower-cased and stripped (no other merging)."""
    if answer is None:
        return None
    return answer.strip().lower() or None


def normalise_answer(answer: str | None) -> str | None:
    """Looser key (grading, and the ``equivalence`` clustering option): lower-cased, stripped,
    inner whitespace collapsed, and a bracketed option letter "(B)" read as "b"."""
    if answer is None:
        return None
    value = " ".join(answer.strip().lower().split())
    letter = re.fullmatch(r"\(?([a-z])\)?[.:]?", value)
    if letter:
        return letter.group(1)
    return value or None


QA_CLUSTERINGS = ("string", "equivalence")


@dataclass
class QATask:
    """Question answering: answers extracted from replies, clustered by J.6 string match."""

    kind: str = "qa"
    personas: dict[str, str] = field(default_factory=lambda: dict(prompts.QA_PERSONAS))
    cot_template: str = prompts.COT_QA
    refine_system: str = prompts.REFINE_SYSTEM_QA
    aggregate_system: str = prompts.AGGREGATE_SYSTEM_QA
    aggregate_system_pre: str = prompts.AGGREGATE_SYSTEM_QA_PRE
    #: "string" = J.6 (lower-cased, stripped); "equivalence" also merges option letters and
    #: mathematically equal answers ("1/2" vs "0.5")
    clustering: str = "string"
    override: bool = False  # every QA answer scores 1.0: the override never fires

    def __post_init__(self) -> None:
        if self.clustering not in QA_CLUSTERINGS:
            raise ValueError(f"QA clustering must be one of {QA_CLUSTERINGS}, got {self.clustering!r}")

    def extract(self, text: str) -> str | None:
        return extract_answer(text)

    def prepare(self, payloads: Sequence[str | None]) -> None:
        pass  # nothing to execute

    def group(self, payloads: Sequence[str | None]) -> list[int]:
        if self.clustering == "string":
            return labels_from_keys([j6_key(p) for p in payloads])
        keys = [normalise_answer(p) for p in payloads]
        from concord.answers import group_answers

        # Answers equal under the J.6 normalisation are one answer: hand the first spelling of
        # each normalised key to the equivalence grouping, which then merges e.g. "1/2" and "0.5".
        first: dict[str, str] = {}
        spelled = [None if k is None else first.setdefault(k, p) for k, p in zip(keys, payloads)]
        ids = group_answers(spelled)
        # Unanswered replies (-1) agree with nothing: each is a singleton cluster.
        return labels_from_keys([None if i == -1 else i for i in ids])

    def score(self, payload: str | None) -> float:
        return 1.0 if payload is not None else 0.0

    def quality(self, payloads: Sequence[str | None]) -> list[float]:
        labels = self.group(payloads)
        n = len(labels)
        return [sum(1 for m in labels if m == lab) / n if p is not None else 0.0 for lab, p in zip(labels, payloads)]

    def describe(self, payload: str | None) -> str:
        return payload if payload is not None else "(no answer)"

    def failure_analysis(self, payload: str | None, reference: str | None) -> str | None:
        return None


# --------------------------------------------------------------------------------------- code


def extract_code(text: str) -> str | None:
    """The last fenced Python block of a reply (the one J.3/J.4 ask for), else None."""
    if not text:
        return None
    blocks = [b.strip("\n") for b in _CODE_BLOCK.findall(text)]
    blocks = [b for b in blocks if b.strip()]
    return blocks[-1] + "\n" if blocks else None


@dataclass(frozen=True)
class TestResult:
    passed: bool
    detail: str = ""  # stderr or mismatch snippet when it failed


#: ``runner(programs, tests) -> results[program][test]``: executes every program on every test.
Runner = Callable[[Sequence[str], Sequence[Any]], list[list[TestResult]]]


@dataclass
class CodeTask:
    """Code generation: proposals cluster by public-test pass signature, scored by pass rate.

    ``public_tests`` are opaque to SC-MoA; ``runner`` executes them (see
    :func:`concord.papers.scmoa.code_runner.make_runner`). ``test_names`` name them in prompts.
    """

    public_tests: Sequence[Any]
    runner: Runner
    test_names: Sequence[str] | None = None
    kind: str = "code"
    override: bool = True
    personas: dict[str, str] = field(default_factory=lambda: dict(prompts.CODE_PERSONAS))
    cot_template: str = prompts.COT_CODE
    refine_system: str = prompts.REFINE_SYSTEM_CODE
    aggregate_system: str = prompts.AGGREGATE_SYSTEM_CODE
    aggregate_system_pre: str = prompts.AGGREGATE_SYSTEM_CODE_PRE
    _results: dict[str, list[TestResult]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.public_tests:
            raise ValueError("a code task needs at least one public test (clustering and the override use them)")
        names = list(self.test_names) if self.test_names is not None else [f"test_{i}" for i in range(len(self.public_tests))]
        if len(names) != len(self.public_tests):
            raise ValueError(f"{len(names)} test names for {len(self.public_tests)} public tests")
        self.test_names = names

    def extract(self, text: str) -> str | None:
        return extract_code(text)

    def prepare(self, payloads: Sequence[str | None]) -> None:
        """Run every not-yet-seen program on the public tests, in one batch."""
        todo = list(dict.fromkeys(p for p in payloads if p is not None and p not in self._results))
        if not todo:
            return
        results = self.runner(todo, self.public_tests)
        if len(results) != len(todo) or any(len(r) != len(self.public_tests) for r in results):
            raise RuntimeError("code runner returned a result matrix of the wrong shape")
        self._results.update(zip(todo, results))

    def results(self, payload: str | None) -> list[TestResult]:
        if payload is None:
            return [TestResult(False, "no ```python``` block in the reply")] * len(self.public_tests)
        if payload not in self._results:
            self.prepare([payload])
        return self._results[payload]

    def signature(self, payload: str | None) -> frozenset[str]:
        return frozenset(n for n, r in zip(self.test_names, self.results(payload)) if r.passed)

    def group(self, payloads: Sequence[str | None]) -> list[int]:
        """Clusters by public-test pass signature; a reply without code is a cluster of its own
        (it is not the same answer as a program that fails every test)."""
        self.prepare(payloads)
        return labels_from_keys([self.signature(p) if p is not None else None for p in payloads])

    def score(self, payload: str | None) -> float:
        res = self.results(payload)
        return sum(r.passed for r in res) / len(res)

    def quality(self, payloads: Sequence[str | None]) -> list[float]:
        self.prepare(payloads)
        return [self.score(p) for p in payloads]

    def describe(self, payload: str | None) -> str:
        passed = sorted(self.signature(payload))
        return f"passes {len(passed)}/{len(self.public_tests)} public tests ({', '.join(passed) or 'none'})"

    def failure_analysis(self, payload: str | None, reference: str | None) -> str | None:
        """Public tests on which the proposal and the reference differ, with error snippets."""
        mine, ref = self.results(payload), self.results(reference)
        lines = []
        for name, a, b in zip(self.test_names, mine, ref):
            if a.passed != b.passed:
                who = "you fail, the majority passes" if b.passed else "you pass, the majority fails"
                snippet = (a.detail if not a.passed else b.detail).strip()[-300:]
                lines.append(f"- {name}: {who}" + (f"\n  {snippet}" if snippet else ""))
        if not lines:
            return "Both solutions pass and fail the same public tests."
        return "\n".join(lines)
