"""The zygote: a pristine process that clones every child, and the clone itself.

The zygote is forked from the runner once, right after start-up, before the first request is
read: its memory holds the interpreter, the prelude modules and the seccomp filter, and no job
data ever enters it (it only receives file descriptors and a fork order). *Threat answered: a
candidate reading another job's program, inputs, outputs or hidden check out of memory it
inherited.* Standard library only.

It is kept small, because every child pays for its size twice: the clone copies its page tables,
and every page of it a child writes to is copied on that write. ``unittest.mock``, which only
``stdin`` mode uses, pulls in ``asyncio`` (a third of the zygote's memory, and fork handlers that
run in every child), so it lives in a second zygote: the first clones it on the first ``stdin``
job (the order ``zygote``), and it imports ``unittest.mock`` and then serves ``stdin`` children
exactly as the first serves the others. Being a clone of a process no job data ever entered, it
holds none either.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import socket

from concord.execution.harness.base import (
    _CLONE_ABI,
    _LIBC,
    CLONE_CHILD_CLEARTID,
    CLONE_CHILD_SETTID,
    CLONE_NEWPID,
    CLONE_PARENT,
    _TOTALS,
    _CollectorTotals,
    _check,
    _collect,
    _fork,
    _seccomp_program,
)
from concord.execution.harness.child import _child_main, _site_packages
from concord.execution.harness.modes import _reliability_guard


M_ARENA_MAX = -8  # glibc's mallopt parameter


def _zygote(sock_fd: int, hello: dict) -> None:
    """Fork children on request. Receives only descriptors (a job memfd and pipes) and whether to
    give the child a PID namespace (the message: ``pidns`` or ``plain``); never reads a job.
    Never returns."""
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
    # One malloc arena for every thread of a child: glibc reserves 64 MB of address space for
    # each further one, which the rlimit fallback's RLIMIT_AS (memory_mb) counts in full, so an
    # honest ThreadPoolExecutor(4) could not start its threads at memory_mb=256 there (nineteenth
    # red team). The interpreter's lock runs one thread at a time anyway.
    _LIBC.mallopt(M_ARENA_MAX, 1)
    # Made once here for every child: each made in a child costs it pages of this process's memory
    # to copy (the filters' ctypes structures; site's search for its directories).
    hello = dict(hello, seccomp=_seccomp_program(hello.get("seccomp")),
                 seccomp_candidates=_seccomp_program(hello.get("seccomp_candidates")),
                 site_packages=_site_packages())
    clone = _Cloner(hello.get("tid_offset"))
    _reliability_guard(disable_exit=False)  # once, for every child (see there)
    _serve(socket.socket(fileno=sock_fd), clone, hello)


def _serve(sock: socket.socket, clone: _Cloner, hello: dict) -> None:
    """The zygote's loop: one child per order on ``sock``. Never returns."""
    # Everything alive now is shared, copy-on-write, with every child: out of the collector's
    # sight, so a child's collections never walk (and so never copy) the inherited pages.
    gc.freeze()
    if not _TOTALS:  # found once, in the first zygote; its clones share its address space's layout
        _TOTALS.append(_CollectorTotals())
    sock.send(b"ready")
    while True:
        _order(sock, clone, hello)


def _order(sock: socket.socket, clone: _Cloner, hello: dict) -> None:
    """Read one order and carry it out: a child, with or without a PID namespace; or the second
    zygote, which serves on the socket that comes with the order. Returns in the zygote only.

    Every child starts from the same heap: nothing of an earlier order is alive (its objects die
    when this returns) and the collector's counts are reset just before the clone. *Why*: a
    child's heap addresses, and so the order of its sets of objects hashed by identity and its
    ``id()`` values, would otherwise depend on how many children its zygote cloned before (the
    same program on the same input printed 7 orders in 18 runs), a rerun would not reproduce its
    outputs, and the count itself would reach a candidate.

    The collection leaves ``gc.get_stats()`` as it found it (:func:`_collect`): its
    totals grew by one per order, and every child inherited them, so a candidate read how many
    units its worker had run, in this call and earlier ones (a rerun printed 3, 4, 5, 6), and a
    HumanEval solution that made its check server restart told the next candidate one bit per
    unit (sixteenth red team). A collection it must be: it also empties the interpreter's free
    lists, without which each order left one more object in them and every child's heap differed."""
    try:
        # An order is a word: a buffer this small comes from Python's own allocator, restored
        # exactly when the order's objects die (a 4 KiB one came from the C allocator, whose
        # first use leaves its heap unlike later ones).
        msg, fds, _, _ = socket.recv_fds(sock, 64, 8)
    except InterruptedError:
        return
    if not msg:
        os._exit(0)  # the runner is gone
    try:
        pidns = msg == b"pidns"
        _collect()
        child = clone(CLONE_NEWPID if pidns else 0) if clone.ok else _fork_through_middle(pidns)
    except Exception as exc:  # noqa: BLE001 -- tell the runner, keep serving
        for fd in fds:
            os.close(fd)
        sock.send(f"error {type(exc).__name__}".encode()[:60])
        return
    if child == 0:
        sock.close()
        if msg == b"zygote":
            _second_zygote(fds, clone, hello)
        _child_main(fds, hello)
    for fd in fds:
        os.close(fd)
    sock.send(str(max(child, 0)).encode())


def _second_zygote(fds: list[int], clone: _Cloner, hello: dict) -> None:
    """The zygote of ``stdin`` children: this clone of the first zygote, with ``unittest.mock``
    (LiveCodeBench patches stdin and ``open`` with it) imported before it serves. Never returns."""
    try:
        (sock_fd,) = fds
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(sock_fd, 3)
        os.closerange(4, 1 << 16)
        import unittest.mock  # noqa: F401 -- warm for every child

        _serve(socket.socket(fileno=3), clone, hello)
    finally:
        os._exit(1)


def _fork_through_middle(pidns: bool) -> int:
    """Where :class:`_Cloner` cannot clone: fork an intermediate process that forks the child
    and exits, so the child is handed to the runner (a subreaper). Returns 0 in the child, its
    pid (0 when unknown) in the zygote."""
    r, w = os.pipe()
    try:
        middle = _fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if middle == 0:
        child = -1
        try:
            os.close(r)
            if pidns:
                # The next fork becomes PID 1 of a fresh namespace; this process then exits.
                _check(_LIBC.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            child = _fork()
            if child != 0:
                os.write(w, str(child).encode())
        except BaseException:  # noqa: BLE001 -- the zygote reads no pid and tells the runner
            child = -1
        if child != 0:
            os._exit(0)
        os.close(w)
        return 0
    os.close(w)
    while True:
        try:
            os.waitpid(middle, 0)
            break
        except InterruptedError:
            continue
    reply = os.read(r, 64)
    os.close(r)
    try:
        return max(int(reply or b"0"), 0) or -1
    except ValueError:
        return -1


def _oom_exempt() -> bool:
    try:
        with open("/proc/self/oom_score_adj") as f:
            return f.read().strip() == "-1000"
    except OSError:
        return False


def tid_offset() -> int | None:
    """Where glibc keeps a thread's own id in its thread descriptor (``pthread_self()`` + this):
    the one 32-bit slot that holds each thread's own id in the calling thread and in two threads
    started for the purpose; None when not exactly one does. One thread alone is ambiguous where
    its id is small or looks like half a pointer (a caller that is PID 1 of a container: its
    descriptor holds many 1s), and None sent the zygote down its other path, whose children have
    another memory layout, so a candidate's ``id()`` and set orders depended on the caller's pid
    (eleventh red team). Called in the trusted parent."""
    import threading

    found: list[set[int] | None] = [_tid_slots()]
    for _ in range(2):
        helper = threading.Thread(target=lambda: found.append(_tid_slots()), daemon=True)
        helper.start()
        helper.join()
    if len(found) != 3 or any(slots is None for slots in found):
        return None
    common = set.intersection(*found)
    return common.pop() if len(common) == 1 else None


#: Bytes of a thread descriptor searched for its id: glibc keeps it at 720 on x86_64 and aarch64,
#: well inside the descriptor (about 2.3 KiB), so the scan never reads past it.
TID_SCAN = 1024


def _tid_slots() -> set[int] | None:
    """Offsets in this thread's descriptor whose 32-bit value is this thread's id."""
    import threading

    try:
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_void_p
        view = (ctypes.c_int32 * (TID_SCAN // 4)).from_address(libc.pthread_self())
        tid = threading.get_native_id()
        return {4 * i for i in range(TID_SCAN // 4) if view[i] == tid}
    except (AttributeError, OSError, ValueError):
        return None


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
        import _thread  # not threading: its fork handler would run in every child

        try:
            _LIBC.pthread_self.restype = ctypes.c_void_p
            self.tid_at = _LIBC.pthread_self() + offset
            if ctypes.c_int32.from_address(self.tid_at).value != _thread.get_native_id():
                return
            self.syscall = ctypes.PyDLL(None, use_errno=True).syscall
            self.api = ctypes.pythonapi
            for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Parent", "PyOS_AfterFork_Child"):
                getattr(self.api, name).restype = None
        except (AttributeError, OSError):
            return
        self.syscall.restype = ctypes.c_long
        nr, tid_before_tls = abi
        # The arguments of each flag set used, built now: each object made here is a page every
        # child shares, and none is made later (a child's heap must not depend on which kinds of
        # children its zygote cloned before it).
        tid, none = ctypes.c_void_p(self.tid_at), ctypes.c_void_p(0)
        tail = (tid, none) if tid_before_tls else (none, tid)
        every = CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | signal.SIGCHLD
        self.args = {flags: (ctypes.c_long(nr), ctypes.c_ulong(flags | every), none, none, *tail)
                     for flags in (0, CLONE_NEWPID)}
        self.ok = True

    def __call__(self, flags: int) -> int:
        args = self.args[flags]
        self.api.PyOS_BeforeFork()
        pid = self.syscall(*args)
        if pid == 0:
            self.api.PyOS_AfterFork_Child()
            return 0
        errno_ = ctypes.get_errno()
        self.api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(errno_, f"clone: {os.strerror(errno_)}")
        return pid
