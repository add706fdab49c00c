"""TTRL's answer extraction for math, reimplemented from its reference reward (not vendored).

Source read: PRIME-RL/TTRL @3e2cc93, ``verl/verl/utils/reward_score/ttrl/``:
``ttt_metrics.test_time_train_metrics`` -> ``auto_extract.auto_extract(task="math")`` ->
``qwen/qwen_math_parser.extract_answer(text, data_name="math")`` (itself adapted from
Qwen2.5-Math's ``evaluation/parser.py``). TTRL counts these strings with a ``Counter``: two
roll-outs vote together exactly when their extracted strings are equal, and the empty string
``""`` (an empty generation, an empty ``\\boxed{}``, a text without any number) is a string like
any other. ``auto_extract`` drops ``None`` answers, but ``extract_answer`` never returns ``None``,
so every roll-out votes.

Two pieces are returned, because the second one serves *grading*:

* :func:`ttrl_answer` -- the string TTRL votes with (``strip_string`` applied): concord's
  ``policy="ttrl"`` answer;
* :func:`ttrl_span` -- the text TTRL located (last ``boxed``, "the answer is", the last number)
  before ``strip_string``. ``strip_string`` destroys meaning in places (it deletes the unit word
  ``pm`` out of ``\\pm``, a free-standing ``t`` or ``a`` out of ``t+1``, every ``and``, turns
  ``j`` into ``i``, ``\\{1,2\\}`` into ``{1,2}``), so grading against gold reads the span, not the
  vote string (docs/fidelity.md, "## CoRE").

Every step below mirrors one line of ``extract_answer`` / ``strip_string``, in order; quirks are
kept on purpose (the vote must be TTRL's), and each is named where it happens.
"""

from __future__ import annotations

import re

# --- extract_answer(pred_str, data_name="math") ------------------------------------------------

_MINERVA_START, _MINERVA_END = "final answer is $", "$. I hope"
# Non-overlapping, like re.findall in the reference; commas are deleted first (thousands).
_LAST_NUMBER = re.compile(r"-?\d*\.?\d+")
_NEWLINE_RUN = re.compile(r"\n\s*")


def ttrl_span(text: str) -> str:
    """The answer text TTRL's extractor locates, after its light clean-up, before ``strip_string``."""
    if not isinstance(text, str):
        raise TypeError(f"a generation must be a string, got {type(text).__name__}")
    text = text.replace("\u043a\u0438", "")  # "ки": a step tag of Math-Shepherd data, dropped by the reference
    if _MINERVA_START in text and _MINERVA_END in text:
        pred = text.split(_MINERVA_START, 1)[1].split(_MINERVA_END, 1)[0].strip()
    elif "boxed" in text:
        pred = _after_last_boxed(text.split("boxed")[-1])
    elif "he answer is" in text:
        pred = text.split("he answer is")[-1].strip()
    elif "final answer is" in text:
        pred = text.split("final answer is")[-1].strip()
    elif "答案是" in text:
        pred = text.split("答案是")[1].strip().split("\n\n")[0].strip()
    else:
        numbers = _LAST_NUMBER.findall(text.replace(",", ""))
        pred = numbers[-1] if numbers else ""
    pred = _NEWLINE_RUN.sub("", pred)
    if pred.startswith(":"):
        pred = pred[1:]
    if pred.endswith("."):
        pred = pred[:-1]
    if pred.endswith("/"):
        pred = pred[:-1]
    return pred


def _after_last_boxed(rest: str) -> str:
    """What follows the last ``boxed``: a brace group (unclosed groups run to the end of the text,
    so a truncated ``\\boxed{12`` yields ``12``), else everything up to the next ``$``."""
    if not rest:
        return ""
    if rest[0] != "{":
        return rest.split("$")[0].strip()
    depth, out = 1, []
    for ch in rest[1:]:  # escaped braces count too: the reference scans characters
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        out.append(ch)
    return "".join(out)


def ttrl_answer(text: str) -> str:
    """The string TTRL votes with for this generation (``""`` when it finds nothing)."""
    return strip_string(ttrl_span(text))


# --- strip_string(string, skip_unit=False) -----------------------------------------------------

# Unit words "mainly from MathQA", in the reference's order, each matched as a *regular
# expression* between non-word characters (so "." in "q ." matches any character), then the
# same list with an "s" appended. The order matters: substitutions run one after another.
_UNIT_TEXTS = [
    "east", "degree", "mph", "kmph", "ft", "m sqaure", " m east", "sq m", "deg", "mile", "q .", "monkey",
    "prime", "ratio", "profit of rs", "rd", "o", "gm", "p . m", "lb", "tile", "per", "dm", "lt", "gain",
    "ab", "way", "west", "a .", "b .", "c .", "d .", "e .", "f .", "g .", "h .", "t", "a", "h",
    "no change", "men", "soldier", "pie", "bc", "excess", "st", "inches", "noon", "percent", "by", "gal",
    "kmh", "c", "acre", "rise", "a . m", "th", "π r 2", "sq", "mark", "l", "toy", "coin", "sq . m",
    "gallon", "° f", "profit", "minw", "yr", "women", "feet", "am", "pm", "hr", "cu cm", "square",
    "v â € ™", "are", "rupee", "rounds", "cubic", "cc", "mtr", "s", "ohm", "number", "kmph", "day",
    "hour", "minute", "min", "second", "man", "woman", "sec", "cube", "mt", "sq inch", "mp", "∏ cm ³",
    "hectare", "more", "sec", "unit", "cu . m", "cm 2", "rs .", "rs", "kg", "g", "month", "km", "m",
    "cm", "mm", "apple", "liter", "loss", "yard", "pure", "year", "increase", "decrease", "d", "less",
    "Surface", "litre", "pi sq m", "s .", "metre", "meter", "inch",
]
_UNIT_TEXTS = _UNIT_TEXTS + [unit + "s" for unit in _UNIT_TEXTS]
_UNIT_PATTERNS = [re.compile(r"(^|\W)" + unit + r"($|\W)") for unit in _UNIT_TEXTS]

_ARRAY_BEGIN = re.compile(r"\\begin\{array\}\{.*?\}")
_ARRAY_END = re.compile(r"\\end\{array\}")
_TRAILING_TEXT = re.compile(r"\\text{.*?}$")
_TEXT_GROUP = re.compile(r"\\text\{(.*?)\}")
_MBOX = re.compile(r"\\mbox{.*?}")
_DECIMAL_ZEROS = re.compile(r"(\d+)\.0*([^\d])")
_DECIMAL_ZEROS_END = re.compile(r"(\d+)\.0*$")
_SQRT_ARGUMENT = re.compile(r"\\sqrt(\w+)")
_VARIABLE_PREFIXES = ["x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to"]


def strip_string(string: str) -> str:
    """TTRL's (Qwen2.5-Math's) answer normalisation with units removed, step for step."""
    string = str(string).strip()
    string = string.replace("\n", "")
    string = string.rstrip(".")
    string = string.replace("\\!", "")
    string = _ARRAY_BEGIN.sub(r"\\begin{pmatrix}", string)
    string = _ARRAY_END.sub(r"\\end{pmatrix}", string)
    string = string.replace("bmatrix", "pmatrix")
    string = string.replace("tfrac", "frac").replace("dfrac", "frac")
    string = string.replace("\\neq", "\\ne").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    string = string.replace("\\left", "").replace("\\right", "")
    string = string.replace("\\{", "{").replace("\\}", "}")
    without_unit = _TRAILING_TEXT.sub("", string).strip()
    if without_unit != "" and without_unit != string:
        string = without_unit
    for _ in range(2):
        for pattern in _UNIT_PATTERNS:
            candidate = pattern.sub(r"\1\2", string)
            if candidate != "":
                string = candidate
    string = string.replace("^{\\circ}", "").replace("^\\circ", "")
    string = string.replace("\\$", "").replace("$", "")
    string = string.replace("\\(", "").replace("\\)", "")
    string = _convert_word_number(string)
    string = _TEXT_GROUP.sub(r"\1", string)
    for prefix in _VARIABLE_PREFIXES:
        string = string.replace(prefix, "")
    string = string.replace("\\emptyset", "{}")
    string = string.replace("(-\\infty,\\infty)", "\\mathbb{R}")
    string = string.replace("\\%", "").replace("%", "")
    string = string.replace(" .", " 0.").replace("{.", "{0.")
    # The reference next unwraps "{x}", "(x)", "[x]" when the *whole* string is alphanumeric,
    # which a string starting with a bracket never is: that branch cannot fire and is omitted.
    string = string.replace("infinity", "\\infty")
    if "\\infty" not in string:
        string = string.replace("inf", "\\infty")
    string = string.replace("+\\inity", "\\infty")
    string = string.replace("and", "")
    string = string.replace("\\mathbf", "")
    string = _MBOX.sub("", string)
    # (The reference's quote removal discards its result: a no-op.)
    if "j" in string and "i" not in string:
        string = string.replace("j", "i")
    string = _DECIMAL_ZEROS.sub(r"\1\2", string)
    string = _DECIMAL_ZEROS_END.sub(r"\1", string)
    if not string:
        return string
    if string[0] == ".":
        string = "0" + string
    parts = string.split("=")
    if len(parts) == 2 and len(parts[0]) <= 2:
        string = parts[1]
    string = _SQRT_ARGUMENT.sub(r"\\sqrt{\1}", string)
    string = string.replace(" ", "")
    string = _fix_fracs(string)
    return _fix_a_slash_b(string)


_TRAILING_WORD = re.compile(r"\s+([A-Za-z]+)\.?\s*$")
_UNIT_WORDS = frozenset(u for u in _UNIT_TEXTS if len(u) >= 2 and u.isalpha())


def trim_trailing_units(span: str) -> str:
    """``span`` without the unit words at its end that TTRL's unit list names (two letters or
    more: a one-letter word may be a variable), e.g. ``12 square units`` -> ``12``. Used for
    grading only; nothing else of ``strip_string`` is applied, since the rest can change meaning."""
    while True:
        m = _TRAILING_WORD.search(span)
        if not m or m.group(1).lower() not in _UNIT_WORDS or not span[: m.start()].strip():
            return span
        span = span[: m.start()]


def _convert_word_number(text: str) -> str:
    # The reference calls word2number's w2n.word_to_num on the whole answer and keeps the text
    # when it raises (as it does for anything without a number word). Its quirks come with it:
    # "05" -> "5", and number words anywhere among other words ("x one" -> "1").
    try:
        from word2number import w2n
    except ModuleNotFoundError as exc:  # pragma: no cover - a pinned dependency
        raise ModuleNotFoundError(
            "policy 'ttrl' needs the package word2number (TTRL's extractor uses it); pip install word2number==1.1"
        ) from exc
    try:
        return str(w2n.word_to_num(text))
    except Exception:  # noqa: BLE001 - the reference swallows every failure the same way
        return text


def _fix_fracs(string: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{72}`` -> ``\\frac{1}{72}`` (Hendrycks MATH)."""
    pieces = string.split("\\frac")
    out = pieces[0]
    for piece in pieces[1:]:
        out += "\\frac"
        if piece and piece[0] == "{":
            out += piece
            continue
        if len(piece) < 2:
            return string
        a, b, rest = piece[0], piece[1], piece[2:]
        out += "{" + a + "}{" + b + "}" + rest if b != "{" else "{" + a + "}" + b + rest
    return out


def _fix_a_slash_b(string: str) -> str:
    """``3/4`` -> ``\\frac{3}{4}`` when both sides are integers (or contain ``sqrt``)."""
    parts = string.split("/")
    if len(parts) != 2:
        return string
    a, b = parts
    try:
        if "sqrt" not in a:
            a = int(a)
        if "sqrt" not in b:
            b = int(b)
        if string != f"{a}/{b}":
            return string
    except ValueError:
        return string
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


__all__ = ["strip_string", "trim_trailing_units", "ttrl_answer", "ttrl_span"]
