"""Hostile candidates, by class of weakness, through the public API on the real sandbox.

Each class: nothing of another job in a candidate's memory; per-child kernel objects (SysV IPC,
keyrings, namespaces); limits that count everything (shared memory, memfd, /tmp, output, CPU
fairness); a bounded trusted side (huge, deep, hash-colliding return values); honest answers
graded as LiveCodeBench grades them.
"""

from __future__ import annotations

import json
import time
from collections import Counter, OrderedDict, defaultdict

import pytest

from concord.execution import outputs_match, run_checks, run_programs
from concord.execution import runner
from concord.execution import sandbox as sb
from concord.execution.literals import canonical, equals_json, parse

pytestmark = pytest.mark.skipif(runner._probe("bwrap", sb.default_python()) is not None,
                                reason="bubblewrap does not work on this machine")

SECRET = "zq" + "x7" * 8  # appears only in another job's data


def _stdin(programs, inputs, **kw):
    kw = {"timeout_s": 4.0, "memory_mb": 128, "workers": 2, "max_output_bytes": 1 << 20, "tmp_mb": 16, **kw}
    return run_programs(programs, inputs, mode="stdin", **kw)


def test_no_other_jobs_data_in_a_candidates_memory():
    # A HumanEval solution searches its heap for the hidden check; a stdin candidate searches for
    # an earlier candidate's program and output on the same worker.
    check = f"def check(candidate):\n    assert candidate(2) == '{SECRET}'\ncheck(f)\n"
    heap_search = (
        "import gc\n"
        "found = ''\n"
        "marker = 'assert candidate(2) ' + '== '\n"
        "for o in gc.get_objects():\n"
        "    for text in (o if isinstance(o, (list, tuple, dict)) else [o]):\n"
        "        if isinstance(text, str) and marker in text:\n"
        "            found = text.split(marker, 1)[1].split(chr(39))[1]\n"
        "def f(x):\n    return found or 'nothing'\n"
    )
    out = run_checks([(heap_search, check)], timeout_s=5.0, memory_mb=256, workers=1)
    assert out[0].status == "error", out
    # the earlier candidate's program and its output were in this worker before
    first = f"print({SECRET[:4]!r} + {SECRET[4:]!r})"
    scan = (
        "import gc, ctypes\n"
        "hit = any(isinstance(o, (str, bytes)) and " + repr(SECRET.encode()) + "[:18] in (o.encode() if isinstance(o, str) else o) for o in gc.get_objects())\n"
        "print('leak' if hit else 'clean')"
    )
    rows = _stdin([first, scan, scan], ["", ""], workers=1)
    assert [o.output for o in rows[0]] == [SECRET, SECRET]
    assert [o.output for o in rows[1] + rows[2]] == ["clean"] * 4


def test_sysv_ipc_and_keyrings_are_no_channel():
    writer = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "shm = libc.shmget(0x5eed, 4096, 0o1666)\n"
        "if shm >= 0:\n"
        "    addr = libc.shmat(shm, None, 0)\n"
        "    ctypes.memmove(addr, b'channel', 7)\n"
        "key = libc.syscall(248, b'user', b'concord-channel', b'secret', 6, -3)\n"  # add_key, session keyring
        "print('shm', shm >= 0, 'key', key >= 0, ctypes.get_errno())"
    )
    reader = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "shm = libc.shmget(0x5eed, 4096, 0o666)\n"
        "got = ctypes.string_at(libc.shmat(shm, None, 0), 7) if shm >= 0 else b''\n"
        "key = libc.syscall(249, b'user', b'concord-channel', None, 0)\n"  # request_key
        "print(got.decode() or 'none', key >= 0)"
    )
    rows = _stdin([writer, reader, reader], ["", ""], workers=1)
    for o in rows[0]:
        # both refused: a segment's inode number comes from a host-wide counter (seccomp.py)
        assert o.output.startswith("shm False key False"), o
    assert [o.output for o in rows[1] + rows[2]] == ["none False"] * 4


def test_namespaces_mounts_and_tracing_are_refused():
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "res = []\n"
        "for flags in (0x10000000, 0x00020000, 0x08000000, 0x40000000):\n"  # NEWUSER NEWNS NEWIPC NEWNET
        "    res.append(libc.unshare(flags) == 0)\n"
        "res.append(libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, b'size=1g') == 0)\n"
        "res.append(libc.syscall(101, 0, 1, 0, 0) == 0)\n"  # ptrace(PTRACE_ATTACH, 1)
        "res.append(libc.syscall(321, 0, 0, 0) >= 0)\n"  # bpf
        "res.append(libc.syscall(319, b'x', 0) >= 0)\n"  # memfd_create
        "sid = os.getsid(0)\n"
        "libc.setsid()\n"
        "res.append(os.getsid(0) != sid)\n"  # setsid is a no-op: the session stays
        "import subprocess\n"
        "print(sum(res))"
    )
    rows = _stdin([probe, "import threading\nt = threading.Thread(target=print, args=('thread ok',))\nt.start()\nt.join()"],
                  [""])
    assert rows[0][0].output == "0", rows[0]
    assert rows[1][0].output == "thread ok"  # clone3 is ENOSYS: threads fall back to clone


def test_memory_outside_the_address_space_counts_and_tmp_stays_capped():
    shm_bomb = (
        "import ctypes, mmap\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "held = 0\n"
        "for i in range(64):\n"
        "    seg = libc.shmget(0x1000 + i, 16 << 20, 0o1666)\n"
        "    if seg < 0:\n"
        "        break\n"
        "    addr = libc.shmat(seg, None, 0)\n"
        "    if addr in (None, ctypes.c_void_p(-1).value):\n"
        "        break\n"
        "    ctypes.memset(addr, 1, 16 << 20)\n"
        "    libc.shmdt(ctypes.c_void_p(addr))\n"
        "    held += 16\n"
        "print(held)"
    )
    shared_map = (
        "import mmap\nmaps = []\n"
        "for _ in range(40):\n"
        "    m = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_SHARED)\n"
        "    m.write(b'x' * (16 << 20))\n"
        "    maps.append(m)\n"
        "print(len(maps) * 16)"
    )
    fill_shm = "f = open('/dev/shm/fill', 'wb')\nfor _ in range(64):\n    f.write(b'x' * 2**20)\nprint('filled')"
    rows = _stdin([shm_bomb, shared_map, fill_shm, "print(int(input()) + 1)"], ["1"], memory_mb=128, tmp_mb=16)
    held = rows[0][0]
    assert held.status != "ok" or int(held.output) <= 32, held  # SysV bounded by the child's IPC limits
    assert rows[1][0].status != "ok" or int(rows[1][0].output) <= 160, rows[1]
    assert rows[2][0].status == "error", rows[2]
    assert rows[3][0].output == "2"


def test_cgroup_counts_shared_memory_where_one_exists():
    from concord.execution import cgroups

    if not cgroups.cgroups_available():
        pytest.skip("no cgroup v1/v2 memory controller here (the IPC sysctls still bound SysV: see above)")
    # IPC limits generous (tmp_mb 1024): only the memory cgroup stands between this and 640 MiB.
    shared = (
        "import mmap\nmaps = []\n"
        "for _ in range(40):\n"
        "    m = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_SHARED)\n"
        "    m.write(b'x' * (16 << 20))\n"
        "    maps.append(m)\n"
        "print(len(maps) * 16)"
    )
    tmpfs = "f = open('/tmp/fill', 'wb')\nfor _ in range(640):\n    f.write(b'x' * 2**20)\nprint('filled')"
    rows = run_programs([shared, tmpfs], [""], mode="stdin", timeout_s=10.0, memory_mb=128, tmp_mb=1024,
                        workers=2)
    for row in rows:
        assert row[0].status == "error", row


def test_output_cap_is_enforced_on_the_bytes_read():
    bypass = "import io, sys\nchunk = 'x' * 2**20\nfor _ in range(24):\n    io.StringIO.write(sys.stdout, chunk)"
    raw_fd = "import os\nfor _ in range(24):\n    os.write(1, b'y' * 2**20)\nprint('done')"
    rows = _stdin([bypass, raw_fd, "print('z' * 1000)"], [""], max_output_bytes=1 << 20)
    assert rows[0][0].status == "error" and "exceeded" in rows[0][0].error, rows[0]
    assert rows[1][0].status == "error" and "exceeded" in rows[1][0].error, rows[1]
    assert rows[2][0].output == "z" * 1000


def test_a_cpu_starver_cannot_make_an_honest_neighbour_time_out():
    starver = (
        "import posix\n"
        "for _ in range(7):\n"
        "    try:\n"
        "        if posix.fork() == 0:\n"
        "            break\n"
        "    except OSError:\n"
        "        break\n"
        "while True:\n    pass"
    )
    honest = "total = 0\nfor i in range(3_000_000):\n    total += i\nprint(total % 97)"
    want = str(sum(range(3_000_000)) % 97)
    t0 = time.monotonic()
    solo = _stdin([honest], [""], timeout_s=30.0, workers=1)
    cost = time.monotonic() - t0
    timeout = max(2.0, 3 * cost)
    rows = _stdin([starver, honest, starver, honest], [""], timeout_s=timeout, workers=4)
    assert solo[0][0].output == want
    assert [r[0].output for r in rows[1::2]] == [want, want], rows
    assert all(r[0].status == "timeout" for r in rows[0::2]), rows


def test_trusted_side_stays_bounded_on_hostile_return_values():
    programs = [
        "def f(x):\n    return list(range(400000))",  # ~3 MB list
        "def f(x):\n    return {(float('nan'), k * (2**61 - 1)) for k in range(20000)}",  # one hash for all
        "def f(x):\n    v = 0\n    for _ in range(20000):\n        v = [v]\n    return v",  # deep
        "def f(x):\n    return 10 ** 20000",  # a huge int
        "def f(x):\n    return 'a' * (5 << 20)",  # over the cap
    ]
    t0 = time.monotonic()
    rows = run_programs(programs, ["1"], mode="call", fn_name="f", timeout_s=10.0, memory_mb=512, workers=2,
                        max_output_bytes=4 << 20)
    assert time.monotonic() - t0 < 60
    assert rows[0][0].ok and rows[0][0].output.startswith("[0, 1, 2")
    assert rows[1][0].ok and rows[1][0].output.startswith("{(nan, ")
    assert rows[2][0].ok and rows[2][0].output == "[" * 20000 + "0" + "]" * 20000
    assert rows[3][0].ok and rows[3][0].output == "1" + "0" * 20000
    assert rows[4][0].status == "error"
    # the parser itself: linear and hash-free
    text = "{" + ", ".join(f"(nan, {k * (2**61 - 1)})" for k in range(30000)) + "}"
    t0 = time.monotonic()
    canonical(parse(text))
    assert time.monotonic() - t0 < 10


def test_big_int_outputs_do_not_change_a_neighbours_grade():
    # The old encoder toggled sys.set_int_max_str_digits from several threads at once.
    big = "def f(x):\n    return 7 ** 40000"
    small = "def f(x):\n    return 10 ** 4299 + x"
    rows = run_programs([big, small, big, small], ["1"], mode="call", fn_name="f", timeout_s=10.0,
                        memory_mb=256, workers=4)
    assert rows[1][0].output == rows[3][0].output == str(10 ** 4299 + 1)
    assert outputs_match(json.dumps(10 ** 4299 + 1), rows[1][0].output, "call")


def _lcb_equal(prediction, expected_json: str) -> bool:
    """LiveCodeBench's grade_call_based comparison (lcb_runner/evaluation/testing_util.py):
    a top-level tuple becomes a list, then ``prediction == json.loads(output)``."""
    if isinstance(prediction, tuple):
        prediction = list(prediction)
    return bool(prediction == json.loads(expected_json))


HONEST = {
    "counter": ("from collections import Counter\ndef f(x):\n    return Counter('abca')", Counter("abca"),
                ['{"a": 2, "b": 1, "c": 1}', '{"a": 2, "b": 1}']),
    "ordered": ("from collections import OrderedDict\ndef f(x):\n    return OrderedDict([('b', 1), ('a', 2)])",
                OrderedDict([("b", 1), ("a", 2)]), ['{"a": 2, "b": 1}', '{"b": 1}']),
    "default": ("from collections import defaultdict\ndef f(x):\n    d = defaultdict(list)\n    d['k'].append(x)\n"
                "    return d", defaultdict(list, {"k": [1]}), ['{"k": [1]}', '{"k": []}']),
    "deep": ("def f(x):\n    v = [x]\n    for _ in range(249):\n        v = [v]\n    return v",
             None, ["[" * 250 + "1" + "]" * 250, "[" * 249 + "1" + "]" * 249]),
    "namedtuple": ("from collections import namedtuple\nP = namedtuple('P', 'a b')\ndef f(x):\n    return P(x, 2)",
                   (1, 2), ["[1, 2]", "[2, 1]"]),
    "tuple_nested": ("def f(x):\n    return [(x, 2)]", [(1, 2)], ["[[1, 2]]"]),
    "numbers": ("from fractions import Fraction\ndef f(x):\n    return [Fraction(x, 2), 2.0, True]",
                None, ["[0.5, 2, 1]", "[0.5, 2, 2]"]),
}


def test_honest_values_graded_as_livecodebench_grades_them():
    names = list(HONEST)
    rows = run_programs([HONEST[n][0] for n in names], ["1"], mode="call", fn_name="f", timeout_s=10.0,
                        memory_mb=256, workers=2)
    disagreements = []
    for name, row in zip(names, rows):
        program, value, expected = HONEST[name]
        namespace: dict = {}
        exec(program, namespace)  # the reference's own value, here, in the test (trusted programs)
        prediction = namespace["f"](1)
        for want in expected:
            ours = outputs_match(want, row[0].output, "call")
            if ours != _lcb_equal(prediction, want):
                disagreements.append((name, want, row[0]))
    assert disagreements == []
    assert outputs_match('{"a": 2, "b": 1, "c": 1}', rows[0][0].output, "call")  # Counter accepted


def test_equals_json_agrees_with_python_eq():
    cases = ["1", "1.0", "True", "(1, 2)", "[(1, 2)]", "{'a': [1, 2.5]}", "{1: 2}", "{1, 2}", "None", "'x'",
             "Fraction(1, 2)", "Decimal('0.5')", "(0.5+0j)", "nan", "[1, [2, [3]]]", "b'x'", "{'a': 1, 'b': 2}"]
    wants = ["1", "1.5", "0.5", "true", "[1, 2]", "[[1, 2]]", '{"a": [1, 2.5]}', '{"1": 2}', "null", '"x"',
             "[1, [2, [3]]]", '{"a": 1, "b": 2}', '{"b": 2, "a": 1}', "[]", "{}"]
    from concord.execution import parse_value

    bad = []
    for text in cases:
        value = parse_value(text)
        for want in wants:
            if equals_json(parse(text), json.loads(want)) != _lcb_equal(value, want):
                bad.append((text, want))
    assert bad == []
