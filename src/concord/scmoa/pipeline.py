"""SC-MoA, Algorithm 1: perturb, propose (best-of-k), cluster, refine minorities, aggregate, override.

Every phase issues its calls as one batch (:func:`concord.chat.complete_batch`), so an HTTP
back-end runs them concurrently and an in-process engine batches them. Greedy decoding with the
J.5 variant tags makes the k samples of a perturbation distinct calls.

Invariants the code keeps (and the tests check):

* anchoring: proposals of the pre-refinement majority cluster are never sent to refinement and
  never rewritten; only minority proposals change (Proposition 3);
* universal aggregation: the aggregator is called on every problem, unanimous or not, unless a
  consensus gate is explicitly requested (the gated *baseline*);
* override: the final output reverts to the best proposal exactly when the aggregate's
  verification score is below the best proposal's (code: public-test pass rate).
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from concord.chat import Chat, complete_batch
from concord.scmoa import prompts
from concord.scmoa.perturb import Perturbation, perturb
from concord.scmoa.tasks import CodeTask, QATask, Task

log = logging.getLogger(__name__)

ACTIONS = ("UNCHANGED", "ADOPTED", "IMPROVED", "DEFENDED")
_DECLARED = re.compile(r"\b(ADOPT|IMPROVE|DEFEND)(?:ED|S|ING)?\b")


@dataclass
class Proposal:
    agent: str
    text: str
    payload: str | None
    alpha: float
    samples: list[dict] = field(default_factory=list)  # the k samples: text, payload, agreement
    best: int = 0
    action: str = "UNCHANGED"
    declared: str | None = None  # the action word the refinement reply itself states, if any


@dataclass(frozen=True)
class Clusters:
    labels: tuple[int, ...]
    sizes: dict[int, int]
    majority: int
    k_max: int
    consensus: float

    def members(self, label: int) -> list[int]:
        return [i for i, lab in enumerate(self.labels) if lab == label]

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "sizes": {str(k): v for k, v in self.sizes.items()},
                "majority": self.majority, "k_max": self.k_max, "consensus": self.consensus}


@dataclass
class SCMoAResult:
    answer: str | None  # QA: the extracted answer; code: the program
    text: str  # the reply the answer was taken from (aggregate, or the best proposal on override)
    record: dict


# ----------------------------------------------------------------------------- pure helpers


def cluster(labels: Sequence[int], quality: Sequence[float]) -> Clusters:
    """Clusters with the J.6 majority: largest; ties by mean quality, then earliest occurrence."""
    if not labels or len(labels) != len(quality):
        raise ValueError(f"cluster needs one quality per label, got {len(labels)} labels and {len(quality)} scores")
    order: dict[int, int] = {}
    for i, lab in enumerate(labels):
        order.setdefault(lab, i)
    sizes = {lab: sum(1 for m in labels if m == lab) for lab in order}
    mean_q = {lab: sum(q for m, q in zip(labels, quality) if m == lab) / sizes[lab] for lab in order}
    majority = min(order, key=lambda lab: (-sizes[lab], -mean_q[lab], order[lab]))
    return Clusters(tuple(labels), sizes, majority, sizes[majority], sizes[majority] / len(labels))


def representative(clusters: Clusters, quality: Sequence[float], label: int | None = None) -> int:
    """The proposal standing for a cluster (default: the majority): highest quality, earliest."""
    members = clusters.members(clusters.majority if label is None else label)
    return min(members, key=lambda i: (-quality[i], i))


def best_of_k(task: Task, payloads: Sequence[str | None]) -> tuple[int, list[float]]:
    """Index of the best sample and each sample's agreement fraction among the k.

    Score(r_ij) is the verification score (code: public pass rate; QA: answered or not), and
    within equal scores the sample whose answer most samples share wins (inner self-consistency,
    Proposition 5); remaining ties go to the earliest sample.
    """
    labels = task.group(payloads)
    k = len(payloads)
    agreement = [sum(1 for m in labels if m == lab) / k for lab in labels]
    scores = [task.score(p) for p in payloads]
    best = min(range(k), key=lambda j: (-scores[j], -agreement[j], j))
    return best, agreement


def select_override(scores: Sequence[float], clusters: Clusters) -> int:
    """argmax_i Score(p_i); ties prefer the post-refinement majority, then the earliest."""
    top = max(scores)
    tied = [i for i, s in enumerate(scores) if s == top]
    return min(tied, key=lambda i: (clusters.labels[i] != clusters.majority, i))


def declared_action(text: str) -> str | None:
    match = _DECLARED.search(text or "")
    return f"{match.group(1)}ED" if match else None


def _letter(label: int) -> str:
    return chr(ord("A") + label) if label < 26 else f"C{label}"


# ----------------------------------------------------------------------------- prompts


def proposal_messages(task: Task, pert: Perturbation, tag: str | None) -> list[dict[str, str]]:
    user = prompts.with_variant(task.cot_template.format(question=pert.question), tag)
    msgs = [{"role": "system", "content": pert.system}] if pert.system else []
    return msgs + [{"role": "user", "content": user}]


def refinement_messages(task: Task, question: str, pert: Perturbation, mine: Proposal, my_quality: float,
                        majority: Proposal, majority_quality: float, k_max: int, n: int) -> list[dict[str, str]]:
    system = task.refine_system.format(persona_name=pert.persona_name, k_max=k_max, n=n)
    blocks = [
        f"<PROBLEM>\n{question[: prompts.REFINE_PROBLEM_CHARS]}\n</PROBLEM>",
        f"<YOUR_PROPOSAL quality={my_quality:.2f}, intra_agreement={mine.alpha:.2f}>\n{mine.text}\n</YOUR_PROPOSAL>",
    ]
    analysis = task.failure_analysis(mine.payload, majority.payload)
    if analysis is not None:
        blocks.append(f"<FAILURE_ANALYSIS>\n{analysis}\n</FAILURE_ANALYSIS>")
    blocks.append(
        f"<MAJORITY_APPROACH quality={majority_quality:.2f}, support={k_max}/{n}>\n{majority.text}\n</MAJORITY_APPROACH>"
    )
    blocks.append(prompts.REFINE_FINAL_INSTRUCTION)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(blocks)}]


def consensus_evolution(perts: Sequence[Perturbation], pre: Clusters, post: Clusters, proposals: Sequence[Proposal],
                        n: int) -> str:
    def shape(c: Clusters) -> str:
        return ", ".join(f"{_letter(lab)}x{size}" for lab, size in c.sizes.items())

    lines = [
        f"Pre-refinement: {pre.k_max}/{n} proposals agree (majority cluster {_letter(pre.majority)}; clusters {shape(pre)}).",
        f"Post-refinement: {post.k_max}/{n} proposals agree (majority cluster {_letter(post.majority)}; clusters {shape(post)}).",
    ]
    for action, verb in (("ADOPTED", "Switched to the majority"), ("IMPROVED", "Revised to a new answer"),
                         ("DEFENDED", "Defended their minority answer")):
        who = [p.name for p, prop in zip(perts, proposals) if prop.action == action]
        lines.append(f"{verb} ({action}): {', '.join(who) if who else 'none'}.")
    return "\n".join(lines)


def aggregation_messages(task: Task, question: str, perts: Sequence[Perturbation], proposals: Sequence[Proposal],
                         quality: Sequence[float], pre: Clusters, post: Clusters, n: int, k: int) -> list[dict[str, str]]:
    system = task.aggregate_system.format(n=n, k=k)
    items = []
    for i, (pert, prop) in enumerate(zip(perts, proposals)):
        note = prompts.ACTION_ANNOTATIONS[prop.action]
        items.append(
            f"<PROPOSAL id={i + 1} persona={pert.name} cluster={_letter(post.labels[i])} "
            f"quality={quality[i]:.2f} intra_agreement={prop.alpha:.2f}> {note}\n{prop.text}\n</PROPOSAL>"
        )
    user = "\n\n".join([
        f"<PROBLEM>\n{question}\n</PROBLEM>",
        "<PROPOSALS>\n" + "\n\n".join(items) + "\n</PROPOSALS>",
        f"<CONSENSUS_EVOLUTION>\n{consensus_evolution(perts, pre, post, proposals, n)}\n</CONSENSUS_EVOLUTION>",
    ])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# ----------------------------------------------------------------------------- phases


def generate_proposals(task: Task, perts: Sequence[Perturbation], chat: Chat, k: int, *, prefix: str = "scmoa",
                       sampling: dict[str, Any] | None = None) -> list[Proposal]:
    """k samples per perturbation (variant tags ``{prefix}-{name}-{j}`` when k > 1), best-of-k."""
    if k < 1:
        raise ValueError(f"k (samples per perturbation) must be >= 1, got {k}")
    convs = [proposal_messages(task, p, f"{prefix}-{p.name}-{j}" if k > 1 else None) for p in perts for j in range(k)]
    texts = complete_batch(chat, convs, **(sampling or {}))
    payloads = [task.extract(t) for t in texts]
    task.prepare(payloads)
    out = []
    for i, pert in enumerate(perts):
        t_i, p_i = texts[i * k : (i + 1) * k], payloads[i * k : (i + 1) * k]
        best, agreement = best_of_k(task, p_i)
        samples = [{"text": t, "payload": p, "agreement": a} for t, p, a in zip(t_i, p_i, agreement)]
        out.append(Proposal(pert.name, t_i[best], p_i[best], agreement[best], samples, best))
    return out


def refine_minorities(task: Task, question: str, perts: Sequence[Perturbation], proposals: Sequence[Proposal],
                      pre: Clusters, quality: Sequence[float], chat: Chat, *,
                      sampling: dict[str, Any] | None = None) -> tuple[list[Proposal], list[dict]]:
    """Phase 2: one refinement call per minority proposal; the majority stays frozen.

    The action is read from the outcome: ADOPTED when the refined answer joins the majority's
    cluster, DEFENDED when it keeps its own, IMPROVED when it moves elsewhere. A reply without an
    answer (or without code) carries no revised position, so the original proposal stands and
    counts as DEFENDED, flagged ``unparsed``.
    """
    n = len(proposals)
    anchor = representative(pre, quality)
    minority = [i for i in range(n) if pre.labels[i] != pre.majority]
    convs = [refinement_messages(task, question, perts[i], proposals[i], quality[i], proposals[anchor],
                                 quality[anchor], pre.k_max, n) for i in minority]
    replies = complete_batch(chat, convs, **(sampling or {})) if convs else []
    refined = list(proposals)  # majority entries are the very same objects: frozen
    log_rows = []
    new_payloads = [task.extract(r) for r in replies]
    task.prepare(new_payloads)
    for i, reply, new in zip(minority, replies, new_payloads):
        old = proposals[i]
        unparsed = new is None
        if unparsed:
            action = "DEFENDED"
            updated = Proposal(old.agent, old.text, old.payload, old.alpha, old.samples, old.best, action,
                               declared_action(reply))
        else:
            mine, maj, now = task.group([old.payload, proposals[anchor].payload, new])
            action = "ADOPTED" if now == maj else "DEFENDED" if now == mine else "IMPROVED"
            updated = Proposal(old.agent, reply, new, old.alpha, old.samples, old.best, action, declared_action(reply))
        refined[i] = updated
        log_rows.append({"agent": old.agent, "index": i, "action": action, "declared": updated.declared,
                         "unparsed": unparsed, "before": task.describe(old.payload),
                         "after": task.describe(updated.payload), "reply": reply})
    return refined, log_rows


def _proposal_rows(task: Task, proposals: Sequence[Proposal], quality: Sequence[float], clusters: Clusters,
                   with_samples: bool) -> list[dict]:
    rows = []
    for i, (p, q) in enumerate(zip(proposals, quality)):
        row = {"agent": p.agent, "summary": task.describe(p.payload), "payload": p.payload, "text": p.text,
               "alpha": p.alpha, "quality": q, "score": task.score(p.payload), "cluster": clusters.labels[i],
               "action": p.action, "declared": p.declared, "best_sample": p.best}
        if with_samples:  # the k samples are the same before and after refinement: stored once
            row["samples"] = p.samples
        rows.append(row)
    return rows


def make_task(task: str | Task, tests: Sequence[Any] | None = None, **code_options: Any) -> Task:
    """``"qa"`` or ``"code"`` (with public ``tests``) as a :class:`Task`; a Task passes through."""
    if not isinstance(task, str):
        return task
    if task == "qa":
        if tests:
            raise ValueError("QA tasks take no tests; pass task='code' for programs")
        return QATask()
    if task == "code":
        if not tests:
            raise ValueError("task='code' needs the public tests (tests=[...]) for clustering and the override")
        runner = code_options.pop("runner", None)
        if runner is None:
            from concord.scmoa.code_runner import make_runner

            runner = make_runner(**code_options)
            code_options = {}
        return CodeTask(public_tests=list(tests), runner=runner, test_names=code_options.pop("test_names", None))
    raise ValueError(f"unknown task {task!r}; expected 'qa' or 'code'")


def run_scmoa(question: str, chat: Chat, *, n: int, k: int, task: str | Task, tests: Sequence[Any] | None = None,
              perturbation: str = "paraphrase", paraphrase_chat: Chat | None = None,
              paraphrases: Sequence[str] | None = None, refine: bool = True, gate: float | None = None,
              max_paraphrase_attempts: int = 3, on_paraphrase_failure: str = "original",
              sampling: dict[str, Any] | None = None, tag_prefix: str = "scmoa",
              code_options: dict[str, Any] | None = None) -> SCMoAResult:
    """Run SC-MoA (Algorithm 1) on one question.

    ``task``: ``"qa"``, ``"code"`` (then ``tests`` are the public tests) or a :class:`Task`.
    ``perturbation``: ``paraphrase`` (Appendix L; by ``paraphrase_chat`` if given, else
    ``chat``), ``persona`` (J.1/J.2) or ``none``. ``paraphrases``: reuse ready-made ones.
    ``refine=False`` skips Phase 2 (ablation). ``gate``: consensus-gated variant -- when the
    pre-refinement consensus reaches it, return the majority's best proposal without refinement
    or aggregation (the default ``None`` always aggregates, as SC-MoA prescribes).
    """
    if n < 1:
        raise ValueError(f"n (perturbations) must be >= 1, got {n}")
    if gate is not None and not 0 < gate <= 1:
        raise ValueError(f"gate must be a consensus threshold in (0, 1], got {gate}")
    task_obj = make_task(task, tests, **(code_options or {}))
    sampling = dict(sampling or {})
    calls: dict[str, int] = {}

    if paraphrases is not None and perturbation == "paraphrase":
        if len(paraphrases) != n:
            raise ValueError(f"{len(paraphrases)} paraphrases given for n={n}")
        perts = [Perturbation(f"para{i + 1}", t) for i, t in enumerate(paraphrases)]
        pert_record = {"mode": "paraphrase", "calls": 0, "given": True, "perturbations": [asdict(p) for p in perts]}
    else:
        perts, pert_record = perturb(question, paraphrase_chat or chat, n, mode=perturbation,
                                     personas=task_obj.personas, max_attempts=max_paraphrase_attempts,
                                     on_failure=on_paraphrase_failure, sampling=sampling)
    calls["perturb"] = pert_record["calls"]

    # Phase 1: proposals, best-of-k, intra-agreement.
    proposals = generate_proposals(task_obj, perts, chat, k, prefix=tag_prefix, sampling=sampling)
    calls["propose"] = n * k
    payloads = [p.payload for p in proposals]
    quality_pre = task_obj.quality(payloads)
    pre = cluster(task_obj.group(payloads), quality_pre)
    vote_pre_idx = representative(pre, quality_pre)
    record: dict[str, Any] = {
        "task": task_obj.kind, "n": n, "k": k, "perturbation": pert_record,
        "proposals_pre": _proposal_rows(task_obj, proposals, quality_pre, pre, True),
        "clusters_pre": pre.to_dict(), "vote_pre": proposals[vote_pre_idx].payload, "vote_pre_index": vote_pre_idx,
        "gate": gate, "gated": False,
    }

    if gate is not None and pre.consensus >= gate:
        record.update(gated=True, refinement=[], clusters_post=pre.to_dict(), vote_post=record["vote_pre"],
                      aggregate=None, override=False, final=record["vote_pre"], final_source="gate",
                      calls={**calls, "refine": 0, "aggregate": 0, "total": sum(calls.values())})
        return SCMoAResult(record["vote_pre"], proposals[vote_pre_idx].text, record)

    # Phase 2: anchored refinement of minorities only.
    if refine:
        post_props, refinement = refine_minorities(task_obj, question, perts, proposals, pre, quality_pre, chat,
                                                   sampling=sampling)
    else:
        post_props, refinement = list(proposals), []
    calls["refine"] = len(refinement)
    post_payloads = [p.payload for p in post_props]
    quality_post = task_obj.quality(post_payloads)
    post = cluster(task_obj.group(post_payloads), quality_post)
    vote_post_idx = representative(post, quality_post)
    record.update(refinement=refinement, proposals_post=_proposal_rows(task_obj, post_props, quality_post, post, False),
                  clusters_post=post.to_dict(), vote_post=post_props[vote_post_idx].payload,
                  vote_post_index=vote_post_idx)

    # Phase 3: universal aggregation over all N traces with the consensus-evolution record.
    agg_text = chat.complete(aggregation_messages(task_obj, question, perts, post_props, quality_post, pre, post, n, k),
                             **sampling)
    calls["aggregate"] = 1
    agg_payload = task_obj.extract(agg_text)
    agg_score = task_obj.score(agg_payload)

    # Score-based override.
    scores = [task_obj.score(p) for p in post_payloads]
    best = select_override(scores, post)
    fired = agg_score < scores[best]
    final, final_text = (post_payloads[best], post_props[best].text) if fired else (agg_payload, agg_text)
    record.update(
        aggregate={"text": agg_text, "payload": agg_payload, "summary": task_obj.describe(agg_payload), "score": agg_score},
        best_proposal=best, best_score=scores[best], override=fired, final=final,
        final_source="override" if fired else "aggregate",
        calls={**calls, "total": sum(calls.values())},
    )
    return SCMoAResult(final, final_text, record)
