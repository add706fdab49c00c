"""The parent side of the killable symbolic worker: :class:`Verifier` and the process-wide default.

Layout: a *template* process imports math-verify once and never computes anything; each *worker* is
forked from it (milliseconds, already warm) and talks to this process over its own socket. A worker
stuck in an operation is killed and a fresh one forked, so a hang costs the operation timeout, not a
multi-second interpreter start-up.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from concord.answers.protocol import _Reader, _send

log = logging.getLogger("concord.answers")


class WorkerError(RuntimeError):
    """The symbolic worker could not be started or reported an internal error."""


class Verifier:
    """math-verify in a killable worker process, with a per-operation timeout.

    Thread-safe (one request at a time) and usable from any thread. ``timeout`` bounds each single
    parse or verify; the operation that exceeds it (or crashes the worker) is remembered, and its
    answer (parse) or pair (verify) is treated as unparseable / not equivalent from then on.
    """

    def __init__(self, timeout: float = 2.0, start_timeout: float = 120.0, memory_mb: int = 4096):
        if timeout <= 0 or start_timeout <= 0:
            raise ValueError("timeout and start_timeout must be positive")
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.memory_mb = int(memory_mb)
        self.opaque: set[str] = set()
        self.bad_pairs: set[tuple[str, str]] = set()
        self.restarts = 0
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()
        self._template: subprocess.Popen | None = None
        self._control: _Reader | None = None
        self._stderr = None
        self._worker: _Reader | None = None
        self._worker_pid: int | None = None

    # -- process management -------------------------------------------------------------------
    def _start_template(self) -> None:
        ours, theirs = socket.socketpair()
        src_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
        self._stderr = tempfile.TemporaryFile()
        code = f"from concord.answers.worker import _template_main; _template_main({theirs.fileno()}, {self.memory_mb})"
        self._template = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
            pass_fds=[theirs.fileno()], env=env, start_new_session=True,
        )
        theirs.close()
        self._control = _Reader(ours)
        msg = self._control.read(time.monotonic() + self.start_timeout)
        if msg != ("ready",):
            tail = self._stderr_tail()
            self._shutdown()
            raise WorkerError(f"math-verify template process failed to start (got {msg!r}); output:\n{tail}")

    def _fork_worker(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self._control.sock, [b"f"], [theirs.fileno()])
        except OSError as exc:
            raise WorkerError(f"math-verify template process is gone: {exc}") from exc
        finally:
            theirs.close()
        msg = self._control.read(time.monotonic() + self.start_timeout)
        if not msg or msg[0] != "forked":
            raise WorkerError(f"math-verify template process did not fork a worker (got {msg!r})")
        self._worker_pid = msg[1]
        self._worker = _Reader(ours)

    def _ensure_worker(self) -> None:
        if self._owner_pid != os.getpid():
            # A forked copy of this object must not share its parent's processes and sockets.
            self._template = self._control = self._worker = self._worker_pid = self._stderr = None
            self._owner_pid = os.getpid()
        if self._worker is not None:
            return
        for attempt in range(2):
            if self._template is None or self._template.poll() is not None:
                self._shutdown()
                self._start_template()
            try:
                self._fork_worker()
                return
            except WorkerError:
                if attempt:
                    raise
                self._shutdown()  # template died: start a new one once

    def _kill_worker(self) -> None:
        reader, pid, self._worker, self._worker_pid = self._worker, self._worker_pid, None, None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)  # our own worker; the template reaps it
            except ProcessLookupError:
                pass
        if reader is not None:
            reader.sock.close()

    def _shutdown(self) -> None:
        self._kill_worker()
        control, template, stderr = self._control, self._template, self._stderr
        self._control = self._template = self._stderr = None
        if control is not None:
            control.sock.close()  # the template exits on end-of-file
        if template is not None:
            try:
                template.wait(timeout=5)
            except subprocess.TimeoutExpired:
                template.kill()
                template.wait()
        if stderr is not None:
            stderr.close()

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()[-4000:].decode(errors="replace")

    def close(self) -> None:
        """Stop the worker and the template process (they restart on the next request)."""
        with self._lock:
            if self._owner_pid == os.getpid():
                self._shutdown()

    # -- requests -----------------------------------------------------------------------------
    def run(self, jobs: list[tuple]) -> list:
        """Run ``("group", keys)`` / ``("grade", gold_key, pred_key)`` jobs; results in order."""
        with self._lock:
            results: dict[int, object] = {}
            pending = list(range(len(jobs)))
            fruitless = 0
            while pending:
                self._ensure_worker()
                culprit = self._run_once(jobs, pending, results)
                pending = [j for j in pending if j not in results]
                if culprit is None:
                    continue
                self._kill_worker()
                self.restarts += 1
                if culprit[0] in ("parse", "verify"):
                    self._blame(culprit)
                    fruitless = 0
                else:  # died outside any operation: retry a little, then give up loudly
                    fruitless += 1
                    if fruitless >= 3:
                        raise WorkerError(f"math-verify worker keeps dying; output:\n{self._stderr_tail()}")
            return [results[j] for j in range(len(jobs))]

    def _run_once(self, jobs, pending, results):
        """Send the pending jobs and collect results; returns the stuck operation, or None."""
        request = ("run", [(j, jobs[j]) for j in pending], self.opaque, self.bad_pairs)
        try:
            _send(self._worker.sock, request)
        except OSError:
            return ("crash",)
        current: tuple = ("idle",)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._worker.read(deadline)
            if msg is None:
                log.warning("math-verify worker stuck or crashed on %s; replacing it", _describe(current))
                return current
            if msg[0] == "op":
                current = msg[1:]
                deadline = time.monotonic() + self.timeout
            elif msg[0] == "done":
                results[msg[1]] = msg[2]
                current = ("idle",)
                deadline = time.monotonic() + self.timeout
            elif msg[0] == "end":
                return None
            else:
                raise WorkerError(f"math-verify worker error: {msg[1]}")

    def _blame(self, op: tuple) -> None:
        if op[0] == "parse":
            self.opaque.add(op[1])
            return
        a, b = op[1], op[2]
        self.bad_pairs.update({(a, b), (b, a)})
        # Was it one of the two (a power tower hangs against any number) or only the pair?
        # Probe each against 0 in a fresh worker: a culprit is then skipped everywhere instead of
        # costing one timeout per partner; an innocent answer like "5" passes in milliseconds.
        for key in (a, b):
            if key in self.opaque or key == _PROBE:
                continue
            self._ensure_worker()
            if self._run_once([("grade", _PROBE, key)], [0], {}) is not None:
                self._kill_worker()
                self.restarts += 1
                self.opaque.add(key)


_PROBE = "0"


def _describe(op: tuple) -> str:
    return " ".join(repr(x)[:80] for x in op)


_DEFAULT: Verifier | None = None
_DEFAULT_LOCK = threading.Lock()


def default_verifier() -> Verifier:
    """The process-wide verifier used when none is passed explicitly."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Verifier()
            atexit.register(_DEFAULT.close)
        return _DEFAULT
