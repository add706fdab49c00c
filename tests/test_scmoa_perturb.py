"""Appendix L paraphrases: protected-token validation, JSON parsing, bounded regeneration."""

from __future__ import annotations

import json
import re

import pytest

from concord.chat import CachedChat, FunctionChat
from concord.papers.scmoa import prompts
from concord.papers.scmoa.perturb import missing_protected, paraphrase, parse_paraphrase_list, perturb, protected_tokens

PHYSICS = "An electron with kinetic energy 3.5 eV moves at 2.1e6 m/s through a 12 cm gap. Find the field."
CODE = "Fix `count_pairs` so it runs fast:\n```python\ndef count_pairs(xs):\n    return 0\n```\nReturn 10 pairs at most."


def test_protected_tokens_cover_numbers_code_and_units():
    toks = protected_tokens(PHYSICS)
    assert {"3.5", "2.1e6", "12", "eV", "m/s", "cm"} <= set(toks)
    code_toks = protected_tokens(CODE)
    assert "```python\ndef count_pairs(xs):\n    return 0\n```" in code_toks
    assert "`count_pairs`" in code_toks and "10" in code_toks
    assert "0" not in code_toks  # numbers inside code are covered by the code block itself


def test_validation_requires_each_protected_token_verbatim():
    good = "Find the field across a 12 cm gap for an electron of 3.5 eV kinetic energy moving at 2.1e6 m/s."
    assert missing_protected(PHYSICS, good) == []
    assert missing_protected(PHYSICS, good.replace("3.5 eV", "3.50 eV")) == ["3.5"]
    assert missing_protected(PHYSICS, good.replace("12 cm", "120 mm")) == ["12", "cm"]
    assert missing_protected(PHYSICS, good.replace("eV", "electronvolts")) == ["eV"]
    changed_code = CODE.replace("return 0", "return 1")
    assert len(missing_protected(CODE, changed_code)) == 1


def test_parse_paraphrase_list_tolerates_fences_and_rejects_garbage():
    assert parse_paraphrase_list('Sure!\n```json\n["a", "b"]\n```') == ["a", "b"]
    assert parse_paraphrase_list('Here: ["x", "y"] done') == ["x", "y"]
    assert parse_paraphrase_list("1. first\n2. second") == []
    assert parse_paraphrase_list('[1, 2]') == []


class Generator:
    """Scripted paraphrase generator: a reply per attempt (recognised by the retry variant tag)."""

    def __init__(self, replies):
        self.replies = replies
        self.asked: list[int] = []

    def __call__(self, messages, sampling):
        user = messages[-1]["content"]
        assert messages[0]["content"] == prompts.PARAPHRASE_SYSTEM.format(
            n=int(re.search(r"problem (\d+) times", user).group(1)))
        self.asked.append(int(re.search(r"problem (\d+) times", user).group(1)))
        tag = re.search(r"paraphrase-retry-(\d+)", user)
        return self.replies[int(tag.group(1)) if tag else 0]


def _ok(i):
    return f"Variant {i}: a 12 cm gap, an electron of 3.5 eV at 2.1e6 m/s; what is the field?"


def test_rejected_paraphrases_are_regenerated_with_a_new_call():
    bad = "An electron crosses a gap; find the field."  # lost every number and unit
    gen = Generator([json.dumps([_ok(1), bad, _ok(2)]), "not json at all", json.dumps([_ok(3)])])
    texts, record = paraphrase(PHYSICS, FunctionChat(gen), 3, max_attempts=3)
    assert texts == [_ok(1), _ok(2), _ok(3)]
    assert gen.asked == [3, 1, 1]  # the first call asks for N; retries only for the missing ones
    assert record["calls"] == 3 and record["n_valid"] == 3 and record["n_fallback"] == 0
    reasons = [r["reason"] for r in record["rejected"]]
    assert reasons[0].startswith("missing protected tokens") and reasons[1] == "no JSON list of strings"


def test_regeneration_is_bounded_then_falls_back_or_raises():
    gen = Generator(["[]", "nothing", "still nothing"])
    texts, record = paraphrase(PHYSICS, FunctionChat(gen), 2, max_attempts=2)
    assert texts == [PHYSICS, PHYSICS] and record["n_fallback"] == 2 and record["calls"] == 2
    with pytest.raises(ValueError, match="only 0/2 valid paraphrases after 2 attempt"):
        paraphrase(PHYSICS, FunctionChat(Generator(["[]", "[]"])), 2, max_attempts=2, on_failure="raise")


def test_retry_tags_make_distinct_cached_calls(tmp_path):
    gen = Generator([json.dumps([_ok(1)]), json.dumps([_ok(2)])])
    chat = CachedChat(FunctionChat(gen), tmp_path)
    first, _ = paraphrase(PHYSICS, chat, 2)
    again, _ = paraphrase(PHYSICS, chat, 2)
    assert first == again == [_ok(1), _ok(2)]
    assert chat.misses == 2 and chat.hits == 2


def test_perturb_modes():
    perts, rec = perturb("What is 2+2?", FunctionChat(lambda m, s: "x"), 3, mode="none")
    assert [p.name for p in perts] == ["plain1", "plain2", "plain3"] and rec["calls"] == 0
    with pytest.raises(ValueError, match="unknown perturbation mode"):
        perturb("q", FunctionChat(lambda m, s: "x"), 2, mode="typos")
