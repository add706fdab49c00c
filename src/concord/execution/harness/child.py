"""A child: reads its own job, isolates and limits itself, then runs its role (candidate code).

Between clone and the first candidate instruction a child that runs candidate code gets its own
mount and IPC namespaces (a size-capped ``/tmp`` and ``/dev/shm``, no ``/proc``, bounded
System V IPC), its memory group, a session of its own, rlimits, an unprivileged uid (or no
capabilities), ``no_new_privs`` and the seccomp filter; see :mod:`concord.execution.harness`.
Standard library only.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import random
import resource
import sys

from concord.execution.harness.base import (
    _LIBC,
    CLONE_NEWIPC,
    CLONE_NEWNS,
    MNT_DETACH,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    SETUP_FAILED,
    STATUS_FD,
    SIGPENDING,
    MEMLOCK,
    _chdir,
    _check,
    _seccomp,
)
from concord.execution.harness.checks import _serve_checks
from concord.execution.harness.modes import _Reporter, _run_call, _run_stdin
from concord.execution.harness.solution import _run_solution


def _site_packages() -> list[str]:
    """The installation's site-packages directories, as ``site`` puts them on ``sys.path``: found
    once, in the zygote, and put on each child's path only there (:func:`_add_site_packages`)."""
    import site

    return [p for p in site.getsitepackages() if os.path.isdir(p)]


def _add_site_packages(directories: list[str]) -> None:
    """The installation's site-packages on ``sys.path`` only now, in the child: on the path in
    the runner, an import probing for a module the standard library lacks (``copy``'s
    ``org.python.core``) listed them into importlib's cache, in the zygote's heap every child
    inherits, so ``id()`` values and set orders followed what was installed there (eleventh red
    team)."""
    sys.path.extend(p for p in directories if p not in sys.path)


def _child_main(fds: list[int], hello: dict) -> None:
    """Read this child's own job, isolate and limit this process, then run its role. Never returns."""
    # Where a setup failure is told: the unit's stderr pipe until it is placed on fd 2.
    told = fds[2] if len(fds) > 2 else 2
    try:
        job_fd, *pipes = fds
        job = json.loads(_read_all(job_fd).decode("utf-8", "surrogatepass"))
        role = job["role"]
        isolate = bool(hello.get("isolate"))
        for path in hello.get("child_cgroup_procs") or ():
            # Where the zygote could not join the memory group (it could be killed there): the
            # group then holds candidates' processes only, so when a candidate fills it (heap,
            # tmpfs, pipe buffers) the out-of-memory killer can only choose among them.
            _write_file(path, "0")
        try:
            # First in line for any out-of-memory kill, wherever one happens (raising the score
            # needs no privilege, unlike lowering the runner's); the check server, which shares
            # the candidate's memory group, after the candidate. Before _isolate takes /proc.
            _write_file("/proc/self/oom_score_adj", "500" if role == "checker" else "1000")
        except OSError:
            pass
        if role == "checker":
            # The server's own memory, read after /proc is gone (_serve_checks' growth check);
            # placed at STATUS_FD below, closed in every check's own child.
            job["status_fd"] = os.open("/proc/self/status", os.O_RDONLY)
            # What a check's own child adds to the server's filter (seccomp.py: no processes
            # where no cgroup counts their CPU); the server itself forks those children.
            job["check_seccomp"] = hello.get("seccomp_candidates")
        if isolate:
            # The check server as well as candidates: a check that is not inert runs in a child
            # of it, which must see no /proc or cgroup files and hold no SysV object past the
            # server (thirteenth red team: a check read the worker's memory and CPU counters and
            # left 150 MB of message queues charged to every later candidate's group).
            _isolate(job, hello.get("cgroup_mount"))
        # A session and process group of its own: kill(0, ...) or killpg from candidate code
        # reaches its own processes only, never the runner (which, without root, has its uid).
        os.setsid()
        _limits(job)
        uid = job.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # from root this clears every capability
            if os.getuid() != uid or os.geteuid() != uid:
                raise RuntimeError("could not drop privileges")
        elif isolate:
            _drop_capabilities()
        _chdir("/" if role == "checker" else "/tmp" if isolate else job["cwd"])
        _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if isolate and hello.get("seccomp"):
            # Candidates without a cgroup start no processes (threads only): see seccomp.py.
            program = hello.get("seccomp_candidates") if role != "checker" else None
            _seccomp(program or hello["seccomp"])
            _select_without_epoll()
        # fds: stdout/stderr (+ the check's request/reply pipes, or the solution's request pipe as stdin)
        if role == "solution":
            out, errfd, stdin = pipes
            _place({0: stdin, 1: out, 2: errfd})
        elif role == "checker":
            (jobs,) = pipes
            null = os.open(os.devnull, os.O_RDWR)
            _place({0: null, 1: null, 2: null, 3: jobs, STATUS_FD: job["status_fd"]})
            job["status_fd"] = STATUS_FD
        else:
            out, errfd = pipes
            _place({0: os.open(os.devnull, os.O_RDWR), 1: out, 2: errfd})
        told = 2
        site_packages = hello["site_packages"]
        del hello, fds, pipes
        random.seed(0)  # a program drawing random numbers gives the same outputs on every run
        _add_site_packages(site_packages)
        run = {"stdin": _run_stdin, "call": _run_call, "solution": _run_solution, "checker": _serve_checks}[role]
        report = _Reporter(job["token"])
    except BaseException as exc:  # noqa: BLE001 -- setup failures are the sandbox's, reported on stderr
        try:
            os.write(told, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(SETUP_FAILED)
    # From here on candidate code may run: whatever happens is the candidate's outcome.
    if role not in ("solution", "checker"):
        report({"setup": True})
    try:
        run(job, report)
    finally:
        os._exit(1)


def _read_all(fd: int) -> bytes:
    """Everything in the file behind ``fd`` (a job's memfd), which is then closed."""
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _write_file(path: str, text: str) -> None:
    """``text`` into a control file (a cgroup's, a sysctl, an oom score) with plain system calls:
    a Python file object per write costs a child more pages of the zygote's memory to copy."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _place(targets: dict[int, int]) -> None:
    """Put each source descriptor at its target number and close every other descriptor."""
    high = {t: fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for t, fd in targets.items()}
    for t, fd in high.items():
        os.dup2(fd, t)
    os.closerange(max(targets) + 1, 1 << 16)


def _isolate(job: dict, cgroup_mount: str | None = None) -> None:
    _check(_LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _check(_LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    size = int(job["tmp_bytes"])
    # Files as well as bytes are bounded: each inode is kernel memory the kernel tears down after
    # the candidate ends, off its clock (a timed-out flood of empty files cost the next unit of
    # work 2-3 s of teardown, measured); one per page of the size leaves any real program room.
    inodes = max(size // 4096, 1024)
    for where in (b"/tmp", b"/dev/shm"):
        opts = f"size={size},nr_inodes={inodes},mode=1777".encode()
        _check(_LIBC.mount(b"tmpfs", where, b"tmpfs", MS_NOSUID | MS_NODEV, opts), f"mount {where.decode()}")
    # System V IPC of this namespace only: bounded like /tmp (segments), and tiny queues.
    # Required where no memory cgroup counts SysV segments; elsewhere a kernel without one of
    # these files keeps its (cgroup-charged) default.
    pages = max(size // 4096, 1)
    for name, value in (("shmmax", size), ("shmall", pages), ("shmmni", 16), ("msgmni", 4),
                        ("msgmnb", 16384), ("msgmax", 8192), ("sem", "32 1024 32 16")):
        try:
            _write_file(f"/proc/sys/kernel/{name}", str(value))
        except OSError:
            if job.get("rlimit_memory") and name in ("shmmax", "shmall", "shmmni"):
                raise
    # No /proc for candidate code: its files are numbered and counted host-wide, and those
    # numbers outlive every candidate (a /proc inode comes from the same kernel counter as a
    # pipe's; /proc/stat's "processes" went up by exactly one per unit of work: a sender moved
    # them, the next candidate read them). Detached after the sysctls above and the oom score.
    _check(_LIBC.umount2(b"/proc", MNT_DETACH), "detach /proc")
    # Nor the worker's cgroup control files (joined above, by the child or its zygote): without
    # root a candidate is their owner (the caller's uid) and rewrote its group's memory, CPU and
    # process limits, which stayed raised for every later candidate of the worker; as root it
    # could still read counters that outlive it (peak memory, fail counts, CPU used). One lazy
    # unmount takes them all (they sit under one tmpfs: sandbox.Backend.argv).
    if cgroup_mount:
        _check(_LIBC.umount2(cgroup_mount.encode(), MNT_DETACH), "detach the cgroup files")


def _select_without_epoll() -> None:
    """``selectors.DefaultSelector`` is poll where seccomp refuses epoll (seccomp.py), as on a system
    without epoll. ``selectors`` chose epoll when the zygote imported it (``subprocess`` does); one
    imported later by the candidate finds epoll refused and chooses poll by itself."""
    selectors = sys.modules.get("selectors")
    if selectors is not None:
        selectors.DefaultSelector = selectors.PollSelector


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
    # Queued signals, and so POSIX timers (each holds one in reserve): kernel memory the rlimit
    # fallback does not bound, counted per user host-wide. Without root a candidate is the
    # caller's uid: two candidates took 120,000 and a concurrent honest candidate's one
    # timer_create failed (eighth red team). No program graded here needs more.
    cap(resource.RLIMIT_SIGPENDING, SIGPENDING)
    # The caller's own real-time priority, nice floor and locked-memory limits must not reach a
    # candidate: a caller allowed SCHED_FIFO would let it run outside the CPU quota, and a verdict
    # must not depend on the caller's `ulimit -l` (tenth red team). Nice can only be raised.
    cap(resource.RLIMIT_RTPRIO, 0)
    cap(resource.RLIMIT_NICE, 0)
    cap(resource.RLIMIT_MEMLOCK, MEMLOCK)
    if job.get("rlimit_memory"):
        cap(resource.RLIMIT_AS, int(job["memory_mb"]) * 1024 * 1024)
        _bound_thread_stacks(int(job["memory_mb"]) * 1024 * 1024 // 2)
    if job.get("rlimit_procs"):
        # The check server's own count: itself and a check's child (as the cgroup's pids.max).
        own = int(job["max_procs"]) + (2 if job.get("role") == "checker" else 0)
        cap(resource.RLIMIT_NPROC, own + int(job.get("tasks_before") or 0))


def _bound_thread_stacks(most: int) -> None:
    """``threading.stack_size`` (and ``_thread``'s) never sets a new thread's stack above ``most``
    bytes, half of ``RLIMIT_AS``. *Why*: the limit counts a thread's whole stack as soon as it is
    reserved, where a memory cgroup counts only the pages used, so without cgroups the honest
    ``threading.stack_size(2**27)`` before a deep recursion failed with "can't start new thread"
    at ``memory_mb=128`` and passed as root (twenty-first red team; glibc's malloc arenas were the
    same case, see zygote.M_ARENA_MAX). The recursion then runs in the stack that fits. The stack
    and the heap still share the one limit, unlike in a cgroup: no rlimit tells reserved memory
    from used (docs/sandbox.md)."""
    import _thread

    original = _thread.stack_size

    def stack_size(*size):
        if size and hasattr(size[0], "__index__") and size[0].__index__() > most:
            size = (most,)
        return original(*size)

    _thread.stack_size = stack_size
    threading = sys.modules.get("threading")
    if threading is not None:
        threading.stack_size = stack_size


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
