"""Per-candidate totals (memory, processes, CPU) through cgroups v2, or rlimits when we cannot.

Each worker gets a cgroup ``concord-<pid>/w<n>`` under this process's own cgroup, split into
``runner`` (bubblewrap and the trusted runner; unlimited) and ``candidate``, which each child
joins before it drops privileges. The candidate group's limits bound the child *and everything
it starts*: ``memory.max`` (``memory.oom.group`` kills the whole group), ``pids.max`` and
``cpu.max`` of one CPU, so a candidate cannot starve its neighbours into wall-clock timeouts.

Creating them needs a writable cgroup v2 hierarchy with the ``memory``, ``pids`` and ``cpu``
controllers delegated to us. Where the kernel does not allow that (cgroup v1 or hybrid hosts,
unprivileged users without delegation), candidates get rlimits instead -- address space per
process, process count per candidate uid, CPU seconds per process -- and one warning says so.
CPU share then rests on the scheduler's autogroups (``kernel.sched_autogroup_enabled``): each
worker's runner leads a session of its own (bubblewrap ``--new-session``), so the many processes
of one candidate share one worker's slice instead of outnumbering a neighbour's one process.
"""

from __future__ import annotations

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
    """``concord-<pid>`` under our own cgroup (created once per process), or CgroupUnavailable."""
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


def _make_base() -> Path:
    own = _own_cgroup()
    available = set((own / "cgroup.controllers").read_text().split())
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        raise CgroupUnavailable(f"controllers {missing} are not available in {own} (cgroup v1 or hybrid host?)")
    enabled = set((own / "cgroup.subtree_control").read_text().split())
    if not set(CONTROLLERS) <= enabled:
        try:
            _write(own / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
        except OSError as exc:  # EBUSY: our group holds processes; EACCES: not delegated
            raise CgroupUnavailable(f"cannot enable {CONTROLLERS} in {own}: {exc.strerror}") from None
    base = own / f"concord-{os.getpid()}"
    try:
        base.mkdir(exist_ok=True)
        _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    except OSError as exc:
        raise CgroupUnavailable(f"cannot create {base}: {exc.strerror}") from None
    return base


class WorkerCgroup:
    """One worker's ``runner`` and ``candidate`` groups."""

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
        _write(self.candidate / "pids.max", str(max_procs))

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the runner group (before its first instruction)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.runner / "cgroup.procs"), *argv]

    def remove(self) -> None:
        for group in (self.candidate, self.runner, self.root):
            try:
                group.rmdir()
            except OSError:
                pass  # processes still dying; the kernel frees an empty group when removed later


def worker_cgroup() -> WorkerCgroup | None:
    """A fresh worker cgroup, or None (rlimits instead) with one warning per process."""
    try:
        return WorkerCgroup()
    except (CgroupUnavailable, OSError) as exc:
        if not _warned.is_set():
            _warned.set()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning(
                "cgroups v2 unavailable (%s): candidates get rlimits instead -- address space per process "
                "(a candidate may use up to max_procs x memory_mb in total), process count per candidate "
                "uid, CPU seconds per process; CPU shared per worker session only through autogroups", reason)
        return None


def cgroups_available() -> bool:
    try:
        _base()
        return True
    except (CgroupUnavailable, OSError):
        return False


def cleanup() -> None:
    """Remove our base group (at exit, once every worker is gone)."""
    try:
        base = _base()
    except (CgroupUnavailable, OSError):
        return
    for child in sorted(base.glob("w*"), reverse=True):
        for sub in ("candidate", "runner", ""):
            try:
                (child / sub).rmdir() if sub else child.rmdir()
            except OSError:
                pass
    try:
        base.rmdir()
    except OSError:
        pass
