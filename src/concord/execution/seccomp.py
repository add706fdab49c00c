"""The seccomp filter every candidate child installs before its first instruction (libseccomp).

Built here, in the trusted parent, with libseccomp (Debian ``libseccomp2`` through PyPI's
``pyseccomp`` ctypes binding), exported as a raw BPF program and handed to the sandbox's runner,
whose children install it with ``prctl(PR_SET_SECCOMP)`` after dropping privileges (the harness
stays standard-library only). Default action: allow; the rules below refuse, each answering a
threat a candidate program poses:

* ``unshare``, ``clone`` with any namespace flag, ``setns`` (EPERM), ``clone3`` (ENOSYS, so libc
  falls back to ``clone``, whose flags the filter can read): *a user namespace gives a candidate
  a full capability set inside it -- a fresh ``/tmp`` of any size, new mounts, new IPC*;
* ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API (``fsopen`` ...,
  ``statmount``, ``listmount``, ``open_tree_attr``): *remounting ``/tmp`` past its size, or the
  filesystem view*;
* ``madvise`` ``MADV_MERGEABLE`` and ``prctl`` ``PR_SET_MEMORY_MERGE`` (EPERM): *same-page
  merging shares equal pages between processes where a host enables it; a write's copy-on-write
  time then tells whether another candidate holds the same content*;
* ``mmap`` with ``MAP_HUGETLB`` (ENOMEM): *huge pages come from a host-wide pool, or from host
  memory when overcommitted, which a cgroup v1 memory group does not charge* (a 64 MB candidate
  held 1,024 MB; tenth red team); ``shmget`` and ``memfd_create`` are refused anyway;
* ``sync``, ``syncfs`` succeed without effect: *a flush of every process's dirty data on the
  host, I/O no group charges* (a candidate's own files are on its tmpfs);
* ``keyctl``, ``add_key``, ``request_key``: *the kernel keyring is not namespaced: keys are a
  channel between candidates that outlives them*;
* ``ptrace``, ``process_vm_readv``/``writev``, ``process_madvise``, ``pidfd_getfd``, ``kcmp``:
  *reading or steering another process* (the check process, a neighbour);
* ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*`` (whose operations bypass seccomp),
  module and kexec calls: *kernel attack surface no solution needs*;
* ``memfd_create``, ``memfd_secret``: *anonymous files that rlimits do not count* (where no memory
  cgroup counts them, this is what bounds them);
* ``setsid`` returns success without doing anything: *a new session per process defeated the
  autogroup CPU sharing* (with cgroups the CPU is shared per candidate group anyway; this keeps
  the rlimit fallback fair too), while a daemonising program still runs as it would elsewhere
  (each child calls the real ``setsid`` once, before the filter, to leave the runner's group);
* ``socket``, ``socketpair`` (EPERM): *no sockets at all*. A candidate child talks to the runner
  only through the pipes it inherits (its job arrives in a memfd, its results go to fd 1), so
  nothing of the harness needs one after the filter is in place. Without sockets there is no
  state in the worker's network namespace to share (TCP ``TIME_WAIT`` entries in
  ``/proc/net/tcp``, abstract unix names, bound ports) and no socket buffer memory to pile up,
  which the memory cgroup does not count for TCP on cgroup v1 hosts;
* ``flock`` and ``fcntl`` with ``F_GETLK``/``F_SETLK``/``F_SETLKW``, the open-file-description
  variants and leases/``F_NOTIFY`` (EPERM), ``inotify_*`` (EPERM): *locks and file events on the
  read-only files every sandbox shares (the interpreter, its libraries) are visible to every
  other candidate*: a channel between concurrent candidates;
* ``pipe``, ``pipe2``, ``mq_open``, ``io_setup``, ``shmget``, ``pidfd_open`` and ``clone`` with
  ``CLONE_PIDFD`` (EPERM): *kernel objects numbered from host-wide counters that outlive every
  process*: a pipe's or message queue's inode number comes from the kernel's one ``get_next_ino``
  counter (so do an AIO ring's), a SysV segment's from the shared-memory mount's, a pidfd's from
  the count of processes ever made. One candidate moved the counter by a chosen amount, the next
  (another candidate, or the same one on its next input, never running at the same time) read
  it by making one more: a channel of about 7 bits per unit of work, measured. A child's pipes
  to the runner are made before its filter, by the trusted side; a program that wants a
  subprocess or a pipe has neither anyway (the reliability guard takes ``subprocess.Popen``
  and ``os.fork``);
* ``fcntl`` ``F_SETPIPE_SZ`` (EPERM): *the same quota through the pipes a child inherits*. Its
  stdout and stderr to the runner are pipes the caller's uid owns (without root): 34 candidates at
  once, each enlarging both (1 MiB, then what was left), put that uid over the soft limit, and
  the caller's new pipes got 2 pages instead of 16 while they ran (eighth red team);
* ``mknod``, ``mknodat`` (EPERM): *a FIFO is a pipe made by name*. Its buffers count towards
  the pipe memory of its owner's uid, which the kernel limits host-wide: without root a
  candidate shares the caller's uid, and a few enlarged FIFOs put that uid over the soft limit,
  after which every new pipe of the caller's gets one page instead of 64 KiB (a write the caller
  sized for 64 KiB then blocked for good), and a candidate elsewhere reads its own pipe's size:
  a channel, measured. Nothing else of the harness or of a program that runs under the reference
  harnesses needs ``mknod`` (files are made with ``open``);
* ``epoll_create``, ``epoll_create1`` (EPERM): *a host-wide limit per user*. Every watch counts
  towards ``fs.epoll.max_user_watches`` of its uid, host-wide, and is kernel memory RLIMIT_AS does
  not count: without root a candidate is the caller's uid, and three candidates of 8 processes
  (500 eventfds and 500 epoll instances each) took all 5.5 million watches, after which the
  caller's own epoll failed and a concurrent ``run_programs`` raised ``OSError(ENOSPC)`` starting a
  worker (eighth red team). No candidate needs epoll: it has no socket and no pipe to wait on
  (``select`` and ``poll`` keep no state in the kernel and still work);
* ``futex`` without ``FUTEX_PRIVATE_FLAG`` (EPERM), the futex2 calls (ENOSYS): *a futex on a page
  of a file is keyed by the file, not by process*: every candidate maps the same libc, and a
  wait on its text in one candidate was woken by a wake in another, on another worker (ninth red
  team). glibc and CPython use private futexes;
* ``preadv2``/``pwritev2`` (ENOSYS, so libc falls back to ``preadv``/``pwritev`` when no flag is
  given and a flag such as ``RWF_NOWAIT`` fails), ``mincore``, ``cachestat`` (EPERM),
  ``fadvise64`` (succeeds without effect: it is advice), ``madvise`` with ``MADV_COLD`` or
  ``MADV_PAGEOUT`` (EPERM): *page-cache residency of shared files, evicted by one candidate and
  probed by another, is a channel across workers and across runs*. Reading a file and timing it
  still tells whether it was cached; without eviction a sender can only load pages once
  (``docs/sandbox.md``);
* ``getrusage`` (EPERM), and ``wait4``/``waitid`` given a resource-usage buffer (EPERM; libc's
  ``waitpid`` and ``waitid`` pass none): *a candidate's own major-fault count tells, exactly and
  without timing, whether the page it just touched was in the page cache*: touching one page of
  each of 16 rarely read library files, a candidate read 16 bits another left in an earlier call
  by reading them (48 of 48 bits, sixteenth red team). ``time.process_time`` reads
  ``clock_gettime``; ``resource`` is out of the reliability guard's reach anyway.

Where no cgroup counts a candidate's CPU (the rlimit fallback, e.g. without root), candidates get
one more rule (``filter_bpf(processes=False)``; the check server keeps the filter above, as it
forks a child for each check that is not inert, and that child adds this one before its check):

* ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD`` (EPERM); threads still start: *the
  CPU time of a process a candidate starts is counted nowhere until the candidate reaps it*, and
  one whose children reap theirs, or ignore ``SIGCHLD``, is never counted: three forked spinners
  used two CPUs for 3 s, the wall-clock backstop, on a 1 s ``timeout_s`` (about 6 CPU-s), while
  cgroups count every process in the group. A program that runs under the reference harnesses
  forks nothing: their reliability guard takes ``os.fork`` and ``subprocess.Popen``.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

__all__ = ["filter_bpf", "SeccompUnavailable", "REFUSED", "ENOSYS_CALLS", "FCNTL_REFUSED", "NAMESPACE_FLAGS",
           "CLONE_PIDFD", "CLONE_THREAD", "FUTEX_PRIVATE", "PROCESS_CALLS", "RUSAGE_ARGUMENT"]

NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
REFUSED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv",
    "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "memfd_create", "memfd_secret", "open_by_handle_at",
    "name_to_handle_at", "fanotify_init", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
    "lookup_dcookie", "vhangup", "iopl", "ioperm", "socket", "socketpair", "flock", "inotify_init",
    "inotify_init1", "inotify_add_watch", "mincore", "cachestat",
    "pipe", "pipe2", "mq_open", "io_setup", "shmget", "pidfd_open", "mknod", "mknodat",
    "epoll_create", "epoll_create1", "open_tree_attr", "listmount", "statmount", "getrusage",
)
# Calls refused only when given a resource-usage buffer (its argument index): the major-fault
# count in it tells whether a shared file's page was cached (see getrusage above).
RUSAGE_ARGUMENT = {"wait4": 3, "waitid": 4}
CLONE_PIDFD = 0x00001000
# libc falls back to the older call (clone, preadv, pwritev); the futex2 calls (5.16, 6.7), which
# glibc does not make, take their shared/private choice in memory or a flags word: see FUTEX_PRIVATE
ENOSYS_CALLS = ("clone3", "preadv2", "pwritev2", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue")
# ``futex`` without FUTEX_PRIVATE_FLAG (EPERM): a shared futex on a page of a file is keyed by the
# file and offset, not by process, and every candidate maps the same libc: FUTEX_WAIT on libc's
# text in one candidate was woken by FUTEX_WAKE in another on another worker (other uid, PID
# namespace), and a wake's count tells whether anyone waits (ninth red team). glibc and CPython
# use private futexes (threads, locks, semaphores not process-shared).
FUTEX_PRIVATE = 0x80
# fcntl commands: F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE,
# F_GETLEASE, F_NOTIFY, F_SETPIPE_SZ
FCNTL_REFUSED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026, 1031)
# madvise MADV_MERGEABLE and prctl PR_SET_MEMORY_MERGE: kernel same-page merging, where a host
# enables it, shares equal pages between processes, and the time of a write to a merged page
# (copy on write) tells whether another candidate holds the same content: a channel.
MADV_MERGEABLE = 12
PR_SET_MEMORY_MERGE = 67
MAP_HUGETLB = 0x40000
MADVISE_REFUSED = (20, 21, MADV_MERGEABLE)  # MADV_COLD, MADV_PAGEOUT (pages out of memory, the page cache too), MADV_MERGEABLE
_NEW_CALLS = {"cachestat": 451, "futex_waitv": 449, "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456,
              "statmount": 457, "listmount": 458, "open_tree_attr": 467}
# Calls that "succeed" without effect: advice, or work for the whole host a candidate has no
# business asking for (``sync``/``syncfs`` flush every process's dirty data, I/O no group charges;
# a candidate's own files are on its tmpfs, which has nothing to flush).
NO_OP_CALLS = ("setsid", "fadvise64", "sync", "syncfs")
_SYSCALL_NUMBERS = {"x86_64": _NEW_CALLS, "aarch64": _NEW_CALLS}  # newer than some libseccomps


class SeccompUnavailable(RuntimeError):
    """libseccomp (or its Python binding) is missing: the sandbox refuses rather than run without it."""


CLONE_THREAD = 0x00010000
PROCESS_CALLS = ("fork", "vfork")  # refused with clone without CLONE_THREAD where processes are


@functools.lru_cache(maxsize=2)
def filter_bpf(processes: bool = True) -> bytes:
    """The filter as a raw BPF program (``struct sock_filter`` array). ``processes=False``: the
    candidates' filter where no cgroup counts their CPU (new processes refused, threads allowed)."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 itself is missing
        raise SeccompUnavailable(
            f"the code sandbox needs libseccomp and its Python binding ({exc}); run scripts/setup.sh "
            "(Debian package libseccomp2, PyPI package pyseccomp)") from None
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # other ABIs (i386, x32): kill
    eperm = sc.ERRNO(errno.EPERM)
    numbers = _SYSCALL_NUMBERS.get(os.uname().machine, {})
    for name in REFUSED:
        try:
            f.add_rule(eperm, name)
        except (OSError, ValueError, RuntimeError):
            if name in numbers:  # known to the kernel, not yet to this libseccomp
                f.add_rule(eperm, numbers[name])
            continue  # a syscall this kernel/architecture lacks
    for name in ENOSYS_CALLS:
        try:
            f.add_rule(sc.ERRNO(errno.ENOSYS), name)
        except (OSError, ValueError, RuntimeError):
            if name in numbers:
                f.add_rule(sc.ERRNO(errno.ENOSYS), numbers[name])
            continue
    f.add_rule(eperm, "futex", sc.Arg(1, sc.MASKED_EQ, FUTEX_PRIVATE, 0))
    for name, index in RUSAGE_ARGUMENT.items():
        f.add_rule(eperm, name, sc.Arg(index, sc.NE, 0))
    for name in NO_OP_CALLS:  # setsid: the session stays the same; fadvise64: nothing evicted
        f.add_rule(sc.ERRNO(0), name)
    f.add_rule(eperm, "prctl", sc.Arg(0, sc.MASKED_EQ, 0xFFFFFFFF, PR_SET_MEMORY_MERGE))
    # Huge pages come from a host-wide pool (or, overcommitted, from host memory) that a cgroup v1
    # memory group does not charge: a 64 MB candidate held 1,024 MB (tenth red team). ENOMEM is
    # what a host without huge pages answers.
    f.add_rule(sc.ERRNO(errno.ENOMEM), "mmap", sc.Arg(3, sc.MASKED_EQ, MAP_HUGETLB, MAP_HUGETLB))
    for flag in (*NAMESPACE_FLAGS.values(), CLONE_PIDFD):
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if not processes:
        for name in PROCESS_CALLS:
            try:
                f.add_rule(eperm, name)
            except (OSError, ValueError, RuntimeError):
                continue  # an architecture without it (aarch64 has clone only)
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    # The kernel reads these arguments as 32-bit ints: compare the low 32 bits only, so a raw
    # syscall with junk in the upper half of the register matches too.
    for cmd in FCNTL_REFUSED:
        f.add_rule(eperm, "fcntl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, cmd))
    for advice in MADVISE_REFUSED:
        f.add_rule(eperm, "madvise", sc.Arg(2, sc.MASKED_EQ, 0xFFFFFFFF, advice))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.flush()
        out.seek(0)
        program = out.read()
    if not program or len(program) % 8:
        raise SeccompUnavailable(f"libseccomp exported a malformed filter ({len(program)} bytes)")
    return program


def available() -> bool:
    try:
        filter_bpf()
        return True
    except SeccompUnavailable:
        return False


if __name__ == "__main__":  # pragma: no cover -- a quick look at the filter
    print(len(filter_bpf()) // 8, "BPF instructions;", os.uname().machine)
