"""Experiment drivers: generate candidates, execute them, and analyse the selection methods.

Artifacts (paths relative to ``results/fmv/``)::

    data/{benchmark}.jsonl                         question records (concord.papers.fmv.data)
    data/{benchmark}.{train,holdout}.jsonl         the seeded random halves (Table 1)
    candidates/{model}/{benchmark}/seed{s}.parquet question_id, rollout_idx, text, n_tokens,
                                                   finish_reason, confidence
    exec/{model}/{benchmark}/seed{s}.parquet       question_id, rollout_idx, program, statuses,
                                                   outputs, passed
    gencluster/{model}/{benchmark}/seed{s}.json    the judge tournament's pick per question
    analysis/{model}/{benchmark}/seed{s}.json      accuracies per method at N and versus N

Generation is its own step, so the analysis runs on any table of candidates (e.g. produced on a
GPU cluster) and execution results are computed once and reused by every method.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from concord.papers.fmv.baselines import best_at_n, mean_at_n, picked_accuracy, semantic_select
from concord.papers.fmv.grading import ExecSettings, execute, grade, programs_for
from concord.consensus.fmv import encode_outputs, fmv_select_codes
from concord.registry import Registry

log = logging.getLogger(__name__)

METHODS = ("mean", "best", "fmv", "semantic", "gencluster")
SCALING_METHODS = ("mean", "best", "fmv", "semantic")
METHOD_LABELS = {"mean": "mean@N (base)", "best": "best@N", "fmv": "FMV", "semantic": "Semantic voting",
                 "gencluster": "GenCluster"}


# ------------------------------------------------------------------ data splits


def split_questions(records: Sequence[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """A seeded random half (train) and the rest (hold-out), each in the original order."""
    if len(records) < 2:
        raise ValueError(f"cannot split {len(records)} question(s) into two halves")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    train_idx = set(order[: len(records) // 2])
    train = [r for i, r in enumerate(records) if i in train_idx]
    holdout = [r for i, r in enumerate(records) if i not in train_idx]
    return train, holdout


# ------------------------------------------------------------------ generation


def generate_candidates(records: Sequence[dict], engine, params, *, max_prompt_tokens: int | None = None) -> pd.DataFrame:
    """``params.n`` completions per question from ``engine`` (see concord.engines).

    ``max_prompt_tokens``: the prompt budget the engine's context was sized with (context =
    prompt budget + ``params.max_new_tokens``); a longer chat-rendered prompt is an error, since
    the engine would otherwise cut the completion short or refuse the request.
    """
    from concord.papers.fmv.prompts import generation_messages

    conversations = [generation_messages(r) for r in records]
    if max_prompt_tokens:
        check_prompt_budget(records, conversations, engine, int(max_prompt_tokens))
    generations = engine.generate(conversations, params)
    rows = []
    for record, gens in zip(records, generations, strict=True):
        for idx, g in enumerate(gens):
            rows.append({"question_id": record["id"], "rollout_idx": idx, "text": g.text, "n_tokens": int(g.n_tokens),
                         "finish_reason": g.finish_reason, "confidence": float(g.mean_logprob)})
    return pd.DataFrame(rows, columns=["question_id", "rollout_idx", "text", "n_tokens", "finish_reason", "confidence"])


def check_prompt_budget(records: Sequence[dict], conversations, engine, max_prompt_tokens: int) -> None:
    """Raise when a rendered prompt is longer than ``max_prompt_tokens`` tokens."""
    tokenizer = engine.tokenizer
    lengths = [len(tokenizer(engine.render(c), add_special_tokens=False)["input_ids"]) for c in conversations]
    over = [(r["id"], n) for r, n in zip(records, lengths) if n > max_prompt_tokens]
    if over:
        shown = ", ".join(f"{qid} ({n})" for qid, n in over[:5])
        raise ValueError(f"{len(over)} prompt(s) exceed fmv.sampling.max_prompt_tokens = {max_prompt_tokens} tokens: "
                         f"{shown}; raise it (the engine context grows with it)")


def grouped_texts(records: Sequence[dict], candidates: pd.DataFrame) -> list[list[str]]:
    """Completions per question, in rollout order; every question must have the same N."""
    required = {"question_id", "rollout_idx", "text"}
    if not required <= set(candidates.columns):
        raise ValueError(f"candidates table lacks columns {sorted(required - set(candidates.columns))}")
    by_q = {qid: g.sort_values("rollout_idx")["text"].tolist() for qid, g in candidates.groupby("question_id", sort=False)}
    missing = [r["id"] for r in records if r["id"] not in by_q]
    if missing:
        raise ValueError(f"no candidates for questions {missing[:5]}{'...' if len(missing) > 5 else ''}")
    texts = [by_q[r["id"]] for r in records]
    sizes = {len(t) for t in texts}
    if len(sizes) != 1:
        raise ValueError(f"questions have different numbers of candidates: {sorted(sizes)}")
    return texts


def grouped_lengths(records: Sequence[dict], candidates: pd.DataFrame) -> list[list[int]]:
    """Completion lengths in tokens per question, in rollout order (GenCluster's representatives)."""
    if "n_tokens" not in candidates.columns:
        raise ValueError("candidates table lacks column n_tokens")
    by_q = {qid: g.sort_values("rollout_idx")["n_tokens"].astype(int).tolist()
            for qid, g in candidates.groupby("question_id", sort=False)}
    missing = [r["id"] for r in records if r["id"] not in by_q]
    if missing:
        raise ValueError(f"no candidates for questions {missing[:5]}")
    return [by_q[r["id"]] for r in records]


# ------------------------------------------------------------------ execution


def execute_candidates(records: Sequence[dict], candidates: pd.DataFrame, settings: ExecSettings, *,
                       thinking: bool = False) -> pd.DataFrame:
    """Run every candidate on its question's oracle inputs and grade it on the hidden tests;
    ``thinking``: the candidates come from a reasoning model (code only after ``</think>``)."""
    rows = []
    for record, texts in zip(records, grouped_texts(records, candidates)):
        programs = programs_for(record, texts, thinking=thinking)
        outcomes = execute(record, programs, settings)
        passed = grade(record, programs, outcomes, settings)
        for idx, (program, row, ok) in enumerate(zip(programs, outcomes, passed)):
            rows.append({"question_id": record["id"], "rollout_idx": idx, "program": program,
                         "statuses": [o.status for o in row], "outputs": [o.output for o in row], "passed": bool(ok)})
        log.info("%s: %d/%d candidates pass, %d valid", record["id"], sum(passed), len(passed),
                 sum(all(o.ok for o in row) for row in outcomes))
    return pd.DataFrame(rows, columns=["question_id", "rollout_idx", "program", "statuses", "outputs", "passed"])


@dataclass
class QuestionExec:
    """One question's execution results, in rollout order."""

    question_id: str
    passed: np.ndarray  # (N,) bool
    vectors: list[list[str | None]]  # (N, K) outputs, None = error/timeout
    programs: list[str | None]

    def __post_init__(self) -> None:
        # Integer codes of the outputs: the scaling analysis selects on thousands of subsets.
        self.codes = encode_outputs(self.vectors)


def load_exec(records: Sequence[dict], exec_table: pd.DataFrame) -> list[QuestionExec]:
    by_q = {qid: g.sort_values("rollout_idx") for qid, g in exec_table.groupby("question_id", sort=False)}
    out = []
    for r in records:
        if r["id"] not in by_q:
            raise ValueError(f"execution table has no rows for question {r['id']}")
        g = by_q[r["id"]]
        vectors = [[None if o is None else str(o) for o in list(v)] for v in g["outputs"]]
        out.append(QuestionExec(r["id"], g["passed"].to_numpy(dtype=bool), vectors, list(g["program"])))
    return out


# ------------------------------------------------------------------ selection and scaling


@dataclass(frozen=True)
class SelectionMethod:
    """A way to pick (or score) candidates of one question: ``accuracy(q, idx, embeddings)`` is the
    method's accuracy when only candidates ``idx`` exist; ``needs_embeddings`` marks semantic ones."""

    name: str
    accuracy: Callable[["QuestionExec", np.ndarray, np.ndarray | None], float]
    needs_embeddings: bool = False


def semantic_pick(q: "QuestionExec", idx: np.ndarray, embeddings: np.ndarray) -> int | None:
    """Semantic voting among candidates ``idx``, restricted to those with a program (a position
    in ``idx``; None when none of them has one)."""
    return semantic_select(embeddings[idx], [q.programs[i] is not None for i in idx])


#: The selection methods of Figure 2 that scale with N (GenCluster, judged by a model, runs apart).
SELECTION_METHODS: Registry[SelectionMethod] = Registry("code-selection method")
for _method in (
    SelectionMethod("mean", lambda q, idx, emb: mean_at_n(q.passed[idx])),
    SelectionMethod("best", lambda q, idx, emb: best_at_n(q.passed[idx])),
    SelectionMethod("fmv", lambda q, idx, emb: picked_accuracy(q.passed[idx], fmv_select_codes(q.codes[idx]))),
    SelectionMethod("semantic", lambda q, idx, emb: picked_accuracy(q.passed[idx], semantic_pick(q, idx, emb)),
                    needs_embeddings=True),
):
    SELECTION_METHODS.register(_method.name, _method)


def method_scores(q: QuestionExec, idx: np.ndarray, embeddings: np.ndarray | None) -> dict[str, float]:
    """Each method's accuracy on one question when only candidates ``idx`` exist."""
    return {
        name: SELECTION_METHODS.get(name).accuracy(q, idx, embeddings)
        for name in SCALING_METHODS
        if embeddings is not None or not SELECTION_METHODS.get(name).needs_embeddings
    }


def default_n_values(n: int) -> list[int]:
    """Powers of two up to N, and N itself."""
    values = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(values + [n]))


def scaling(
    questions: Sequence[QuestionExec],
    embeddings: Sequence[np.ndarray] | None,
    n_values: Sequence[int],
    n_subsamples: int,
    seed: int,
) -> dict[str, dict[int, np.ndarray]]:
    """Per method and N: each question's accuracy averaged over ``n_subsamples`` random subsets of
    N of its candidates (one subset when N is all of them). Returns method -> N -> (Q,) array."""
    n_total = len(questions[0].passed)
    bad = [n for n in n_values if not 1 <= n <= n_total]
    if bad:
        raise ValueError(f"n_values {bad} outside 1..{n_total} (the candidates per question)")
    methods = [m for m in SCALING_METHODS if embeddings is not None or not SELECTION_METHODS.get(m).needs_embeddings]
    out = {m: {} for m in methods}
    for n in n_values:
        per_q = {m: np.zeros(len(questions)) for m in methods}
        for qi, q in enumerate(questions):
            rng = np.random.default_rng([seed, n, qi])
            draws = 1 if n == n_total else n_subsamples
            for _ in range(draws):
                idx = np.sort(rng.choice(n_total, size=n, replace=False)) if n < n_total else np.arange(n_total)
                scores = method_scores(q, idx, None if embeddings is None else embeddings[qi])
                for m in methods:
                    per_q[m][qi] += scores[m] / draws
        for m in methods:
            out[m][n] = per_q[m]
    return out


def bootstrap_se(values: Sequence[float], n_resamples: int, seed: int) -> float:
    """Bootstrap SE of the mean over questions (NaN with fewer than two questions)."""
    from concord.stats import bootstrap_se as _se

    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return float("nan")
    return _se(values, n_resamples=n_resamples, seed=seed)


def analyze(
    records: Sequence[dict],
    exec_table: pd.DataFrame,
    *,
    embeddings: Sequence[np.ndarray] | None,
    gencluster_picks: dict[str, int | None] | None,
    n_values: Sequence[int] | None,
    n_subsamples: int,
    seed: int,
    n_resamples: int,
) -> dict:
    """Accuracy of every method at the full N (Figure 2 left) and versus N (Figure 2 right)."""
    questions = load_exec(records, exec_table)
    n_total = len(questions[0].passed)
    n_values = list(n_values) if n_values else default_n_values(n_total)
    if n_total not in n_values:
        n_values = sorted(set(n_values) | {n_total})
    curves = scaling(questions, embeddings, n_values, n_subsamples, seed)
    full = {m: curves[m][n_total] for m in curves}
    if gencluster_picks is not None:
        missing = [q.question_id for q in questions if q.question_id not in gencluster_picks]
        if missing:
            raise ValueError(f"GenCluster picks missing for questions {missing[:5]}")
        full["gencluster"] = np.array([picked_accuracy(q.passed, gencluster_picks[q.question_id]) for q in questions])
    summary = {m: {"accuracy": float(np.mean(v)), "se": bootstrap_se(v, n_resamples, seed)} for m, v in full.items()}
    curve_rows = [
        {"method": m, "n": int(n), "accuracy": float(np.mean(v)), "se": bootstrap_se(v, n_resamples, seed)}
        for m in curves for n, v in sorted(curves[m].items())
    ]
    per_question = [
        {"question_id": q.question_id, **{m: float(full[m][i]) for m in full},
         "n_valid": int(sum(all(o is not None for o in v) for v in q.vectors))}
        for i, q in enumerate(questions)
    ]
    # each question's accuracy per method and N, so figures can pool seeds (concord.papers.fmv.report)
    scaling_per_question = [{"method": m, "n": int(n), "values": [float(x) for x in v]}
                            for m in curves for n, v in sorted(curves[m].items())]
    return {"n": n_total, "n_questions": len(questions), "methods": summary, "scaling": curve_rows,
            "scaling_per_question": scaling_per_question, "per_question": per_question,
            "n_subsamples": n_subsamples, "n_values": [int(n) for n in n_values]}


def question_metrics(records: Sequence[dict], exec_table: pd.DataFrame) -> pd.DataFrame:
    """Per question at the table's full N: mean@N, best@N and FMV accuracy (Tables 1 and 2)."""
    rows = []
    for q in load_exec(records, exec_table):
        all_idx = np.arange(len(q.passed))
        s = method_scores(q, all_idx, None)
        rows.append({"question_id": q.question_id, "mean": s["mean"], "best": s["best"], "fmv": s["fmv"]})
    return pd.DataFrame(rows)


def embed_candidates(texts: Sequence[Sequence[str]], batch_size: int = 64, embedder=None) -> list[np.ndarray]:
    """Semantic-voting embeddings of every whole completion, one (N, d) matrix per question."""
    from concord.papers.fmv.baselines import embed_completions, load_embedder

    flat = [t for group in texts for t in group]
    if not flat:
        return []
    emb = embed_completions(flat, embedder or load_embedder(), batch_size=batch_size)
    out, start = [], 0
    for group in texts:
        out.append(emb[start:start + len(group)])
        start += len(group)
    return out
