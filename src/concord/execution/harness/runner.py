"""The runner: the trusted process of a worker's sandbox, reading requests and reporting results.

Started once per worker by the trusted parent (:mod:`concord.execution.runner`), it reads one
request per line on stdin and writes one JSON event per line on stdout. It never runs candidate
code. It is not dumpable and it is a child subreaper (orphans come to it, it reaps them); it
enforces every limit on what it reads (time by :class:`_Clock`, output by
:class:`FrameReader`). Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import tempfile
import time

from concord.execution.harness.base import (
    _LIBC,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    STDERR_KEEP,
    STDERR_READ,
)
from concord.execution.harness.clock import _Clock, _CpuUsage
from concord.execution.harness.frames import FrameReader, _result
from concord.execution.harness.zygote import _zygote


class _Runner:
    def __init__(self) -> None:
        self.out = os.dup(1)  # events to the trusted parent; children never inherit it (CLOEXEC)
        self.unsent = bytearray()
        os.set_inheritable(self.out, False)
        self.isolate = False
        self.cpu_usage: _CpuUsage | None = None
        self.sock: socket.socket | None = None  # to the zygote
        self.stdin_sock: socket.socket | None = None  # to the zygote of stdin children, once started
        self.checker: tuple[int, socket.socket, tuple] | None = None  # the check server: pid, jobs socket, limits

    def emit(self, obj: dict, now: bool = True) -> None:
        """An event to the parent. ``now=False`` keeps it for the next write, which happens before
        this process next waits: a result and the "done" after it reach the parent in one write,
        which wakes it once instead of twice.

        A result's ``raw`` text (a candidate's output, up to ``max_output_bytes``) follows its line
        as ``raw_bytes`` bytes of UTF-8, not inside the JSON: JSON writes a control character as
        six, and the copies of that escaped text cost this process, which no candidate's memory
        group charges, 25 times the output at its peak (sixth red team)."""
        raw = obj.get("raw")
        payload = b""
        if isinstance(raw, str):
            payload = raw.encode("utf-8", "surrogatepass")
            obj = {**obj, "raw": None, "raw_bytes": len(payload)}
        self.unsent += (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
        self.unsent += payload
        del payload
        if now:
            self.flush()

    def flush(self) -> None:
        done = 0
        with memoryview(self.unsent) as view:  # written from where it lies: no copy of it
            while done < len(view):
                done += os.write(self.out, view[done:])
        self.unsent.clear()
        if done > 1 << 20:  # glibc keeps freed large blocks (its mmap threshold grows): hand them back
            _LIBC.malloc_trim(0)

    def setup(self, hello: dict) -> None:
        _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        try:  # an out-of-memory kill should pick a candidate, never the runner or the zygote
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("-1000")
        except OSError:
            pass
        self.isolate = bool(hello.get("isolate"))
        self.cpu_usage = _CpuUsage(hello["cpu_usage"]) if hello.get("cpu_usage") else None
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

    def stdin_zygote(self) -> socket.socket:
        """The zygote of ``stdin`` children (see :func:`_second_zygote`), cloned from the zygote
        on first use."""
        if self.stdin_sock is None:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                socket.send_fds(self.sock, [b"zygote"], [theirs.fileno()])
                reply = self.sock.recv(64)
                if not reply.isdigit() or int(reply) <= 0 or mine.recv(64) != b"ready":
                    raise RuntimeError(f"the zygote could not start the stdin zygote ({reply[:60]!r})")
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()
            self.stdin_sock = mine
        return self.stdin_sock

    def spawn(self, job: dict, fds: list[int]) -> int:
        """A fresh child from the zygote, reading ``job`` from a private memfd; returns its pid
        (our child: cloned with CLONE_PARENT, or handed to us when the zygote's intermediate
        process exits)."""
        sock = self.stdin_zygote() if job["role"] == "stdin" else self.sock
        if job.get("rlimit_procs") and job.get("uid") is None:
            # Counted here, not in the child: a child's heap (and so its identity-hashed orders)
            # must not depend on how many processes, with which pids, ran beside it.
            job = dict(job, tasks_before=_tasks_of_this_uid())
        memfd = os.memfd_create("job", 0)
        try:
            data = memoryview(json.dumps(job).encode("utf-8", "surrogatepass"))
            while data:
                data = data[os.write(memfd, data):]
            os.lseek(memfd, 0, os.SEEK_SET)
            # The check server too: a check is caller input (SC-MoA's assert tests are generated),
            # and one that is not inert runs in a child of the server, which could fork a process
            # of its own that outlived the check (thirteenth red team). As PID 1 of its own
            # namespace the server takes everything below it along when it ends.
            pidns = self.isolate
            socket.send_fds(sock, [b"pidns" if pidns else b"plain"], [memfd, *fds])
        finally:
            os.close(memfd)
        reply = sock.recv(64)
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

    def checker_hung_up(self) -> bool:
        """Whether the check server closed its end of the jobs socket (it is ending)."""
        if self.checker is None:
            return False
        try:
            return self.checker[1].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

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
        workdir = self._workdir(job)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pids, checker = self._launch(job, start, token, workdir, out_w, err_w)
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        last = len(job["inputs"]) if job["mode"] == "call" else start + 1
        unit = _Unit(start, last)
        reader = FrameReader(token, start, last, int(job["max_output_bytes"]))
        clock = _Clock(self.cpu_usage, pids + ([checker] if checker else []), float(job["timeout_s"]),
                       everyone=self.isolate)
        try:
            self._read(unit, job["mode"], start, reader, clock, {out_r: "out", err_r: "err"})
            if checker is None and unit.stop is None and unit.k < last:
                self._await_exit(pids[0], clock, unit)
        finally:
            clock.close()
            for pid in pids:
                _kill(pid, group=not self.isolate)
            status = _reap(pids)
            if checker is not None and unit.k < last:  # the check did not finish: neither does its server
                status = self.drop_checker()
            elif checker is not None and self.checker_hung_up():
                # A server ends after a check that is not inert (it hangs up first), but what
                # that check left in its process could keep it waiting, outside every clock: a
                # check rebound `os._exit` and its child ran on (fourteenth red team). Ended now.
                self.drop_checker()
            os.close(out_r)
            os.close(err_r)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        if unit.k >= last:
            return unit.k
        stop = unit.stop
        if stop is None:
            if not unit.setup:  # no candidate code ran: the failure is ours (the token proves it)
                raise RuntimeError(bytes(unit.err).decode("utf-8", "replace").strip()
                                   or f"sandbox setup failed ({_death(status, b'')})")
            # A check server that ended mid-check is reaped through its namespace's intermediate
            # process, whose status (0, or our SIGKILL) says nothing of how the server ended, and
            # which of the two one gets is a race: one text, the same on every rerun (fifteenth
            # red team: "exited with status 0" or "killed" for one call).
            error = SERVER_ENDED if checker is not None else _death(status, unit.err)
            stop = {"status": "error", "error": error}
        self.emit({"k": unit.k, "output": None, **stop})
        return unit.k + 1

    def _workdir(self, job: dict) -> str | None:
        """Without a private /tmp: a fresh working directory per child instead."""
        if self.isolate:
            return None
        workdir = tempfile.mkdtemp(prefix="concord-run-")
        if job.get("uid") is not None:
            os.chmod(workdir, 0o777)
        return workdir

    def _launch(self, job: dict, start: int, token: str, workdir: str | None, out_w: int,
                err_w: int) -> tuple[list[int], int | None]:
        """Start a unit of work's processes: (its child's pid, the check server's pid or None)."""
        mode, uid = job["mode"], job.get("uid")
        if mode == "humaneval":
            return self._launch_check(job, start, token, workdir, out_w, err_w)
        # The check server shares the candidates' memory group: a program's headroom must not
        # depend on whether a HumanEval check ran on this worker before it.
        self.drop_checker()
        if mode == "call":
            child = self._child_job(job, "call", token, program=job["program"], fn_name=job["fn_name"],
                                    inputs=job["inputs"][start:], k=start, calls=len(job["inputs"]) - start,
                                    uid=uid, cwd=workdir)
        else:
            child = self._child_job(job, "stdin", token, program=job["program"], input=job["inputs"][start],
                                    k=start, uid=uid, cwd=workdir)
        return [self.spawn(child, [out_w, err_w])], None

    def _launch_check(self, job: dict, start: int, token: str, workdir: str | None, out_w: int,
                      err_w: int) -> tuple[list[int], int | None]:
        """A HumanEval check: the check to the worker's check server, the solution to a fresh child,
        the two joined by a request and a reply pipe."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        one = {"check": job["inputs"][start], "k": start, "token": token, "max_output_bytes": job["max_output_bytes"]}
        checker = None
        try:
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
            child = self._child_job(job, "solution", "", program=job["program"], uid=job.get("uid"), cwd=workdir)
            return [self.spawn(child, [rep_w, err_w, req_r])], checker
        except BaseException:
            if checker is not None:
                self.drop_checker()
            raise
        finally:
            for fd in (req_r, req_w, rep_r, rep_w):
                os.close(fd)

    def _read(self, unit: _Unit, mode: str, start: int, reader: FrameReader, clock: _Clock,
              fds: dict[int, str]) -> None:
        """Read the unit's stdout and stderr until every input is reported, the clock runs out,
        or the reader says stop; results go to the parent as they come."""
        drained = 0.0  # when stderr was last drained (see _drain)
        while fds and unit.k < reader.last:
            left, why = clock.left()
            if left <= 0:
                unit.stop = {"status": "timeout", "error": why}
                return
            if self.unsent:
                blocked = time.monotonic()
                self.flush()  # blocks while the parent is not reading: not the candidate's time
                clock.pause(time.monotonic() - blocked)
            watch, wait = list(fds), left
            if "drain" in fds.values():  # at most once per DRAIN_EVERY, however small its writes
                due = drained + DRAIN_EVERY - time.monotonic()
                if due > 0:
                    watch, wait = [fd for fd in fds if fds[fd] != "drain"], min(left, due)
            ready, _, _ = select.select(watch, [], [], wait)
            for fd in ready:
                if fds[fd] == "drain":
                    drained = time.monotonic()
                    if not _drain(fd):
                        del fds[fd]
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    del fds[fd]
                elif fds[fd] == "err":
                    if unit.keep_err(chunk):  # enough kept: drain the rest unread (below)
                        fds[fd] = "drain"
                else:
                    for event in reader.feed(chunk):
                        self._on(event, unit, mode, start, clock)
                        if unit.stop is not None:
                            return

    @staticmethod
    def _await_exit(pid: int, clock: _Clock, unit: _Unit) -> None:
        """The child closed its output before reporting: wait, within its time, for it to end,
        so that its outcome says how it ended, the same on every rerun. Killed at once, a child
        that closed its pipes and then exited read as "exited" or as "killed" as a race fell
        (eighteenth red team)."""
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # no pidfds (before Linux 5.3): killed at once, as before
            return
        try:
            while True:
                left, why = clock.left()
                if left <= 0:
                    unit.stop = {"status": "timeout", "error": why}
                    return
                if select.select([fd], [], [], left)[0]:
                    return
        finally:
            os.close(fd)

    def _on(self, event: tuple, unit: _Unit, mode: str, start: int, clock: _Clock) -> None:
        kind = event[0]
        if kind == "setup":
            if not unit.setup:  # the candidate's clock starts once its isolation is set up
                unit.setup = True
                clock.restart()
        elif kind == "defined":
            if mode == "call" and not unit.defined and event[1] == start:  # once: the definition's own timer
                unit.defined = True
                clock.restart()
        elif kind == "stop":
            unit.stop = event[1]
        elif not clock.in_time():  # arrived after the limit (e.g. this process was stopped)
            unit.stop = {"status": "timeout", "error": f"exceeded {clock.timeout:g} s"}
        else:
            _, k, header, raw = event
            # With the CPU seconds the input used: what the trusted parent may spend reading the
            # value grows with them (parent runner._Job.reading_allowance).
            self.emit({**_result(k, header, raw), "used": round(clock.cpu_used(), 6)}, now=False)
            unit.k = k + 1
            if unit.k < unit.last:  # after the last result the clock is read no more
                clock.restart()


class _Unit:
    """What the runner knows of one unit of work while it runs: the next input to report, why it
    stopped early (if it did), whether the child got as far as candidate code, its stderr."""

    def __init__(self, start: int, last: int) -> None:
        self.k, self.last = start, last  # the next input to report; the one after the unit's last
        self.stop: dict | None = None
        self.setup = self.defined = False
        self.err = bytearray()
        self.err_seen = 0

    def keep_err(self, chunk: bytes) -> bool:
        """Keep the start of stderr for messages; True once enough was read to stop reading."""
        self.err_seen += len(chunk)
        if len(self.err) < STDERR_KEEP:
            self.err += chunk[: STDERR_KEEP - len(self.err)]
        return self.err_seen > STDERR_READ


def _drain(fd: int) -> bool:
    """Discard what is in the pipe ``fd`` (stderr past what is kept), moved by the kernel to
    /dev/null without a copy into this process; False at its end. *Why not stop reading*: a
    program writing more than ``STDERR_READ`` to stderr (debug prints, which LiveCodeBench
    neither captures nor grades) then blocked on the full pipe for good, and its honest answer
    was a timeout (3 MB of debug lines, ninth red team)."""
    global _NULL
    if _NULL is None:
        _NULL = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        return os.splice(fd, _NULL, 1 << 20) > 0
    except (AttributeError, OSError):  # no splice here: read and drop
        return len(os.read(fd, 1 << 16)) > 0


_NULL: int | None = None
# A writer of 1-byte chunks woke the runner per write: 0.88 s of its CPU in 2 s (measured); at
# this period it blocks on the full pipe meanwhile (64 KiB per 2 ms: 3 MB of debug lines wait 0.1 s).
DRAIN_EVERY = 0.002


def _kill(pid: int, group: bool) -> None:
    # Every child leads a session and process group of its own (pgid = pid): kill that group,
    # then the child itself (in case it had not got as far as setsid). PID 1 of a namespace takes
    # everything else in it along; without namespaces the group is what the child started.
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


#: a HumanEval unit whose check server ended before the check reported
SERVER_ENDED = "the check server ended before the check reported (memory, process or CPU limit, or a signal)"


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


def _tasks_of_this_uid() -> int:
    """Tasks (threads included) of the processes this uid runs where this process sees them:
    RLIMIT_NPROC counts them all. Without root every process of the sandbox (bubblewrap's init,
    the runner, the zygotes, the check server) shares the candidate's uid, so a limit of
    ``max_procs`` alone left a candidate 3 or 4 processes, fewer after a job that started a
    second zygote or a check server (measured); the allowance makes it ``max_procs`` whatever
    ran before. Read by the runner, which sees every process of its sandbox."""
    uid, total = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:  # ended meanwhile
                pass
    return total

