"""Benchmarks normalised to one JSONL schema, and the prompts of the CoRE paper's Appendix I.

Every question becomes ``{id, prompt, answer, level, subject, source}`` where ``prompt`` is the
raw question text (the instruction is added by :func:`build_messages` at roll-out time, so the
same data serves every backbone). Sources: TTRL's JSON files, Hugging Face Hub datasets (real
runs), and a seeded synthetic arithmetic generator whose answers are checkable (the default).
"""

from __future__ import annotations

import json
import os
import random
import re
import string
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Sequence

FIELDS = ("id", "prompt", "answer", "level", "subject", "source")

# Appendix I: one user turn, the backbone's chat template, no system prompt. The instruction text
# is TTRL's (the paper names it "the boxing instruction"; TTRL's *_instr data variants use it).
BOXING_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
GPQA_INSTRUCTION = (
    "Let's think step by step and output the final answer (the letter of the correct option, "
    "A, B, C or D) within \\boxed{}."
)
# A wording for very small models on CPU budgets (the embedded default, SmolLM2-135M): told to
# "think step by step", a 135M model rambles past a 32-token budget and its last number is noise;
# asked for one short sentence it states a number (measured: 5-10% more roll-outs answered and
# about twice the per-roll-out accuracy on the default synthetic forms; see config/config.yaml).
SHORT_INSTRUCTION = (
    "Answer with one short sentence that ends with the number, and put the final answer within \\boxed{}."
)
NO_THINK = "/no_think"
PROMPT_STYLES = ("instruct", "instruct-short", "qwen-math", "qwen3")
TASKS = ("math", "multiple_choice")

# Hub datasets behind each real benchmark (id, config, split).
HUB_DATASETS = {
    "math500": ("HuggingFaceH4/MATH-500", None, "test"),
    "math_l4": ("HuggingFaceH4/MATH-500", None, "test"),
    "math_l5": ("HuggingFaceH4/MATH-500", None, "test"),
    "aime2024": ("HuggingFaceH4/aime_2024", None, "train"),
    "amc": ("AI-MO/aimo-validation-amc", None, "train"),
    "gpqa_diamond": ("Idavidrein/gpqa", "gpqa_diamond", "train"),
}


class DataError(ValueError):
    """A benchmark file or record does not have the expected shape."""


# --------------------------------------------------------------------------- prompts
def build_user_content(question: str, prompt_style: str = "instruct", task: str = "math") -> str:
    """The single user turn of Appendix I for a backbone's ``prompt_style`` and a ``task``."""
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt_style {prompt_style!r}; choose one of {PROMPT_STYLES}")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    instruction = GPQA_INSTRUCTION if task == "multiple_choice" else BOXING_INSTRUCTION
    if prompt_style == "instruct-short" and task == "math":
        instruction = SHORT_INSTRUCTION
    if prompt_style == "qwen-math" and task == "math":
        return question  # Qwen2.5-Math boxes natively: bare question
    if prompt_style == "qwen3":
        return f"{question}\n{NO_THINK}\n{instruction}"
    return f"{question}\n{instruction}"


def build_messages(question: str, prompt_style: str = "instruct", task: str = "math") -> list[dict[str, str]]:
    return [{"role": "user", "content": build_user_content(question, prompt_style, task)}]


# --------------------------------------------------------------------------- schema
def validate_record(rec: dict, where: str = "record") -> dict:
    missing = [f for f in FIELDS if f not in rec]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}")
    if not isinstance(rec["prompt"], str) or not rec["prompt"].strip():
        raise DataError(f"{where}: 'prompt' must be a non-empty string")
    if rec["answer"] is None or str(rec["answer"]).strip() == "":
        raise DataError(f"{where}: 'answer' is empty")
    return {f: rec[f] for f in FIELDS}


def write_questions(path: str | os.PathLike, records: Iterable[dict]) -> Path:
    from concord.io import write_jsonl

    records = [validate_record(r, f"question {i}") for i, r in enumerate(records)]
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise DataError(f"duplicate question ids in {path}")
    return write_jsonl(path, records)


def load_questions(path: str | os.PathLike) -> list[dict]:
    from concord.io import read_jsonl

    return [validate_record(r, f"{path}:{i + 1}") for i, r in enumerate(read_jsonl(path))]


# --------------------------------------------------------------------------- TTRL JSON
def load_ttrl_json(path: str | os.PathLike, source: str | None = None) -> list[dict]:
    """Read TTRL's ``test.json`` format: a JSON list of ``{prompt, answer, ...}`` objects."""
    path = Path(path)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"TTRL file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(items, list):
        raise DataError(f"{path}: expected a JSON list of questions, got {type(items).__name__}")
    source = source or path.parent.name
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "prompt" not in item or "answer" not in item:
            raise DataError(f"{path}: item {i} lacks 'prompt'/'answer'")
        qid = item.get("id", item.get("unique_id", f"{source}-{i:04d}"))
        out.append(
            validate_record(
                {
                    "id": str(qid),
                    "prompt": item["prompt"],
                    "answer": str(item["answer"]),
                    "level": _level(item.get("level")),
                    "subject": item.get("subject", item.get("type")) or _subject_from_id(str(qid)),
                    "source": item.get("source", source) or source,
                },
                f"{path}: item {i}",
            )
        )
    return out


def _subject_from_id(qid: str) -> str:
    """MATH ids look like ``test/precalculus/807.json``: the folder is the subject."""
    parts = qid.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "test" else ""


def _level(value) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    match = re.search(r"\d+", str(value))
    return int(match.group()) if match else None


# --------------------------------------------------------------------------- Hub datasets
def load_hub(dataset: str, *, seed: int = 0, levels: list[int] | None = None,
             path: str | os.PathLike | None = None) -> list[dict]:
    """Load a real benchmark from the Hugging Face Hub (cluster runs; needs network access), or
    with ``path`` from a local file of the same dataset's rows (its Hub columns, as JSONL, CSV or
    Parquet): a copy downloaded beforehand for compute nodes without network."""
    if dataset not in HUB_DATASETS:
        raise DataError(f"unknown hub dataset {dataset!r}; known: {sorted(HUB_DATASETS)}")
    repo, name, split = HUB_DATASETS[dataset]
    if path is not None:
        rows = read_rows(path)
    else:
        from datasets import load_dataset

        try:
            rows = list(load_dataset(repo, name, split=split))
        except Exception as exc:  # offline machines raise connection errors of several types
            raise DataError(f"could not load {repo} from the Hugging Face Hub: {exc}") from exc
    if dataset == "math_l4":
        levels = levels or [4]
    elif dataset == "math_l5":
        levels = levels or [5]
    return normalise_hub_rows(dataset, rows, seed=seed, levels=levels)


def read_rows(path: str | os.PathLike) -> list[dict]:
    """The rows of a local copy of a Hub dataset: JSONL, CSV (header, every value a string, as the
    Hub's CSV files are read) or Parquet."""
    import pandas as pd

    from concord.io import read_jsonl

    path = Path(path)
    if not path.is_file():
        raise DataError(f"benchmark file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return read_jsonl(path)
    if suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        raise DataError(f"{path}: a Hub dataset copy is .jsonl, .csv or .parquet")
    return frame.to_dict(orient="records")


def normalise_hub_rows(dataset: str, rows: list[dict], *, seed: int = 0, levels: list[int] | None = None) -> list[dict]:
    """Map one Hub dataset's rows to the common schema (pure: testable on fixtures)."""
    out = []
    if dataset in ("math500", "math_l4", "math_l5"):
        for r in rows:
            level = _level(r.get("level"))
            if levels and level not in levels:
                continue
            out.append({"id": r["unique_id"], "prompt": r["problem"], "answer": r["answer"], "level": level,
                        "subject": r.get("subject", ""), "source": "MATH-500"})
    elif dataset == "aime2024":
        for i, r in enumerate(rows):
            out.append({"id": str(r.get("id", f"aime2024-{i}")), "prompt": r["problem"], "answer": str(r["answer"]),
                        "level": None, "subject": "", "source": "AIME 2024"})
    elif dataset == "amc":
        for i, r in enumerate(rows):
            answer = r["answer"]
            if isinstance(answer, float) and answer.is_integer():
                answer = int(answer)
            out.append({"id": str(r.get("id", f"amc-{i}")), "prompt": r["problem"], "answer": str(answer),
                        "level": None, "subject": "", "source": "AMC"})
    elif dataset == "gpqa_diamond":
        rng = random.Random(seed)
        for i, r in enumerate(rows):
            out.append(gpqa_record(r, rng, i))
    else:
        raise DataError(f"no normaliser for {dataset!r}")
    return [validate_record(r, f"{dataset} row {i}") for i, r in enumerate(out)]


def gpqa_record(row: dict, rng: random.Random, index: int) -> dict:
    """GPQA with its four choices shuffled (seeded), the gold answer becoming a letter."""
    correct = row["Correct Answer"].strip()
    choices = [correct] + [row[f"Incorrect Answer {k}"].strip() for k in (1, 2, 3)]
    rng.shuffle(choices)
    letters = "ABCD"
    body = "\n".join(f"({letters[i]}) {c}" for i, c in enumerate(choices))
    return {
        "id": str(row.get("Record ID", f"gpqa-{index}")),
        "prompt": f"{row['Question'].strip()}\n\n{body}",
        "answer": letters[choices.index(correct)],
        "level": None,
        "subject": row.get("High-level domain", ""),
        "source": "GPQA-Diamond",
    }


# --------------------------------------------------------------------------- synthetic
def synthetic_arithmetic(n_questions: int, seed: int = 0, forms: Sequence[str] | None = None) -> list[dict]:
    """Seeded arithmetic questions with exact answers, cycling through ``forms`` in order.

    The default ``forms`` are the five-level ladder (:data:`LADDER`): level 1 ``sum`` (a + b, two
    digits), 2 ``product_difference`` (a * b - c), 3 ``parentheses`` (multi-step), 4
    ``fraction_sum`` (reduced to lowest terms), 5 ``linear_equation`` (solve for x). The one-digit
    forms (``sum_1digit``, ``product_1digit``, ``story_sum_1digit``, level 1) sit where a 135M
    model is right some of the time, which the embedded default needs. ``level`` and ``subject``
    (the form's name) of every record say which form produced it.
    """
    if n_questions < 1:
        raise ValueError("n_questions must be >= 1")
    forms = list(forms) if forms else list(LADDER)
    unknown = [f for f in forms if f not in SYNTHETIC_FORMS]
    if unknown:
        raise DataError(f"unknown synthetic form(s) {unknown}; choose from {sorted(SYNTHETIC_FORMS)}")
    rng = random.Random(seed)
    out = []
    for i in range(n_questions):
        form = forms[i % len(forms)]
        level, make = SYNTHETIC_FORMS[form]
        text, answer = make(rng)
        out.append({"id": f"synthetic-{seed}-{i:04d}", "prompt": text, "answer": _fmt(answer), "level": level,
                    "subject": form, "source": "synthetic"})
    return out


def _fmt(value: Fraction | int) -> str:
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _l1(rng):
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    return f"What is {a} + {b}?", a + b


def _l2(rng):
    a, b, c = rng.randint(2, 19), rng.randint(2, 19), rng.randint(1, 50)
    return f"Compute {a} \\times {b} - {c}.", a * b - c


def _l3(rng):
    a, b, c, d = (rng.randint(2, 15) for _ in range(4))
    return f"Evaluate ({a} + {b}) \\times {c} - {d} \\times {a}.", (a + b) * c - d * a


def _l4(rng):
    a, b, c, d = rng.randint(1, 9), rng.randint(2, 12), rng.randint(1, 9), rng.randint(2, 12)
    return (f"Compute \\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{d}}} and give the result as a fraction in lowest terms.",
            Fraction(a, b) + Fraction(c, d))


def _l5(rng):
    a, x, b = rng.randint(2, 12), rng.randint(-20, 20), rng.randint(-30, 30)
    c = a * x + b
    name = rng.choice(string.ascii_lowercase[:3] + "xyz")
    return f"Solve for ${name}$: ${a}{name} + ({b}) = {c}$.", x


def _sum_1digit(rng):
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return f"What is {a} + {b}?", a + b


def _product_1digit(rng):
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return f"What is {a} \\times {b}?", a * b


_NAMES = ("Tom", "Anna", "Sam", "Lena", "Omar", "Mia")
_THINGS = ("apples", "pens", "books", "coins", "stamps", "shells")


def _story_sum_1digit(rng):
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    name, things = rng.choice(_NAMES), rng.choice(_THINGS)
    return f"{name} has {a} {things} and gets {b} more. How many {things} does {name} have now?", a + b


# name -> (level, generator). Levels 1-5 are the ladder; the one-digit forms are level 1.
SYNTHETIC_FORMS = {
    "sum": (1, _l1),
    "product_difference": (2, _l2),
    "parentheses": (3, _l3),
    "fraction_sum": (4, _l4),
    "linear_equation": (5, _l5),
    "sum_1digit": (1, _sum_1digit),
    "product_1digit": (1, _product_1digit),
    "story_sum_1digit": (1, _story_sum_1digit),
}
LADDER = ("sum", "product_difference", "parentheses", "fraction_sum", "linear_equation")


def prepare_benchmark(spec: dict) -> list[dict]:
    """Load the benchmark described by a config ``benchmarks.<key>`` entry."""
    source = spec["source"]
    if source == "synthetic":
        records = synthetic_arithmetic(int(spec.get("n_questions", 20)), seed=int(spec.get("seed", 0)),
                                       forms=spec.get("forms"))
    elif source == "ttrl_json":
        if "path" not in spec:
            raise DataError("a ttrl_json benchmark needs 'path' (a TTRL test.json file)")
        records = load_ttrl_json(spec["path"])
        if spec.get("levels"):
            if any(r["level"] is None for r in records):
                raise DataError(f"{spec['path']}: records have no 'level' field, so 'levels' cannot filter them "
                                "(TTRL ships MATH-L4/MATH-L5 as separate files)")
            records = [r for r in records if r["level"] in spec["levels"]]
    elif source == "hub":
        if "dataset" not in spec:
            raise DataError(f"a hub benchmark needs 'dataset', one of {sorted(HUB_DATASETS)}")
        records = load_hub(spec["dataset"], seed=int(spec.get("seed", 0)), levels=spec.get("levels"),
                           path=spec.get("path"))
    else:
        raise DataError(f"unknown benchmark source {source!r}")
    if spec.get("n_questions") and source != "synthetic":
        records = records[: int(spec["n_questions"])]
    if not records:
        raise DataError(f"benchmark {spec} produced no questions")
    return records


#: Examples per task in the BIG-Bench Hard release (27 tasks, 6,511 examples): SC-MoA's loaders
#: check its files against it and the rehearsal writes files of these sizes.
BBH_TASK_SIZES = {
    **{t: 250 for t in (
        "boolean_expressions", "date_understanding", "disambiguation_qa", "dyck_languages", "formal_fallacies",
        "geometric_shapes", "hyperbaton", "logical_deduction_five_objects", "logical_deduction_seven_objects",
        "logical_deduction_three_objects", "movie_recommendation", "multistep_arithmetic_two", "navigate",
        "object_counting", "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection",
        "sports_understanding", "temporal_sequences", "tracking_shuffled_objects_five_objects",
        "tracking_shuffled_objects_seven_objects", "tracking_shuffled_objects_three_objects", "web_of_lies",
        "word_sorting")},
    "causal_judgement": 187, "penguins_in_a_table": 146, "snarks": 178,
}
