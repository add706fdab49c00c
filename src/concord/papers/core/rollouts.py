"""Roll-outs: N samples per question, answers extracted and grouped, stored as Parquet.

Generation runs in chunks of questions; each finished chunk is cached outside Snakemake's
declared outputs (``cache_dir``), so a killed job resumes where it stopped and a rerun with the
same seed reproduces the same rows.

Answers are read with the config's answer policy (``answers.policy``,
:func:`concord.answers.extract_answer`); the policy and the task are recorded in the Parquet
metadata (``answers``), so the offline analysis grades with the policy the answers were read
with. A cached chunk read under another policy keeps its generations and re-reads its answers.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from concord.data import build_messages
from concord.engines.base import Engine, SamplingParams

log = logging.getLogger(__name__)

COLUMNS = [
    "question_id", "rollout_idx", "text", "n_tokens", "finish_reason", "confidence",
    "answer", "answer_class", "gold",
]


@dataclass(frozen=True)
class RolloutSpec:
    n: int
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    seed: int = 0
    prompt_style: str = "instruct"
    task: str = "math"
    chunk_questions: int = 8
    policy: str = "strict"  # answers.policy: how answers are read from the texts


def generate_rollouts(
    engine: Engine, questions: Sequence[dict], spec: RolloutSpec, cache_dir: str | os.PathLike | None = None
) -> pd.DataFrame:
    """Sample ``spec.n`` roll-outs per question and return one row per roll-out."""
    from tqdm.auto import tqdm

    frames = []
    chunks = [questions[i : i + spec.chunk_questions] for i in range(0, len(questions), spec.chunk_questions)]
    cache = Path(cache_dir) if cache_dir else None
    for index, chunk in enumerate(tqdm(chunks, desc="roll-out chunks", unit="chunk")):
        cached = cache / f"chunk{index:05d}.parquet" if cache else None
        if cached is not None and cached.is_file():
            frame = pd.read_parquet(cached)
            if list(frame["question_id"].unique()) == [q["id"] for q in chunk]:
                log.info("reusing cached chunk %s", cached)
                if answer_policy_of(cached, default="strict") != (spec.policy, spec.task):
                    log.info("re-reading the answers of %s with policy %r", cached, spec.policy)
                    frame = assign_answers(frame, spec.policy, spec.task)
                    _write_chunk(cached, frame, spec)
                frames.append(frame)
                continue
            log.warning("ignoring stale cache %s (questions changed)", cached)
        params = SamplingParams(
            n=spec.n, temperature=spec.temperature, top_p=spec.top_p,
            max_new_tokens=spec.max_new_tokens, seed=spec.seed * 1_000_003 + index,
        )
        conversations = [build_messages(q["prompt"], spec.prompt_style, spec.task) for q in chunk]
        generations = engine.generate(conversations, params)
        frame = assign_answers(_chunk_frame(chunk, generations), spec.policy, spec.task)
        if cached is not None:
            _write_chunk(cached, frame, spec)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _chunk_frame(questions: Sequence[dict], generations) -> pd.DataFrame:
    rows = []
    for q, gens in zip(questions, generations):
        for i, g in enumerate(gens):
            rows.append({
                "question_id": q["id"], "rollout_idx": i, "text": g.text, "n_tokens": g.n_tokens,
                "finish_reason": g.finish_reason, "confidence": g.mean_logprob, "answer": None,
                "answer_class": -1, "gold": str(q["answer"]),
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def assign_answers(frame: pd.DataFrame, policy: str, task: str = "math") -> pd.DataFrame:
    """``answer`` and ``answer_class`` of every roll-out read from its text under ``policy``
    (classes per question, in order of first appearance; -1 only for an unanswered roll-out)."""
    from concord.answers import extract_answer, group_answers_batch

    frame = frame.copy()
    answers = [extract_answer(t, policy, task=task) for t in frame["text"]]
    positions = list(frame.groupby("question_id", sort=False).indices.values())
    labels = group_answers_batch([[answers[i] for i in idx] for idx in positions])
    classes = [-1] * len(answers)
    for idx, group_labels in zip(positions, labels):
        for i, c in zip(idx, group_labels):
            classes[i] = int(c)
    frame["answer"] = pd.Series(answers, index=frame.index, dtype=object)
    frame["answer_class"] = classes
    return frame


def answer_policy_of(path: str | os.PathLike, default: str | None = None) -> tuple[str, str]:
    """(policy, task) the answers of a roll-out file were read with, from its Parquet metadata.

    Files written before the policy was recorded read as ``default`` (they used the last box:
    ``"strict"``); without a default such a file is an error naming how to fix it.
    """
    from concord.io import read_parquet_metadata

    meta = read_parquet_metadata(path)
    answers = meta.get("answers")
    if answers is None:
        if default is None:
            raise ValueError(f"{path}: no answer policy recorded; regenerate the roll-outs (snakemake --forcerun rollouts)")
        return default, (meta.get("config") or {}).get("task", "math")
    return answers["policy"], answers.get("task", "math")


def _write_chunk(path: Path, frame: pd.DataFrame, spec: RolloutSpec) -> None:
    from concord.io import write_parquet

    write_parquet(path, frame, metadata={"answers": {"policy": spec.policy, "task": spec.task}})


def validate_rollouts(frame: pd.DataFrame, where: str = "roll-outs") -> pd.DataFrame:
    """Check a roll-out table before analysis/training uses it; name what is wrong."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}")
    if frame.empty:
        raise ValueError(f"{where}: no rows")
    if frame["confidence"].isna().any():
        raise ValueError(f"{where}: {int(frame['confidence'].isna().sum())} roll-out(s) have no confidence")
    sizes = frame.groupby("question_id", sort=False).size()
    if sizes.nunique() != 1:
        raise ValueError(f"{where}: questions have different roll-out counts ({sorted(sizes.unique())})")
    bad = frame[(frame["answer"].isna()) != (frame["answer_class"] < 0)]
    if len(bad):
        raise ValueError(f"{where}: answer/answer_class disagree on {len(bad)} row(s)")
    return frame


def groups(frame: pd.DataFrame) -> list[dict]:
    """Per question: answers, texts, confidences, classes and gold, in roll-out order."""
    out = []
    for qid, g in frame.sort_values(["question_id", "rollout_idx"]).groupby("question_id", sort=False):
        out.append({
            "question_id": qid,
            "answers": [a if isinstance(a, str) else None for a in g["answer"].tolist()],
            "texts": g["text"].tolist(),
            "confidences": g["confidence"].to_numpy(dtype=float),
            "classes": g["answer_class"].to_numpy(dtype=int),
            "gold": g["gold"].iloc[0],
        })
    return out
