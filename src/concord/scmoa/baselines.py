"""Baselines of section 5 with the same chat, task and variant-tag protocol (Appendix J.5).

* Zero-shot CoT: 1 call.
* Self-consistency (k=10): k tagged samples ``sc-{j}`` of the plain CoT prompt, majority vote with
  the J.6 tie-breaks (code: vote over public-test pass signatures).
* MoA: N=4 SPUQ paraphrases; layer 1 answers each paraphrase, layer 2 re-answers with the layer-1
  responses in MoA's aggregate-and-synthesize system prompt, a final aggregator synthesises
  layer 2 (2N+1 calls; paraphrases shared with SC-MoA through the call cache).
* Self-MoA: 6 tagged samples ``selfmoa-{j}`` of one model, then the same aggregator (7 calls).

Each returns a dict with ``answer`` (payload), ``text`` and ``calls``. Consensus-gated SC-MoA is
obtained from the ungated record (:func:`gated_answer`), as Appendix H simulates thresholds.

The layered-synthesis baselines (MoA, Self-MoA) pass each response's *reply* (``content``) to the
next layer, not its reasoning channel: that is the "output passage" the paper contrasts with
SC-MoA's trace-level aggregation (Section 1).
"""

from __future__ import annotations

from typing import Any, Sequence

from concord.chat import Chat, complete_batch
from concord.scmoa import prompts
from concord.scmoa.perturb import paraphrase
from concord.scmoa.pipeline import cluster, representative
from concord.scmoa.tasks import Task


def _cot(task: Task, question: str, tag: str | None) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompts.with_variant(task.cot_template.format(question=question), tag)}]


def _vote(task: Task, texts: Sequence[str]) -> tuple[int | None, list[str | None], float]:
    """Majority vote with the J.6 tie-breaks; unanswered samples never win (None: none answered)."""
    payloads = [task.extract(t) for t in texts]
    task.prepare(payloads)
    quality = [task.score(p) for p in payloads]
    clusters = cluster(task.group(payloads), quality, [p is not None for p in payloads])
    return representative(clusters, quality), payloads, clusters.consensus


def zero_shot_cot(question: str, chat: Chat, task: Task, *, sampling: dict[str, Any] | None = None) -> dict:
    text = chat.complete(_cot(task, question, None), **(sampling or {})).text
    return {"answer": task.extract(text), "text": text, "calls": 1}


def self_consistency(question: str, chat: Chat, task: Task, *, k: int = 10,
                     sampling: dict[str, Any] | None = None) -> dict:
    if k < 1:
        raise ValueError(f"self-consistency needs k >= 1, got {k}")
    replies = complete_batch(chat, [_cot(task, question, f"sc-{j}") for j in range(k)], **(sampling or {}))
    texts = [c.text for c in replies]
    best, payloads, consensus = _vote(task, texts)
    return {"answer": payloads[best] if best is not None else None, "text": texts[best] if best is not None else "",
            "calls": k, "consensus": consensus,
            "samples": [{"text": c.text, "reasoning": c.reasoning, "payload": p} for c, p in zip(replies, payloads)]}


def _synthesis(task: Task, question: str, responses: Sequence[str], tag: str | None = None) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompts.moa_system(list(responses))}, *_cot(task, question, tag)]


def moa(question: str, chat: Chat, task: Task, *, n: int = 4, paraphrases: Sequence[str] | None = None,
        paraphrase_chat: Chat | None = None, max_paraphrase_attempts: int = 3,
        sampling: dict[str, Any] | None = None) -> dict:
    """Two-layer MoA over N paraphrases plus a final aggregator (2N+1 calls)."""
    sampling = sampling or {}
    extra = 0
    if paraphrases is None:
        paraphrases, rec = paraphrase(question, paraphrase_chat or chat, n, max_attempts=max_paraphrase_attempts,
                                      sampling=sampling)
        extra = rec["calls"]
    if len(paraphrases) != n:
        raise ValueError(f"MoA needs {n} paraphrases, got {len(paraphrases)}")
    layer1 = [c.text for c in complete_batch(chat, [_cot(task, x, f"moa-{i}") for i, x in enumerate(paraphrases)],
                                             **sampling)]
    layer2 = [c.text for c in complete_batch(chat, [_synthesis(task, x, layer1, f"moa-{i}")
                                                    for i, x in enumerate(paraphrases)], **sampling)]
    final = chat.complete(_synthesis(task, question, layer2), **sampling).text
    return {"answer": task.extract(final), "text": final, "calls": 2 * n + 1 + extra,
            "layers": [layer1, layer2]}


def self_moa(question: str, chat: Chat, task: Task, *, k: int = 6, sampling: dict[str, Any] | None = None) -> dict:
    """k samples of one model on the same prompt, synthesised by the MoA aggregator (k+1 calls)."""
    if k < 1:
        raise ValueError(f"Self-MoA needs k >= 1, got {k}")
    sampling = sampling or {}
    samples = [c.text for c in complete_batch(chat, [_cot(task, question, f"selfmoa-{j}") for j in range(k)],
                                              **sampling)]
    final = chat.complete(_synthesis(task, question, samples), **sampling).text
    return {"answer": task.extract(final), "text": final, "calls": k + 1, "samples": samples}


def gated_answer(record: dict, threshold: float) -> str | None:
    """SC-MoA with a consensus gate, simulated on an ungated record (Appendix H).

    Pre-refinement consensus at or above ``threshold`` exits with the majority vote; otherwise
    the ungated (always-aggregate) result stands. ``inf`` never exits.
    """
    if record["clusters_pre"]["consensus"] >= threshold:
        return record["vote_pre"]
    return record["final"]
