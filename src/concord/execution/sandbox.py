"""How a worker's runner is isolated: bubblewrap with an allow-listed filesystem, or (opted-in) nothing.

The bubblewrap sandbox shows the runner only what the interpreter needs, read-only: the
interpreter's prefix (standard library included), the directories of the shared libraries it
and its extension modules link against (found with ``ldd``), and the dynamic loader. Everything
else -- ``/etc``, ``/home``, ``/root``, ``/work``, ``/var``, ``/opt``, the project, the results
and the data -- does not exist there. ``/dev`` is a minimal device set without terminals, ``/proc`` (the runner's; candidate children have none) belongs to the
sandbox's own PID namespace, there is no network, IPC or UTS sharing, and each candidate child
has PID, mount and IPC namespaces of its own, a size-capped ``/tmp`` and ``/dev/shm`` of its own,
and the seccomp filter of :mod:`concord.execution.seccomp` (see :mod:`concord.execution.harness`).
No user namespace can be made inside: the filter refuses ``unshare`` and namespace flags on
``clone`` (bubblewrap's ``--disable-userns`` needs ``--unshare-user``, which the root path does
not use).

As root the runner keeps root inside the sandbox (it needs it to give every child its own
namespaces and to drop it to the candidate uid); without root it runs as uid 0 of a user
namespace and children shed that namespace's capabilities instead.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

BACKENDS = ("auto", "bwrap", "none")
_REMOVED = {"unshare": "the unshare backend was removed (its filesystem view was a deny-list); use bwrap"}
ENV_BACKEND = "CONCORD_SANDBOX"  # auto | bwrap | none (none = explicit opt-out)
CGROUP_MOUNT = "/run/concord-cgroup"  # where a worker's candidate cgroup appears in the sandbox

REPO_ROOT = Path(__file__).resolve().parents[3]


class SandboxUnavailable(RuntimeError):
    """No isolation backend works here and the user has not opted out."""


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the candidate): a setup or infrastructure problem."""


@dataclass(frozen=True)
class Backend:
    name: str  # bwrap | none
    python: str
    privileged: bool  # we are root: children drop to an unprivileged uid of their own
    binds: tuple[str, ...] = ()  # read-only paths visible in the sandbox (bwrap only)

    @property
    def isolated(self) -> bool:
        return self.name != "none"

    def argv(self, program: str, cgroup_binds: list[tuple[str, str]] | None = None) -> list[str]:
        """The command that runs ``program`` (``python -c``) in this sandbox. ``-S``: no ``site``
        at start-up, so no ``.pth`` file of the interpreter's installation runs code (and
        imports modules) in the runner, its zygote and every child; the program sets up what
        ``site`` would that candidates see (see ``harness.BOOTSTRAP``)."""
        interp = [self.python, "-S", "-s", "-B", "-X", "utf8"]
        if _python_version(self.python) >= (3, 11):
            interp.append("-P")  # no script directory on sys.path
        interp += ["-c", program]
        if self.name == "none":
            return interp
        args = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                "--unshare-uts", "--die-with-parent", "--new-session"]
        if not cgroup_binds:
            # With a worker cgroup the zygote must move from the runner's group into its sibling,
            # which a cgroup namespace rooted at the runner's group would forbid.
            args.append("--unshare-cgroup-try")
        if not self.privileged:
            args += ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL"]
        made: set[str] = set()
        for path in self.binds:
            # Parents bubblewrap would create root-only (0700, e.g. /root for a pyenv interpreter)
            # must be traversable by the candidate uid.
            for parent in reversed(Path(path).parents[:-1]):
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", path, path]
        # bubblewrap's /dev has a devpts instance of its own (/dev/pts, /dev/ptmx): its terminals'
        # buffers are kernel memory no memory cgroup charges, and their number is bounded only
        # host-wide (kernel.pty.max), so an empty read-only /dev/pts covers it: no terminals.
        args += ["--dev", "/dev", "--size", "4096", "--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts",
                 "--proc", "/proc", "--size", str(1 << 20), "--tmpfs", "/tmp"]
        if cgroup_binds:
            # The worker's cgroup directories under one small tmpfs, so that a child detaches them
            # all with one lazy unmount once it has joined its groups (harness.child._isolate):
            # without root a candidate owns its group's control files (the caller's uid), and
            # rewrote its own memory, CPU and process limits, for every later candidate of the
            # worker too (eighth red team).
            args += ["--size", "4096", "--tmpfs", CGROUP_MOUNT]
        for host, inside in cgroup_binds or ():
            args += ["--bind", host, inside]
        # Last, once every mount point exists: the root and /dev tmpfs bubblewrap made read-only.
        # Without root a candidate is uid 0 of bubblewrap's user namespace, which owns them: it
        # wrote into them unbounded (host memory no group charges), left files and replaced
        # /dev/stdin for later candidates of the worker, and removed the runner's /proc mount
        # point (sixth red team). Children mount their own /tmp and /dev/shm on top as before.
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        if cgroup_binds:
            args += ["--remount-ro", CGROUP_MOUNT]  # the tmpfs only: the binds in it stay writable
        args += ["--chdir", "/", "--", *interp]
        return args


@functools.lru_cache(maxsize=8)
def _python_version(python: str) -> tuple[int, int]:
    if os.path.realpath(python) == os.path.realpath(sys.executable) or python == default_python():
        return sys.version_info[:2]
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=30, check=True)
    major, minor = out.stdout.split()
    return int(major), int(minor)


def default_python() -> str:
    """The base interpreter behind the virtual environment (the venv itself lives in the
    project, which the sandbox does not show)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def python_prefix(python: str) -> str:
    real = Path(os.path.realpath(python))
    if real == Path(os.path.realpath(default_python())):
        return os.path.realpath(sys.base_prefix)
    return str(real.parent.parent)


#: Prefixes a distribution's interpreter shares with every other program of the host (Debian's
#: and Ubuntu's ``/usr/bin/python3``, GPU images' system Python): showing one whole would show
#: ``/usr/bin``, ``/usr/share`` and ``/usr/local``, so the sandbox shows the interpreter and its
#: standard library instead.
SHARED_PREFIXES = ("/", "/usr", "/usr/local")


@functools.lru_cache(maxsize=8)
def allowed_paths(python: str) -> tuple[str, ...]:
    """What the sandbox shows, read-only: the interpreter's prefix (for a prefix it shares with
    the host's other programs, :data:`SHARED_PREFIXES`: the interpreter and its standard library
    only), the directories of the shared libraries it and its extension modules need, and the
    dynamic loader."""
    prefix = python_prefix(python)
    shared = prefix in SHARED_PREFIXES
    objects = [os.path.realpath(python)]
    major, minor = _python_version(python)
    stdlib = os.path.join(prefix, "lib", f"python{major}.{minor}")
    dynloads = [Path(stdlib) / "lib-dynload"] if shared else list(Path(prefix).glob("lib/python3*/lib-dynload"))
    for dynload in dynloads:
        objects += sorted(str(p) for p in dynload.glob("*.so"))
    # The path it is started by too, where that is a link (``/usr/bin/python3``).
    paths = {os.path.abspath(python), objects[0], stdlib} if shared else {prefix}
    for lib in _ldd(tuple(objects)):
        if not shared and _is_within(lib, prefix):
            continue
        if os.path.basename(lib).startswith("ld-linux") or "/ld-" in lib:
            paths.add(lib)  # the loader must sit exactly where the ELF header says
        else:
            paths.add(os.path.dirname(lib))
            paths.add(os.path.dirname(os.path.realpath(lib)))
    # No directory twice: drop paths inside another allowed path.
    ordered = sorted(paths)
    return tuple(p for p in ordered if not any(p != q and _is_within(p, q) for q in ordered))


def _ldd(objects: tuple[str, ...]) -> list[str]:
    ldd = shutil.which("ldd")
    if ldd is None:
        log.warning("ldd not found: the sandbox shows /usr/lib and /lib* whole instead of the libraries the "
                    "interpreter needs")
        return [p for p in ("/lib", "/lib64", "/usr/lib", "/usr/lib64") if os.path.exists(p)]
    out = subprocess.run([ldd, *objects], capture_output=True, text=True, timeout=120).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                libs.append(target)
        elif parts and parts[0].startswith("/") and not line.rstrip().endswith(":"):  # "obj:" heads each object's list
            libs.append(parts[0])
    return sorted(set(libs))


def _is_within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def requested_backend(name: str | None) -> str:
    name = name or os.environ.get(ENV_BACKEND) or "auto"
    if name in _REMOVED:
        raise ValueError(f"sandbox backend {name!r}: {_REMOVED[name]}")
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r} (from argument or ${ENV_BACKEND}); choose one of {BACKENDS}")
    return name


def make_backend(name: str, python: str) -> Backend:
    privileged = os.geteuid() == 0
    if name == "none" and privileged and not _world_accessible(python_prefix(python)):
        # Without a sandbox the only protection left is the dropped uid, which must still be
        # able to import the standard library.
        raise SandboxUnavailable(
            f"sandbox='none' as root runs candidates under an unprivileged uid, which cannot read "
            f"the interpreter at {python_prefix(python)}; pass python= a world-readable interpreter "
            "(e.g. /usr/bin/python3) or install bubblewrap"
        )
    binds = allowed_paths(python) if name == "bwrap" else ()
    return Backend(name=name, python=python, privileged=privileged, binds=binds)


def _world_accessible(path: str) -> bool:
    """Can any user traverse every ancestor of ``path`` and read ``path`` itself?"""
    current = Path(path)
    if not (current.stat().st_mode & 0o005 == 0o005):
        return False
    return all(parent.stat().st_mode & 0o001 for parent in current.parents)
