"""From a model's completion to a runnable program.

LiveCodeBench takes the last fenced code block of a completion. We do the same, except that
when the question names a function we prefer the last block that defines it (models often end
with a usage example), and a completion without fences counts as code when it parses.

A reasoning ("Thinking") model writes its reasoning first and closes it with ``</think>``
(Qwen3-Thinking's chat template opens the block in the prompt, so the completion holds only the
closing tag). Drafts inside the reasoning are not the answer: only the text after the last
``</think>`` is searched for code, and a Thinking model's completion that never closes its
reasoning (cut at the token budget) holds no answer at all.
"""

from __future__ import annotations

import ast
import re
import textwrap

# ```python ... ``` or ``` ... ```; an unterminated last fence (the model ran out of tokens)
# still yields its (truncated) code.
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)
_NOT_PYTHON = {"text", "txt", "plaintext", "output", "bash", "sh", "shell", "console", "json", "cpp", "c", "java"}


THINK_CLOSE = "</think>"


def final_answer(text: str | None, *, thinking: bool = False) -> str:
    """The part of a completion after the model's reasoning (see the module docstring).

    ``thinking``: the model is a reasoning model, so text without ``</think>`` is unfinished
    reasoning and yields "". Any model's text is cut after a ``</think>`` it does write.
    """
    text = text or ""
    head, sep, tail = text.rpartition(THINK_CLOSE)
    if sep:
        return tail
    return "" if thinking else text


def code_blocks(text: str) -> list[str]:
    """Fenced code blocks of ``text`` that are (or may be) Python, in order."""
    blocks = []
    for match in _FENCE.finditer(text or ""):
        lang, body = match.group(1).lower(), match.group(2)
        if lang in _NOT_PYTHON:
            continue
        if body.strip():
            blocks.append(body.rstrip() + "\n")
    return blocks


def defines(code: str, name: str | None) -> bool:
    """Does ``code`` define ``name`` at top level (a function, or a method of class Solution)?"""
    if not name:
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and node.name == "Solution":
            if any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == name for b in node.body):
                return True
    return False


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def extract_code(text: str, fn_name: str | None = None, *, thinking: bool = False) -> str | None:
    """The program in a completion's final answer (:func:`final_answer`), or None when it holds no code."""
    text = final_answer(text, thinking=thinking)
    blocks = code_blocks(text)
    if blocks:
        if fn_name:
            defining = [b for b in blocks if defines(b, fn_name)]
            if defining:
                return defining[-1]
        return blocks[-1]
    stripped = (text or "").strip()
    if stripped and _compiles(stripped) and _looks_like_code(stripped):
        return stripped + "\n"
    # Completion-style output: an indented function body that only compiles inside a def.
    body = (text or "").rstrip().lstrip("\n")
    if body.strip() and _compiles("def _body():\n" + textwrap.indent(textwrap.dedent(body), "    ")):
        return body + "\n"
    return None


def _compiles(code: str) -> bool:
    # compile(), unlike ast.parse(), also rejects e.g. a module-level ``return``.
    try:
        compile(code, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _looks_like_code(text: str) -> bool:
    # A bare word or sentence can parse as Python (an expression); demand a statement that
    # does something a program would.
    tree = ast.parse(text)
    return any(not isinstance(node, ast.Expr) for node in tree.body) or any(
        isinstance(node.value, ast.Call) for node in tree.body if isinstance(node, ast.Expr)
    )


def assemble_program(code: str | None, *, fn_name: str | None = None, prefix: str = "", prompt: str = "") -> str | None:
    """The program to run for one candidate.

    ``prefix``: code the candidate may rely on without repeating it (HumanEval: the prompt's
    imports and helper functions). ``prompt``: the function header the model was asked to
    complete; when the candidate's code does not define ``fn_name`` it is taken as the body of
    that function (completion-style output).
    """
    if code is None:
        return None
    if fn_name and not defines(code, fn_name) and prompt:
        continued = prompt + code
        if defines(continued, fn_name):
            return continued
    return (prefix.rstrip() + "\n\n" + code) if prefix.strip() else code


def helper_source(prompt: str, fn_name: str) -> str:
    """Everything of a HumanEval prompt except the function to write: imports and helpers."""
    tree = ast.parse(prompt)
    keep = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn_name)]
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) + ("\n" if keep else "")
