"""concord.execution: real sandboxed subprocesses, both LiveCodeBench modes, LCB grading."""

from __future__ import annotations

import os

import shutil

import pytest

from concord.execution import Outcome, outputs_match, run_programs
from concord.execution import sandbox as sb

RUN = dict(timeout_s=2.0, memory_mb=256)


def outputs(rows):
    return [[o.output for o in row] for row in rows]


def statuses(rows):
    return [[o.status for o in row] for row in rows]


# ------------------------------------------------------------------ stdin mode


def test_stdin_programs_read_input_every_way_and_outputs_are_normalised():
    programs = [
        "print(int(input()) * 2)",
        "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
        "data = open(0).read().split()\nprint(len(data))",
        "import sys\nprint(sys.stdin.buffer.read().decode().strip()[::-1])",
        # relies on LiveCodeBench's prelude (no import of math) and on __main__ guards
        "def main():\n    print(  floor(sqrt(int(input())))  , '   ')\nif __name__ == '__main__':\n    main()",
        "print(1)\nexit()\nprint(2)",
        "print('  a  \\n  b   \\n\\n')",
    ]
    rows = run_programs(programs, ["16", "9"], mode="stdin", **RUN)
    assert outputs(rows) == [
        ["32", "18"],
        ["16", "9"],
        ["1", "1"],
        ["61", "9"],
        ["4", "3"],
        ["1", "1"],
        ["a\nb", "a\nb"],
    ]


def test_stdin_errors_and_syntax_errors_are_per_candidate():
    rows = run_programs(["x = 1/0", "def (", "print(input())"], ["7"], mode="stdin", **RUN)
    assert statuses(rows) == [["error"], ["error"], ["ok"]]
    assert "ZeroDivisionError" in rows[0][0].error and "SyntaxError" in rows[1][0].error
    assert rows[0][0].output is None and rows[2][0].output == "7"


def test_none_program_is_an_error_without_running():
    rows = run_programs([None, "print(1)"], ["", ""], mode="stdin", **RUN)
    assert statuses(rows) == [["error", "error"], ["ok", "ok"]]


def test_timeout_is_per_input_and_later_inputs_still_run():
    loop_on_odd = "n = int(input())\nwhile n % 2:\n    pass\nprint(n)"
    rows = run_programs([loop_on_odd], ["1", "2", "3", "4"], mode="stdin", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["timeout", "ok", "timeout", "ok"]]
    assert outputs(rows)[0][1::2] == ["2", "4"]


def test_candidate_that_swallows_the_timer_is_killed_from_outside_and_the_run_resumes():
    stubborn = (
        "n = int(input())\n"
        "while n == 1:\n"
        "    try:\n"
        "        while True:\n"
        "            pass\n"
        "    except BaseException:\n"
        "        pass\n"
        "print(n)"
    )
    rows = run_programs([stubborn], ["1", "2"], mode="stdin", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["timeout", "ok"]]
    assert rows[0][1].output == "2"


def test_candidate_killing_its_own_harness_loses_only_that_input():
    prog = "import os\nn = int(input())\nif n == 2:\n    os._exit(3)\nprint(n)"
    rows = run_programs([prog], ["1", "2", "3"], mode="stdin", **RUN)
    assert statuses(rows) == [["ok", "error", "ok"]]
    assert outputs(rows)[0] == ["1", None, "3"]


# ------------------------------------------------------------------ call mode


def test_call_based_functions_and_solution_classes():
    programs = [
        "def f(a, b):\n    return (a + b, a * b)",
        "class Solution:\n    def f(self, a, b):\n        return [a + b, a * b]",
        "def f(a, b):\n    return [float(a + b), float(a * b)]",  # 3.0 == 3 as in LCB
        "def f(a, b):\n    return {a, b}",
        "def g(a, b):\n    return 0",
        "def f(a, b):\n    return {'y': a, 'x': b}",
    ]
    rows = run_programs(programs, ["1\n2", "3\n4"], mode="call", fn_name="f", **RUN)
    assert outputs(rows)[:3] == [["[3,2]", "[7,12]"]] * 3
    assert rows[3][0].output.startswith("repr:")
    assert statuses(rows)[4] == ["error", "error"] and "no function named 'f'" in rows[4][0].error
    assert outputs(rows)[5] == ['{"x":2,"y":1}', '{"x":4,"y":3}']


def test_call_mode_validates_inputs_and_fn_name():
    with pytest.raises(ValueError, match="inputs\\[1\\]"):
        run_programs(["def f(x): return x"], ["1", "not json"], mode="call", fn_name="f", **RUN)
    with pytest.raises(ValueError, match="fn_name"):
        run_programs(["def f(x): return x"], ["1"], mode="call", **RUN)
    with pytest.raises(ValueError, match="unknown execution mode"):
        run_programs(["print(1)"], ["1"], mode="stdout", **RUN)


def test_call_mode_timeouts_and_prints_are_ignored():
    prog = "def f(n):\n    print('noise' * 1000)\n    while n < 0:\n        pass\n    return n + 1"
    rows = run_programs([prog], ["1", "-1", "5"], mode="functional", fn_name="f", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["ok", "timeout", "ok"]]
    assert outputs(rows)[0][::2] == ["2", "6"]


def test_parallel_workers_give_the_same_result_as_one():
    programs = [f"print(int(input()) + {i})" for i in range(6)]
    one = run_programs(programs, ["1", "2"], mode="stdin", workers=1, **RUN)
    two = run_programs(programs, ["1", "2"], mode="stdin", workers=2, **RUN)
    assert one == two and outputs(one)[5] == ["6", "7"]


# ------------------------------------------------------------------ grading


def test_outputs_match_follows_livecodebench():
    assert outputs_match("3\n1 2\n", "3\n1 2", "stdin")
    assert outputs_match("1.50 2\n", "1.5 2.0", "stdin")  # Decimal comparison per line
    assert not outputs_match("1 2\n", "1 2\n3", "stdin")
    assert not outputs_match("yes", "YES", "stdin")
    assert not outputs_match("1", None, "stdin")
    assert outputs_match("[1, 2]", "[1,2]", "call")
    assert outputs_match("3", "3.0", "call")
    assert not outputs_match("[1, 2]", "repr:{1, 2}", "call")
    assert Outcome("ok", "1").ok and not Outcome("error", None).ok


# ------------------------------------------------------------------ sandbox selection


def test_refuses_without_a_sandbox_unless_opted_out(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor unshare can be found
    monkeypatch.delenv(sb.ENV_BACKEND, raising=False)
    sb._probe.cache_clear()
    try:
        with pytest.raises(sb.SandboxUnavailable, match="bubblewrap"):
            run_programs(["print(1)"], [""], mode="stdin", **RUN)
        python = shutil.which("python3", path="/usr/bin") or sb.default_python()
        rows = run_programs(["print(1)"], [""], mode="stdin", sandbox="none", python=python, **RUN)
        assert outputs(rows) == [["1"]]
    finally:
        sb._probe.cache_clear()


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown sandbox backend 'docker'"):
        run_programs(["print(1)"], [""], mode="stdin", sandbox="docker", **RUN)


def test_hidden_paths_keep_the_interpreter_visible():
    hide, keep = sb.hidden_paths(sb.default_python())
    repo = os.path.realpath(sb.REPO_ROOT)
    # A checkout under /tmp is hidden by the private tmpfs that replaces /tmp in the sandbox.
    assert sb._is_within(repo, "/tmp") or repo in hide or any(sb._is_within(repo, h) for h in hide)
    prefix = sb.python_prefix(sb.default_python())
    assert not any(h == prefix or sb._is_within(prefix, h) for h in hide) or prefix in keep


def test_programs_drawing_random_numbers_are_reproducible():
    prog = "import random\nprint(random.random(), hash('concord'))"
    first = run_programs([prog], ["", ""], mode="stdin", **RUN)
    again = run_programs([prog], ["", ""], mode="stdin", **RUN)
    assert first == again and first[0][0].output == first[0][1].output
