"""The sandbox's inside, part by part, without processes: the HumanEval call plan."""

from __future__ import annotations

import pytest

from concord.execution import harness


def _plan(body: str, entry: str = "f") -> list:
    got_entry, calls = harness._planned_calls(f"def check(candidate):\n{body}\ncheck({entry})\n")
    assert got_entry == entry
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
    "",
])
def test_no_plan_for_an_unusual_check(check):
    assert harness._planned_calls(check)[1] == []
