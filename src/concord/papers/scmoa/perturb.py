"""Phase 1a: N semantic-preserving perturbations of a question (Appendix L; personas J.1/J.2).

Paraphrases come from one call that returns a JSON list under the six rules of Appendix L. Each
rephrasing is validated by a regex check that every *protected token* of the original -- numbers,
code (fenced blocks, inline code, function signatures) and physical units -- appears verbatim.
Rejected or missing rephrasings are regenerated in further calls (a bounded number; each carries
a distinct variant tag so that greedy decoding and the call cache yield a new reply). Slots still
empty after the last attempt are filled with the original question and counted in the record,
so the run keeps N agents and the shortfall is visible (the paper's "paraphrase-quality bug",
where dropped paraphrases silently reduced N, is what this guards against).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

from concord.chat import Chat
from concord.papers.scmoa import prompts

log = logging.getLogger(__name__)

_FENCED = re.compile(r"```.*?```", re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_SIGNATURE = re.compile(r"\bdef\s+\w+\s*\([^)]*\)\s*(?:->\s*[^:\n]+)?:")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")
#: Physical units recognised when they directly follow a number ("3.2 eV", "9.8 m/s^2").
UNITS = (
    "eV", "keV", "MeV", "GeV", "TeV", "meV", "J", "kJ", "MJ", "cal", "kcal", "W", "kW", "MW", "N", "kN",
    "Pa", "kPa", "MPa", "atm", "bar", "Hz", "kHz", "MHz", "GHz", "m", "km", "cm", "mm", "um", "\u03bcm",
    "nm", "pm", "fm", "\u00c5", "g", "kg", "mg", "\u03bcg", "s", "ms", "\u03bcs", "ns", "ps", "fs", "min", "h",
    "K", "\u00b0C", "\u00b0F", "\u00b0", "mol", "mmol", "M", "mM", "L", "mL", "V", "mV", "kV", "A", "mA", "\u03a9",
    "ohm", "T", "G", "C", "F", "Da", "kDa", "amu", "m/s", "km/s", "m/s^2", "m/s\u00b2", "km/h", "rad", "sr",
    "lm", "lx", "Bq", "Gy", "Sv", "Wb", "H", "S", "cd", "dB", "%", "ly", "pc", "AU", "kg/m^3", "g/mol",
    "J/mol", "kJ/mol", "N/m", "W/m^2",
)
_UNIT_AFTER_NUMBER = re.compile(
    r"\d\s*(" + "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True)) + r")(?![A-Za-z0-9])"
)


@dataclass(frozen=True)
class Perturbation:
    """One agent's view of the problem: its user text, optional system prompt, and its name."""

    name: str  # "para1".."paraN", a persona key, or "plain1".. (no perturbation)
    question: str
    system: str | None = None

    @property
    def persona_name(self) -> str:
        return prompts.persona_name(self.name)


def protected_tokens(text: str) -> list[str]:
    """Numbers, code and units of ``text`` that a paraphrase must keep verbatim (rules 3-5)."""
    tokens: list[str] = []
    code_spans = [m.group(0) for m in _FENCED.finditer(text)]
    tokens += code_spans
    prose = _FENCED.sub(" ", text)
    tokens += [m.group(0) for m in _INLINE.finditer(prose)]
    tokens += [m.group(0) for m in _SIGNATURE.finditer(prose)]
    # Numbers inside code are covered by the code spans themselves.
    tokens += [m.group(0) for m in _NUMBER.finditer(_INLINE.sub(" ", prose))]
    tokens += [m.group(1) for m in _UNIT_AFTER_NUMBER.finditer(prose)]
    return list(dict.fromkeys(tokens))


def _present(token: str, text: str) -> bool:
    if _NUMBER.fullmatch(token):
        # "12" must not be satisfied by "123" or "1.12".
        return re.search(r"(?<![\w.])" + re.escape(token) + r"(?![\d])", text) is not None
    if any(c.isalpha() for c in token) and len(token) <= 8 and "`" not in token:
        return re.search(r"(?<![A-Za-z])" + re.escape(token) + r"(?![A-Za-z])", text) is not None
    return token in text


def missing_protected(original: str, paraphrase: str) -> list[str]:
    """Protected tokens of ``original`` absent from ``paraphrase`` (empty list: valid)."""
    return [t for t in protected_tokens(original) if not _present(t, paraphrase)]


def parse_paraphrase_list(text: str) -> list[str]:
    """The JSON list of strings in a generator reply (code fences and chatter tolerated).

    Returns an empty list when no JSON list of strings can be found: a malformed reply yields no
    paraphrases, and the caller regenerates.
    """
    candidates = [m.group(1) for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, re.S)]
    start, end = text.find("["), text.rfind("]")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for cand in candidates:
        try:
            value = json.loads(cand)
        except json.JSONDecodeError:
            continue
        if isinstance(value, list):
            items = [v.strip() for v in value if isinstance(v, str) and v.strip()]
            if items:
                return items
    return []


def paraphrase_messages(question: str, n: int, attempt: int) -> list[dict[str, str]]:
    user = prompts.PARAPHRASE_USER.format(n=n, question=question)
    tag = None if attempt == 0 else f"paraphrase-retry-{attempt}"
    return [
        {"role": "system", "content": prompts.PARAPHRASE_SYSTEM.format(n=n)},
        {"role": "user", "content": prompts.with_variant(user, tag)},
    ]


def paraphrase(question: str, chat: Chat, n: int, *, max_attempts: int = 3, on_failure: str = "original",
               sampling: dict[str, Any] | None = None) -> tuple[list[str], dict]:
    """N validated paraphrases of ``question`` and a record of the generation.

    ``on_failure``: ``"original"`` fills slots still empty after ``max_attempts`` calls with the
    original question; ``"raise"`` raises :class:`ValueError` instead.
    """
    if n < 1:
        raise ValueError(f"number of paraphrases must be >= 1, got {n}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    if on_failure not in {"original", "raise"}:
        raise ValueError(f"on_failure must be 'original' or 'raise', got {on_failure!r}")
    accepted: list[str] = []
    rejected: list[dict] = []
    attempts = 0
    while len(accepted) < n and attempts < max_attempts:
        want = n - len(accepted)
        reply = chat.complete(paraphrase_messages(question, want, attempts), **(sampling or {})).text
        attempts += 1
        items = parse_paraphrase_list(reply)
        if not items:
            rejected.append({"attempt": attempts, "reason": "no JSON list of strings", "text": reply[:200]})
        for item in items:
            if len(accepted) >= n:
                break
            missing = missing_protected(question, item)
            if missing:
                rejected.append({"attempt": attempts, "reason": f"missing protected tokens {missing}", "text": item[:200]})
            elif item in accepted:
                rejected.append({"attempt": attempts, "reason": "duplicate", "text": item[:200]})
            else:
                accepted.append(item)
    n_fallback = n - len(accepted)
    if n_fallback and on_failure == "raise":
        raise ValueError(
            f"only {len(accepted)}/{n} valid paraphrases after {attempts} attempt(s); "
            f"last rejection: {rejected[-1]['reason'] if rejected else 'none'}"
        )
    if n_fallback:
        log.info("paraphrase: %d/%d slot(s) fall back to the original question", n_fallback, n)
    record = {"calls": attempts, "n_valid": len(accepted), "n_fallback": n_fallback, "rejected": rejected}
    return accepted + [question] * n_fallback, record


def perturb(question: str, chat: Chat, n: int, *, mode: str = "paraphrase", personas: dict[str, str] | None = None,
            max_attempts: int = 3, on_failure: str = "original", sampling: dict[str, Any] | None = None,
            ) -> tuple[list[Perturbation], dict]:
    """N perturbations: ``paraphrase`` (SPUQ, Appendix L), ``persona`` (J.1/J.2 system prompts
    on the original question) or ``none`` (N copies of the question: the i.i.d. control)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if mode == "paraphrase":
        texts, record = paraphrase(question, chat, n, max_attempts=max_attempts, on_failure=on_failure, sampling=sampling)
        perts = [Perturbation(f"para{i + 1}", t) for i, t in enumerate(texts)]
    elif mode == "persona":
        if not personas:
            raise ValueError("persona perturbation needs the task's personas")
        if n > len(personas):
            raise ValueError(f"persona perturbation has {len(personas)} personas (Appendix J.1/J.2), cannot make n={n}")
        perts = [Perturbation(name, question, system) for name, system in list(personas.items())[:n]]
        record = {"calls": 0}
    elif mode == "none":
        perts = [Perturbation(f"plain{i + 1}", question) for i in range(n)]
        record = {"calls": 0}
    else:
        raise ValueError(f"unknown perturbation mode {mode!r}; expected 'paraphrase', 'persona' or 'none'")
    record = {"mode": mode, **record, "perturbations": [asdict(p) for p in perts]}
    return perts, record
