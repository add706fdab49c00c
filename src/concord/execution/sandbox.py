"""How a candidate's harness process is isolated: bubblewrap, unshare, or (opted-in) nothing.

Every backend gives the harness (see :mod:`concord.execution.harness`) a process group of its
own; the namespace backends add a private PID, network, IPC and UTS namespace, a read-only
view of the host filesystem with the project, home and runtime directories hidden, and a
private size-capped tmpfs at ``/tmp`` (the only writable place). When we run as root the
harness drops to an unprivileged uid of its own before candidate code runs, so that
``RLIMIT_NPROC`` (which root ignores) caps fork bombs and no file the host protects is
writable or readable.
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

BACKENDS = ("auto", "bwrap", "unshare", "none")
ENV_BACKEND = "CONCORD_SANDBOX"  # auto | bwrap | unshare | none (none = explicit opt-out)

# Directories that may hold secrets, the project or other runs' data; hidden behind an empty,
# read-only tmpfs. The project root and the working directory are added at run time.
DEFAULT_HIDDEN = ("/root", "/home", "/work", "/run", "/var", "/mnt", "/srv", "/media")
# Never hide these (or an ancestor of them): the interpreter and its libraries live there.
_SYSTEM = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/sys")

REPO_ROOT = Path(__file__).resolve().parents[3]


class SandboxUnavailable(RuntimeError):
    """No isolation backend works here and the user has not opted out."""


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the candidate): a setup or infrastructure problem."""


@dataclass(frozen=True)
class Backend:
    name: str  # bwrap | unshare | none
    python: str
    privileged: bool  # we are root: the harness drops to an unprivileged uid
    hide: tuple[str, ...]
    keep: tuple[str, ...]
    tmp_bytes: int

    def argv(self, harness_source: str) -> list[str]:
        interp = [self.python, "-s", "-B", "-X", "utf8"]
        if _python_version(self.python) >= (3, 11):
            interp.append("-P")  # no script directory on sys.path
        interp += ["-c", harness_source]
        if self.name == "none":
            return interp
        if self.name == "unshare":
            return [shutil.which("unshare") or "unshare", "--fork", "--pid", "--mount-proc", "--mount", "--net", "--ipc", "--uts",
                    "--kill-child", "--", *interp]
        # absolute path: the sandbox is started with a clean environment of its own
        args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--perms", "1777", "--size", str(self.tmp_bytes), "--tmpfs", "/tmp"]
        for path in self.hide:
            args += ["--size", "65536", "--tmpfs", path]
        for path in self.keep:
            for parent in _between(self.hide, path):
                args += ["--perms", "0755", "--dir", parent]
            args += ["--ro-bind", path, path]
        for path in self.hide:
            args += ["--remount-ro", path]
        args += ["--remount-ro", "/dev"]
        if self.privileged:
            # No user namespace: the harness starts as real root (to drop to its own uid).
            args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        else:
            args += ["--unshare-all"]
        args += ["--die-with-parent", "--new-session", "--chdir", "/tmp", "--", *interp]
        return args

    def mounts(self) -> dict | None:
        """What the harness mounts itself (unshare backend only)."""
        if self.name != "unshare":
            return None
        return {"tmp_bytes": self.tmp_bytes, "hide": list(self.hide), "keep": list(self.keep)}


def _between(hide: tuple[str, ...], path: str) -> list[str]:
    """Directories strictly between the hidden directory covering ``path`` and ``path``."""
    for top in hide:
        if _is_within(path, top):
            rel = Path(path).relative_to(top).parts[:-1]
            return [str(Path(top, *rel[: i + 1])) for i in range(len(rel))]
    return []


def _is_within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


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
    project, which the sandbox hides)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def python_prefix(python: str) -> str:
    real = Path(os.path.realpath(python))
    if real == Path(os.path.realpath(default_python())):
        return os.path.realpath(sys.base_prefix)
    return str(real.parent.parent)


def hidden_paths(python: str, extra: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(directories to hide, directories inside them to keep visible) for one interpreter."""
    prefix = python_prefix(python)
    wanted = set(DEFAULT_HIDDEN) | {str(REPO_ROOT), os.getcwd(), str(Path.home())} | set(extra)
    hide = []
    for raw in wanted:
        path = os.path.realpath(raw)
        if not os.path.isdir(path) or _is_within(path, "/tmp"):
            continue  # /tmp is replaced wholesale by the private tmpfs
        if any(_is_within(sys_dir, path) for sys_dir in _SYSTEM):
            continue
        hide.append(path)
    hide = sorted(hide)
    # Drop directories already covered by a hidden ancestor.
    hide = [p for p in hide if not any(p != q and _is_within(p, q) for q in hide)]
    keep = [prefix] if any(_is_within(prefix, h) for h in hide) else []
    # An interpreter living *inside* a hidden directory must not get the directory itself hidden.
    hide = [h for h in hide if h != prefix and not _is_within(h, prefix)]
    return tuple(hide), tuple(keep)


def requested_backend(name: str | None) -> str:
    name = name or os.environ.get(ENV_BACKEND) or "auto"
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r} (from argument or ${ENV_BACKEND}); choose one of {BACKENDS}")
    return name


def resolve_backend(name: str | None = None, python: str | None = None, tmp_mb: int = 64) -> Backend:
    """Pick and probe a backend. ``auto`` tries bubblewrap, then unshare; with neither working it
    refuses, unless ``none`` was asked for explicitly (argument or ``$CONCORD_SANDBOX=none``)."""
    name = requested_backend(name)
    python = python or default_python()
    order = ["bwrap", "unshare"] if name == "auto" else [name]
    failures = []
    for candidate in order:
        problem = _probe(candidate, python, int(tmp_mb))
        if problem is None:
            return _make_backend(candidate, python, int(tmp_mb))
        failures.append(f"{candidate}: {problem}")
    raise SandboxUnavailable(
        "no working sandbox for running generated code ("
        + "; ".join(failures)
        + "). Install bubblewrap (Debian: apt-get install bubblewrap), or run as root with util-linux "
        f"unshare, or opt out explicitly with sandbox='none' / {ENV_BACKEND}=none (unsafe: candidate "
        "programs then run with your user's rights, network and filesystem)."
    )


def _make_backend(name: str, python: str, tmp_mb: int) -> Backend:
    privileged = os.geteuid() == 0
    if name == "none" and privileged and not _world_accessible(python_prefix(python)):
        # Without a sandbox the only protection left is the dropped uid, which must still be
        # able to import the standard library.
        raise SandboxUnavailable(
            f"sandbox='none' as root runs candidates under an unprivileged uid, which cannot read "
            f"the interpreter at {python_prefix(python)}; pass python= a world-readable interpreter "
            "(e.g. /usr/bin/python3) or install bubblewrap"
        )
    hide, keep = hidden_paths(python) if name != "none" else ((), ())
    return Backend(name=name, python=python, privileged=privileged, hide=hide, keep=keep,
                   tmp_bytes=tmp_mb * 1024 * 1024)


def _world_accessible(path: str) -> bool:
    """Can any user traverse every ancestor of ``path`` and read ``path`` itself?"""
    current = Path(path)
    if not (current.stat().st_mode & 0o005 == 0o005):
        return False
    return all(parent.stat().st_mode & 0o001 for parent in current.parents)


@functools.lru_cache(maxsize=16)
def _probe(name: str, python: str, tmp_mb: int) -> str | None:
    """None when ``name`` can run a trivial program end to end here, else why not."""
    if name == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap not found on PATH"
    if name == "unshare":
        if shutil.which("unshare") is None:
            return "unshare not found on PATH"
        if os.geteuid() != 0:
            return "the unshare backend needs root (mount namespaces and a uid to drop to)"
    if name == "none":
        log.warning("running generated code WITHOUT a sandbox (explicit opt-out)")
        return None
    from concord.execution import _run_one, Limits  # late: avoids an import cycle

    backend = _make_backend(name, python, tmp_mb)
    try:
        out = _run_one(backend, "print(6 * 7)", ["", ""], "stdin", None, Limits(timeout_s=10, memory_mb=512), uid_slot=0)
    except SandboxError as exc:
        return str(exc)
    if [o.output for o in out] != ["42", "42"]:
        return f"probe program gave {out!r} instead of 42"
    return None
