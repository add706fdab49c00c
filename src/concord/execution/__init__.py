"""Sandboxed execution of candidate programs on test inputs (LiveCodeBench's two modes).

``run_programs(programs, inputs, mode=...)`` runs every program on every input and returns an
N x K matrix of :class:`Outcome`. One sandboxed harness process per candidate runs all K inputs
in a loop (so the isolation cost is paid once per candidate, not per input); each input gets
its own timer, fresh globals and captured stdout. A candidate that hangs past the timer, kills
its own harness or corrupts the result stream loses only the input at hand: its process group
is killed and a fresh sandbox resumes at the next input.

Modes, as LiveCodeBench grades them:

* ``stdin``: the program reads the input from standard input and writes to standard output;
  the output is normalised to the stripped text with each line stripped.
* ``call`` (alias ``functional``): the program defines ``fn_name`` (or ``class Solution`` with
  that method, instantiated once); each input holds one JSON value per line, one line per
  argument; the return value is normalised to canonical JSON (tuples as lists, integral floats
  as ints, sorted keys) or ``repr:...`` when JSON cannot carry it.

Isolation (see :mod:`concord.execution.sandbox`): process group per candidate, per-input wall
clock (in-process timer plus a hard kill from outside), CPU, address-space, process-count and
file-size limits, no network, read-only filesystem with the project/home/runtime directories
hidden, a private size-capped ``/tmp``, capped captured output, and an unprivileged uid when
run as root. Without bubblewrap or unshare it refuses to run unless ``sandbox="none"`` (or
``CONCORD_SANDBOX=none``) opts out explicitly.
"""

from __future__ import annotations

import json
import math
import os
import queue
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Sequence

from concord.execution import harness as _harness
from concord.execution.harness import normalize_stdout, normalize_value, parse_call_input
from concord.execution.sandbox import (
    Backend,
    SandboxError,
    SandboxUnavailable,
    resolve_backend,
)

__all__ = [
    "Outcome",
    "Limits",
    "run_programs",
    "outputs_match",
    "normalize_stdout",
    "normalize_value",
    "normalize_mode",
    "SandboxError",
    "SandboxUnavailable",
    "resolve_backend",
]

STATUSES = ("ok", "error", "timeout")
MODES = {"stdin": "stdin", "call": "call", "functional": "call"}

_HARNESS_SOURCE = Path(_harness.__file__).read_text(encoding="utf-8")
_STARTUP_S = 60.0  # interpreter start + prelude imports on a loaded 2-core machine
_STDERR_CAP = 64 * 1024
# A clean environment: nothing of ours leaks in, hashing and BLAS threads are deterministic.
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def uid_block() -> int:
    """First uid of this process's block of 1024 sandbox uids.

    Each worker slot runs candidates under its own uid (when we are root), so RLIMIT_NPROC caps
    one candidate's fork bomb without starving another candidate; the block depends on the pid
    (read at call time, so forked workers get their own) so that concurrent runs on one host
    rarely share uids.
    """
    return 100_000 + (os.getpid() % 1_000_000) * 1024


@dataclass(frozen=True)
class Outcome:
    """One program on one input: ``status`` in ok/error/timeout; ``output`` is the normalised
    output when ``status == "ok"``, else None; ``error`` says what went wrong."""

    status: str
    output: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int
    max_output_bytes: int = 4 * 1024 * 1024
    max_procs: int = 8
    tmp_mb: int = 64

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64 (the interpreter needs it), got {self.memory_mb!r}")
        if self.max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be positive, got {self.max_output_bytes!r}")
        if self.max_procs < 1:
            raise ValueError(f"max_procs must be >= 1, got {self.max_procs!r}")
        if self.tmp_mb < 1:
            raise ValueError(f"tmp_mb must be >= 1, got {self.tmp_mb!r}")

    @property
    def grace_s(self) -> float:
        # The in-process timer normally ends an input; the outside kill is the backstop.
        return 1.0 + 0.5 * self.timeout_s


def normalize_mode(mode: str) -> str:
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"unknown execution mode {mode!r}; use 'stdin' or 'call' (alias 'functional')") from None


def run_programs(
    programs: Sequence[str | None],
    inputs: Sequence[str],
    *,
    mode: str,
    fn_name: str | None = None,
    timeout_s: float,
    memory_mb: int,
    workers: int | None = None,
    sandbox: str | None = None,
    max_output_bytes: int = 4 * 1024 * 1024,
    max_procs: int = 8,
    tmp_mb: int = 64,
    python: str | None = None,
) -> list[list[Outcome]]:
    """Run each program on each input in the sandbox; ``result[i][k]`` is program i on input k.

    A ``None`` program (e.g. no code could be extracted from a completion) gets ``error``
    outcomes without running. ``sandbox``: auto (bubblewrap, else unshare, else refuse),
    bwrap, unshare, or none (explicit opt-out); default from ``$CONCORD_SANDBOX``.
    """
    mode = normalize_mode(mode)
    programs = list(programs)
    inputs = list(inputs)
    _validate(programs, inputs, mode, fn_name)
    limits = Limits(float(timeout_s), int(memory_mb), int(max_output_bytes), int(max_procs), int(tmp_mb))
    if not programs:
        return []
    if not inputs:
        return [[] for _ in programs]
    backend = resolve_backend(sandbox, python=python, tmp_mb=limits.tmp_mb)
    n_workers = max(1, min(int(workers or _cpu_count()), len(programs)))
    owned = _acquire_slots(n_workers)
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in owned:
        slots.put(slot)

    def task(program: str | None) -> list[Outcome]:
        if program is None:
            return [Outcome("error", None, "no program")] * len(inputs)
        slot = slots.get()
        try:
            return _run_one(backend, program, inputs, mode, fn_name, limits, uid_slot=slot)
        finally:
            slots.put(slot)

    try:
        if n_workers == 1:
            return [task(p) for p in programs]
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="sandbox") as pool:
            return list(pool.map(task, programs))
    finally:
        _release_slots(owned)


def outputs_match(expected: str, output: str | None, mode: str) -> bool:
    """LiveCodeBench's verdict for one test: does a normalised ``output`` match ``expected``
    (the raw expected output of the benchmark)?

    stdin: equal stripped lines, else equal lines of Decimal tokens (so ``1.50`` matches
    ``1.5``). call: the JSON values compare equal under Python's ``==``.
    """
    if output is None:
        return False
    mode = normalize_mode(mode)
    if mode == "call":
        if output.startswith(_harness.REPR_PREFIX):
            return False
        try:
            return json.loads(output) == json.loads(expected)
        except (json.JSONDecodeError, RecursionError):
            return False
    want = normalize_stdout(expected).split("\n")
    got = output.split("\n")
    if len(want) != len(got):
        return False
    for a, b in zip(want, got):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] != [Decimal(x) for x in b.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


# ------------------------------------------------------------------ internals


# Uid slots are process-wide, so concurrent run_programs calls (e.g. from several threads) never
# run two candidates under one uid at the same time.
_UID_SLOTS = 1024
_slot_lock = threading.Lock()
_free_slots = list(range(1, _UID_SLOTS))  # slot 0 is the backend probe's


def _acquire_slots(n: int) -> list[int]:
    with _slot_lock:
        if len(_free_slots) < n:
            raise RuntimeError(f"more than {_UID_SLOTS - 1} concurrent sandboxes requested in one process")
        taken, _free_slots[:] = _free_slots[:n], _free_slots[n:]
    return taken


def _release_slots(slots: list[int]) -> None:
    with _slot_lock:
        _free_slots.extend(slots)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _validate(programs: list, inputs: list, mode: str, fn_name: str | None) -> None:
    for i, program in enumerate(programs):
        if program is not None and not isinstance(program, str):
            raise TypeError(f"programs[{i}] must be a string or None, got {type(program).__name__}")
    for k, text in enumerate(inputs):
        if not isinstance(text, str):
            raise TypeError(f"inputs[{k}] must be a string, got {type(text).__name__}")
    if mode == "call":
        if not fn_name or not str(fn_name).isidentifier():
            raise ValueError(f"call-based execution needs fn_name, a Python identifier; got {fn_name!r}")
        for k, text in enumerate(inputs):
            try:
                parse_call_input(text)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"inputs[{k}] is not LiveCodeBench call input (one JSON value per line): {exc}"
                ) from exc


def _run_one(
    backend: Backend,
    program: str,
    inputs: list[str],
    mode: str,
    fn_name: str | None,
    limits: Limits,
    *,
    uid_slot: int,
) -> list[Outcome]:
    """All inputs of one program; a fresh sandbox resumes after any input that killed one."""
    outcomes: list[Outcome | None] = [None] * len(inputs)
    start = 0
    while start < len(inputs):
        results, stop = _attempt(backend, program, inputs, start, mode, fn_name, limits, uid_slot)
        for k, outcome in results.items():
            outcomes[k] = outcome
        if stop is None:
            break
        k, outcome = stop
        outcomes[k] = outcome
        start = k + 1
    missing = [k for k, o in enumerate(outcomes) if o is None]
    if missing:  # the protocol guarantees one result per input; anything else is our bug
        raise SandboxError(f"sandbox returned no result for inputs {missing}")
    return outcomes  # type: ignore[return-value]


def _attempt(backend, program, inputs, start, mode, fn_name, limits, uid_slot):
    """One sandbox process from input ``start`` on. Returns ``(results, stop)``: the outcomes it
    reported, and ``(k, outcome)`` for the input that ended it early (or None)."""
    remaining = len(inputs) - start
    payload = {
        "program": program,
        "inputs": inputs,
        "start": start,
        "mode": mode,
        "fn_name": fn_name,
        "timeout_s": limits.timeout_s,
        "max_output_bytes": limits.max_output_bytes,
        "memory_mb": limits.memory_mb,
        "max_procs": limits.max_procs,
        "file_mb": limits.tmp_mb,
        # The whole process may use the CPU of every input's timer plus the definition stage.
        "cpu_s": int(math.ceil(limits.timeout_s * (remaining + 1) + limits.grace_s)) + 1,
        "uid": uid_block() + uid_slot if backend.privileged else None,
        "mounts": backend.mounts(),
        "reap": backend.name != "none",  # kill(-1) is only safe inside a PID namespace
    }
    workdir = None
    if backend.name == "none":
        workdir = tempfile.mkdtemp(prefix="concord-run-")
        if backend.privileged:
            os.chmod(workdir, 0o777)  # the dropped uid must be able to write its temp dir
        payload["cwd"] = workdir
    data = json.dumps(payload).encode("utf-8", "surrogatepass")
    line_cap = 7 * limits.max_output_bytes + 4096  # JSON escaping can grow text up to ~6x
    try:
        proc = subprocess.Popen(
            backend.argv(_HARNESS_SOURCE),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as a whole
            close_fds=True,
            env=_ENV,
            cwd="/",
        )
    except OSError as exc:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise SandboxError(f"could not start the {backend.name} sandbox: {exc}") from exc
    results: dict[int, Outcome] = {}
    stop = None
    try:
        stop = _converse(proc, data, results, start, len(inputs), limits, mode, line_cap, backend)
    finally:
        _kill_group(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return results, stop


def _converse(proc, data, results, start, n_inputs, limits, mode, line_cap, backend):
    sel = selectors.DefaultSelector()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
    sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    view = memoryview(data)
    out_buf, err_buf = bytearray(), bytearray()
    ready = False
    expect = start
    deadline = time.monotonic() + _STARTUP_S
    open_reads = 2
    try:
        while open_reads:
            now = time.monotonic()
            if now >= deadline:
                if not ready:
                    raise SandboxError(f"{backend.name} sandbox did not start within {_STARTUP_S:g} s: "
                                       + _tail(err_buf))
                _kill_group(proc)
                return expect, Outcome("timeout", None, f"killed after {limits.timeout_s + limits.grace_s:g} s")
            for key, _ in sel.select(timeout=deadline - now):
                stream = key.fileobj
                if key.data == "in":
                    try:
                        view = view[os.write(stream.fileno(), view[: 1 << 16]):]
                    except BrokenPipeError:
                        view = view[:0]
                    if not view:
                        sel.unregister(stream)
                        stream.close()
                    continue
                chunk = os.read(stream.fileno(), 1 << 16)
                if not chunk:
                    sel.unregister(stream)
                    open_reads -= 1
                    continue
                if key.data == "err":
                    if len(err_buf) < _STDERR_CAP:
                        err_buf += chunk[: _STDERR_CAP - len(err_buf)]
                    continue
                out_buf += chunk
                while True:
                    cut = out_buf.find(b"\n")
                    if cut < 0:
                        break
                    line = bytes(out_buf[:cut])
                    del out_buf[: cut + 1]
                    event = _parse_event(line)
                    if event is None:
                        return expect, Outcome("error", None, "corrupted the result stream")
                    if event.get("event") == "ready" and not ready:
                        ready = True
                        # the first result also covers the definition (call) / compile stage
                        deadline = time.monotonic() + 2 * limits.timeout_s + limits.grace_s
                        continue
                    outcome = _to_outcome(event, expect) if ready else None
                    if outcome is None:
                        return expect, Outcome("error", None, "corrupted the result stream")
                    results[expect] = outcome
                    expect += 1
                    if expect == n_inputs:
                        return None
                    deadline = time.monotonic() + limits.timeout_s + limits.grace_s
                if len(out_buf) > line_cap:
                    return expect, Outcome("error", None, "result stream exceeded the output cap")
    finally:
        sel.close()
    # Both pipes closed: the harness exited before reporting every input.
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        rc = proc.wait()
    if not ready:
        raise SandboxError(f"{backend.name} sandbox failed to start (exit status {rc}): {_tail(err_buf)}")
    if expect >= n_inputs:
        return None
    # bubblewrap and unshare report a child killed by signal S as exit status 128 + S.
    sig = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)
    if sig == signal.SIGXCPU:  # only RLIMIT_CPU sends it: the candidate ran out of time
        return expect, Outcome("timeout", None, "CPU time limit")
    return expect, Outcome("error", None, f"harness process died (exit status {rc})")


def _parse_event(line: bytes) -> dict | None:
    try:
        event = json.loads(line.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _to_outcome(event: dict, expect: int) -> Outcome | None:
    status, output, error = event.get("status"), event.get("output"), event.get("error")
    if event.get("k") != expect or status not in STATUSES:
        return None
    if (status == "ok") != isinstance(output, str):
        return None
    if error is not None and not isinstance(error, str):
        return None
    return Outcome(status, output if status == "ok" else None, error)


def _tail(buf: bytes | bytearray, n: int = 2000) -> str:
    text = bytes(buf).decode("utf-8", "replace").strip()
    return text[-n:] if text else "(no stderr)"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
