"""Benchmarks to one schema; Appendix I prompts."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from concord import data
from concord.answers import grade


def test_synthetic_is_seeded_and_has_five_levels():
    a = data.synthetic_arithmetic(25, seed=3)
    b = data.synthetic_arithmetic(25, seed=3)
    c = data.synthetic_arithmetic(25, seed=4)
    assert a == b
    assert a != c
    assert sorted({r["level"] for r in a}) == [1, 2, 3, 4, 5]
    assert len({r["id"] for r in a}) == 25
    for r in a:
        assert data.validate_record(r) == r


def _evaluate(prompt: str, level: int) -> Fraction:
    """Recompute a synthetic answer independently from its question text."""
    import re

    import sympy

    if level == 4:
        nums = [int(x) for x in re.findall(r"\\frac\{(\d+)\}\{(\d+)\}", prompt) for x in x]
        return Fraction(nums[0], nums[1]) + Fraction(nums[2], nums[3])
    if level == 5:
        var, eq = re.search(r"Solve for \$(\w)\$: \$(.*)\$\.", prompt).groups()
        lhs, rhs = eq.split("=")
        sym = sympy.Symbol(var)
        expr = sympy.sympify(lhs.replace(var, f"*{var}"), locals={var: sym}) - sympy.sympify(rhs)
        return Fraction(str(sympy.solve(expr, sym)[0]))
    expr = re.sub(r"^(What is|Compute|Evaluate) ", "", prompt).rstrip("?.").replace("\\times", "*")
    return Fraction(str(sympy.sympify(expr)))


def test_synthetic_answers_are_correct_and_checkable():
    for r in data.synthetic_arithmetic(30, seed=11):
        expected = _evaluate(r["prompt"], r["level"])
        shown = expected.numerator if expected.denominator == 1 else f"{expected.numerator}/{expected.denominator}"
        assert grade(str(shown), r["answer"]), (r, expected)


def test_prompts_follow_appendix_i():
    q = "What is 1+1?"
    assert data.build_user_content(q, "qwen-math", "math") == q
    instr = data.build_user_content(q, "instruct", "math")
    assert instr.startswith(q) and "\\boxed{}" in instr
    qwen3 = data.build_user_content(q, "qwen3", "math")
    assert qwen3.index("/no_think") < qwen3.index("\\boxed{}")
    mc = data.build_user_content(q, "instruct", "multiple_choice")
    assert "letter" in mc and "\\boxed{}" in mc
    # Even Qwen-Math gets the letter instruction on GPQA (one answer channel for every task).
    assert "letter" in data.build_user_content(q, "qwen-math", "multiple_choice")
    assert data.build_messages(q) == [{"role": "user", "content": instr}]
    with pytest.raises(ValueError, match="prompt_style"):
        data.build_user_content(q, "chatml")


@pytest.mark.parametrize("name,count", [("AIME", 30), ("AMC", 83), ("MATH", 500), ("MATH-L4", 128), ("MATH-L5", 134)])
def test_ttrl_files_load(shared_ttrl, name, count):
    records = data.load_ttrl_json(shared_ttrl / name / "test.json")
    assert len(records) == count
    assert all(set(r) == set(data.FIELDS) for r in records)
    assert len({r["id"] for r in records}) == count


def test_ttrl_levels_need_a_level_field(shared_ttrl):
    spec = {"source": "ttrl_json", "path": str(shared_ttrl / "MATH" / "test.json"), "levels": [5]}
    with pytest.raises(data.DataError, match="no 'level' field"):
        data.prepare_benchmark(spec)
    records = data.prepare_benchmark({"source": "ttrl_json", "path": str(shared_ttrl / "MATH-L5" / "test.json")})
    assert len(records) == 134 and records[0]["subject"] == "intermediate_algebra"


def test_ttrl_errors_name_the_problem(tmp_path):
    bad = tmp_path / "test.json"
    bad.write_text("{not json")
    with pytest.raises(data.DataError, match="not valid JSON"):
        data.load_ttrl_json(bad)
    bad.write_text(json.dumps({"prompt": "x"}))
    with pytest.raises(data.DataError, match="JSON list"):
        data.load_ttrl_json(bad)
    bad.write_text(json.dumps([{"prompt": "x"}]))
    with pytest.raises(data.DataError, match="item 0"):
        data.load_ttrl_json(bad)
    with pytest.raises(data.DataError, match="not found"):
        data.load_ttrl_json(tmp_path / "missing.json")


def test_hub_normalisers_on_fixtures():
    math_rows = [
        {"problem": "p1", "answer": "3", "level": 4, "subject": "Algebra", "unique_id": "test/algebra/1.json"},
        {"problem": "p2", "answer": "\\frac12", "level": 5, "subject": "Geometry", "unique_id": "test/geometry/2.json"},
    ]
    l4 = data.normalise_hub_rows("math_l4", math_rows, levels=[4])
    assert [r["id"] for r in l4] == ["test/algebra/1.json"]
    amc = data.normalise_hub_rows("amc", [{"id": 7, "problem": "q", "answer": 12.0}])
    assert amc[0]["answer"] == "12"
    aime = data.normalise_hub_rows("aime2024", [{"id": 60, "problem": "q", "answer": "204"}])
    assert aime[0]["source"] == "AIME 2024"


def test_gpqa_choices_are_shuffled_and_gold_is_the_letter():
    row = {"Question": "Which?", "Correct Answer": "right", "Incorrect Answer 1": "w1",
           "Incorrect Answer 2": "w2", "Incorrect Answer 3": "w3", "Record ID": "r1", "High-level domain": "Physics"}
    letters = set()
    for seed in range(12):
        rec = data.gpqa_record(row, random.Random(seed), 0)
        letter = rec["answer"]
        assert f"({letter}) right" in rec["prompt"]
        letters.add(letter)
    assert len(letters) > 1  # the correct option is not always in the same place
    again = data.normalise_hub_rows("gpqa_diamond", [row], seed=5)
    assert again == data.normalise_hub_rows("gpqa_diamond", [row], seed=5)


def test_questions_roundtrip_and_duplicate_ids(tmp_path):
    records = data.synthetic_arithmetic(5)
    path = data.write_questions(tmp_path / "q.jsonl", records)
    assert data.load_questions(path) == records
    with pytest.raises(data.DataError, match="duplicate"):
        data.write_questions(tmp_path / "d.jsonl", records + records[:1])
    with pytest.raises(data.DataError, match="answer"):
        data.validate_record({**records[0], "answer": ""})


def test_synthetic_forms_cycle_and_answers_are_correct():
    import re

    forms = ["sum_1digit", "product_1digit", "story_sum_1digit"]
    records = data.synthetic_arithmetic(30, seed=2, forms=forms)
    assert [r["subject"] for r in records[:6]] == forms + forms
    assert all(r["level"] == 1 for r in records)
    for r in records:
        if r["subject"] == "story_sum_1digit":
            a, b = (int(x) for x in re.findall(r"\d+", r["prompt"]))
            expected = Fraction(a + b)
        else:
            expected = _evaluate(r["prompt"], r["level"])
        assert grade(str(expected), r["answer"]), r
        assert all(0 < int(x) < 10 for x in re.findall(r"\d+", r["prompt"])), r  # one-digit operands
    spec = {"source": "synthetic", "n_questions": 4, "seed": 2, "forms": forms}
    assert data.prepare_benchmark(spec) == records[:4]
    assert [r["subject"] for r in data.synthetic_arithmetic(5)] == list(data.LADDER)  # default: the ladder


def test_unknown_synthetic_form_is_named():
    with pytest.raises(data.DataError, match="unknown synthetic form.*'sum_3digit'"):
        data.synthetic_arithmetic(3, forms=["sum_1digit", "sum_3digit"])


def test_short_instruction_prompt_style():
    q = "What is 2 + 3?"
    short = data.build_user_content(q, "instruct-short", "math")
    assert short.startswith(q) and "one short sentence" in short and short.endswith("within \\boxed{}.")
    # Multiple choice keeps its own instruction (the letter of the option).
    assert data.build_user_content(q, "instruct-short", "multiple_choice") == data.build_user_content(
        q, "instruct", "multiple_choice")
