"""The child side of the killable symbolic worker: the warm template process and the workers it forks.

Imported only in those processes (``python -c 'from concord.answers.worker import _template_main'``)."""

from __future__ import annotations

import cmath
import functools
import logging
import os
import signal
import socket
import threading
import time
from typing import Callable

from concord.answers.canonical import _FRACTION_KEY, cluster_keys, decide_cheaply, key_info, too_complex
from concord.answers.protocol import _Reader, _send


def _template_main(control_fd: int, memory_mb: int) -> None:
    control = socket.socket(fileno=control_fd)
    from math_verify import parse

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    parse("$\\frac{1}{2}+x$", parsing_timeout=None)  # warm the LaTeX grammar once for every worker
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped automatically
    _send(control, ("ready",))
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not msg or not fds:
            return  # the parent closed the control socket (or died)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _worker_loop(socket.socket(fileno=fds[0]), memory_mb, os.getppid())
            except BaseException:  # noqa: BLE001 - a worker never returns into the template's loop
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])
        _send(control, ("forked", pid))


def _worker_loop(sock: socket.socket, memory_mb: int, template_pid: int) -> None:
    verified = _symbolic_checker(lambda *op: _send(sock, ("op", *op)))  # imports sympy and math-verify first
    _limit_memory(memory_mb)
    _die_with_parent()
    threading.Thread(target=_exit_when_orphaned, args=(template_pid,), daemon=True).start()
    reader = _Reader(sock)
    while True:
        request = reader.read(None)
        if request is None:
            return
        _serve(sock, request, verified)


def _symbolic_checker(report: Callable[..., None]) -> Callable[[str, str], bool]:
    """``verified(gold, pred)``: math-verify's verdict on two canonical keys, each key parsed once
    and each pair decided once; ``report`` announces every parse and verify before it starts (the
    parent learns which one hung)."""
    import sympy
    from math_verify import parse, verify

    @functools.lru_cache(maxsize=8192)
    def parsed(key: str):
        kind, value = key_info(key)
        if kind == "rational" and _FRACTION_KEY.match(key):
            # An integer or reduced p/q: exactly what latex2sympy would build, without the parser.
            return [sympy.Rational(value.numerator, value.denominator), key]
        report("parse", key)
        try:
            return parse("$" + key + "$", parsing_timeout=None)
        except Exception:  # noqa: BLE001 - anything latex2sympy throws means "unparseable"
            return []

    @functools.lru_cache(maxsize=8192)
    def numeric(key: str) -> complex | None:
        """Value of a constant expression (no symbols, no sets or relations), else None."""
        exprs = [p for p in parsed(key) if isinstance(p, sympy.Expr)]
        if len(exprs) != 1 or not exprs[0].is_number:
            return None
        try:
            value = complex(exprs[0].evalf(30))
        except Exception:  # noqa: BLE001 - not evaluable to a finite number
            return None
        return value if cmath.isfinite(value) else None

    @functools.lru_cache(maxsize=65536)
    def verified(gold: str, pred: str) -> bool:
        g, p = parsed(gold), parsed(pred)
        if not g or not p:
            return False
        report("verify", gold, pred)
        # math-verify's symbolic fallback costs 20-40 ms per constant pair (5\sqrt{5} vs 125);
        # constants whose values clearly differ cannot pass its numeric or symbolic checks.
        vg, vp = numeric(gold), numeric(pred)
        if vg is not None and vp is not None and abs(vg - vp) > _NUMERIC_TOL * max(1.0, abs(vg), abs(vp)):
            return False
        try:
            return bool(verify(g, p, timeout_seconds=None))
        except Exception:  # noqa: BLE001 - a comparison that errors is not a match
            return False

    return verified


def _serve(sock: socket.socket, request: tuple, verified: Callable[[str, str], bool]) -> None:
    """Answer one request's jobs (group or grade), each as it is done, then ``end``; an error is
    reported instead of killing the worker."""
    _, jobs, opaque, bad_pairs = request

    def usable(a: str, b: str) -> bool:
        return not (a in opaque or b in opaque or (a, b) in bad_pairs or too_complex(a) or too_complex(b))

    def equivalent(a: str, b: str) -> bool:
        cheap = decide_cheaply(a, b)
        if cheap is not None:
            return cheap
        # Grouping needs a symmetric relation and math-verify is asymmetric (a gold ``0`` accepts
        # ``a+3z=0``): only a verdict in both directions is an equivalence.
        return usable(a, b) and verified(a, b) and verified(b, a)

    try:
        for job_id, job in jobs:
            if job[0] == "group":
                result = cluster_keys(job[1], equivalent)
            elif job[0] == "grade":
                result = usable(job[1], job[2]) and verified(job[1], job[2])
            else:
                raise ValueError(f"unknown job kind {job[0]!r}")
            _send(sock, ("done", job_id, result))
        _send(sock, ("end",))
    except Exception as exc:  # noqa: BLE001 - report instead of dying silently
        _send(sock, ("error", f"{type(exc).__name__}: {exc}"))


# Far looser than math-verify's float rounding (6 decimals): the shortcut only rejects pairs that
# math-verify would reject too.
_NUMERIC_TOL = 1e-5


def _limit_memory(memory_mb: int) -> None:
    # A runaway sympy expansion should fail with MemoryError, not push the machine into swap.
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):
        pass


def _die_with_parent() -> None:
    # A worker stuck in C code holds the GIL, so no Python thread can notice that its template
    # died; ask the kernel to kill it instead (Linux prctl PR_SET_PDEATHSIG = 1).
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)
