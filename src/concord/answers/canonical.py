"""Canonical keys: cheap and sound (two answers with the same key are the same answer), and the
decisions that need no symbolic work (rationals, choice letters, size limits)."""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from fractions import Fraction
from typing import Callable, Sequence

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
