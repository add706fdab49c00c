"""Warm start: ``python -m concord <command>`` forked from an interpreter that has already imported
torch, transformers and TRL, instead of importing them afresh in every job.

Every model-using job of a workflow pays ~5 s (on a 2-core EPYC) to import torch, transformers
and TRL before it computes anything: a fifth of an evaluation, 25 times in the default run.
Where ``CONCORD_WARM_DIR`` names a private directory (``scripts/run_default.sh`` makes one per
run), ``python -m concord`` first asks a warm server there to run its command: the server forks,
the child takes the caller's standard streams, exit status and ``sys.argv`` and runs
``concord/__main__.py`` exactly as ``python -m concord`` would, from the modules already imported.

What the child computes is what a fresh process computes, by construction:
- A server serves only callers whose whole environment, working directory, interpreter and flags
  equal its own (the server key hashes them): a job with other threads, dtypes or paths finds no
  server of its key, starts one for later jobs and runs cold itself. So import-time settings
  (``OMP_NUM_THREADS``, ``ATEN_CPU_CAPABILITY``, ``HF_HUB_OFFLINE``) are the caller's own.
- The server imports only third-party modules and ``concord`` itself (which pins the CPU kernels
  before torch, as in every job); every other concord module is imported by the child from disk,
  so an edited checkout runs its current code.
- The server never computes: no tensor op, no thread pool, no thread at a fork but its own and
  jemalloc's (checked, :data:`FORK_SAFE_THREADS`).
  ``random`` reseeds in a forked child (CPython's at-fork hook); every stream concord draws
  from is seeded explicitly.

The caller stays the process Snakemake (or a shell) waits on and signals: the child's exit code or
terminating signal becomes the caller's, and a caller that ends first (Snakemake cancelled the
job) takes the child's process group with it (SIGTERM, SIGKILL after a grace period). A server
ends when its run's owner process (``CONCORD_WARM_OWNER``) ends, after ``IDLE_S`` without work,
or with ``python -m concord.warmstart stop DIR``.

Measured by Snakemake's ``benchmark`` files: a warm job's wall time (``s``) is right; its CPU time
and memory columns measure the caller alone, so the figures of a warm run are wall times.

Hand-written: Python's ``multiprocessing`` forkserver preloads modules but serves only its own
parent's ``Process`` objects, not separate ``python -m`` processes started by Snakemake.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: the modules a server imports before serving: what model-using jobs import and take seconds to
MODULES = (
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "transformers.models.auto.tokenization_auto",
    "transformers.generation",
    "trl",
    "trl.trainer.grpo_trainer",
    "accelerate",
    "datasets",
    "safetensors.torch",
    "pandas",
    "pyarrow.parquet",
    "scipy.stats",
    "statsmodels.api",
    "sklearn.metrics",
    "matplotlib.pyplot",
    "math_verify",
    "gguf",
)
#: a server with nothing to do for this long ends
IDLE_S = 600.0
#: how long a child whose caller ended has to exit after SIGTERM before SIGKILL
GRACE_S = 10.0
#: the longest request line a server reads
MAX_REQUEST = 1 << 20
#: AF_UNIX paths longer than this do not fit in sockaddr_un on Linux
MAX_SOCKET_PATH = 100
ENV_DIR, ENV_OWNER, ENV_OFF = "CONCORD_WARM_DIR", "CONCORD_WARM_OWNER", "CONCORD_WARM"

#: set in a served child, so its own ``concord/__main__.py`` runs the command instead of asking again
_SERVED = False


def server_key(env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """What a caller and a server must share for the server's imports to be the caller's own."""
    identity = {
        "env": sorted((env if env is not None else os.environ).items()),
        "cwd": cwd if cwd is not None else os.getcwd(),
        "executable": sys.executable,
        "flags": repr(sys.flags),
        "warnoptions": sys.warnoptions,
        "xoptions": sorted(sys._xoptions.items()),
        "version": sys.version,
    }
    return hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()[:20]


def _cold_by_design() -> bool:
    """Processes no server may serve: a Slurm job's (its child would run outside the job's cgroup
    and limits, on whatever host the server runs) and a multi-process launcher's ranks (each
    carries its own rank in the environment, so no server would ever be shared)."""
    return "SLURM_JOB_ID" in os.environ or "LOCAL_RANK" in os.environ or \
        os.environ.get("WORLD_SIZE", "1") not in ("", "1")


# ---------------------------------------------------------------------------------------------
# caller


def run_warm(argv: list[str]) -> int | None:
    """Run ``python -m concord`` with ``argv`` (``sys.argv``) in a warm server's child: its exit code,
    or None where no server serves this process (the caller then runs the command itself)."""
    directory = os.environ.get(ENV_DIR)
    if _SERVED or not directory or os.environ.get(ENV_OFF) == "0" or _cold_by_design():
        return None
    key = server_key()
    path = os.path.join(directory, key + ".sock")
    if not os.path.isdir(directory):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _at_socket_path(sock.connect, path)
    except OSError:
        sock.close()
        _clear_dead_server(directory, key)
        _start_server(directory, key)
        return None
    with sock:
        try:
            request = json.dumps({"argv": list(argv)}).encode() + b"\n"
            sent = socket.send_fds(sock, [request], [0, 1, 2])
            sock.sendall(request[sent:])
            reader = sock.makefile("rb")
            started = reader.readline()
        except OSError:
            return None
        if not started.startswith(b'{"started"'):
            return None  # the server refused or ended before forking: nothing ran
        try:
            reply = reader.readline()
        except KeyboardInterrupt:  # closing the socket ends the child's group
            return 130
    try:
        status = json.loads(reply)
    except ValueError:
        print(f"concord: the warm server in {directory} ended before the command did", file=sys.stderr)
        return 1
    if "signal" in status:  # end as the child ended, so the caller's caller sees the same
        sig = int(status["signal"])
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return int(status["exit"])


def _start_server(directory: str, key: str) -> None:
    """Start a server of this process's key for the jobs after this one (once: an exclusive
    lock file), detached from this job's session so that Snakemake's end of the job spares it."""
    try:
        fd = os.open(os.path.join(directory, key + ".lock"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return
    with open(os.path.join(directory, key + ".log"), "ab") as log:
        server = subprocess.Popen(
            [sys.executable, *_interpreter_flags(), "-m", "concord.warmstart", "serve", directory, key],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )
    os.write(fd, str(server.pid).encode())  # so that stop() ends a server still importing, too
    os.close(fd)


def _clear_dead_server(directory: str, key: str) -> None:
    """Remove the files of a server that was killed outright, so that a caller may start another."""
    try:
        pid = int(Path(directory, key + ".lock").read_text())
    except (OSError, ValueError):
        return  # none, or one just being started
    if not _alive(pid):
        _remove(directory, key)


def _at_socket_path(call, path: str) -> None:
    """``call(path)`` (bind or connect), through ``/proc/self/fd`` where ``path`` is too long for
    an AF_UNIX address (a deep TMPDIR): the socket stays a file in its private directory."""
    if len(path) <= MAX_SOCKET_PATH:
        call(path)
        return
    directory = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        call(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
    finally:
        os.close(directory)


def _interpreter_flags() -> list[str]:
    """The command-line options that made this interpreter's ``sys.flags`` and ``-X`` options
    (the helper the standard library's own tests use to start a like interpreter)."""
    return subprocess._args_from_interpreter_flags()


# ---------------------------------------------------------------------------------------------
# server


class _Served(Exception):
    """Raised in a forked child to leave the server's frames: carries the caller's argv."""

    def __init__(self, argv: list[str]):
        super().__init__()
        self.argv = argv


def serve(directory: str, key: str) -> None:
    """Import :data:`MODULES`, then fork a child for every caller of ``key`` until idle or orphaned.
    In a child, raises :class:`_Served` (caught by :func:`_main`) with the streams already taken."""
    import importlib

    if key != server_key():
        raise SystemExit(f"concord.warmstart: this process's key is not {key}: serving nothing")
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as error:  # a module a job would fail to import as well
            print(f"warm: not preloaded: {name}: {error}", file=sys.stderr, flush=True)
    others = _other_threads()
    if others:
        raise SystemExit(f"concord.warmstart: threads {others} after the imports: forking is unsafe")
    path, server = Path(directory) / f"{key}.sock", os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    _at_socket_path(listener.bind, str(temporary))
    listener.listen(64)
    os.replace(temporary, path)  # callers see a socket only once it accepts
    (Path(directory) / f"{key}.pid").write_text(str(os.getpid()))
    print(f"warm: serving {key} (pid {os.getpid()})", file=sys.stderr, flush=True)
    try:
        _loop(listener, int(os.environ.get(ENV_OWNER, "0") or 0))
    finally:
        if os.getpid() == server:  # a served child leaves through here too (_Served)
            listener.close()
            _remove(directory, key)


def _loop(listener: socket.socket, owner: int) -> None:
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    children: dict[int, dict] = {}  # pid -> {conn, pidfd, killed_at}
    last_work = time.monotonic()
    while True:
        for selected, _ in selector.select(timeout=1.0):
            kind, pid = selected.data
            if kind == "accept":
                _accept(listener, selector, children)
            elif kind == "hangup":
                _caller_gone(pid, selector, children)
            elif kind == "exited":
                _reap(pid, selector, children)
        now = time.monotonic()
        for pid, child in children.items():
            if child["killed_at"] and now - child["killed_at"] > GRACE_S:
                _signal_group(pid, signal.SIGKILL)
        if children:
            last_work = now
        elif now - last_work > IDLE_S or (owner and not _alive(owner)):
            return


def _accept(listener, selector, children) -> None:
    conn, _ = listener.accept()
    conn.settimeout(10.0)
    fds: list[int] = []
    try:
        line, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
        while not line.endswith(b"\n") and len(line) < MAX_REQUEST:
            more = conn.recv(MAX_REQUEST - len(line))
            if not more:
                break
            line += more
        argv = json.loads(line)["argv"]
        if len(fds) != 3 or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError("a request is a JSON argv and three file descriptors")
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"warm: refused a request: {error}", file=sys.stderr, flush=True)
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become_child(listener, selector, conn, fds, argv)
    for fd in fds:
        os.close(fd)
    print(f"warm: served pid {pid}: {' '.join(argv[1:])[:300]}", file=sys.stderr, flush=True)
    try:
        conn.sendall(json.dumps({"started": pid}).encode() + b"\n")
    except OSError:
        pass
    conn.settimeout(None)
    pidfd = os.pidfd_open(pid)
    children[pid] = {"conn": conn, "pidfd": pidfd, "killed_at": 0.0}
    selector.register(conn, selectors.EVENT_READ, ("hangup", pid))
    selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))


def _become_child(listener, selector, conn, fds, argv) -> None:
    """In the forked child: drop the server's sockets, take the caller's streams, leave the loop."""
    global _SERVED
    selector.close()
    listener.close()
    conn.close()
    os.setpgid(0, 0)  # the caller's end ends this group: the command and whatever it started
    _die_with_parent()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdout.reconfigure(line_buffering=os.isatty(1))
    _SERVED = True
    raise _Served(argv)


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: a server killed outright takes its children along (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _caller_gone(pid, selector, children) -> None:
    """The caller's socket closed (or spoke) while its child runs: end the child's group."""
    child = children[pid]
    selector.unregister(child["conn"])
    if not child["killed_at"]:
        child["killed_at"] = time.monotonic()
        _signal_group(pid, signal.SIGTERM)


def _reap(pid, selector, children) -> None:
    child = children.pop(pid)
    selector.unregister(child["pidfd"])
    os.close(child["pidfd"])
    _signal_group(pid, signal.SIGKILL)  # what the command left in its group; pid not yet reaped
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        reply = {"signal": os.WTERMSIG(status)}
    else:
        reply = {"exit": os.waitstatus_to_exitcode(status)}
    if not child["killed_at"]:
        selector.unregister(child["conn"])
        try:
            child["conn"].sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass
    child["conn"].close()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: threads a fork may leave behind: jemalloc's (pyarrow's allocator) purger, which jemalloc's own
#: fork handlers stop before and restart after a fork
FORK_SAFE_THREADS = ("jemalloc_bg_thd",)


def _other_threads() -> list[str]:
    """Names of this process's threads besides the calling one that a fork could break."""
    import threading

    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) == threading.get_native_id():
            continue
        try:
            name = Path(f"/proc/self/task/{task}/comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
        if name not in FORK_SAFE_THREADS:
            names.append(name)
    return names


def _remove(directory: str, key: str) -> None:
    """A server's files: its socket first (no caller connects to an ended server), then its pid
    file, then its lock (a later caller may start another)."""
    for suffix in (".sock", ".pid", ".lock"):
        Path(directory, key + suffix).unlink(missing_ok=True)


def stop(directory: str) -> int:
    """End every server in ``directory``, serving or still importing (SIGTERM; a server's children
    end with it): the number signalled."""
    signalled = 0
    for lock in Path(directory).glob("*.lock"):
        key = lock.name.removesuffix(".lock")
        pids = set()
        for name in (lock, Path(directory, key + ".pid")):
            try:
                pids.add(int(name.read_text()))
            except (ValueError, OSError):
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
                signalled += 1
            except OSError:
                pass
        _remove(directory, key)
    return signalled


def _main(args: list[str]) -> None:
    # Run as ``-m concord.warmstart`` this module is ``__main__``: the child's ``concord/__main__.py``
    # must find this module, and its _SERVED, under its own name rather than import a second copy.
    sys.modules.setdefault("concord.warmstart", sys.modules[__name__])
    if len(args) == 3 and args[0] == "serve":
        try:
            serve(args[1], args[2])
            return
        except _Served as served:
            argv = served.argv
        _run_as_concord(argv)  # outside the except: a command's own traceback chains to nothing
        return
    if len(args) == 2 and args[0] == "stop":
        served = sum(log.read_text(errors="replace").count("warm: served pid ")
                     for log in Path(args[1]).glob("*.log"))
        stop(args[1])
        print(f"[warm] {served} command(s) forked from a warm interpreter", file=sys.stderr)
        return
    raise SystemExit("usage: python -m concord.warmstart serve DIR KEY | stop DIR")


def _run_as_concord(argv: list[str]) -> None:
    """``python -m concord`` in this (forked) process: ``__main__`` and ``sys.argv`` as runpy sets
    them; SystemExit, a traceback and interpreter shutdown (atexit, flushing) as in a fresh one."""
    import runpy

    sys.argv = list(argv)
    runpy.run_module("concord", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
