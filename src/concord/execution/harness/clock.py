"""How much of its time limit a unit of work has used (CPU, run-queue waits, wall clock). Standard library only."""

from __future__ import annotations

import os
import time

from concord.execution.harness.base import _CLK_TCK, WALL_BACKSTOP

#: seconds between two reads of a running unit's waits for a CPU (:meth:`_Clock.left`): a thread
#: that lives shorter than this can lose at most this much of its wait
WAIT_POLL = 0.02


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _read(fd: int | None) -> bytes:
    """The whole (short) file behind ``fd``, read again from its start; b"" once unreadable (a
    process that has been reaped). One system call per reading, where opening the file each time
    took five and a Python file object."""
    if fd is None:
        return b""
    try:
        return os.pread(fd, 512, 0)
    except OSError:
        return b""


class _CpuUsage:
    """The worker's candidate cgroup's CPU time (cgroup v2 ``cpu.stat``, v1 ``cpuacct.usage``),
    its file kept open for the runner's lifetime."""

    def __init__(self, path: str | None) -> None:
        self.v2 = bool(path) and path.endswith("cpu.stat")
        self.fd = _open(path) if path else None

    def seconds(self) -> float | None:
        text = _read(self.fd)
        try:
            if self.v2:  # usage_usec
                return int(text.split(b"usage_usec", 1)[1].split()[0]) / 1e6
            return int(text) / 1e9  # nanoseconds
        except (ValueError, IndexError):
            return None


class _RunDelays:
    """Run-queue waits (``schedstat``'s run delay) of every task of a unit of work, in seconds:
    each thread of each of its processes, the ones it starts too. Inside the sandbox (its own PID
    namespace, ``everyone``) that is every task but this runner's; elsewhere the threads of the
    unit's own processes. *Why*: only the main threads of the solution and the check server were
    read, so a program working in a thread, or a check forked into a child of its server (any
    check that imports), had its waits for a CPU charged as time used, and timed out under a
    loaded host where the same work in a main thread passed (4 of 4 against 0 of 4; sixteenth
    red team). A task's file is opened once and kept: a later task that reuses its id is another
    file, counted from nothing; a task that ends keeps what it had waited."""

    def __init__(self, pids: list[int], everyone: bool) -> None:
        self.pids, self.everyone, self.own = pids, everyone, os.getpid()
        self.files: dict[int, int] = {}  # task id -> its schedstat, open
        self.seen: dict[int, int] = {}  # task id -> its run delay when last read (ns)
        self.ended = 0  # ns waited by tasks read before and gone since

    def close(self) -> None:
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()

    def _processes(self) -> list:
        if not self.everyone:
            return self.pids
        try:
            return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != self.own]
        except OSError:
            return self.pids

    def seconds(self) -> float:
        for tid, fd in list(self.files.items()):
            try:
                self.seen[tid] = int(_read(fd).split()[1])
            except (ValueError, IndexError):  # ended and reaped: what it waited stays counted
                os.close(fd)
                del self.files[tid]
                self.ended += self.seen.pop(tid, 0)
        for pid in self._processes():
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for name in tasks:
                tid = int(name)
                if tid in self.files:
                    continue
                fd = _open(f"/proc/{pid}/task/{name}/schedstat")
                try:
                    self.seen[tid] = int(_read(fd).split()[1])
                except (ValueError, IndexError):
                    if fd is not None:
                        os.close(fd)
                    continue
                self.files[tid] = fd
        return (self.ended + sum(self.seen.values())) / 1e9


class _Clock:
    """How much of ``timeout`` the current unit of work has used: the larger of its CPU time and
    its wall-clock time less the time its tasks waited for a CPU (:class:`_RunDelays`); plus a
    wall-clock backstop.

    Its CPU time includes the runner's own since the unit's clock started: the runner reads,
    frames and forwards what the candidate writes, work the candidate decides. A candidate writing
    one byte at a time (or in packets, ``O_DIRECT``) made the runner spend about as much CPU as
    itself outside its group, so a unit took two CPUs for its one ``timeout`` (measured after the
    eighth red team).

    CPU time comes from the worker's candidate cgroup when there is one (everything the candidate
    started), else from ``/proc/<pid>/stat`` of the candidate's processes. The ``/proc`` files of
    the unit's processes are opened once, when the clock is made: they stay the files of those
    processes (never of a later one that reuses a pid) and read as empty once they are reaped."""

    def __init__(self, cpu_usage: _CpuUsage | None, pids: list[int], timeout: float, everyone: bool = False) -> None:
        self.cpu_usage, self.timeout, self.pids = cpu_usage, timeout, pids
        self.delays = _RunDelays(pids, everyone)
        self.stat: list | None = None  # opened when there is no cgroup to read
        self.restart()

    def close(self) -> None:
        self.delays.close()
        for fd in self.stat or []:
            if fd is not None:
                os.close(fd)
        self.stat = []

    def restart(self) -> None:
        self.t0 = time.monotonic()
        self.own0 = time.process_time()  # the runner is single-threaded: its process is this unit's reader
        self.cpu0 = self.cpu()
        self.wait0 = self.waited()

    def pause(self, seconds: float) -> None:
        """``seconds`` the runner spent blocked handing results to the trusted parent: no part of
        the candidate's wall time (its CPU time, read from the kernel, still counts in full). A
        parent busy reading other candidates' large values left the runner blocked in its write
        while an honest candidate's next input ran: 5 of 12 honest inputs timed out beside three
        neighbours, none alone (eighth red team)."""
        if seconds > 0:
            self.t0 += seconds

    def cpu(self) -> float:
        if self.cpu_usage is not None:
            seconds = self.cpu_usage.seconds()
            if seconds is not None:
                return seconds
        if self.stat is None:
            self.stat = [_open(f"/proc/{pid}/stat") for pid in self.pids]
        total = 0
        for fd in self.stat:
            try:
                fields = _read(fd).rsplit(b")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            except (ValueError, IndexError):
                pass
        return total / _CLK_TCK

    def waited(self) -> float:
        self.read_at = time.monotonic()
        return self.delays.seconds()

    def in_time(self) -> bool:
        """Is the unit of work still within its limit? Asked again when a result arrives, so a
        result read after the limit passed (this process was stopped, or descheduled, while it
        waited) is a timeout and never accepted late."""
        left, _ = self.left()
        return left > 0

    def cpu_used(self) -> float:
        """CPU seconds the unit has used since its clock started, the runner's own included."""
        return self.cpu() - self.cpu0 + (time.process_time() - self.own0)

    def left(self) -> tuple[float, str]:
        """Seconds left, at most ``WAIT_POLL`` (the runner asks again by then), and why none are."""
        now = time.monotonic()
        wall = now - self.t0
        backstop = WALL_BACKSTOP * self.timeout - wall
        if backstop <= 0:
            return 0.0, f"exceeded {self.timeout:g} s ({WALL_BACKSTOP:g}x wall-clock backstop)"
        cpu = self.cpu_used()
        used = max(cpu, wall)
        if used >= self.timeout or now - self.read_at >= WAIT_POLL:
            # The waits for a CPU are read where they can decide, and every WAIT_POLL while the
            # unit runs, so that a thread that ends is read before it does; each read lists every
            # task of the sandbox, and a unit asked its time about seven times per HumanEval check
            # (a third of the runner's own work). Read only where they decided, the waits of
            # threads that ended before were lost, and an honest program working in short threads
            # timed out on a loaded host (twenty-second red team).
            waited = min(max(self.waited() - self.wait0, 0.0), wall)
            used = max(cpu, wall - waited)
        if used >= self.timeout:
            return 0.0, f"exceeded {self.timeout:g} s"
        return max(min(self.timeout - used, backstop, WAIT_POLL), 0.002), ""
