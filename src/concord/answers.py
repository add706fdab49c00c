"""Final answers: extraction from ``\\boxed{}``, canonical keys, symbolic equivalence, grouping, grading.

Equivalence is decided by math-verify (``parse`` + ``verify``). math-verify's own timeouts use
SIGALRM, which raises outside the main thread and cannot interrupt work stuck inside C code
(power towers such as ``10^{10^{10}}`` hang forever), so every symbolic operation runs in a worker
*process* forked from a warm template; a worker that exceeds the per-operation timeout is killed
and replaced within milliseconds. The worker announces each parse/verify before starting it, so
the parent knows which answer (or pair) hung, remembers it as opaque, and resumes the remaining
work in the fresh worker. Works from any thread; POSIX only (fork, Unix sockets).

Answer policies (``extract_answer``): ``strict`` reads the last complete ``\\boxed{}``; ``ttrl``
reproduces TTRL's extractor (:mod:`concord.ttrl_extraction`), where the empty answer ``""`` votes.

Grouping N answers avoids N^2 symbolic comparisons: answers first collapse by a cheap canonical key
(presentation-only LaTeX clean-up, rational literals in normal form, multiple-choice letters);
pairs of rationals and letters are then decided exactly without math-verify, and only the
remaining class representatives are compared symbolically, greedily, in order of first appearance.
"""

from __future__ import annotations

import atexit
import cmath
import functools
import logging
import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------

_BOXED = re.compile(r"\\boxed(?![A-Za-z])")
# A backslash escapes the next character (``\{`` is a literal brace and must not count).
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)


def extract_boxed(text: str | None) -> str | None:
    """Content of the **last** ``\\boxed{...}`` (braces balanced), or None.

    ``\\boxed {x}`` (whitespace before the brace) is accepted. None when there is no ``\\boxed``,
    when the last one has no brace group, when its braces never balance (a truncated generation),
    or when it is empty: an incomplete final answer is no answer, and an earlier box is not the
    model's final word.
    """
    if not text:
        return None
    if not isinstance(text, str):
        raise TypeError(f"extract_boxed expects a string, got {type(text).__name__}")
    last = None
    for last in _BOXED.finditer(text):
        pass
    if last is None:
        return None
    start = last.end()
    while start < len(text) and text[start].isspace():
        start += 1
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for token in _BRACE_TOKEN.finditer(text, start):
        tok = token.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                content = text[start + 1 : token.start()].strip()
                return content or None
    return None


# ---------------------------------------------------------------------------------------------
# Answer policies: what a roll-out's answer is
# ---------------------------------------------------------------------------------------------

#: ``ttrl``: TTRL's extractor (last ``boxed``, "the answer is", the last number, its normalisation);
#: every generation yields a string, ``""`` when nothing is found, and that string votes.
#: ``strict``: the content of the last complete, non-empty ``\boxed{}``, else None (no vote).
POLICIES = ("ttrl", "strict")
TASKS = ("math", "multiple_choice")


def check_policy(policy: str) -> str:
    """``policy`` itself, or a ValueError naming the allowed values."""
    if policy not in POLICIES:
        raise ValueError(f"unknown answer policy {policy!r}; allowed: {', '.join(POLICIES)} (config key answers.policy)")
    return policy


def extract_answer(text: str | None, policy: str = "strict", *, task: str = "math") -> str | None:
    r"""The answer a roll-out gives under ``policy``: the string that forms its vote class.

    ``None`` means unanswered (no vote, no node, reward 0); ``""`` is an answer like any other
    (``ttrl`` only: an empty generation, an empty box, a text without a number). A ``None`` text
    (no generation at all) is unanswered under both policies. For ``multiple_choice`` a choice
    letter is reduced to the bare letter; under ``strict`` anything else is unanswered, under
    ``ttrl`` it still votes as written (the paper keeps one ``\boxed{}`` channel and one grader for
    multiple choice, Appendix I).
    """
    check_policy(policy)
    _check_task(task)
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"extract_answer expects a string, got {type(text).__name__}")
    if policy == "strict":
        answer = extract_boxed(text)
        return answer if task == "math" or answer is None else normalize_choice(answer)
    from concord.ttrl_extraction import ttrl_answer

    answer = ttrl_answer(text)
    return answer if task == "math" else normalize_choice(answer) or answer


def graded_answer(text: str | None, policy: str = "strict", *, task: str = "math") -> str | None:
    r"""The answer as the model wrote it, for grading against gold under ``policy``.

    ``strict``: the same as :func:`extract_answer`. ``ttrl``: the text TTRL's extractor located,
    *before* its normalisation, which is lossy (``1\pm\sqrt{2}`` loses its ``\pm`` as a unit word,
    ``t+1`` its ``t``); grading reads what was written, so a correct answer is never graded wrong
    because of the vote's string surgery (docs/fidelity.md).
    """
    check_policy(policy)
    _check_task(task)
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"graded_answer expects a string, got {type(text).__name__}")
    if policy == "strict":
        return extract_answer(text, "strict", task=task)
    from concord.ttrl_extraction import trim_trailing_units, ttrl_span

    # "The answer is 12 square units." locates "12 square units"; the unit words TTRL itself
    # removes are trimmed off the end (only there, and never a one-letter word, which may be a
    # variable), so a stated answer with its unit is graded on its value.
    span = trim_trailing_units(ttrl_span(text))
    return span if task == "math" else normalize_choice(span) or span


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")


# ---------------------------------------------------------------------------------------------
# Canonical keys (cheap, sound: two answers with the same key are the same answer)
# ---------------------------------------------------------------------------------------------
#
# math-verify reads whitespace: "32, 349" is the set {32, 349} but "32,349" is 32349; "28 percent"
# is 28% but "28percent" is a product of letters. So the key never glues two tokens that could
# read differently once joined. Each rewrite below has a test with a counter-example that must
# keep its meaning (tests/test_answers.py, "canonical rewrites").

_CHOICE_LETTERS = "ABCDEFGHIJ"
_TEXT_WRAPPER = re.compile(r"^\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\s*\{(.*)\}$", re.DOTALL)
_CHOICE = re.compile(rf"^\(?([{_CHOICE_LETTERS}])\)?\.?$")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
# A control word, a control symbol (``\\`` -- a row break -- is one token, never half of one),
# a run of whitespace, or one character.
_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\s+|.", re.DOTALL)
# Presentation only: delimiter sizing and display style change nothing; ``\!`` (a negative thin
# space) is deleted as math-verify deletes it; the other spacing commands are spaces.
_DROPPED = frozenset({r"\left", r"\right", r"\displaystyle", r"\textstyle", r"\!"})
_SPACES = frozenset({r"\,", r"\;", r"\:", r"\>", "\\ ", "~"})
_FRAC_VARIANTS = frozenset({r"\dfrac", r"\tfrac"})
# Inside these groups spaces are text ("\text{ and }"): kept, only collapsed.
_TEXT_COMMANDS = frozenset({r"\text", r"\textbf", r"\textrm", r"\textit", r"\mathrm", r"\mbox", r"\operatorname"})
# Characters that can fuse with a neighbour into another reading when a space between them goes.
_FUSIBLE = re.compile(r"[A-Za-z0-9.]")
# Thousands separators: LaTeX's "{,}" between digit groups; a thin space or a space only when the
# whole answer is one number in SI digit groups ("1 000 000", "1\,000").
_THOUSANDS = re.compile(r"(?<=\d)\{,\}(?=\d{3}(?!\d))")
_SI_NUMBER = re.compile(r"^[+-]?\d{1,3}(?:(?: |\\,)\d{3})+(?:\.\d+)?$")


def normalize_choice(answer: str | None) -> str | None:
    """Multiple-choice letter of an answer (``\\text{(B)}``, ``(B)``, ``B``, ``B.`` -> ``B``), else None.

    Only capital letters A-J count: a lower-case letter is a mathematical symbol.
    """
    if answer is None:
        return None
    s = _UNESCAPED_DOLLAR.sub("", answer).strip()
    while True:
        m = _TEXT_WRAPPER.match(s)
        if not m:
            break
        s = m.group(1).strip()
    s = s.replace(" ", "")
    m = _CHOICE.match(s)
    return m.group(1) if m else None


def canonical_answer(answer: str) -> str:
    """Cheap canonical key: presentation-only LaTeX removed, rational literals in normal form.

    ``142.0`` and ``0142`` -> ``142``; ``\\dfrac{6}{8}``, ``6/8`` and ``\\frac68`` -> ``3/4``;
    ``\\left( 3 \\right)`` -> ``(3)``; ``\\text{(B)}`` -> ``B``; ``""`` stays ``""`` (the empty
    answer). Every rewrite preserves meaning, so equal keys may be merged without a symbolic
    check; different keys go to :func:`decide_cheaply` and then math-verify. Decimals keep decimal
    form (``0.75``) because math-verify compares floats with rounding, which an exact fraction
    would lose.
    """
    if not isinstance(answer, str):
        raise TypeError(f"an answer must be a string, got {type(answer).__name__}")
    letter = normalize_choice(answer)
    if letter is not None:
        return letter
    s = _tidy_latex(_UNESCAPED_DOLLAR.sub("", answer))
    if _SI_NUMBER.match(s):
        s = s.replace("\\,", "").replace(" ", "")
    s = _THOUSANDS.sub("", s)
    if s.endswith(".") and len(s) > 1:
        s = s[:-1].rstrip()
    if _NUMBER.match(s):
        return _decimal_key(s)
    fraction = _fraction_literal(s)
    if fraction is not None:
        return _fraction_key(fraction)
    return s


def _tidy_latex(s: str) -> str:
    """Drop presentation-only tokens and every space that cannot change the reading."""
    tokens: list[str] = []
    text_depth = 0  # > 0 inside the brace group of a text command
    pending_text_group = False
    glued = False  # just after ",\!": the thousands separator of the MATH data ("32,\! 349" is 32349)
    for tok in _TOKEN.findall(s):
        if tok in _DROPPED:
            glued = tok == r"\!" and bool(tokens) and tokens[-1] == ","
            continue
        if tok in _SPACES or tok.isspace():
            if tokens and tokens[-1] != " " and not glued:
                tokens.append(" ")
            continue
        glued = False
        if tok in _FRAC_VARIANTS:
            tok = r"\frac"
        if tokens and tokens[-1] == " ":
            keep = text_depth > 0 or _space_needed(tokens[-2] if len(tokens) > 1 else "", tok)
            tokens[-1] = " " if keep else ""
        if tok == "{" and (pending_text_group or text_depth):
            text_depth += 1
        elif tok == "}" and text_depth:
            text_depth -= 1
        pending_text_group = tok in _TEXT_COMMANDS
        tokens.append(tok)
    return "".join(tokens).strip()


def _space_needed(before: str, after: str) -> bool:
    """Whether a space between two tokens can matter to a reader of the answer."""
    if not before:
        return False
    if before.startswith("\\") and before[1:].isalpha():
        return after[:1].isalpha()  # "\pi r" is not "\pir"
    if before == ",":
        return after[:1].isdigit()  # "32, 349" is a list, "32,349" a number
    if after == ",":
        return before[-1:].isdigit()
    return bool(_FUSIBLE.fullmatch(before[-1]) and _FUSIBLE.fullmatch(after[0]))  # "2 100", "28 percent"


# \frac{P}{Q}, \frac PQ (one digit each), \frac{P}Q, \frac P{Q}, P/Q with integer P, Q.
_FRACTION = re.compile(
    r"^(?P<sign>[+-]?)(?:\\frac(?:\{(?P<p1>[+-]?\d+)\}|(?P<p2>\d))(?:\{(?P<q1>[+-]?\d+)\}|(?P<q2>\d))"
    r"|(?P<p3>\d+)/(?P<q3>\d+))$"
)
_FRACTION_KEY = re.compile(r"^-?\d+(?:/\d+)?$")


def _fraction_literal(s: str) -> Fraction | None:
    m = _FRACTION.match(s)
    if not m:
        return None
    p = int(m["p1"] or m["p2"] or m["p3"])
    q = int(m["q1"] or m["q2"] or m["q3"])
    if q == 0:
        return None
    value = Fraction(p, q)
    return -value if m["sign"] == "-" else value


def _decimal_key(s: str) -> str:
    # String surgery rather than Decimal.normalize(), which rounds to 28 significant digits.
    sign = "-" if s.startswith("-") else ""
    whole, _, frac = s.lstrip("+-").partition(".")
    whole, frac = whole.lstrip("0") or "0", frac.rstrip("0")
    body = f"{whole}.{frac}" if frac else whole
    return "0" if body == "0" else sign + body


def _fraction_key(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@functools.lru_cache(maxsize=65536)
def key_info(key: str) -> tuple[str, Fraction | None]:
    """(kind, exact value) of a canonical key; kind is ``empty``, ``rational``, ``choice`` or ``expr``."""
    if not key:
        return "empty", None
    if len(key) == 1 and key in _CHOICE_LETTERS:
        return "choice", None
    if _NUMBER.match(key):
        return "rational", Fraction(Decimal(key))
    if _FRACTION_KEY.match(key):
        return "rational", Fraction(key)
    return "expr", None


# Two rationals closer than this may still be "equal" to math-verify, which rounds floats to 6
# decimals (0.333333 ~ 1/3); only clearly different values are decided without it.
_NEAR = Fraction(1, 10**5)


def decide_cheaply(a: str, b: str) -> bool | None:
    """Equivalence of two canonical keys when it needs no symbolic work, else None.

    The empty answer and multiple-choice letters equal only themselves; two rational literals
    compare exactly, except near-equal values, which are left to math-verify's float rounding.
    """
    if a == b:
        return True
    (ka, va), (kb, vb) = key_info(a), key_info(b)
    if ka in ("empty", "choice") or kb in ("empty", "choice"):
        return False
    if ka == "rational" and kb == "rational":
        if va == vb:
            return True
        if abs(va - vb) <= _NEAR * max(1, abs(va), abs(vb)):
            return None
        return False
    return None


# Answers this long or this deeply nested are never real final answers and are the inputs on
# which latex2sympy spends seconds to minutes; they are compared by canonical key only.
MAX_SYMBOLIC_CHARS = 400
MAX_SYMBOLIC_DEPTH = 24


def too_complex(key: str) -> bool:
    """True when a key is not worth (or not safe for) symbolic parsing."""
    if len(key) > MAX_SYMBOLIC_CHARS:
        return True
    depth = deepest = 0
    for ch in key:
        if ch in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "})]":
            depth -= 1
    return deepest > MAX_SYMBOLIC_DEPTH


def cluster_keys(keys: Sequence[str], equivalent: Callable[[str, str], bool]) -> list[int]:
    """Greedy clustering of distinct keys: each joins the first earlier class whose representative
    it is equivalent to. Class ids follow first appearance; at most K*classes comparisons."""
    reps: list[str] = []
    labels: list[int] = []
    for key in keys:
        for cid, rep in enumerate(reps):
            if equivalent(rep, key):
                labels.append(cid)
                break
        else:
            reps.append(key)
            labels.append(len(reps) - 1)
    return labels


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def is_equivalent(a: str | None, b: str | None, *, verifier: "Verifier | None" = None) -> bool:
    """Mathematical equivalence of two answers, for grouping (None is equivalent to nothing).

    Symmetric and conservative: equal canonical keys, equal rationals, or math-verify verifying
    *both* directions. math-verify is asymmetric by design (a gold ``0`` accepts the
    prediction ``a+3z=0``; a gold set accepts a tuple): one direction is a grading verdict, not an
    equivalence, and merging on it would put a wrong answer into a right answer's class.
    """
    if a is None or b is None:
        return False
    return group_answers([a, b], verifier=verifier) == [0, 0]


def group_answers(answers: Sequence[str | None], *, verifier: "Verifier | None" = None) -> list[int]:
    """Equivalence-class id per answer: -1 for None, ids 0, 1, ... in order of first appearance."""
    return group_answers_batch([answers], verifier=verifier)[0]


def group_answers_batch(
    groups: Sequence[Sequence[str | None]], *, verifier: "Verifier | None" = None
) -> list[list[int]]:
    """:func:`group_answers` for many questions with one round trip to the symbolic worker."""
    keyed: list[list[str | None]] = []
    uniques: list[list[str]] = []
    for g, answers in enumerate(groups):
        if isinstance(answers, str):
            raise TypeError(f"group {g}: expected a sequence of answers, got a single string")
        keys = []
        for i, a in enumerate(answers):
            if a is not None and not isinstance(a, str):
                raise TypeError(f"group {g}, answer {i}: expected str or None, got {type(a).__name__}")
            keys.append(None if a is None else canonical_answer(a))
        keyed.append(keys)
        uniques.append(list(dict.fromkeys(k for k in keys if k is not None)))

    verifier = verifier or default_verifier()
    labels_per_group: list[list[int] | None] = [None] * len(groups)
    jobs, job_groups = [], []
    for g, unique in enumerate(uniques):
        try:  # most groups need no symbolic work at all: stay in-process
            labels_per_group[g] = cluster_keys(unique, functools.partial(_decide_locally, opaque=verifier.opaque))
        except _NeedsSymbolic:
            jobs.append(("group", unique))
            job_groups.append(g)
    if jobs:
        for g, labels in zip(job_groups, verifier.run(jobs)):
            labels_per_group[g] = labels

    out = []
    for keys, unique, labels in zip(keyed, uniques, labels_per_group):
        class_of = dict(zip(unique, labels))
        out.append([-1 if k is None else class_of[k] for k in keys])
    return out


class _NeedsSymbolic(Exception):
    pass


def _decide_locally(a: str, b: str, *, opaque: set[str]) -> bool:
    cheap = decide_cheaply(a, b)
    if cheap is not None:
        return cheap
    if a in opaque or b in opaque or too_complex(a) or too_complex(b):
        return False
    raise _NeedsSymbolic


def grade(pred: str | None, gold: str | int | float, *, verifier: "Verifier | None" = None) -> bool:
    """Is the answer ``pred`` correct for ``gold``? math-verify's gold-to-prediction verdict
    (evaluation: gold goes first, math-verify is asymmetric), after meaning-preserving keys.
    Multiple-choice golds compare letters; an empty or missing answer is never correct.

    Pass the answer as written (:func:`graded_answer`), not a lossy vote string.
    """
    if pred is None:
        return False
    if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        raise TypeError(f"gold must be str, int or float, got {type(gold).__name__}")
    gold_key, pred_key = canonical_answer(str(gold)), canonical_answer(pred)
    if not gold_key:
        raise ValueError(f"gold answer {gold!r} is empty; every question needs a gold answer to be graded")
    if gold_key == pred_key:
        return True
    if key_info(pred_key)[0] == "empty" or "choice" in (key_info(gold_key)[0], key_info(pred_key)[0]):
        return False
    verifier = verifier or default_verifier()
    if gold_key in verifier.opaque or pred_key in verifier.opaque or too_complex(gold_key) or too_complex(pred_key):
        return False
    # No rational shortcut here: grading follows math-verify exactly (its float rounding included).
    return verifier.run([("grade", gold_key, pred_key)])[0]


# ---------------------------------------------------------------------------------------------
# The killable symbolic worker
# ---------------------------------------------------------------------------------------------
#
# Layout: a *template* process imports math-verify once and never computes anything; each
# *worker* is forked from it (milliseconds, already warm) and talks to this process over its own
# socket. A worker stuck in an operation is killed and a fresh one forked, so a hang costs the
# operation timeout, not a multi-second interpreter start-up.

_HEADER = struct.Struct(">I")


def _send(sock: socket.socket, obj) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(payload)) + payload)


class _Reader:
    """Framed pickle messages from a socket, with a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def read(self, deadline: float | None):
        while True:
            if len(self.buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self.buffer)
                end = _HEADER.size + size
                if len(self.buffer) >= end:
                    payload, self.buffer = self.buffer[_HEADER.size : end], self.buffer[end:]
                    return pickle.loads(payload)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                ready, _, _ = select.select([self.sock], [], [], remaining)
                if not ready:
                    return None
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk


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
        src_root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH")) if p)
        self._stderr = tempfile.TemporaryFile()
        code = f"from concord.answers import _template_main; _template_main({theirs.fileno()}, {self.memory_mb})"
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


# ---------------------------------------------------------------------------------------------
# Template and worker side (child processes)
# ---------------------------------------------------------------------------------------------


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
    import sympy
    from math_verify import parse, verify

    _limit_memory(memory_mb)
    _die_with_parent()
    threading.Thread(target=_exit_when_orphaned, args=(template_pid,), daemon=True).start()
    reader = _Reader(sock)

    def report(*op) -> None:
        _send(sock, ("op", *op))

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

    while True:
        request = reader.read(None)
        if request is None:
            return
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


__all__ = [
    "MAX_SYMBOLIC_CHARS",
    "MAX_SYMBOLIC_DEPTH",
    "POLICIES",
    "TASKS",
    "Verifier",
    "WorkerError",
    "canonical_answer",
    "check_policy",
    "cluster_keys",
    "decide_cheaply",
    "default_verifier",
    "extract_answer",
    "extract_boxed",
    "grade",
    "graded_answer",
    "group_answers",
    "group_answers_batch",
    "is_equivalent",
    "key_info",
    "normalize_choice",
    "too_complex",
]
