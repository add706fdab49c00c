"""Hostile candidates against the real sandbox: none may harm the host, the run or a neighbour.

Every hostile program runs in one ``run_programs`` call next to a benign candidate, with
two workers, on each namespace backend that works on this machine.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from concord.execution import run_programs
from concord.execution import sandbox as sb

REPO = sb.REPO_ROOT


def _backends():
    out = []
    for name in ("bwrap", "unshare"):
        if sb._probe(name, sb.default_python(), 64) is None:
            out.append(name)
    return out


BACKENDS = _backends()
pytestmark = pytest.mark.skipif(not BACKENDS, reason="no sandbox backend works on this machine")


@pytest.fixture()
def canary():
    """A file of the project that hostile code tries to delete or overwrite."""
    path = REPO / f".sandbox-canary-{os.getpid()}"
    path.write_text("intact")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture()
def listener():
    """A TCP server on the host's loopback; a sandboxed program must not reach it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits = []
    stop = threading.Event()

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


def _hostile(canary: Path, port: int) -> dict[str, str]:
    escape = REPO / f".sandbox-escape-{os.getpid()}"
    return {
        "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "infinite_loop": "while True:\n    pass",
        "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))",
        "write_outside": f"open({str(escape)!r}, 'w').write('x')\nopen('/etc/concord-pwned', 'w').write('x')",
        "delete_outside": f"import os\nos.remove({str(canary)!r})",
        "overwrite_outside": f"open({str(canary)!r}, 'w').write('pwned')",
        "kill_parent": "import os, signal\nfor pid in (os.getppid(), -1, 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\nprint('still here')",
        "socket": f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')",
        "internet": "import socket\nsocket.create_connection(('8.8.8.8', 53), timeout=1)\nprint('connected')",
        "print_gigabytes": "import sys\nchunk = 'x' * 2**20\nfor _ in range(4096):\n    sys.stdout.write(chunk)",
        "read_project": f"print(open({str(REPO / 'pyproject.toml')!r}).read())",
        "read_home": "import os\nprint(os.listdir(os.path.expanduser('~root')))",
        "fill_tmp": "f = open('/tmp/fill', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)",
        # bwrap: read-only /dev; unshare: a private 1 MiB /dev/shm. Either way not the host's.
        "shm": "open('/dev/shm/concord', 'w').write('x')",
        "daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\nprint('parent done')",
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_programs_harm_nothing(backend, canary, listener):
    port, hits = listener
    hostile = _hostile(canary, port)
    benign = "print(sum(map(int, input().split())))"
    programs = [benign, *hostile.values(), benign]
    inputs = ["1 2", "3 4"]
    t0 = time.monotonic()
    rows = run_programs(programs, inputs, mode="stdin", timeout_s=2.0, memory_mb=256, workers=2,
                        sandbox=backend, max_output_bytes=1 << 20, tmp_mb=16)
    elapsed = time.monotonic() - t0
    by_name = dict(zip(hostile, rows[1:-1]))

    # The neighbours are untouched.
    for row in (rows[0], rows[-1]):
        assert [(o.status, o.output) for o in row] == [("ok", "3"), ("ok", "7")]
    # The host is untouched.
    assert canary.read_text() == "intact"
    assert not (REPO / f".sandbox-escape-{os.getpid()}").exists()
    assert not Path("/etc/concord-pwned").exists()
    assert not Path("/dev/shm/concord").exists()
    assert hits == []
    # Each hostile program got a verdict on every input, none "ok" with its payload. Under heavy
    # load a slow crash (e.g. the memory bomb paging in) may hit the wall clock first, so a crash
    # may read "timeout"; a hang never reads "error" or "ok".
    crashes = ["memory_bomb", "write_outside", "delete_outside", "overwrite_outside", "socket", "internet",
               "print_gigabytes", "read_project", "fill_tmp"]
    for name in crashes:
        assert all(o.status in ("error", "timeout") for o in by_name[name]), (name, by_name[name])
    for name in ("fork_bomb", "infinite_loop"):
        assert [o.status for o in by_name[name]] == ["timeout", "timeout"], (name, by_name[name])
    if by_name["print_gigabytes"][0].status == "error":
        assert "output exceeded" in by_name["print_gigabytes"][0].error
    assert by_name["read_home"][0].status == "error" or by_name["read_home"][0].output in ("[]", "['.pyenv']")
    assert [o.output for o in by_name["kill_parent"]] in (["still here"] * 2, [None, None])
    assert [o.output for o in by_name["daemon"]] == ["parent done"] * 2
    # Nothing the candidates started outlives the run (killed processes may take a moment).
    deadline = time.monotonic() + 10
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sandbox_processes() == []
    assert elapsed < 120


def _sandbox_processes() -> list[int]:
    """Live (not zombie) processes running under this run's sandbox uids."""
    from concord.execution import uid_block

    base = uid_block()
    leftovers = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if base <= uid < base + 1024 and state not in ("Z", "X"):
            leftovers.append(int(entry.name))
    return leftovers


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_mode_hostile_definition_stage(backend, canary):
    # Module-level code of a call-based program runs at definition time, under the same rules.
    programs = [
        f"import os\nos.remove({str(canary)!r})\ndef f(x):\n    return x",
        "while True:\n    pass\ndef f(x):\n    return x",
        "def f(x):\n    return x * 2",
    ]
    rows = run_programs(programs, ["1", "2"], mode="call", fn_name="f", timeout_s=0.5, memory_mb=256,
                        sandbox=backend)
    assert [o.status for o in rows[0]] == ["error", "error"]
    assert [o.status for o in rows[1]] == ["timeout", "timeout"]
    assert [o.output for o in rows[2]] == ["2", "4"]
    assert canary.read_text() == "intact"
