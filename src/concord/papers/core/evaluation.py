"""pass@1 as mean@k of a model directory on a benchmark (seed 000, section 4).

For every question, sample ``k`` answers (paper: k = 16, temperature 0.6, top-p 0.95, 3072 new
tokens), read each answer as written under the answer policy (``answers.policy``:
:func:`concord.answers.graded_answer` -- the last ``\\boxed{}``, or what TTRL's extractor locates)
and grade it against the gold answer with the library's equivalence
(:func:`concord.answers.grade`); pass@1 is the mean over questions of the fraction of correct
samples. The same function evaluates the frozen base model and every trained
(arm, seed): only the model directory differs.

Output (``results/eval/{model}/{benchmark}/{arm}/seed{seed}.json``)::

    {"pass_at_1": float, "k": int, "n_questions": int, "per_question": [
        {"id", "n_correct", "k", "accuracy", "answers": [...], "level", "subject"}, ...],
     "sampling": {...}, "provenance": {...}}
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

log = logging.getLogger(__name__)


def mean_at_k(per_question: Sequence[Mapping[str, Any]]) -> float:
    """pass@1 estimated as mean@k from per-question ``n_correct`` / ``k``."""
    if not per_question:
        raise ValueError("no questions were evaluated")
    return float(sum(q["n_correct"] / q["k"] for q in per_question) / len(per_question))


def grade_samples(question: Mapping[str, Any], texts: Sequence[str], policy: str = "strict", task: str = "math") -> dict:
    """One question's record: the answers as written (what is graded), how many are correct."""
    from concord.answers import grade, graded_answer

    answers = [graded_answer(t, policy, task=task) for t in texts]
    correct = [bool(grade(a, question["answer"])) for a in answers]
    return {
        "id": str(question["id"]),
        "k": len(texts),
        "n_correct": int(sum(correct)),
        "accuracy": sum(correct) / len(texts),
        "answers": answers,
        "correct": correct,
        "level": question.get("level"),
        "subject": question.get("subject"),
    }


def evaluate(
    *,
    model_dir: str | os.PathLike,
    questions_path: str | os.PathLike,
    out_path: str | os.PathLike,
    seed: int,
    evaluation: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | None = None,
    prompt_style: str = "instruct",
    task: str = "math",
    arm: str = "base",
    answers_policy: str = "strict",
    chunk_size: int | None = None,
    provenance_config: Mapping[str, Any] | None = None,
) -> dict:
    """Evaluate ``model_dir`` on ``questions_path`` with mean@k; write the JSON result atomically."""
    from concord import provenance
    from concord.data import build_messages, load_questions
    from concord.engines import SamplingParams, load_engine
    from concord.io import write_json
    from concord.config import resolve_section

    ev = resolve_section("evaluation", evaluation)
    engine_cfg = dict(engine or {})
    backend = engine_cfg.pop("backend", "hf")
    if backend == "vllm":
        engine_cfg["seed"] = int(seed)
    questions = load_questions(questions_path)
    if ev["max_questions"]:
        questions = questions[: int(ev["max_questions"])]
    params = SamplingParams(
        n=int(ev["k"]), temperature=float(ev["temperature"]), top_p=float(ev["top_p"]),
        max_new_tokens=int(ev["max_new_tokens"]), seed=int(seed),
    )
    eng = load_engine(backend, model_dir, **engine_cfg)
    if chunk_size is None:
        # As many questions per call as fill one engine batch of k samples each.
        chunk_size = max(1, int(engine_cfg.get("batch_size", 32)) // params.n)
    t0 = time.time()
    per_question: list[dict] = []
    # Chunks keep memory bounded and show progress; each chunk gets its own derived seed so the
    # result does not depend on how an engine batches internally.
    for start in range(0, len(questions), chunk_size):
        chunk = questions[start:start + chunk_size]
        chunk_params = SamplingParams(**{**params.__dict__, "seed": params.seed * 1_000_003 + start})
        gens = eng.generate([build_messages(q["prompt"], prompt_style, task) for q in chunk], chunk_params)
        for q, samples in zip(chunk, gens):
            per_question.append(grade_samples(q, [s.text for s in samples], answers_policy, task))
        done = len(per_question)
        log.info("evaluated %d/%d questions (%.0f s): running pass@1 %.3f", done, len(questions), time.time() - t0,
                 mean_at_k(per_question))
    result = {
        "pass_at_1": mean_at_k(per_question),
        "k": params.n,
        "n_questions": len(per_question),
        "arm": arm,
        "per_question": per_question,
        "sampling": {"k": params.n, "temperature": params.temperature, "top_p": params.top_p,
                     "max_new_tokens": params.max_new_tokens, "seed": params.seed},
    }  # no wall time here: a rerun must write the same bytes (the job's time is in benchmarks/)
    result["provenance"] = provenance.record(
        step="evaluate", seed=int(seed), inputs=[questions_path],
        config=dict(provenance_config or {"evaluation": ev, "engine": dict(engine or {}), "prompt_style": prompt_style,
                                          "task": task, "arm": arm, "answers": {"policy": answers_policy}}),
        model=str(model_dir), model_sha256=_model_hash(model_dir), dtype=getattr(eng, "dtype", None),
        numeric=provenance.numeric_path(provenance.engine_dtype(eng)),
    )
    write_json(out_path, result)
    log.info("pass@1 (mean@%d) of %s on %d questions: %.4f -> %s (%.0f s)", params.n, model_dir, len(per_question),
             result["pass_at_1"], out_path, time.time() - t0)
    return result


def _model_hash(model_dir: str | os.PathLike) -> str | None:
    """Hash of the weights (not the whole directory: logs beside a trained model do not matter)."""
    from concord.provenance import sha256_file

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    import hashlib

    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        digest.update(sha256_file(f).encode())
    return digest.hexdigest()
