"""What a roll-out's answer is: the last ``\\boxed{}`` and the two answer policies (``strict``, ``ttrl``)."""

from __future__ import annotations

import re

from concord.answers.canonical import normalize_choice


_BOXED = re.compile(r"\\boxed(?![A-Za-z])")
# A backslash escapes the next character (``\{`` is a literal brace and must not count).
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)


def extract_boxed(text: str | None) -> str | None:
    """Content of the **last** ``\\boxed{...}`` (braces balanced), or None.

    ``\\boxed {x}`` (whitespace before the brace) is accepted. None when there is no ``\\boxed``,
    when the last one has no brace group, when its braces never balance (a truncated generation),
    or when it is empty: an incomplete final answer is no answer, and an earlier box is not the
    model's final word.
    """
    if not text:
        return None
    if not isinstance(text, str):
        raise TypeError(f"extract_boxed expects a string, got {type(text).__name__}")
    last = None
    for last in _BOXED.finditer(text):
        pass
    if last is None:
        return None
    start = last.end()
    while start < len(text) and text[start].isspace():
        start += 1
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for token in _BRACE_TOKEN.finditer(text, start):
        tok = token.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                content = text[start + 1 : token.start()].strip()
                return content or None
    return None


#: ``ttrl``: TTRL's extractor (last ``boxed``, "the answer is", the last number, its normalisation);
#: every generation yields a string, ``""`` when nothing is found, and that string votes.
#: ``strict``: the content of the last complete, non-empty ``\boxed{}``, else None (no vote).
POLICIES = ("ttrl", "strict")
TASKS = ("math", "multiple_choice")


def check_policy(policy: str) -> str:
    """``policy`` itself, or a ValueError naming the allowed values."""
    if policy not in POLICIES:
        raise ValueError(f"unknown answer policy {policy!r}; allowed: {', '.join(POLICIES)} (config key answers.policy)")
    return policy


def extract_answer(text: str | None, policy: str = "strict", *, task: str = "math") -> str | None:
    r"""The answer a roll-out gives under ``policy``: the string that forms its vote class.

    ``None`` means unanswered (no vote, no node, reward 0); ``""`` is an answer like any other
    (``ttrl`` only: an empty generation, an empty box, a text without a number). A ``None`` text
    (no generation at all) is unanswered under both policies. For ``multiple_choice`` a choice
    letter is reduced to the bare letter; under ``strict`` anything else is unanswered, under
    ``ttrl`` it still votes as written (the paper keeps one ``\boxed{}`` channel and one grader for
    multiple choice, Appendix I).
    """
    check_policy(policy)
    _check_task(task)
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"extract_answer expects a string, got {type(text).__name__}")
    if policy == "strict":
        answer = extract_boxed(text)
        return answer if task == "math" or answer is None else normalize_choice(answer)
    from concord.ttrl_extraction import ttrl_answer

    answer = ttrl_answer(text)
    return answer if task == "math" else normalize_choice(answer) or answer


def graded_answer(text: str | None, policy: str = "strict", *, task: str = "math") -> str | None:
    r"""The answer as the model wrote it, for grading against gold under ``policy``.

    ``strict``: the same as :func:`extract_answer`. ``ttrl``: the text TTRL's extractor located,
    *before* its normalisation, which is lossy (``1\pm\sqrt{2}`` loses its ``\pm`` as a unit word,
    ``t+1`` its ``t``); grading reads what was written, so a correct answer is never graded wrong
    because of the vote's string surgery (docs/fidelity.md).
    """
    check_policy(policy)
    _check_task(task)
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"graded_answer expects a string, got {type(text).__name__}")
    if policy == "strict":
        return extract_answer(text, "strict", task=task)
    from concord.ttrl_extraction import trim_trailing_units, ttrl_span

    # "The answer is 12 square units." locates "12 square units"; the unit words TTRL itself
    # removes are trimmed off the end (only there, and never a one-letter word, which may be a
    # variable), so a stated answer with its unit is graded on its value.
    span = trim_trailing_units(ttrl_span(text))
    return span if task == "math" else normalize_choice(span) or span


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
