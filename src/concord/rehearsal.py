"""The rehearsal of the papers' own configs on one CPU node (scripts/rehearse.sh).

Two jobs here, both pure Python (no torch, no Snakemake import):

* :func:`write_inputs` writes every benchmark file the paper configs read, each in its
  benchmark's own published format and at the size the configs check (MATH-500's 500 Hub rows,
  GPQA-Diamond's 198 CSV rows, LiveCodeBench v6's 175 rows of ``test6.jsonl``, BBH's 27 task
  files, ...), with questions made by concord's seeded generators, never copied from a benchmark.
  The loaders and their count checks then run exactly as on a cluster; ``config/rehearsal.yaml``
  only caps how many questions each job uses.
* :func:`plan_rules` and :func:`ran_rules` read the rule names of a dry run's job table and of
  the jobs a run finished (Snakemake's own logs); :func:`compare` says which planned rules never ran.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path

from concord.data import BBH_TASK_SIZES, synthetic_arithmetic
from concord.io import atomic_path, write_jsonl

#: MATH-500 subjects (the Hub rows' ``subject`` field).
MATH_SUBJECTS = ("Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra", "Number Theory",
                 "Prealgebra", "Precalculus")
#: Sizes the paper configs and loaders check or the benchmarks have (README of each dataset).
SIZES = {"math500": 500, "aime2024": 30, "amc": 83, "gpqa_diamond": 198, "mmlu_ml": 112, "aime_2022_2024": 90,
         "lcb_v6": 175, "lcb_hard": 171}
class RehearsalError(ValueError):
    """A dry run or a run log that cannot be read as one."""


# --------------------------------------------------------------------------- questions
def _questions(n: int, seed: int, forms: list[str] | None = None) -> list[dict]:
    return synthetic_arithmetic(n, seed=seed, forms=forms)


def _distractors(answer: str, rng: random.Random) -> list[str]:
    """Three wrong options near the right one (distinct strings)."""
    try:
        base = int(answer)
    except ValueError:
        base = len(answer)
    out: list[str] = []
    while len(out) < 3:
        candidate = str(base + rng.choice([-3, -2, -1, 1, 2, 3, 5, 7]))
        if candidate != answer and candidate not in out:
            out.append(candidate)
    return out


def _write_csv(path: Path, rows: list[list[str]] | list[dict], header: list[str] | None = None) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        if header is not None:
            writer = csv.DictWriter(fh, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        else:
            csv.writer(fh).writerows(rows)


def _write_json(path: Path, value) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1), encoding="utf-8")


# --------------------------------------------------------------------------- CoRE (Hub rows)
def math500_rows(seed: int = 0) -> list[dict]:
    """HuggingFaceH4/MATH-500's columns: problem, solution, answer, subject, level, unique_id."""
    rows = []
    for i, q in enumerate(_questions(SIZES["math500"], seed)):
        subject = MATH_SUBJECTS[i % len(MATH_SUBJECTS)]
        folder = subject.lower().replace(" & ", "_").replace(" ", "_")
        rows.append({"problem": q["prompt"], "solution": f"The answer is $\\boxed{{{q['answer']}}}$.",
                     "answer": q["answer"], "subject": subject, "level": q["level"],
                     "unique_id": f"test/{folder}/{i}.json"})
    return rows


def aime2024_rows(seed: int = 0) -> list[dict]:
    """HuggingFaceH4/aime_2024's columns: id, problem, solution, answer, url, year."""
    qs = _questions(SIZES["aime2024"], seed + 1, ["sum", "product_difference", "parentheses"])
    return [{"id": 60 + i, "problem": q["prompt"], "solution": "", "answer": q["answer"],
             "url": f"https://example.invalid/2024_AIME_{'I' if i < 15 else 'II'}_Problem_{i % 15 + 1}",
             "year": 2024} for i, q in enumerate(qs)]


def amc_rows(seed: int = 0) -> list[dict]:
    """AI-MO/aimo-validation-amc's columns: id, problem, answer (a float), url."""
    qs = _questions(SIZES["amc"], seed + 2, ["sum", "product_difference", "parentheses"])
    return [{"id": i, "problem": q["prompt"], "answer": float(q["answer"]),
             "url": f"https://example.invalid/2023_AMC_12A_Problem_{i % 25 + 1}"} for i, q in enumerate(qs)]


GPQA_HEADER = ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
               "Incorrect Answer 3", "High-level domain", "Subdomain"]


def gpqa_rows(seed: int = 0) -> list[dict]:
    """Idavidrein/gpqa (gpqa_diamond.csv) columns: the question, its correct answer and three
    incorrect ones, domain fields (the loaders shuffle the options, seeded)."""
    rng = random.Random(f"gpqa:{seed}")
    rows = []
    for i, q in enumerate(_questions(SIZES["gpqa_diamond"], seed + 3, ["sum", "product_difference"])):
        wrong = _distractors(q["answer"], rng)
        rows.append({"Record ID": f"rec{i:04d}", "Question": q["prompt"], "Correct Answer": q["answer"],
                     "Incorrect Answer 1": wrong[0], "Incorrect Answer 2": wrong[1], "Incorrect Answer 3": wrong[2],
                     "High-level domain": "Physics" if i % 2 else "Chemistry", "Subdomain": "Arithmetic"})
    return rows


# --------------------------------------------------------------------------- LiveCodeBench
_CODE_TASKS = (
    ("Sum of two", "Read two integers a and b on one line and print a + b.", lambda a, b: a + b),
    ("Difference", "Read two integers a and b on one line and print a - b.", lambda a, b: a - b),
    ("Product", "Read two integers a and b on one line and print a * b.", lambda a, b: a * b),
    ("Larger", "Read two integers a and b on one line and print the larger of them.", max),
)


def lcb_rows(n: int, seed: int, *, start: str, difficulty: str | None = None) -> list[dict]:
    """livecodebench/code_generation_lite rows: public tests as JSON text, private tests as
    base64(zlib(pickle(JSON text))), metadata as JSON text; stdin problems (AtCoder style) and
    functional ones (LeetCode style, ``metadata.func_name`` and a ``class Solution`` starter)."""
    import base64
    import pickle
    import zlib
    from datetime import date, timedelta

    rng = random.Random(f"lcb:{seed}")
    first = date.fromisoformat(start)
    rows = []
    for i in range(n):
        title, statement, fn = _CODE_TASKS[i % len(_CODE_TASKS)]
        pairs = [(rng.randint(-20, 20), rng.randint(-20, 20)) for _ in range(4)]
        functional = i % 3 == 2
        if functional:
            tests = [{"input": f"{a}\n{b}", "output": str(fn(a, b)), "testtype": "functional"} for a, b in pairs]
            statement = statement.replace("Read two integers a and b on one line and print", "Given integers a and b, return")
            starter = "class Solution:\n    def solve(self, a: int, b: int) -> int:\n        "
            meta = {"func_name": "solve"}
        else:
            tests = [{"input": f"{a} {b}\n", "output": f"{fn(a, b)}\n", "testtype": "stdin"} for a, b in pairs]
            starter, meta = "", {}
        private = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests[1:])))).decode("ascii")
        day = first + timedelta(days=i % 200)
        rows.append({
            "question_title": f"{title} {i}", "question_content": statement,
            "platform": "leetcode" if functional else "atcoder", "question_id": f"rehearsal{seed}_{i:04d}",
            "contest_id": f"rehearsal{i // 4}", "contest_date": f"{day.isoformat()}T00:00:00",
            "starter_code": starter, "difficulty": difficulty or ("easy", "medium", "hard")[i % 3],
            "public_test_cases": json.dumps(tests[:1]), "private_test_cases": private, "metadata": json.dumps(meta),
        })
    return rows


# --------------------------------------------------------------------------- SC-MoA files
def bbh_task(task: str, n: int, seed: int) -> dict:
    """One BIG-Bench-Hard task file: ``{"examples": [{"input", "target"}, ...]}``."""
    qs = _questions(n, seed, ["sum", "product_difference"])
    return {"canary": "rehearsal data generated by concord (not BIG-Bench-Hard)",
            "examples": [{"input": q["prompt"], "target": q["answer"]} for q in qs]}


def mmlu_rows(seed: int = 0) -> list[list[str]]:
    """MMLU's ``machine_learning_test.csv``: no header; question, A-D, answer letter."""
    rng = random.Random(f"mmlu:{seed}")
    rows = []
    for q in _questions(SIZES["mmlu_ml"], seed + 5, ["sum", "product_difference"]):
        options = [q["answer"], *_distractors(q["answer"], rng)]
        rng.shuffle(options)
        rows.append([q["prompt"], *options, "ABCD"[options.index(q["answer"])]])
    return rows


def aime_rows(seed: int = 0) -> list[dict]:
    """AIME 2022-2024 as JSONL (problem, answer, year, url): 30 problems a year."""
    qs = _questions(SIZES["aime_2022_2024"], seed + 6, ["sum", "product_difference"])
    return [{"id": f"{2022 + i // 30}-{i % 30}", "problem": q["prompt"], "answer": str(abs(int(q["answer"])) % 1000),
             "year": 2022 + i // 30, "url": f"https://example.invalid/{2022 + i // 30}_AIME"}
            for i, q in enumerate(qs)]


def write_inputs(root: str | Path, seed: int = 0) -> dict[str, str]:
    """Every benchmark file of the three paper configs under ``root``; the paths by config key."""
    root = Path(root)
    for sub in ("core", "livecodebench", "bbh", "mmlu", "gpqa", "aime"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "core" / "math500.jsonl", math500_rows(seed))
    write_jsonl(root / "core" / "aime2024.jsonl", aime2024_rows(seed))
    write_jsonl(root / "core" / "amc.jsonl", amc_rows(seed))
    gpqa = gpqa_rows(seed)
    _write_csv(root / "gpqa" / "gpqa_diamond.csv", gpqa, GPQA_HEADER)
    # FMV: the v6 shard (175 problems, the count read_lcb_version checks).
    write_jsonl(root / "livecodebench" / "test6.jsonl", lcb_rows(SIZES["lcb_v6"], seed, start="2025-01-01"))
    # SC-MoA's LCB-Hard: release_v6 rows, 171 hard ones in the paper's date window and easier
    # or older ones around them (the loader's filters do the selecting).
    hard = lcb_rows(SIZES["lcb_hard"], seed + 1, start="2024-09-01", difficulty="hard")
    for i, row in enumerate(hard):  # the window is 2024-09-01 .. 2025-04-30: keep every date inside
        row["contest_date"] = f"2024-{9 + i % 4:02d}-{1 + i % 28:02d}T00:00:00"
    others = lcb_rows(20, seed + 2, start="2023-01-01")
    write_jsonl(root / "livecodebench" / "code_generation_lite_release_v6.jsonl", hard + others)
    for j, (task, n) in enumerate(sorted(BBH_TASK_SIZES.items())):
        _write_json(root / "bbh" / f"{task}.json", bbh_task(task, n, seed + 100 + j))
    _write_csv(root / "mmlu" / "machine_learning_test.csv", mmlu_rows(seed))
    write_jsonl(root / "aime" / "aime_2022_2024.jsonl", aime_rows(seed))
    return {
        "core.math500": str(root / "core" / "math500.jsonl"), "core.aime2024": str(root / "core" / "aime2024.jsonl"),
        "core.amc": str(root / "core" / "amc.jsonl"), "gpqa": str(root / "gpqa" / "gpqa_diamond.csv"),
        "livecodebench": str(root / "livecodebench"), "bbh": str(root / "bbh"),
        "mmlu": str(root / "mmlu" / "machine_learning_test.csv"), "aime": str(root / "aime" / "aime_2022_2024.jsonl"),
    }


# --------------------------------------------------------------------------- rule sets
_STATS_HEADER = re.compile(r"^job\s+count\s*$")


def plan_rules(dry_run: str) -> set[str]:
    """Rule names of the ``Job stats`` table a Snakemake dry run prints."""
    lines = dry_run.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if _STATS_HEADER.match(line.strip()))
    except StopIteration:
        raise RehearsalError("no 'Job stats' table in the dry run (did it plan?)") from None
    rules = set()
    for line in lines[start + 2:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        if parts[0] != "total":
            rules.add(parts[0])
    if not rules:
        raise RehearsalError("the dry run's job table is empty")
    return rules


#: Snakemake 9 log lines: a job's block starts with ``rule NAME:`` (or ``localrule``) and its
#: ``jobid: N``; ``Finished jobid: N (Rule: NAME)`` closes it.
_FINISHED = re.compile(r"Finished jobid: \d+ \(Rule: ([\w]+)\)")


def ran_rules(logs: Iterable[str | Path]) -> set[str]:
    """Rules of which at least one job finished, from Snakemake's run logs (``.snakemake/log``)."""
    rules: set[str] = set()
    for log in logs:
        rules |= set(_FINISHED.findall(Path(log).read_text(encoding="utf-8", errors="replace")))
    return rules


def compare(planned: set[str], ran: set[str]) -> list[str]:
    """Planned rules that never ran (sorted); empty when the rehearsal covered the plan."""
    return sorted(planned - ran)
