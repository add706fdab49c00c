"""Loaders for the SC-MoA benchmarks' published file formats, into one question format.

Every loader returns dicts with ``id, prompt, answer, level, subject, source`` (the project's
``data/{benchmark}.jsonl`` contract) plus ``task`` (``qa`` or ``code``) and, for code,
``tests_public`` / ``tests_hidden`` (see :mod:`concord.papers.scmoa.code_runner` for the test forms).

Formats:

* BBH: one JSON file per task, ``{"examples": [{"input", "target"}]}`` (the BIG-Bench Hard repo),
  optionally a named subset (:data:`BBH_SUBSETS`: the paper's BBH-3 of 296 problems and its full
  BBH of 2,561), drawn per task with a seed.
* MMLU machine learning: the original headerless CSV (question, A, B, C, D, answer letter) or a
  JSONL/Parquet export with ``question``, ``choices`` (list) and ``answer`` (index or letter).
* GPQA-Diamond: ``gpqa_diamond.csv`` with ``Question``, ``Correct Answer``, ``Incorrect Answer 1-3``;
  the four options are shuffled with a seed (the file always lists the correct answer first).
* AIME 2022-2024: JSONL/CSV/Parquet with a problem and an integer answer; the year comes from a
  ``year`` column or is parsed from ``url``/``id`` (e.g. ``2023_AIME_I_Problems/Problem_4``).
* LiveCodeBench: JSONL release files (``question_content``, ``public_test_cases`` as JSON,
  ``private_test_cases`` as JSON or base64 -> zlib -> pickle -> JSON, ``metadata`` with
  ``func_name``, ``difficulty``); ``difficulty="hard"`` keeps LCB-Hard; :data:`LCB_HARD_WINDOW`
  is the paper's contest-date window (171 problems: 129 AtCoder, 42 LeetCode).

:data:`PAPER_COUNTS` are the benchmark sizes the paper prints; ``scmoa-data --expected-count``
(:func:`check_count`) refuses a file that does not give them.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import pickle
import random
import re
import zlib
from pathlib import Path
from typing import Any, Iterable

from concord.data import BBH_TASK_SIZES
from concord.io import read_jsonl

LETTERS = "ABCDEFGHIJ"

#: Benchmark sizes the SC-MoA paper prints (Section 5, Appendices A, B, D).
PAPER_COUNTS = {"bbh3": 296, "bbh_full": 2561, "mmlu_ml": 112, "gpqa_diamond": 198, "aime": 90, "lcb_hard": 171}

#: The paper's BBH subsets as per-task quotas. The paper prints only their sizes (BBH-3: 296
#: problems of date_understanding, disambiguation_qa and penguins_in_a_table; full BBH: 2,561 of
#: all 27 tasks) and its per-task numbers (Appendix B/S: penguins_in_a_table +13 problems =
#: +13.5 pp, so ~96 problems; date_understanding +9 = +9 pp, so 100). BBH-3 takes 100, 100, 96; the
#: full set splits 2,561 evenly over the 27 tasks (95 each for the first 23 in name order, 94 for
#: the last 4). Each quota is a seeded sample of that task's examples, kept in file order.
BBH_SUBSETS = {
    "bbh3": {"date_understanding": 100, "disambiguation_qa": 100, "penguins_in_a_table": 96},
    "bbh_full": {t: (95 if i < 23 else 94) for i, t in enumerate(sorted(BBH_TASK_SIZES))},
}

#: LCB-Hard (Appendices A, D, S): hard problems with contest_date from September 2024 (after the
#: model's cutoff) in release_v6, whose last problems are from April 2025.
LCB_HARD_WINDOW = {"difficulty": "hard", "start_date": "2024-09-01", "end_date": "2025-04-30"}


def check_count(rows: list, expected: int, fmt: str, source: Any = None) -> None:
    """Refuse a benchmark whose size differs from the paper's (a wrong file or release)."""
    if len(rows) != expected:
        raise ValueError(
            f"{fmt} from {source or 'the packaged set'} gave {len(rows)} questions; the paper's benchmark has "
            f"{expected}. Check the file (release, subset, date window) or drop expected_count from the config."
        )


def bbh_sample(examples_by_task: dict[str, list], quotas: dict[str, int], seed: int = 0) -> dict[str, list[int]]:
    """Indices kept per task: a seeded sample of ``quotas[task]`` examples, in file order."""
    out = {}
    for task, quota in quotas.items():
        if task not in examples_by_task:
            raise ValueError(f"BBH subset needs task {task!r}, which is not among the task files given")
        size = len(examples_by_task[task])
        if quota > size:
            raise ValueError(f"BBH subset wants {quota} {task} examples; the file has {size}")
        out[task] = sorted(random.Random(f"{seed}:{task}").sample(range(size), quota))
    return out
FORMATS = ("bbh", "mmlu_ml", "gpqa_diamond", "aime", "livecodebench", "humaneval", "questions")


def _rows(path: Path) -> list[dict]:
    """Rows of a JSONL (optionally gzipped), JSON list, CSV (with header) or Parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    if suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        data = json.loads(text)
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records")
        return data
    return read_jsonl(path)


def _require(row: dict, keys: Iterable[str], where: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}; has {sorted(row)[:12]}")


def format_choices(question: str, options: list[str]) -> str:
    lines = [question.strip(), ""] + [f"({LETTERS[i]}) {str(o).strip()}" for i, o in enumerate(options)]
    return "\n".join(lines) + "\n\nAnswer with the letter of the correct option."


def _record(id_: str, prompt: str, answer: str, *, subject: str, source: str, task: str = "qa",
            level: Any = None, **extra: Any) -> dict:
    return {"id": id_, "prompt": prompt, "answer": answer, "level": level, "subject": subject,
            "source": source, "task": task, **extra}


# ---------------------------------------------------------------------------- QA benchmarks


def load_bbh(path: str | Path, subset: str | None = None, seed: int = 0) -> list[dict]:
    """A BBH task file, or a directory of them (tasks in name order); ``subset`` names one of
    :data:`BBH_SUBSETS` (ids keep each example's index in its task file)."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no BBH task files (*.json) in {path}")
    if subset is not None and subset not in BBH_SUBSETS:
        raise ValueError(f"unknown BBH subset {subset!r}; known: {sorted(BBH_SUBSETS)}")
    examples = {}
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
            raise ValueError(f"{f}: a BBH task file is an object with an 'examples' list")
        for i, ex in enumerate(data["examples"]):
            _require(ex, ("input", "target"), f"{f} example {i}")
        examples[f.stem] = data["examples"]
    keep = bbh_sample(examples, BBH_SUBSETS[subset], seed) if subset else {t: range(len(e)) for t, e in examples.items()}
    out = []
    for task in sorted(keep):
        for i in keep[task]:
            ex = examples[task][i]
            out.append(_record(f"{task}-{i}", ex["input"], str(ex["target"]).strip(), subject=task, source="bbh"))
    return out


def load_mmlu_ml(path: str | Path) -> list[dict]:
    path = Path(path)
    out = []
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        for i, row in enumerate(rows):
            if len(row) != 6:
                raise ValueError(f"{path} row {i + 1}: expected 6 columns (question, A-D, answer), got {len(row)}")
            question, *options, answer = row
            if answer.strip().upper() not in LETTERS[:4]:
                raise ValueError(f"{path} row {i + 1}: answer {answer!r} is not one of A-D")
            out.append(_record(f"mmlu_ml-{i}", format_choices(question, options), answer.strip().upper(),
                               subject="machine_learning", source="mmlu"))
        return out
    for i, row in enumerate(_rows(path)):
        _require(row, ("question", "choices", "answer"), f"{path} record {i}")
        options = list(row["choices"])
        answer = row["answer"]
        letter = LETTERS[int(answer)] if str(answer).strip().isdigit() else str(answer).strip().upper()
        if letter not in LETTERS[: len(options)]:
            raise ValueError(f"{path} record {i}: answer {answer!r} does not index {len(options)} choices")
        out.append(_record(f"mmlu_ml-{i}", format_choices(row["question"], options), letter,
                           subject=str(row.get("subject", "machine_learning")), source="mmlu"))
    return out


def load_gpqa_diamond(path: str | Path, seed: int = 0) -> list[dict]:
    path = Path(path)
    out = []
    for i, row in enumerate(_rows(path)):
        keys = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
        _require(row, keys, f"{path} row {i + 1}")
        options = [row[k].strip() for k in keys[1:]]
        rid = str(row.get("Record ID") or f"gpqa-{i}")
        order = list(range(4))
        random.Random(f"{seed}:{rid}").shuffle(order)  # per-question, reproducible
        shuffled = [options[j] for j in order]
        out.append(_record(rid, format_choices(row["Question"], shuffled), LETTERS[order.index(0)],
                           subject=str(row.get("Subdomain") or row.get("High-level domain") or "science"),
                           source="gpqa_diamond"))
    return out


_YEAR = re.compile(r"(20\d\d)")


def load_aime(path: str | Path, years: Iterable[int] = (2022, 2023, 2024)) -> list[dict]:
    path = Path(path)
    years = {int(y) for y in years}
    out = []
    for i, row in enumerate(_rows(path)):
        problem = next((row[k] for k in ("problem", "Problem", "question", "prompt") if k in row), None)
        answer = next((row[k] for k in ("answer", "Answer") if k in row), None)
        if problem is None or answer is None:
            raise ValueError(f"{path} record {i}: needs a problem (problem/question/prompt) and an answer")
        year = row.get("year", row.get("Year"))
        if year is None:
            found = _YEAR.search(f"{row.get('url', '')} {row.get('id', '')} {row.get('ID', '')}")
            if found is None:
                raise ValueError(f"{path} record {i}: no year column and none in url/id")
            year = found.group(1)
        if int(year) not in years:
            continue
        value = str(answer).strip()
        if not re.fullmatch(r"\d{1,3}", value.lstrip("0") or "0"):
            raise ValueError(f"{path} record {i}: AIME answers are integers 0-999, got {answer!r}")
        rid = str(row.get("id", row.get("ID", f"aime-{i}")))
        out.append(_record(rid, str(problem), str(int(value)), subject=f"AIME {year}", source="aime", level=int(year)))
    return out


# ---------------------------------------------------------------------------- code benchmarks


class _NoGlobals(pickle.Unpickler):
    """LiveCodeBench pickles a JSON string: refuse anything that would import code."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a test-case blob")


def decode_lcb_tests(blob: Any) -> list[dict]:
    """LiveCodeBench test cases from JSON text, or from base64 -> zlib -> pickle -> JSON text."""
    if isinstance(blob, list):
        return blob
    if not isinstance(blob, str):
        raise ValueError(f"test cases must be a JSON string or list, got {type(blob).__name__}")
    try:
        return json.loads(blob)
    except json.JSONDecodeError:
        pass
    try:
        raw = _NoGlobals(io.BytesIO(zlib.decompress(base64.b64decode(blob)))).load()
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
        raise ValueError(f"test cases are neither JSON nor base64/zlib/pickle ({exc})") from exc
    return json.loads(raw) if isinstance(raw, (str, bytes)) else raw


def lcb_tests(cases: list[dict], fn_name: str | None) -> list[dict]:
    out = []
    for c in cases:
        kind = c.get("testtype", "stdin")
        if kind == "functional":
            if not fn_name:
                raise ValueError("functional LiveCodeBench tests need metadata.func_name")
            out.append({"type": "functional", "input": c["input"], "output": c["output"], "fn_name": fn_name})
        elif kind == "stdin":
            out.append({"type": "stdin", "input": c["input"], "output": c["output"]})
        else:
            raise ValueError(f"unknown LiveCodeBench testtype {kind!r}")
    return out


def load_livecodebench(path: str | Path, difficulty: str | None = "hard", start_date: str | None = None,
                       end_date: str | None = None) -> list[dict]:
    """LiveCodeBench problems of one difficulty, optionally within ``[start_date, end_date]``
    (ISO dates compared with ``contest_date``; the paper keeps post-training-cutoff problems)."""
    path = Path(path)
    out = []
    for i, row in enumerate(_rows(path)):
        _require(row, ("question_id", "question_content", "public_test_cases"), f"{path} record {i}")
        if difficulty and str(row.get("difficulty", "")).lower() != difficulty:
            continue
        date = str(row.get("contest_date", ""))[:10]
        if (start_date or end_date) and not date:
            raise ValueError(f"{path} record {i}: a date window needs contest_date")
        if (start_date and date < start_date) or (end_date and date > end_date):
            continue
        meta = row.get("metadata") or {}
        meta = json.loads(meta) if isinstance(meta, str) else meta
        fn_name = meta.get("func_name")
        public = lcb_tests(decode_lcb_tests(row["public_test_cases"]), fn_name)
        hidden = lcb_tests(decode_lcb_tests(row.get("private_test_cases") or "[]"), fn_name)
        prompt = str(row["question_content"]).strip()
        starter = str(row.get("starter_code") or "").strip()
        if starter:
            prompt += f"\n\nUse this starter code:\n```python\n{starter}\n```"
        elif not fn_name:
            prompt += "\n\nRead the input from standard input and write the answer to standard output."
        out.append(_record(str(row["question_id"]), prompt, None, subject=str(row.get("platform", "")),
                           source="livecodebench", task="code", level=row.get("difficulty"),
                           tests_public=public, tests_hidden=hidden, contest_date=date or None))
    return out


def load_humaneval(path: str | Path, n_public: int = 1) -> list[dict]:
    """HumanEval problems (JSONL or JSONL.gz, the official release format) as code questions."""
    return [humaneval_question(p, n_public) for p in _rows(Path(path))]


def load_questions(path: str | Path) -> list[dict]:
    """A project questions file (``data/{benchmark}.jsonl``); ``task`` defaults to QA."""
    out = []
    for i, row in enumerate(_rows(Path(path))):
        _require(row, ("id", "prompt", "answer"), f"{path} record {i}")
        row = dict(row)
        row.setdefault("task", "qa")
        if row["task"] == "code" and not row.get("tests_public"):
            raise ValueError(f"{path} record {i}: a code question needs tests_public")
        out.append(row)
    return out


def load(fmt: str, path: str | Path, **options: Any) -> list[dict]:
    loaders = {"bbh": load_bbh, "mmlu_ml": load_mmlu_ml, "gpqa_diamond": load_gpqa_diamond, "aime": load_aime,
               "livecodebench": load_livecodebench, "humaneval": load_humaneval, "questions": load_questions}
    if fmt not in loaders:
        raise ValueError(f"unknown benchmark format {fmt!r}; expected one of {FORMATS}")
    rows = loaders[fmt](path, **options)
    if not rows:
        raise ValueError(f"{path}: no questions loaded as {fmt}")
    return rows


# ---------------------------------------------------------------------------- HumanEval


def split_humaneval_tests(test: str, entry_point: str) -> list[dict]:
    """The HumanEval ``check(candidate)`` split into one assert test per asserting statement.

    Statements of ``check`` that assert nothing (imports, helper assignments) and module-level
    statements of the test file other than ``check`` and ``METADATA`` are set-up: each test
    carries the set-up that precedes it, so every test runs on its own.
    """
    import ast
    import textwrap

    tree = ast.parse(test)
    module_setup = []
    check = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        elif not (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "METADATA" for t in node.targets)):
            module_setup.append(ast.get_source_segment(test, node))
    if check is None:
        raise ValueError("HumanEval test has no check(candidate) function")
    arg = check.args.args[0].arg if check.args.args else "candidate"
    setup, tests = list(module_setup), []
    for stmt in check.body:
        src = textwrap.dedent(ast.get_source_segment(test, stmt, padded=True) or "")
        if any(isinstance(n, ast.Assert) for n in ast.walk(stmt)):
            body = "\n".join(setup + [src])
            if arg != "candidate":
                body = f"{arg} = candidate\n{body}"
            tests.append({"type": "assert", "code": body, "entry_point": entry_point})
        else:
            setup.append(src)
    if not tests:
        raise ValueError("HumanEval check() contains no assert")
    return tests


def humaneval_question(problem: dict, n_public: int = 1) -> dict:
    """A HumanEval problem (``task_id, prompt, entry_point, test``) as an SC-MoA code question:
    the first ``n_public`` asserts are public (clustering, override), the rest hidden."""
    _require(problem, ("task_id", "prompt", "entry_point", "test"), f"HumanEval {problem.get('task_id', '?')}")
    if n_public < 1:
        raise ValueError(f"n_public must be >= 1, got {n_public}")
    tests = split_humaneval_tests(problem["test"], problem["entry_point"])
    prompt = ("Complete the following Python function. Return the whole function.\n"
              f"```python\n{problem['prompt'].rstrip()}\n```")
    return _record(str(problem["task_id"]), prompt, None, subject="humaneval", source="humaneval", task="code",
                   tests_public=tests[:n_public], tests_hidden=tests[n_public:], entry_point=problem["entry_point"])
