"""Per-candidate totals (memory, processes, CPU) through cgroups v2 or v1, or rlimits when we cannot.

*Threats answered: memory a candidate holds outside its address space* (System V segments,
memfds, tmpfs pages, pipe and socket buffers: a memory cgroup charges them all, RLIMIT_AS none),
*process counts per candidate rather than per uid, and CPU a neighbour steals* (each worker's
candidate group has an equal share and at most one CPU, however many processes or sessions it
makes).

cgroup v1 / hybrid hosts (``memory``, ``pids``, ``cpu``, ``cpuacct`` mounted as v1 hierarchies,
as on this project's machines): :class:`V1WorkerCgroup` makes ``concord-<pid>-<start>/w<n>`` under this
process's own group in each hierarchy (``<pid>-<start>``, below), with ``memory.limit_in_bytes`` = ``memory.memsw.limit_in_bytes``
(no swap), ``pids.max``, ``cpu.cfs_quota_us`` of one CPU, and ``cpuacct.usage`` read for the
candidate's CPU time. The sandbox's zygote joins the pids, cpu and cpuacct groups once (every
child it forks starts inside). The memory group: the zygote joins it once where the
out-of-memory killer can never pick it (``oom_score_adj`` -1000, as root), else each child joins
it itself; the runner is never charged with, or killed for, a candidate's memory.

The base group is named ``concord-<pid>-<start>`` (``start``: this process's start time in clock
ticks since boot, from ``/proc/self/stat``), so a later process that reuses the pid never meets a
dead one's groups: with ``concord-<pid>`` alone, a stale ``w<n>`` left by a killed process made
``mkdir`` fail and the candidates of the new one silently fall back to rlimits (a 128 MB
candidate held 360 MB and was graded ok). Empty groups of processes that are gone (pid dead, or
alive with another start time) are removed when a base is made.

Each worker gets a cgroup ``concord-<pid>-<start>/w<n>`` under this process's own cgroup, split into
``runner`` (bubblewrap, the trusted runner and the zygote; unlimited) and ``candidate``, which
each child joins before it drops privileges. The candidate group's limits bound the child *and everything
it starts*: ``memory.max`` (``memory.oom.group`` kills the whole group), ``pids.max`` and
``cpu.max`` of one CPU, so a candidate cannot starve its neighbours into wall-clock timeouts.

Creating them needs a writable cgroup v2 hierarchy with the ``memory``, ``pids`` and ``cpu``
controllers delegated to us: where an ancestor has them and we may write it (root, or a delegated
subtree) they are enabled down to our group, whose processes move to a leaf of it first (cgroup
v2 lets no group with processes pass controllers on). Where the kernel does not allow that (cgroup v1 or hybrid hosts,
unprivileged users without delegation), candidates get rlimits instead -- address space per
process, process count per candidate uid, CPU seconds per process -- start no processes of their
own (seccomp; threads only, as nothing would count a process's CPU), and one warning says so.
CPU share then rests on the scheduler's autogroups (``kernel.sched_autogroup_enabled``): each
worker's runner leads a session of its own (bubblewrap ``--new-session``), so the many processes
of one candidate share one worker's slice instead of outnumbering a neighbour's one process.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids", "cpu")
_warned = threading.Event()
_counter = itertools.count()


class CgroupUnavailable(RuntimeError):
    pass


def _own_cgroup() -> Path:
    mount = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            mount = left.split()[4]
            break
    if mount is None:
        raise CgroupUnavailable("no cgroup2 filesystem is mounted")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            return Path(mount) / path.lstrip("/")
    raise CgroupUnavailable("this process is in no cgroup v2 group")


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


_state: dict[int, Path | CgroupUnavailable] = {}  # per pid: a forked process needs its own base


def _base() -> Path:
    """``concord-<pid>-<start>`` under our own cgroup (created once per process), or CgroupUnavailable."""
    pid = os.getpid()
    if pid not in _state:
        try:
            _state[pid] = _make_base()
        except OSError as exc:
            _state[pid] = CgroupUnavailable(exc.strerror or str(exc))
        except CgroupUnavailable as exc:
            _state[pid] = exc
    result = _state[pid]
    if isinstance(result, CgroupUnavailable):
        raise result
    return result


REST = "concord-rest"  # where :func:`_vacate` moved the processes of a group that makes ours


def _make_base() -> Path:
    own = _own_cgroup()
    while own.name == REST and set(CONTROLLERS) <= set((own.parent / "cgroup.subtree_control").read_text().split()):
        own = own.parent  # moved there by an earlier process (or by us): its parent is ready
    _make_available(own)
    enabled = set((own / "cgroup.subtree_control").read_text().split())
    if not set(CONTROLLERS) <= enabled:
        try:
            _enable(own)
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # EACCES: not delegated to us
                raise CgroupUnavailable(f"cannot enable {CONTROLLERS} in {own}: {exc.strerror}") from None
            _vacate(own)
            try:
                _enable(own)
            except OSError as again:
                raise CgroupUnavailable(f"cannot enable {CONTROLLERS} in {own}: {again.strerror}") from None
    sweep_stale_groups(own)
    base = own / base_name()
    try:
        base.mkdir(exist_ok=True)
        _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    except OSError as exc:
        raise CgroupUnavailable(f"cannot create {base}: {exc.strerror}") from None
    return base


def _enable(group: Path, controllers=CONTROLLERS) -> None:
    _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in controllers))


def _make_available(own: Path) -> None:
    """Make every controller of :data:`CONTROLLERS` available in ``own``, enabling the missing ones
    in each ancestor's ``cgroup.subtree_control`` from the nearest that has them down to our parent.
    A VM's or container's agent that starts commands in a group of their own enables only some
    (seen: a GPU node's ``/process_api/<id>`` had memory but not cpu or pids); as root, or where an
    ancestor is delegated to us, they can be enabled. Elsewhere (cgroup v1 or hybrid hosts, groups
    not ours) CgroupUnavailable names what is missing, and candidates get rlimits."""
    missing = [c for c in CONTROLLERS if c not in (own / "cgroup.controllers").read_text().split()]
    if not missing:
        return
    chain, group = [], own.parent
    while missing and not set(missing) <= set((group / "cgroup.controllers").read_text().split()):
        if group == group.parent or not (group.parent / "cgroup.controllers").exists():
            raise CgroupUnavailable(f"controllers {missing} are not available in {own} (cgroup v1 or hybrid host?)")
        chain.append(group)
        group = group.parent
    for ancestor in [group, *reversed(chain)]:
        try:
            _enable(ancestor, missing)
        except OSError as exc:  # EBUSY: it holds processes; EACCES: not ours
            raise CgroupUnavailable(f"controllers {missing} are not available in {own}, and enabling them in "
                                    f"{ancestor} failed: {exc.strerror}") from None


def _vacate(own: Path) -> None:
    """Move the processes of ``own`` into ``own/concord-rest`` (:data:`REST`). cgroup v2 lets no group both hold
    processes and pass controllers to its children ("no internal processes"), and we are in
    ``own``; the processes stay inside ``own``, under every limit it has (a Slurm job's, say)."""
    rest = own / REST
    try:
        rest.mkdir(exist_ok=True)
        for _ in range(20):  # a process may fork while we move the others
            pids = (own / "cgroup.procs").read_text().split()
            if not pids:
                return
            for pid in pids:
                try:
                    _write(rest / "cgroup.procs", pid)
                except ProcessLookupError:
                    pass  # it exited
    except OSError as exc:
        raise CgroupUnavailable(f"cannot move the processes of {own} into {rest}: {exc.strerror}") from None
    raise CgroupUnavailable(f"the processes of {own} kept multiplying while moved into {rest}")


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (clock ticks since boot), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # field 22, counted after the command name


def _pid_namespace() -> str:
    """This process's PID namespace (its inode), or "0" where ``/proc`` does not say."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def base_name(pid: int | None = None) -> str:
    """``concord-<pidns>-<pid>-<start>``: unique to one process for the machine's uptime, and
    naming the PID namespace in which its pid means that process."""
    pid = os.getpid() if pid is None else pid
    return f"concord-{_pid_namespace()}-{pid}-{_start_time(pid)}"


def _is_stale(name: str) -> bool:
    """A ``concord-<pidns>-<pid>-<start>`` group of this PID namespace whose process is gone, or
    one of the older names (``concord-<pid>-<start>``, ``concord-<pid>``) whose process is gone (a
    live process of that pid may be the owner of a ``concord-<pid>``). A group made in another
    PID namespace is never judged: its pid names another process here, or none, and a caller in a
    PID namespace of its own (a container's PID 1 beside the host's jobs in one cgroup) removed
    the live groups of every process it could not see, which then failed to start its sandbox."""
    parts = name.split("-")
    if len(parts) == 4:
        if parts[1] != _pid_namespace() or not parts[2].isdigit():
            return False
        parts = parts[1:]
    if len(parts) not in (2, 3) or not parts[1].isdigit():
        return False
    start = _start_time(int(parts[1]))
    return start is None or (len(parts) == 3 and parts[2] != start)


def sweep_stale_groups(parent: Path) -> None:
    """Remove the empty groups that dead processes left in ``parent`` (``concord-*/w<n>[/...]``).
    A group that still holds a process cannot be removed and stays."""
    try:
        stale = [d for d in parent.glob("concord-*") if d.is_dir() and _is_stale(d.name)]
    except OSError:
        return
    for base in stale:
        for child in sorted(base.glob("w*"), reverse=True):
            for sub in ("candidate", "runner"):
                _rmdir_quietly(child / sub)
            _rmdir_quietly(child)
        _rmdir_quietly(base)


class WorkerCgroup:
    """One worker's ``runner`` and ``candidate`` groups (cgroup v2)."""

    def binds(self, mount: str) -> list[tuple[str, str]]:
        # Below the mount, not on it: the sandbox remounts the mount itself read-only.
        return [(str(self.candidate), f"{mount}/candidate")]

    def procs(self, mount: str) -> list[str]:
        """Groups the zygote joins once: none (it stays in ``runner``, outside every limit)."""
        return []

    def child_procs(self, mount: str) -> list[str]:
        """Groups each child joins before it drops privileges: the candidate group, which the
        zygote and the runner are never in, so an out-of-memory kill there takes candidates only."""
        return [f"{mount}/candidate/cgroup.procs"]

    def cpu_usage(self, mount: str) -> str:
        return f"{mount}/candidate/cpu.stat"

    def extra_pids(self) -> int:
        return 2  # the zygote and, while it forks a child, its intermediate process

    def __init__(self) -> None:
        self.root = _base() / f"w{next(_counter)}"
        self.root.mkdir()
        _write(self.root / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        self.runner = self.root / "runner"
        self.candidate = self.root / "candidate"
        self.runner.mkdir()
        self.candidate.mkdir()
        _write(self.candidate / "cpu.max", "100000 100000")  # one CPU
        if (self.candidate / "memory.oom.group").exists():
            _write(self.candidate / "memory.oom.group", "1")

    def set_limits(self, memory_mb: int, max_procs: int) -> None:
        _write(self.candidate / "memory.max", str(memory_mb * 1024 * 1024))
        if (self.candidate / "memory.swap.max").exists():
            _write(self.candidate / "memory.swap.max", "0")
        _write(self.candidate / "pids.max", str(max_procs + self.extra_pids()))

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the runner group (before its first instruction)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.runner / "cgroup.procs"), *argv]

    def remove(self) -> None:
        for group in (self.candidate, self.runner, self.root):
            try:
                group.rmdir()
            except OSError:
                pass  # processes still dying; the kernel frees an empty group when removed later


V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
_v1_state: dict[int, dict[str, Path] | CgroupUnavailable] = {}


def _v1_bases() -> dict[str, Path]:
    """``concord-<pid>-<start>`` under our own group in each v1 hierarchy we need (once per process)."""
    pid = os.getpid()
    if pid not in _v1_state:
        try:
            _v1_state[pid] = _make_v1_bases()
        except (OSError, CgroupUnavailable) as exc:
            _v1_state[pid] = exc if isinstance(exc, CgroupUnavailable) else CgroupUnavailable(exc.strerror or str(exc))
    result = _v1_state[pid]
    if isinstance(result, CgroupUnavailable):
        raise result
    return result


def _make_v1_bases() -> dict[str, Path]:
    mounts: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields = right.split()
        if fields[:1] == ["cgroup"] and len(fields) >= 3:
            for opt in fields[2].split(","):
                if opt in V1_CONTROLLERS:
                    mounts[opt] = left.split()[4]
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            own[c] = path
    missing = [c for c in V1_CONTROLLERS if c not in mounts or c not in own]
    if missing:
        raise CgroupUnavailable(f"cgroup v1 controllers {missing} are not mounted")
    bases = {}
    for c in V1_CONTROLLERS:
        parent = Path(mounts[c]) / own[c].lstrip("/")
        sweep_stale_groups(parent)
        base = parent / base_name()
        try:
            base.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {base}: {exc.strerror}") from None
        bases[c] = base
    return bases


class V1WorkerCgroup:
    """One worker's candidate group in each cgroup v1 hierarchy (memory, pids, cpu, cpuacct)."""

    def __init__(self) -> None:
        n = next(_counter)
        self.groups = {c: base / f"w{n}" for c, base in _v1_bases().items()}
        for group in self.groups.values():
            group.mkdir()
        cpu = self.groups["cpu"]
        _write(cpu / "cpu.cfs_period_us", "100000")
        _write(cpu / "cpu.cfs_quota_us", "100000")  # one CPU
        self.candidate = self.groups["memory"]
        self._limits: tuple | None = None

    def binds(self, mount: str) -> list[tuple[str, str]]:
        return [(str(g), f"{mount}/{c}") for c, g in self.groups.items()]

    def procs(self, mount: str) -> list[str]:
        """Groups the zygote joins once (every child then starts inside): processes and CPU."""
        return [f"{mount}/{c}/cgroup.procs" for c in self.groups if c != "memory"]

    def child_procs(self, mount: str) -> list[str]:
        """The memory group, joined by each child itself: the zygote and the runner stay outside
        it, so when a candidate fills it the out-of-memory killer can choose candidates only."""
        return [f"{mount}/memory/cgroup.procs"]

    def cpu_usage(self, mount: str) -> str:
        return f"{mount}/cpuacct/cpuacct.usage"

    def extra_pids(self) -> int:
        # The zygote, the zygote of stdin children, and, while one of them forks a child, its
        # intermediate process (all joined the group once, so every child starts inside).
        return 3

    def set_limits(self, memory_mb: int, max_procs: int) -> None:
        if self._limits == (memory_mb, max_procs):
            return
        memory = self.groups["memory"]
        limit = memory_mb * 1024 * 1024
        files = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        if not (memory / files[1]).exists():
            files = files[:1]
        try:
            for name in files:
                _write(memory / name, str(limit))
        except OSError:  # memsw must stay >= the limit: lowering goes the other way round
            for name in reversed(files):
                _write(memory / name, str(limit))
        _write(self.groups["pids"] / "pids.max", str(max_procs + self.extra_pids()))
        self._limits = (memory_mb, max_procs)

    def wrap(self, argv: list[str]) -> list[str]:
        return argv  # the runner stays where it is; the zygote joins the candidate groups

    def remove(self) -> None:
        for group in self.groups.values():
            try:
                group.rmdir()
            except OSError:
                pass


ENV_CGROUPS = "CONCORD_CGROUPS"  # "off": rlimits only (the fallback, e.g. to test it on a host with cgroups)


def worker_cgroup():
    """A fresh worker cgroup (v2, else v1), or None (rlimits instead) with one warning per process."""
    if os.environ.get(ENV_CGROUPS, "").lower() == "off":
        why_v2 = why_v1 = f"disabled by ${ENV_CGROUPS}=off"
        _warn(why_v2, why_v1)
        return None
    try:
        return WorkerCgroup()
    except (CgroupUnavailable, OSError) as exc:
        why_v2 = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    try:
        return V1WorkerCgroup()
    except (CgroupUnavailable, OSError) as exc:
        why_v1 = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    _warn(why_v2, why_v1)
    return None


def _warn(why_v2: str, why_v1: str) -> None:
    if not _warned.is_set():
        _warned.set()
        log.warning(
            "cgroups unavailable (v2: %s; v1: %s): candidates get rlimits instead -- address space per process "
            "(a candidate may use up to max_procs x memory_mb in total, and kernel memory such as pipe and "
            "socket buffers is not counted; SysV shared memory is bounded by each child's IPC namespace, "
            "memfd is refused by seccomp), process count per candidate uid, CPU seconds per process, and no "
            "process started by a candidate (threads only: nothing would count its CPU); the timeout counts "
            "CPU time and wall time less run-queue waits", why_v2, why_v1)


def base_groups() -> list[Path]:
    """This process's base groups (``concord-<pid>-<start>``: one on cgroup v2, one per v1
    hierarchy), made if needed; CgroupUnavailable where neither works."""
    try:
        return [_base()]
    except (CgroupUnavailable, OSError):
        return list(_v1_bases().values())


def cgroups_available() -> bool:
    for base in (_base, _v1_bases):
        try:
            base()
            return True
        except (CgroupUnavailable, OSError):
            continue
    return False


def cleanup() -> None:
    """Remove our base groups (once every worker is gone); a later worker makes them anew."""
    try:
        _remove_bases()
    finally:
        _state.pop(os.getpid(), None)
        _v1_state.pop(os.getpid(), None)


def _rmdir_quietly(path: Path) -> None:
    """Remove an empty cgroup directory; one still in use (or gone) is left to the next clean-up."""
    try:
        path.rmdir()
    except OSError:
        pass


def _remove_bases() -> None:
    try:
        for base in _v1_bases().values():
            for child in base.glob("w*"):
                _rmdir_quietly(child)
            _rmdir_quietly(base)
    except (CgroupUnavailable, OSError):
        pass
    try:
        base = _base()
    except (CgroupUnavailable, OSError):
        return
    for child in sorted(base.glob("w*"), reverse=True):
        for sub in ("candidate", "runner"):
            _rmdir_quietly(child / sub)
        _rmdir_quietly(child)
    _rmdir_quietly(base)
