"""Chat prompts for code generation and for GenCluster's pairwise judge.

Generation follows LiveCodeBench's code-generation format (question, then a format section
that either shows the starter code or asks for a stdin/stdout program, code in backticks);
HumanEval questions are function headers with docstrings, shown as starter code.
"""

from __future__ import annotations

SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all tests."
)

_WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose "
    "your code within delimiters."
)
_STDIN = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
    "test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when "
    "the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT."
)


def generation_messages(question: dict) -> list[dict[str, str]]:
    """The conversation that asks the model for one program for ``question``."""
    starter = question.get("starter_code") or ""
    if question.get("source") == "humaneval":
        user = (
            "Complete the following Python function. Write the whole function, with the imports it "
            "needs, in a single ```python code block.\n\n"
            f"```python\n{starter.rstrip()}\n```\n"
        )
    else:
        user = f"### Question:\n{question['prompt'].strip()}\n\n"
        if starter.strip():
            user += f"### Format: {_WITH_STARTER}\n```python\n{starter.rstrip()}\n```\n\n"
        else:
            user += f"### Format: {_STDIN}\n```python\n# YOUR CODE HERE\n```\n\n"
        user += "### Answer: (use the provided format with backticks)\n\n"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


JUDGE_SYSTEM = "You are an expert competitive programmer who reviews solutions carefully."


def judge_messages(question: dict, program_a: str, program_b: str) -> list[dict[str, str]]:
    """Ask which of two programs solves ``question``; the reply must end with
    "Final answer: A" or "Final answer: B" (what :func:`concord.papers.fmv.baselines.parse_verdict` reads)."""
    user = (
        f"### Problem\n{question['prompt'].strip()}\n\n"
        f"### Solution A\n```python\n{program_a.rstrip()}\n```\n\n"
        f"### Solution B\n```python\n{program_b.rstrip()}\n```\n\n"
        "The two solutions behave differently on some inputs, so at most one of them is correct. "
        "Analyse both against the problem statement, then decide which one is correct. "
        "End your reply with exactly one line: \"Final answer: A\" or \"Final answer: B\"."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
