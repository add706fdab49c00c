"""What test-time training needs to know about a *task* (math, multiple choice, code, ...).

:func:`concord.rl.run.train` is one trainer for every paper's arms; what differs between the
CoRE paper's math benchmarks and the FMV paper's code benchmarks is only how a question becomes
a prompt, which of its fields the reward may see, and -- for validation and the per-step
diagnostics, never for the reward -- how a completion is graded against the question's
reference. A :class:`TrainingTask` bundles those four things; tasks register by name, the math
tasks here, the code task from the FMV paper's package (``concord.papers.fmv``), so the shared
layer never imports a paper package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

Question = Mapping[str, Any]
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class TrainingTask:
    """Hooks of one task.

    Args:
        name: the ``task`` value of a benchmark (``math``, ``multiple_choice``, ``code``).
        load: questions file -> question records (each with a unique ``id``).
        messages: (question, prompt_style) -> the chat prompt the policy answers.
        grade: (questions, completions per question, params) -> correctness per completion, with
            ``params`` the run's scorer parameters (e.g. a code task's sandbox limits). Sees the
            reference answers: used by validation and diagnostics only, never by the reward.
        context: question -> its non-gold fields a reward scorer needs (e.g. a code question's
            test inputs); every value must have one type across questions (Arrow columns).
        diagnostics: (scored groups, questions by id) -> per-step logging values, or None.
        with_policy: answer policy -> this task reading answers with that policy
            (``answers.policy``); None for tasks whose answers are not read by a policy (code).
    """

    name: str
    load: Callable[[str | os.PathLike], list[dict]]
    messages: Callable[[Question, str], Messages]
    grade: Callable[[Sequence[Question], Sequence[Sequence[str]], Mapping[str, Any]], list[list[bool]]]
    context: Callable[[Question], dict[str, Any]] = field(default=lambda q: {})
    diagnostics: Callable[[Sequence, Mapping[str, Question]], dict[str, float]] | None = None
    with_policy: Callable[[str], "TrainingTask"] | None = None


_TASKS: dict[str, TrainingTask] = {}


def register_task(task: TrainingTask) -> TrainingTask:
    """Register (or replace) a task under ``task.name``."""
    _TASKS[task.name] = task
    return task


def get_task(name: str, answer_policy: str | None = None) -> TrainingTask:
    """The task registered as ``name``; with ``answer_policy``, the variant that grades answers
    read under that policy (tasks without answer policies ignore it)."""
    if name not in _TASKS:
        import difflib

        close = difflib.get_close_matches(str(name), sorted(_TASKS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"no training task {name!r}.{hint} Known: {sorted(_TASKS)} (paper packages register theirs "
            f"when concord.papers is imported)"
        )
    task = _TASKS[name]
    return task.with_policy(answer_policy) if answer_policy and task.with_policy else task


def task_names() -> list[str]:
    return sorted(_TASKS)


# --------------------------------------------------------------------------- math tasks
def _math_task(name: str, policy: str = "strict") -> TrainingTask:
    def load(path):
        from concord.data import load_questions

        return load_questions(path)

    def messages(q: Question, prompt_style: str) -> Messages:
        from concord.data import build_messages

        return build_messages(q["prompt"], prompt_style, name)

    def grade(questions: Sequence[Question], completions: Sequence[Sequence[str]], params=None) -> list[list[bool]]:
        from concord.answers import grade as grade_answer, graded_answer

        return [[bool(grade_answer(graded_answer(t, policy, task=name), q["answer"])) for t in texts]
                for q, texts in zip(questions, completions)]

    def diagnostics(groups, questions_by_id):
        from concord.rl.diagnostics import math_diagnostics

        return math_diagnostics(groups, {k: q["answer"] for k, q in questions_by_id.items()})

    return TrainingTask(name=name, load=load, messages=messages, grade=grade, diagnostics=diagnostics,
                        with_policy=lambda p: _math_task(name, p))


MATH = register_task(_math_task("math"))
MULTIPLE_CHOICE = register_task(_math_task("multiple_choice"))

__all__ = ["TrainingTask", "get_task", "register_task", "task_names"]
