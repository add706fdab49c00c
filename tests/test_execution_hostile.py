"""Hostile candidates against the real sandbox: none may change anything but its own outcome.

Each hostile program runs in one ``run_programs`` call between benign neighbours, two workers
in parallel. "Forged" results carry the answer the neighbours give, so a forgery that worked
would show up as an ``ok`` with that output.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from concord.execution import run_programs, uid_block
from concord.execution.runner import UID_SLOTS as _UID_SLOTS
from concord.execution import runner
from concord.execution import sandbox as sb

REPO = sb.REPO_ROOT
pytestmark = pytest.mark.skipif(runner._probe("bwrap", sb.default_python()) is not None,
                                reason="bubblewrap does not work on this machine")

BENIGN = "a, b = map(int, input().split())\ntotal = 0\nfor i in range(200000):\n    total += i % 7\nprint(a + b)"
INPUTS = ["1 2", "3 4"]
WANT = [("ok", "3"), ("ok", "7")]

# Every way to the result channel a candidate might try: fds 0-1023, its /proc/self/fd, and the
# fds of every process it can see (the runner's are not among them: other PID namespace).
FORGE_LINES = r'''
import posix, json
lines = []
for k in range(4):
    event = {"k": k, "status": "ok", "raw": "3", "plain": True, "error": None, "output": "3"}
    lines.append(json.dumps(event))
    lines.append(json.dumps({"event": "done", "id": k}))
payload = ("\n".join(lines) + "\n").encode()
for fd in range(1024):
    try:
        posix.write(fd, payload)
    except OSError:
        pass
for d in posix.listdir("/proc"):
    if not d.isdigit() and d != "self":
        continue
    try:
        fds = posix.listdir(f"/proc/{d}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            with open(f"/proc/{d}/fd/{fd}", "wb", buffering=0) as f:
                f.write(payload)
        except OSError:
            pass
'''


def _hostile(canary: Path, secret: Path, port: int, test_pid: int) -> dict[str, str]:
    escape = REPO / f".sandbox-escape-{os.getpid()}"
    return {
        "forge_and_exit": FORGE_LINES + "posix._exit(0)",
        "forge_and_crash": FORGE_LINES + "raise SystemError('after forging')",
        "forge_and_hang": FORGE_LINES + "while True:\n    pass",
        "patch_harness": (
            "import sys, json, posix\n"
            "main = sys.modules['__main__']\n"
            "for name in list(vars(main)):\n"
            "    if callable(getattr(main, name)) and not name.startswith('__'):\n"
            "        setattr(main, name, lambda *a, **k: None)\n"
            "json.dumps = lambda *a, **k: '{\"k\": 0, \"status\": \"ok\", \"raw\": \"3\"}'\n"
            "sys.modules['os'].write = lambda fd, data: len(data)\n"
            "print('wrong')"
        ),
        "signal_parent": (
            "import posix, signal\n"
            f"targets = [p for p in [posix.getppid(), {test_pid}, -1] + list(range(1, 64)) if p]\n"
            "for pid in targets:\n"
            "    for sig in (signal.SIGUSR1, signal.SIGKILL):\n"
            "        try:\n"
            "            posix.kill(pid, sig)\n"
            "        except OSError:\n"
            "            pass\n"
            "print('still here')"
        ),
        "fork_bomb": "import posix\nwhile True:\n    try:\n        posix.fork()\n    except OSError:\n        pass",
        "busy_forks": "import posix\nfor _ in range(16):\n    try:\n        if posix.fork() == 0:\n            break\n    except OSError:\n        break\nwhile True:\n    pass",
        "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))",
        "memory_bomb_forked": (
            "import posix\nfor _ in range(8):\n    try:\n        if posix.fork() == 0:\n            break\n"
            "    except OSError:\n        break\nblocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))"
        ),
        "infinite_loop": "while True:\n    pass",
        "write_outside": f"open({str(escape)!r}, 'w').write('x')",
        "overwrite_canary": f"open({str(canary)!r}, 'w').write('pwned')",
        "read_secret": f"print(open({str(secret)!r}).read())",
        "read_project": f"print(open({str(REPO / 'pyproject.toml')!r}).read())",
        "read_etc": "print(open('/etc/passwd').read())",
        "see_processes": "import posix\nprint(sorted(d for d in posix.listdir('/proc') if d.isdigit()))",
        "list_root": "import posix\nprint(sorted(posix.listdir('/root')))",
        "socket": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')",
        "print_gigabytes": "import sys\nchunk = 'x' * 2**20\nfor _ in range(4096):\n    sys.stdout.write(chunk)",
        "flood_fd1": "import posix\nchunk = b'x' * 2**20\nwhile True:\n    posix.write(1, chunk)",
        "fill_tmp": "f = open('/tmp/fill', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)",
        "daemon": "import posix, time\nif posix.fork() == 0:\n    posix.setsid()\n    time.sleep(600)\nprint('parent done')",
    }


@pytest.fixture()
def canary():
    path = REPO / f".sandbox-canary-{os.getpid()}"
    path.write_text("intact")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture()
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


def test_hostile_programs_change_nothing_but_their_own_outcome(canary, listener, tmp_path):
    port, hits = listener
    secret = tmp_path / "hidden_test_outputs.txt"  # e.g. a results_dir outside the project
    secret.write_text("the answer is 3")
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *a: received.append(1))
    try:
        hostile = _hostile(canary, secret, port, os.getpid())
        programs = [BENIGN]
        for program in hostile.values():
            programs += [program, BENIGN]
        t0 = time.monotonic()
        rows = run_programs(programs, INPUTS, mode="stdin", timeout_s=3.0, memory_mb=256, workers=2,
                            max_output_bytes=1 << 20, tmp_mb=16)
        elapsed = time.monotonic() - t0
    finally:
        signal.signal(signal.SIGUSR1, previous)
    neighbours, by_name = rows[0::2], dict(zip(hostile, rows[1::2]))

    for row in neighbours:
        assert [(o.status, o.output) for o in row] == WANT
    assert received == []
    assert hits == []
    assert canary.read_text() == "intact"
    assert not (REPO / f".sandbox-escape-{os.getpid()}").exists()
    # No hostile program got the neighbours' answer, and each got a verdict per input.
    for name, row in by_name.items():
        assert len(row) == 2
        assert all(o.output != "3" for o in row), (name, row)
    for name in ("forge_and_exit", "forge_and_crash", "memory_bomb", "memory_bomb_forked", "write_outside",
                 "overwrite_canary", "read_secret", "read_project", "read_etc", "socket",
                 "print_gigabytes", "fill_tmp"):
        assert all(o.status in ("error", "timeout") for o in by_name[name]), (name, by_name[name])
    for name in ("forge_and_hang", "fork_bomb", "busy_forks", "infinite_loop", "flood_fd1"):
        assert all(o.status in ("timeout", "error") for o in by_name[name]), (name, by_name[name])
    assert [o.output for o in by_name["patch_harness"]] == ["wrong", "wrong"]
    assert [o.output for o in by_name["signal_parent"]] == ["still here", "still here"]
    assert [o.output for o in by_name["daemon"]] == ["parent done", "parent done"]
    assert [o.output for o in by_name["see_processes"]] == ["[]", "[]"]  # no /proc at all (docs/sandbox.md)
    assert by_name["list_root"][0].status == "error" or by_name["list_root"][0].output == "['.pyenv']"
    assert not _candidate_processes(), "a candidate process outlived the run"
    assert elapsed < 150


def _candidate_processes() -> list[int]:
    """Live (not zombie) processes under this process's candidate uids (the lower half of the uid
    block; the upper half is the check servers', which idle pooled workers keep and which never
    run candidate code)."""
    deadline = time.monotonic() + 10
    while True:
        base, found = uid_block(), []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                uid = entry.stat().st_uid
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if base <= uid < base + _UID_SLOTS and state not in ("Z", "X"):
                found.append(int(entry.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_humaneval_pass_cannot_be_forged():
    check = "def check(candidate):\n    assert abs(candidate(2) - 4) < 1e-6\ncheck(f)\n"
    wrong = "def f(x):\n    return x\n"
    programs = {
        "honest": "def f(x):\n    return 2 * x\n",
        "wrong": wrong,
        "forge_fds": wrong + FORGE_LINES.replace('"raw": "3"', '"raw": "passed"') + "posix._exit(0)\n",
        "exit_zero": "import posix\n" + wrong + "posix._exit(0)\n",
        "exit_in_call": "import posix\ndef f(x):\n    posix._exit(0)\n",
        "system_exit": wrong + "raise SystemExit(0)\n",
        "patch_harness": (
            "import sys\nmain = sys.modules['__main__']\n"
            "for name in list(vars(main)):\n"
            "    if callable(getattr(main, name)) and not name.startswith('__'):\n"
            "        setattr(main, name, lambda *a, **k: None)\n" + wrong
        ),
        # The reporter and its token are in this process's memory (it was forked from the check's
        # process): find them through the frames and the garbage collector, and report a pass.
        "forge_with_token": wrong + (
            "import sys, gc\n"
            "def forge(rep, k=0):\n"
            "    rep({'k': k, 'status': 'ok', 'raw': 'passed', 'error': None})\n"
            "    rep.finish()\n"
            "fr = sys._getframe()\n"
            "while fr is not None:\n"
            "    if 'report' in fr.f_locals:\n"
            "        forge(fr.f_locals['report'], fr.f_locals.get('start', 0))\n"
            "    fr = fr.f_back\n"
            "for o in gc.get_objects():\n"
            "    if type(o).__name__ == '_Reporter':\n"
            "        forge(o)\n"
        ),
        # the classic reward hack: a return value that equals everything
        "always_equal": "class Anything:\n    def __eq__(self, other):\n        return True\n"
                        "def f(x):\n    return Anything()\n",
        "int_equal": "class Int(int):\n    def __eq__(self, other):\n        return True\n"
                     "def f(x):\n    return Int(0)\n",
        # plant a module where the check's process would import it from, then hope the check imports it
        "plant_module": "for name in ('math', 'random', 'copy'):\n"
                        "    open('/tmp/' + name + '.py', 'w').write('import os\\nos._exit(0)')\n" + wrong,
        # shadow the built-ins the check's asserts use with globals of its own
        "shadow_builtins": wrong + "def abs(x):\n    return 0\nAssertionError = KeyboardInterrupt\n",
        # patch the builtins the check's asserts use (the check runs elsewhere)
        "patch_builtins": "import builtins\nbuiltins.AssertionError = type('Q', (BaseException,), {})\n"
                          "builtins.len = lambda *a: 0\n" + wrong,
    }
    rows = run_programs(list(programs.values()), [check, "import math, random, copy\n" + check], mode="humaneval",
                        timeout_s=3.0, memory_mb=256, workers=2)
    verdict = {name: {o.status for o in row} for name, row in zip(programs, rows)}
    assert verdict == {name: {"ok"} if name == "honest" else {"error"} for name in programs}


def test_call_mode_results_cannot_be_forged_or_patched():
    programs = [
        "def f(x):\n    return x + 1",
        # patch everything the reporting code might use, then return a wrong value
        "import sys, json\nmain = sys.modules['__main__']\n"
        "for name in list(vars(main)):\n"
        "    if callable(getattr(main, name)) and not name.startswith('__'):\n"
        "        setattr(main, name, lambda *a, **k: (True, '999'))\n"
        "json.dumps = lambda *a, **k: '{\"k\": 0, \"status\": \"ok\", \"raw\": \"999\", \"plain\": true}'\n"
        "def f(x):\n    return -x",
        # forge on every descriptor inside the call, then crash
        "def f(x):\n" + "\n".join("    " + line for line in FORGE_LINES.strip().splitlines()) + "\n    raise ValueError",
    ]
    rows = run_programs(programs, ["1", "2"], mode="call", fn_name="f", timeout_s=3.0, memory_mb=256, workers=2)
    assert [o.output for o in rows[0]] == ["2", "3"]
    assert [o.output for o in rows[1]] == ["-1", "-2"]
    assert [o.status for o in rows[2]] == ["error", "error"]


def test_fresh_state_per_input_in_stdin_mode():
    # Input 1 leaves a file in /tmp, a running process and zombies; input 2 must see none of it,
    # and may fork exactly as many processes as input 1 could (7 / 0 / 7 processes).
    program = (
        "import posix, time\n"
        "n = int(input())\n"
        "state = []\n"
        "try:\n"
        "    open('/tmp/left-behind').close()\n"
        "    state.append('tmp')\n"
        "except OSError:\n"
        "    pass\n"
        "if len([d for d in posix.listdir('/proc') if d.isdigit()]) > 1:\n"
        "    state.append('procs')\n"
        "forks = 0\n"
        "for _ in range(7):\n"
        "    try:\n"
        "        if posix.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            posix._exit(0)\n"
        "        forks += 1\n"
        "    except OSError:\n"
        "        break\n"
        "open('/tmp/left-behind', 'w').write('x')\n"
        "print(forks, ' '.join(state) or 'clean')"
    )
    rows = run_programs([program, program], ["1", "2", "3"], mode="stdin", timeout_s=5.0, memory_mb=256,
                        workers=1, max_procs=8)
    for row in rows:  # the second candidate reuses the first one's worker: no state crosses either
        assert [o.output for o in row] == ["7 clean"] * 3


# The effective capability set through capget(2) (no /proc in a candidate's view).
CAPABILITIES = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None)\n"
    "header = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"
    "data = (ctypes.c_uint32 * 6)()\n"
    "assert libc.capget(header, data) == 0\n"
    "print(f'{data[3]:08x}{data[0]:08x}')\n"
)


def _as_nobody(script: str) -> subprocess.CompletedProcess:
    """``script`` run by /usr/bin/python3 as user nobody (the sandbox's unprivileged, rlimit path)."""
    python = "/usr/bin/python3"
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a world-readable /usr/bin/python3")
    src = str(REPO / "src")
    if not all(os.stat(p).st_mode & 0o005 for p in [src, *map(str, Path(src).parents)]):
        pytest.skip("the checkout is not readable by nobody")
    # /usr/bin/python3 has no pyseccomp of its own: a copy of the (pure Python) binding where
    # nobody can read it (tmp_path is private to root).
    import pyseccomp

    libs = Path(tempfile.mkdtemp(prefix="concord-unpriv-", dir="/tmp"))
    try:
        shutil.copy(pyseccomp.__file__, libs / "pyseccomp.py")
        libs.chmod(0o755)
        (libs / "pyseccomp.py").chmod(0o644)
        proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script],
                              capture_output=True, text=True, timeout=120, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": f"{src}:{libs}"})
    finally:
        shutil.rmtree(libs, ignore_errors=True)
    if "SandboxUnavailable" in proc.stderr:
        pytest.skip("unprivileged user namespaces are not allowed here")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_without_root_children_shed_the_user_namespace_capabilities():
    # The unprivileged path: bubblewrap makes a user namespace, children drop its capabilities.
    proc = _as_nobody(
        "from concord.execution import run_programs\n"
        "rows = run_programs([" + repr(CAPABILITIES) + ","
        " 'print(int(input()) * 2)'], ['21'], mode='stdin', timeout_s=5, memory_mb=256, python='/usr/bin/python3')\n"
        "print([o.output for row in rows for o in row])\n"
    )
    assert proc.stdout.strip().splitlines()[-1] == "['0000000000000000', '42']"


#: forks three spinners and outlives them in a loop of short sleeps: with its processes' CPU
#: uncounted, it ran to the 3x wall-clock backstop on two CPUs (about 6 CPU-s on a 1 s limit)
FORK_SPINNERS = """
import posix, time
try:
    for _ in range(3):
        if posix.fork() == 0:
            while True:
                pass
except OSError:
    pass
t0 = time.monotonic()
while time.monotonic() - t0 < 5:
    time.sleep(0.01)
"""
#: what a candidate may start there: a thread, not a process (fork, posix_spawn)
STARTS = """
import posix, threading
box = []
worker = threading.Thread(target=lambda: box.append(sum(range(1000))))
worker.start()
worker.join()
for start in (posix.fork, lambda: posix.posix_spawn('/usr/bin/python3', ['python3'], {})):
    try:
        start()
        box.append('started')
    except OSError as exc:
        box.append(exc.errno)
print(box)
"""


#: an honest pool of threads: glibc reserved 64 MB of address space per thread's malloc arena,
#: which RLIMIT_AS (memory_mb) counts there, so it could not start its threads at 256 MB
THREAD_POOL = ("from concurrent.futures import ThreadPoolExecutor\n"
               "with ThreadPoolExecutor(4) as pool:\n    print(sum(pool.map(lambda x: x * x, range(100))))\n")
#: the competitive programmer's deep recursion: a thread with a 256 MB stack (twenty-first red team)
DEEP_IN_A_THREAD = ("import sys, threading\nfrom functools import lru_cache\nsys.setrecursionlimit(10 ** 6)\n"
                    "threading.stack_size(2 ** 28)\n@lru_cache(None)\ndef depth(n):\n"
                    "    return 0 if n == 0 else depth(n - 1) + 1\n"
                    "thread = threading.Thread(target=lambda: print(depth(60000)))\nthread.start()\nthread.join()\n")
IMPORTING_CHECK = "import math\ndef check(candidate):\n    assert candidate(1, 2) == math.floor(3.5)\ncheck(add)\n"
#: a check (SC-MoA's are generated) runs in a child of the check server, which it may not fork
FORKING_CHECK = ("import posix\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    pid = posix.fork()\n"
                 "    if pid == 0:\n        posix._exit(0)\n    posix.waitpid(pid, 0)\ncheck(add)\n")


def test_without_cgroups_a_candidate_starts_threads_but_no_process_whose_cpu_nothing_counts():
    # Without cgroups the clock reads a candidate's own processes; a process it forks ran
    # uncounted, so three forked spinners used two CPUs to the wall-clock backstop. Candidates
    # and checks there start no processes (seccomp), threads still; the server forks its checks.
    proc = _as_nobody(
        "import time\n"
        "from concord.execution import run_checks, run_programs\n"
        "t0 = time.monotonic()\n"
        f"rows = run_programs([{FORK_SPINNERS!r}, {STARTS!r}, {THREAD_POOL!r}, {DEEP_IN_A_THREAD!r}, 'print(int(input()) * 2)'], ['21'],"
        " mode='stdin', timeout_s=1, memory_mb=256, workers=1, python='/usr/bin/python3')\n"
        "took = time.monotonic() - t0\n"
        f"checks = [{IMPORTING_CHECK!r}, {FORKING_CHECK!r}]\n"
        "out = run_checks([('def add(a, b):\\n    return a + b\\n', check) for check in checks], timeout_s=5,"
        " memory_mb=256, python='/usr/bin/python3')\n"
        "print([(o.status, o.output) for row in rows for o in row], [o.error or o.status for o in out], took < 3)\n"
    )
    last = proc.stdout.strip().splitlines()[-1]
    # the spinners' candidate timed out on its own 1 s, not the 3 s backstop; EPERM after a thread
    # ran; four threads start under RLIMIT_AS (one malloc arena: nineteenth red team); a check
    # that imports still runs in a child of its server, and starts no process there; a thread asking
    # for a stack larger than RLIMIT_AS leaves room for starts with the largest that fits
    assert last == ("[('timeout', None), ('ok', '[499500, 1, 1]'), ('ok', '328350'), ('ok', '60000'), ('ok', '42')] "
                    "['ok', 'failed: PermissionError: [Errno 1] Operation not permitted'] True"), last


#: a wrong solution that, on the input it should reject, writes a forged reply of 2.7 million tiny
#: objects (32 MB, under the reply cap) for the check server to parse
FORGED_REPLY = """
import os
def total(xs):
    if not isinstance(xs, list):
        chunk = b'{"i": "0"}, ' * 100_000
        os.write(1, b'{"r": [')
        for _ in range(27):
            data = memoryview(chunk)
            while data:
                data = data[os.write(1, data):]
        os.write(1, b'{"i": "0"}]}\\n')
        os.read(0, 1)
        os._exit(0)
    return sum(xs)
"""


def test_without_root_a_reply_the_check_server_cannot_hold_fails_the_solution_whatever_the_check_catches():
    # Fifteenth red team: under RLIMIT_AS the server's MemoryError while parsing a forged reply
    # reached the check as an exception, which `except:` caught: the wrong solution passed.
    check = ("def check(candidate):\n    assert candidate([1, 2]) == 3\n    try:\n        candidate('bad')\n"
             "    except:\n        return\n    assert False\ncheck(total)\n")
    proc = _as_nobody(
        "from concord.execution import run_checks\n"
        f"out = run_checks([({FORGED_REPLY!r}, {check!r})], timeout_s=10, memory_mb=256, python='/usr/bin/python3')\n"
        "print([(o.status, o.error) for o in out])\n"
    )
    assert "cannot hold" in proc.stdout.strip().splitlines()[-1], proc.stdout[-2000:]
