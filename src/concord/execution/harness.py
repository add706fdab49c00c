"""The program that runs *inside* the sandbox: one process per candidate, all K inputs in a loop.

It must stay self-contained (standard library only, no ``concord`` imports): the project
directory is hidden from the sandbox, so this file's source is handed to the interpreter with
``python -c``. The parent (:mod:`concord.execution`) imports the same module for the output
normalisation, so that a candidate's outputs and a benchmark's expected outputs are normalised
by one function.

Protocol. The parent writes one JSON payload to stdin and closes it. The harness reads it,
prepares the inputs, applies resource limits, drops privileges, and writes one JSON line per
event to a private duplicate of the original stdout: ``{"event": "ready"}`` once, then
``{"k": k, "status": "ok"|"error"|"timeout", "output": str|None, "error": str|None}`` for each
input in order. File descriptors 0-2 point at ``/dev/null`` while candidate code runs; the
candidate's ``print``/``sys.stdout`` goes to a capped in-memory buffer (as LiveCodeBench
captures it) and its stdin is the test input, both as ``sys.stdin`` and as file descriptor 0
(so ``open(0).read()`` works).
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import signal
import sys

# LiveCodeBench runs every candidate after this prelude, so programs may use these names
# without importing them; we do the same so that a program graded correct there runs here.
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

REPR_PREFIX = "repr:"  # marks a call-based return value that JSON cannot carry


# ------------------------------------------------------------------ normalisation (shared)


def normalize_stdout(text: str) -> str:
    """LiveCodeBench's view of a stdout: the stripped text, each line stripped."""
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def _canonical(value):
    # Python's == (which LiveCodeBench grades call-based answers with) equates 2 and 2.0;
    # mapping integral floats to ints makes string equality of the JSON agree with it.
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("dict with non-string keys")
        return {k: _canonical(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not JSON")


def normalize_value(value) -> str:
    """Canonical string of a call-based return value (tuples become lists, as in LiveCodeBench)."""
    try:
        return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return REPR_PREFIX + repr(value)


def parse_call_input(text: str) -> list:
    """LiveCodeBench functional input: one JSON value per line, one line per argument."""
    return [json.loads(line) for line in text.split("\n") if line.strip()]


# ------------------------------------------------------------------ sandbox-side machinery


class _Timeout(BaseException):
    """Raised by SIGALRM; a BaseException so that ``except Exception`` in candidates misses it."""


class _OutputLimit(BaseException):
    """The candidate printed more than the cap allows."""


class _CappedSink(io.RawIOBase):
    """Collects at most ``cap`` bytes; past that it raises (``strict``) or drops the rest."""

    def __init__(self, cap: int, strict: bool) -> None:
        super().__init__()
        self.cap, self.strict = cap, strict
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        n = len(b)
        if self.size + n > self.cap:
            self.overflow = True
            if self.strict:
                raise _OutputLimit()
            return n
        self.chunks.append(bytes(b))
        self.size += n
        return n

    def getvalue(self) -> bytes:
        return b"".join(self.chunks)


class _Emitter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __call__(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


_ARMED = [False]


def _on_alarm(signum, frame):
    if _ARMED[0]:
        _ARMED[0] = False
        raise _Timeout()


def _arm(seconds: float) -> None:
    _ARMED[0] = True
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))


def _disarm() -> None:
    _ARMED[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:297] + "..."


def _text_streams(data: bytes, cap: int, strict: bool):
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
    sink = _CappedSink(cap, strict)
    stdout = io.TextIOWrapper(io.BufferedWriter(sink, buffer_size=1 << 16), encoding="utf-8", errors="replace")
    return stdin, stdout, sink


def _input_fd(data: bytes) -> int:
    """A memory file holding the input, to stand in for file descriptor 0."""
    fd = os.memfd_create("stdin", os.MFD_CLOEXEC)  # children inherit only the dup on fd 0
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return fd


def _set_limits(p: dict) -> None:
    import resource

    def cap(which, value, headroom=0):
        value = int(value)
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard - headroom)
        resource.setrlimit(which, (value, value + headroom))

    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_AS, p["memory_mb"] * 1024 * 1024)
    # hard > soft: reaching the soft limit sends SIGXCPU (reported as a timeout), not SIGKILL
    cap(resource.RLIMIT_CPU, p["cpu_s"], headroom=2)
    cap(resource.RLIMIT_NPROC, p["max_procs"])
    cap(resource.RLIMIT_FSIZE, p["file_mb"] * 1024 * 1024)
    cap(resource.RLIMIT_NOFILE, 256)


def _drop_privileges(uid) -> None:
    if uid is None:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # from root this clears every capability as well
    if os.getuid() != uid or os.geteuid() != uid:
        raise RuntimeError("could not drop privileges")


def _mount_setup(spec: dict) -> None:
    """unshare backend only: make the (private) mount tree read-only, add the private tmpfs,
    and hide directories. bubblewrap does the same from its command line."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 1, 2, 4, 32, 4096, 8192, 16384

    def mount(src, target, fstype, flags, data=None):
        if libc.mount(src.encode() if src else None, target.encode(), fstype.encode() if fstype else None,
                      flags, data.encode() if data else None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {src} -> {target}: {os.strerror(err)}")

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def readonly_tree(path):
        # mount_setattr(2) with AT_RECURSIVE: every mount below ``path`` becomes read-only
        # (only in this mount namespace, which is a private copy).
        attr = MountAttr(1 | 2 | 4, 0, 0, 0)  # MOUNT_ATTR_RDONLY | NOSUID | NODEV
        syscall_nr = 442  # mount_setattr on x86_64 and aarch64 alike
        AT_FDCWD, AT_RECURSIVE = -100, 0x8000
        if libc.syscall(syscall_nr, AT_FDCWD, path.encode(), AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount_setattr {path}: {os.strerror(err)}")

    readonly_tree("/")
    tmp_opts = f"size={spec['tmp_bytes']},mode=1777"
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts)
    # /dev/shm of the host is world-writable and shared: give the sandbox its own, tiny one.
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=1777")
    keep = spec.get("keep", [])
    staged = []
    for i, path in enumerate(keep):  # stage the paths to keep before their parents are hidden
        stage = f"/tmp/.keep{i}"
        os.mkdir(stage)
        mount(path, stage, None, MS_BIND | MS_REC)
        staged.append((stage, path))
    for path in spec.get("hide", []):
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
    for stage, path in staged:
        os.makedirs(path, exist_ok=True)
        mount(stage, path, None, MS_MOVE)
        os.rmdir(stage)
        readonly_tree(path)
    for path in spec.get("hide", []):
        mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=64k,mode=755")


def _reap(enabled: bool) -> None:
    """Kill whatever the candidate left running (forked children, daemons) before the next
    input. Only inside a PID namespace, where kill(-1) reaches nothing but the sandbox."""
    if not enabled:
        return
    try:
        os.kill(-1, signal.SIGKILL)  # every process we may signal, except ourselves
    except OSError:
        pass
    while True:  # under unshare we are PID 1: collect the orphans ourselves
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def main() -> None:
    payload = json.loads(_read_all(0))
    emit = _Emitter(os.dup(1))  # os.dup gives a non-inheritable descriptor
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

    if payload.get("mounts"):
        _mount_setup(payload["mounts"])
    os.chdir(payload.get("cwd", "/tmp"))

    inputs = payload["inputs"]
    start = payload.get("start", 0)
    mode = payload["mode"]
    timeout_s = float(payload["timeout_s"])
    cap = int(payload["max_output_bytes"])
    encoded = [s.encode("utf-8", "surrogatepass") for s in inputs]
    stdin_fds = {k: _input_fd(encoded[k]) for k in range(start, len(inputs))} if mode == "stdin" else {}

    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(50000)  # as LiveCodeBench
    prelude_ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(PRELUDE, "<prelude>", "exec"), prelude_ns)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized files fail with EFBIG, not death

    _set_limits(payload)
    _drop_privileges(payload.get("uid"))
    emit({"event": "ready"})

    reap = bool(payload.get("reap"))
    real = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    program = payload["program"]
    if mode == "stdin":
        _run_stdin(program, inputs, start, stdin_fds, prelude_ns, timeout_s, cap, emit, real, reap)
    else:
        _run_call(program, payload["fn_name"], inputs, start, prelude_ns, timeout_s, cap, emit, real, reap)


def _restore(real) -> None:
    sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__ = real


def _run_stdin(program, inputs, start, stdin_fds, prelude_ns, timeout_s, cap, emit, real, reap) -> None:
    try:
        code = compile(program, "<candidate>", "exec")
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        for k in range(start, len(inputs)):
            emit({"k": k, "status": "error", "output": None, "error": _short(exc)})
        return
    for k in range(start, len(inputs)):
        os.dup2(stdin_fds[k], 0)
        os.close(stdin_fds.pop(k))
        os.lseek(0, 0, os.SEEK_SET)
        stdin, stdout, sink = _text_streams(inputs[k].encode("utf-8", "surrogatepass"), cap, strict=True)
        errsink = _text_streams(b"", 1 << 16, strict=False)[1]
        sys.stdin = sys.__stdin__ = stdin
        sys.stdout = sys.__stdout__ = stdout
        sys.stderr = sys.__stderr__ = errsink
        namespace = dict(prelude_ns, stdin=stdin, stdout=stdout, stderr=errsink)
        random.seed(0)  # a program that draws random numbers still gives reproducible outputs
        status, error = "ok", None
        try:
            _arm(timeout_s)
            try:
                try:
                    exec(code, namespace)
                except SystemExit:
                    pass  # LiveCodeBench treats exit() as the end of the program
                stdout.flush()
            finally:
                _disarm()
        except _Timeout:
            status, error = "timeout", f"exceeded {timeout_s:g} s"
        except _OutputLimit:
            status, error = "error", f"output exceeded {cap} bytes"
        except BaseException as exc:
            status, error = "error", _short(exc)
        finally:
            _disarm()
            _restore(real)
        if status == "ok" and sink.overflow:
            status, error = "error", f"output exceeded {cap} bytes"
        output = None
        if status == "ok":
            output = normalize_stdout(sink.getvalue().decode("utf-8", "replace"))
        _reap(reap)
        emit({"k": k, "status": status, "output": output, "error": error})
        del namespace, stdin, stdout, sink


def _run_call(program, fn_name, inputs, start, prelude_ns, timeout_s, cap, emit, real, reap) -> None:
    # Candidate prints are not graded in call-based mode: collect (capped) and drop them.
    sink_stdout = _text_streams(b"", 1 << 16, strict=False)[1]
    sys.stdout = sys.__stdout__ = sys.stderr = sys.__stderr__ = sink_stdout
    sys.stdin = sys.__stdin__ = io.StringIO("")
    namespace = dict(prelude_ns, __name__="solution")
    method, setup_error = None, None
    try:
        _arm(timeout_s)
        try:
            exec(compile(program, "<candidate>", "exec"), namespace)
            if "class Solution" in program:  # LiveCodeBench's rule for LeetCode-style answers
                method = getattr(namespace["Solution"](), fn_name)
            else:
                method = namespace[fn_name]
        finally:
            _disarm()
        if not callable(method):
            raise TypeError(f"{fn_name} is not callable")
    except _Timeout:
        setup_error = ("timeout", f"definition exceeded {timeout_s:g} s")
    except KeyError:
        setup_error = ("error", f"NameError: no function named {fn_name!r}")
    except BaseException as exc:
        setup_error = ("error", _short(exc))
    if setup_error is not None:
        for k in range(start, len(inputs)):
            emit({"k": k, "status": setup_error[0], "output": None, "error": setup_error[1]})
        return
    for k in range(start, len(inputs)):
        status, error, output = "ok", None, None
        random.seed(0)  # reproducible outputs for programs that draw random numbers
        try:
            args = parse_call_input(inputs[k])
            _arm(timeout_s)
            try:
                # serialising a huge return value is the candidate's time too
                output = normalize_value(method(*args))
            finally:
                _disarm()
            if len(output.encode("utf-8", "surrogatepass")) > cap:
                status, error, output = "error", f"output exceeded {cap} bytes", None
        except _Timeout:
            status, error = "timeout", f"exceeded {timeout_s:g} s"
        except BaseException as exc:
            status, error = "error", _short(exc)
        finally:
            _disarm()
            sys.stdout = sys.__stdout__ = sys.stderr = sys.__stderr__ = sink_stdout
        _reap(reap)
        emit({"k": k, "status": status, "output": output, "error": error})


if __name__ == "__main__":
    main()
