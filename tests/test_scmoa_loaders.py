"""Benchmark loaders on small files written in each benchmark's published format."""

from __future__ import annotations

import base64
import csv
import gzip
import json
import pickle
import zlib

import pytest

from concord.papers.scmoa import loaders


def test_bbh_task_files(tmp_path):
    (tmp_path / "date_understanding.json").write_text(json.dumps(
        {"canary": "x", "examples": [{"input": "Today is 1/1/2020. What is tomorrow?\nOptions:\n(A) 01/02/2020", "target": "(A)"}]}))
    (tmp_path / "web_of_lies.json").write_text(json.dumps({"examples": [{"input": "Does Ka tell the truth?", "target": "Yes"}]}))
    rows = loaders.load("bbh", tmp_path)
    assert [r["id"] for r in rows] == ["date_understanding-0", "web_of_lies-0"]
    assert rows[0]["answer"] == "(A)" and rows[0]["task"] == "qa" and rows[1]["subject"] == "web_of_lies"


def test_mmlu_ml_csv_and_jsonl(tmp_path):
    path = tmp_path / "machine_learning_test.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerow(["Which is a kernel?", "RBF", "ReLU", "SGD", "Adam", "A"])
    rows = loaders.load("mmlu_ml", path)
    assert rows[0]["answer"] == "A" and "(A) RBF" in rows[0]["prompt"] and "(D) Adam" in rows[0]["prompt"]
    jl = tmp_path / "mmlu.jsonl"
    jl.write_text(json.dumps({"question": "2+2?", "choices": ["3", "4", "5", "6"], "answer": 1}) + "\n")
    assert loaders.load("mmlu_ml", jl)[0]["answer"] == "B"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerow(["q", "a", "b", "c", "d", "E"])
    with pytest.raises(ValueError, match="not one of A-D"):
        loaders.load("mmlu_ml", path)


def test_gpqa_shuffles_options_reproducibly(tmp_path):
    path = tmp_path / "gpqa_diamond.csv"
    fields = ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
              "Incorrect Answer 3", "Subdomain"]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for i in range(8):
            w.writerow({"Record ID": f"rec{i}", "Question": f"Q{i}?", "Correct Answer": "right",
                        "Incorrect Answer 1": "w1", "Incorrect Answer 2": "w2", "Incorrect Answer 3": "w3",
                        "Subdomain": "Physics"})
    rows = loaders.load("gpqa_diamond", path, seed=3)
    assert rows == loaders.load("gpqa_diamond", path, seed=3)
    for r in rows:
        assert f"({r['answer']}) right" in r["prompt"]
    assert len({r["answer"] for r in rows}) > 1  # the correct option does not always sit at (A)


def test_aime_years_from_url(tmp_path):
    path = tmp_path / "aime.jsonl"
    rows = [{"id": 1, "problem": "Find x.", "answer": "033", "url": "https://x/2022_AIME_I_Problems/Problem_1"},
            {"id": 2, "problem": "Find y.", "answer": "7", "url": "https://x/2021_AIME_II_Problems/Problem_2"},
            {"id": 3, "problem": "Find z.", "answer": "999", "year": 2024}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = loaders.load("aime", path)
    assert [(r["id"], r["answer"], r["level"]) for r in out] == [("1", "33", 2022), ("3", "999", 2024)]


def _lcb_private(cases):
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def test_livecodebench_public_and_encoded_private_tests(tmp_path):
    path = tmp_path / "test6.jsonl"
    rows = [
        {"question_id": "abc123_d", "question_title": "Sum", "question_content": "Print a+b.", "platform": "atcoder",
         "difficulty": "hard", "starter_code": "", "metadata": "{}", "contest_date": "2025-02-01T00:00:00",
         "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
         "private_test_cases": _lcb_private([{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}])},
        {"question_id": "lc1", "question_content": "Add two numbers.", "platform": "leetcode", "difficulty": "hard",
         "starter_code": "class Solution:\n    def add(self, a: int, b: int) -> int:\n        ",
         "contest_date": "2024-06-01T00:00:00",
         "metadata": json.dumps({"func_name": "add"}),
         "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
         "private_test_cases": json.dumps([])},
        {"question_id": "easy1", "question_content": "x", "difficulty": "easy", "public_test_cases": "[]"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = loaders.load("livecodebench", path)
    assert [r["id"] for r in out] == ["abc123_d", "lc1"]
    assert out[0]["tests_hidden"] == [{"type": "stdin", "input": "5 5\n", "output": "10\n"}]
    assert out[1]["tests_public"][0] == {"type": "functional", "input": "1\n2", "output": "3", "fn_name": "add"}
    assert "starter code" in out[1]["prompt"] and out[0]["task"] == "code"
    recent = loaders.load("livecodebench", path, start_date="2025-01-01", end_date="2025-04-30")
    assert [r["id"] for r in recent] == ["abc123_d"]


def test_lcb_blob_refuses_pickled_code():
    evil = base64.b64encode(zlib.compress(pickle.dumps(print))).decode()
    with pytest.raises(ValueError, match="refusing to load"):
        loaders.decode_lcb_tests(evil)


def test_humaneval_gz_and_questions_file(tmp_path):
    problem = {"task_id": "HumanEval/1", "prompt": "def inc(x):\n    \"\"\"x+1\"\"\"\n", "entry_point": "inc",
               "canonical_solution": "    return x + 1\n",
               "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(0) == 1\n"}
    gz = tmp_path / "HumanEval.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(json.dumps(problem) + "\n")
    (q,) = loaders.load("humaneval", gz)
    assert q["task"] == "code" and len(q["tests_public"]) == 1 and len(q["tests_hidden"]) == 1
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"id": "a", "prompt": "1+1?", "answer": "2"}) + "\n")
    assert loaders.load("questions", qfile)[0]["task"] == "qa"
    with pytest.raises(ValueError, match="unknown benchmark format"):
        loaders.load("mmlu", qfile)


def _bbh_release(root, drop=()):
    """The 27 BBH task files with the release's example counts (6,511 examples; synthetic text)."""
    root.mkdir(exist_ok=True)
    for task, size in loaders.BBH_TASK_SIZES.items():
        if task in drop:
            continue
        examples = [{"input": f"{task} question {i}", "target": f"({'ABCD'[i % 4]})"} for i in range(size)]
        (root / f"{task}.json").write_text(json.dumps({"canary": "x", "examples": examples}))
    return root


def test_bbh_subsets_have_the_papers_sizes(tmp_path):
    assert sum(loaders.BBH_TASK_SIZES.values()) == 6511 and len(loaders.BBH_TASK_SIZES) == 27
    root = _bbh_release(tmp_path / "bbh")
    bbh3 = loaders.load("bbh", root, subset="bbh3")
    loaders.check_count(bbh3, loaders.PAPER_COUNTS["bbh3"], "bbh", root)
    assert len(bbh3) == 296
    per_task = {t: sum(r["subject"] == t for r in bbh3) for t in {r["subject"] for r in bbh3}}
    assert per_task == {"date_understanding": 100, "disambiguation_qa": 100, "penguins_in_a_table": 96}
    full = loaders.load("bbh", root, subset="bbh_full")
    assert len(full) == loaders.PAPER_COUNTS["bbh_full"] == 2561 and len({r["subject"] for r in full}) == 27
    # Seeded: the same seed draws the same problems (ids keep the index in the task file), another seed others.
    assert [r["id"] for r in loaders.load("bbh", root, subset="bbh3")] == [r["id"] for r in bbh3]
    assert [r["id"] for r in loaders.load("bbh", root, subset="bbh3", seed=1)] != [r["id"] for r in bbh3]
    assert all(r["prompt"] == f"{r['subject']} question {r['id'].rsplit('-', 1)[1]}" for r in bbh3)
    with pytest.raises(ValueError, match="gave 2561 questions; the paper's benchmark has 296"):
        loaders.check_count(full, 296, "bbh", root)


def test_bbh_subset_names_a_missing_task_or_an_unknown_subset(tmp_path):
    root = _bbh_release(tmp_path / "bbh", drop=("penguins_in_a_table",))
    with pytest.raises(ValueError, match="needs task 'penguins_in_a_table'"):
        loaders.load("bbh", root, subset="bbh3")
    with pytest.raises(ValueError, match="unknown BBH subset 'bbh4'"):
        loaders.load("bbh", root, subset="bbh4")


def _lcb_row(qid, platform, date, difficulty="hard"):
    tests = json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}])
    return {"question_id": qid, "question_content": f"Problem {qid}", "platform": platform, "contest_date": date,
            "difficulty": difficulty, "public_test_cases": tests, "private_test_cases": tests, "metadata": "{}"}


def test_lcb_hard_window_keeps_the_papers_171_problems(tmp_path):
    """A release-like file: 129 AtCoder and 42 LeetCode hard problems inside the window
    (September 2024 to April 2025), plus problems the window must drop."""
    rows = [_lcb_row(f"abc{i}", "atcoder", f"2024-{9 + i % 4:02d}-{1 + i % 28:02d}T12:00:00") for i in range(129)]
    rows += [_lcb_row(f"lc{i}", "leetcode", f"2025-{1 + i % 4:02d}-{1 + i % 28:02d}T00:00:00") for i in range(42)]
    rows += [_lcb_row("early", "atcoder", "2024-08-31T23:00:00"), _lcb_row("late", "leetcode", "2025-05-01T00:00:00"),
             _lcb_row("medium", "atcoder", "2024-10-10T00:00:00", difficulty="medium")]
    path = tmp_path / "test6.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    window = loaders.LCB_HARD_WINDOW
    kept = loaders.load("livecodebench", path, **window)
    loaders.check_count(kept, loaders.PAPER_COUNTS["lcb_hard"], "livecodebench", path)
    assert sum(q["subject"] == "atcoder" for q in kept) == 129 and sum(q["subject"] == "leetcode" for q in kept) == 42
    assert {"early", "late", "medium"}.isdisjoint(q["id"] for q in kept)
    assert min(q["contest_date"] for q in kept) >= "2024-09-01"
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    with pytest.raises(ValueError, match="gave 170 questions; the paper's benchmark has 171"):
        loaders.check_count(loaders.load("livecodebench", short, **window), 171, "livecodebench", short)


def test_scmoa_data_command_checks_the_expected_count(tmp_path):
    from concord.cli import main as cli_main

    root = _bbh_release(tmp_path / "bbh")
    out = tmp_path / "bbh3.jsonl"
    base = ["scmoa-data", "--format", "bbh", "--input", str(root), "--subset", "bbh3", "--out", str(out)]
    assert cli_main(base + ["--expected-count", "296"]) == 0
    assert len(out.read_text().splitlines()) == 296
    with pytest.raises(ValueError, match="gave 296 questions; the paper's benchmark has 300"):
        cli_main(base + ["--expected-count", "300"])
