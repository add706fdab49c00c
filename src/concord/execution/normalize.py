"""Trusted-side normalisation: what a runner event becomes as an :class:`Outcome`.

Runs in the parent only. A call-mode return value arrives as text from the candidate's process;
it is parsed here by :mod:`concord.execution.literals` (linear in the text, bounded in depth and
copies, no hashing of candidate data, no ``eval``/``ast``) and rendered as its canonical text, so
whatever the candidate's process wrote, the recorded output is either the canonical text of a
plain value or marked ``repr:`` (grades as wrong). An event the runner already found oversized
is an ``error`` for that candidate only.
"""

from __future__ import annotations

import json
import itertools
import re
import time

from concord.execution import literals
from concord.execution.harness.values import encoder
from concord.execution.outcome import REPR_PREFIX, STATUSES, Outcome

__all__ = ["normalize_stdout", "normalize_value", "parse_value", "canonical_value", "to_outcome", "parse_call_input"]

# Trusted callers' own values only; never lifts the process-wide int/str digit limit (threads).
_render = encoder(1 << 62, toggle_digits=False)


def normalize_stdout(text: str) -> str:
    """LiveCodeBench's view of a stdout (``get_stripped_lines``): the stripped text, each line stripped.

    Done a slice of whole lines at a time (about 64 Ki characters), in C (``split``, ``map``,
    ``join``): one string per line of a whole 4 MiB output of short lines, a stripped copy of each
    and the generator's step per line cost this process (which no candidate's group charges)
    about 30 times the output at its peak, per worker thread (eighth red team); now a few times
    the output, and a third of the time."""
    text = text.strip()
    if "\n" not in text:
        return text
    if len(text) <= _SLICE:
        return "\n".join(map(str.strip, text.split("\n")))
    parts, start, end = [], 0, len(text)
    while start < end:
        cut = text.find("\n", start + _SLICE)  # every slice but the first starts at a newline
        if cut < 0:
            cut = end
        parts.append("\n".join(map(str.strip, text[start:cut].split("\n"))))
        start = cut
    return "".join(parts)


_SLICE = 1 << 16


def normalize_value(value) -> str:
    """The recorded output of a call-mode return value: its canonical literal text (what the
    vote compares exactly), or ``repr:`` + its repr when it has no literal form."""
    try:
        plain, text = _render(value)
    except (RecursionError, MemoryError, ValueError):
        return REPR_PREFIX + "<unrepresentable>"
    return text if plain else REPR_PREFIX + text


def parse_call_input(text: str) -> list:
    """LiveCodeBench functional input: one JSON value per line, one line per argument."""
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def parse_value(text: str):
    """The plain value written as ``text`` (the encoder's literal syntax: Python literals plus
    ``inf``/``nan``, ``Fraction(n, d)``, ``Decimal('s')``, ``set()``, ``frozenset(...)``);
    ValueError otherwise. Parsed by :mod:`concord.execution.literals` (linear, bounded)."""
    tree = literals.parse(text)
    try:
        return literals.to_python(tree)
    except TypeError as exc:  # an element no set or dict key can hold: `{[1]}`, `{{'a': 1}: 2}`
        raise ValueError(f"not a plain value: {exc}") from None


def canonical_value(text: str, deadline: float | None = None) -> str | None:
    """The canonical text of the plain value ``text`` denotes, or None when it denotes none (or
    cannot be read before ``deadline``, in ``time.thread_time()``). Linear in ``text`` and hash-free (see
    :mod:`concord.execution.literals`)."""
    try:
        return literals.canonical(literals.parse(text, deadline=deadline), deadline=deadline)
    except literals.LiteralError:
        return None


# CPython's reprs name an object's address: ``<generator object f at 0x7fd869a275a0>``, and with
# more after it, ``<cell at 0x...: int object at 0x...>``, ``<code object f at 0x..., file ...>``,
# ``<frame at 0x..., file ...>``, ``<weakref at 0x...; to 'A' at 0x...>``.
# Only what CPython's ``%p`` writes for a user-space address: lower-case, 8 to 16 digits (with
# address randomisation off they start 0x5555... or 0x7fff...). Any " at 0x..." was rewritten
# before, and the expected output is not: an honest "Found at 0x1F, done" was graded wrong
# (eighth red team).
_ADDRESS = re.compile(r"(?<= at )0x[0-9a-f]{8,16}(?=[>:,;\s])")
#: an address cut short where an error text was cut (its message at 300 characters and "...",
#: the text at 1,000)
_CUT_ADDRESS = re.compile(r"(?<= at )0x[0-9a-f]{0,16}(?=(?:\.\.\.)?\Z)")


def canonical_addresses(text: str) -> str:
    """``text`` with every address in a default repr (`` at 0x...`` before ``>``, ``:``, ``,`` or
    ``;``, inside a ``<`` the line has not closed) written as ``0x0``. Where an object sits in
    memory depends on what the process allocated before (other jobs on the same worker, the order
    threads hand jobs out), so a recorded output must not carry it: reruns record the same bytes,
    and two candidates returning the same kind of object agree. Outside angle brackets nothing is
    rewritten: an honest "breakpoint at 0x0040a1b2: ok" was recorded as "breakpoint at 0x0: ok"
    and graded wrong (twenty-first red team). One pass over the text, however many addresses."""
    if " at 0x" not in text:
        return text
    state = [0, 0]  # where the text after the last address starts; the brackets open there

    def rewrite(m: re.Match) -> str:
        start, depth = state
        line = text.rfind("\n", start, m.start())
        if line >= 0:
            start, depth = line + 1, 0
        state[0], state[1] = m.end(), _depth_after(depth, text[start:m.start()])
        return "0x0" if state[1] else m.group()

    return _ADDRESS.sub(rewrite, text)


_BRACKETS = re.compile(r"[^<>]+")
_STEP = {"<": 1, ">": -1}


def _depth_after(depth: int, text: str) -> int:
    """How many ``<`` are open after ``text``, ``depth`` open before it, each ``>`` closing one
    if any is open. In the form ``max(depth + net, net - lowest)`` (``lowest``: the lowest count
    any prefix of ``text`` reaches), its brackets walked at C speed: a ``>`` before a ``<`` must
    not cancel it (``-> <A object at 0x...>`` kept its address, twenty-second red team)."""
    first_open = text.find("<")
    if first_open < 0:
        return max(depth - text.count(">"), 0) if depth else 0
    if text.rfind(">") < first_open:  # the usual case, `>, <A object`: every close before every open
        return max(depth - text.count(">", 0, first_open), 0) + text.count("<", first_open)
    # The running counts one at a time, never a list of them (2 million brackets made the caller
    # hold 180 MB for one output, twenty-third red team).
    lowest = min(0, min(itertools.accumulate(map(_STEP.__getitem__, _BRACKETS.sub("", text)))))
    net = text.count("<") - text.count(">")
    return max(depth + net, net - lowest)


def to_outcome(event: dict, mode: str, timeout_s: float | None = None) -> Outcome:
    """A runner event as an Outcome; anything malformed is an error, never an ``ok``. Reading a
    return value takes at most ``literals.MAX_STEPS`` tokens and ``timeout_s`` (the candidate's
    own limit); past either, an error. Nothing in ``event`` makes this raise."""
    status, raw, error = event.get("status"), event.get("raw"), event.get("error")
    if status not in STATUSES:
        return Outcome("error", None, "malformed result")
    if isinstance(error, str):  # an error text is recorded too; cut, it may end in part of an address
        error = canonical_addresses(error[:1000])
        if " at 0x" in error[-24:] and "<" in error:
            error = _CUT_ADDRESS.sub("0x0", error)
    else:
        error = None
    if status != "ok":
        return Outcome(status, None, error or status)
    if not isinstance(raw, str):
        return Outcome("error", None, "malformed result")
    if mode == "stdin":
        return Outcome("ok", canonical_addresses(normalize_stdout(raw)))
    if mode == "humaneval":
        return Outcome("ok", "passed") if raw == "passed" else Outcome("error", None, "malformed result")
    if event.get("plain") is not True:
        return Outcome("ok", REPR_PREFIX + canonical_addresses(raw))
    deadline = time.thread_time() + timeout_s if timeout_s else None  # this thread's CPU time (literals.parse)
    try:
        text = literals.canonical(literals.parse(raw, deadline=deadline), deadline=deadline)
    except literals.LiteralTooLarge as exc:
        return Outcome("error", None, str(exc))
    except literals.LiteralError:
        text = None
    except Exception as exc:  # noqa: BLE001 -- RecursionError, MemoryError...: this candidate's error only
        return Outcome("error", None, f"return value could not be read ({type(exc).__name__})")
    return Outcome("ok", text if text is not None else REPR_PREFIX + canonical_addresses(raw))
