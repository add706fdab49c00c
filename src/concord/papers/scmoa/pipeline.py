"""SC-MoA, Algorithm 1: perturb, propose (best-of-k), cluster, refine minorities, aggregate, override.

Every phase issues its calls as one batch (:func:`concord.chat.complete_batch`), so an HTTP
back-end runs them concurrently and an in-process engine batches them. Greedy decoding with the
J.5 variant tags makes the k samples of a perturbation distinct calls.

The unit of aggregation is the reasoning *trace*: each proposal keeps the reasoning channel of its
reply (:class:`concord.chat.Completion`), and the refinement and aggregation prompts show it
(:func:`concord.papers.scmoa.prompts.trace`) beside the reply.

Invariants the code keeps (and the tests check):

* anchoring: proposals of the pre-refinement majority cluster are never sent to refinement and
  never rewritten; only minority proposals change (Proposition 3); a proposal without an answer
  is never the majority's representative (the anchor): when no proposal answers there is no
  anchor and no refinement;
* universal aggregation: the aggregator is called on every problem, unanimous or not, unless a
  consensus gate is explicitly requested (the gated *baseline*);
* override: on code the final output reverts to the best proposal exactly when the aggregate's
  public-test pass rate is below the best proposal's; on QA it never fires (every answer scores
  1.0, Section 4 and Appendix N).
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from concord.chat import CallLog, Chat, Completion, complete_batch
from concord.papers.scmoa import prompts
from concord.papers.scmoa.perturb import Perturbation, perturb
from concord.papers.scmoa.tasks import CodeTask, QATask, Task
from concord.registry import Registry

log = logging.getLogger(__name__)

ACTIONS = ("UNCHANGED", "ADOPTED", "IMPROVED", "DEFENDED")
_DECLARED = re.compile(r"\b(ADOPT|IMPROVE|DEFEND)(?:ED|S|ING)?\b")


@dataclass
class Proposal:
    agent: str
    text: str
    payload: str | None
    alpha: float
    samples: list[dict] = field(default_factory=list)  # the k samples: text, reasoning, payload, agreement, usage
    best: int = 0
    action: str = "UNCHANGED"
    declared: str | None = None  # the action word the refinement reply itself states, if any
    reasoning: str | None = None  # the reasoning channel of the reply in ``text``

    def trace(self, max_chars: int | None = None) -> str:
        return prompts.trace(self.text, self.reasoning, max_chars)


@dataclass(frozen=True)
class Clusters:
    labels: tuple[int, ...]
    sizes: dict[int, int]
    majority: int | None  # None when no proposal carries an answer
    k_max: int
    consensus: float

    def members(self, label: int | None) -> list[int]:
        return [i for i, lab in enumerate(self.labels) if lab == label] if label is not None else []

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "sizes": {str(k): v for k, v in self.sizes.items()},
                "majority": self.majority, "k_max": self.k_max, "consensus": self.consensus}

    @classmethod
    def from_dict(cls, d: dict) -> "Clusters":
        return cls(tuple(d["labels"]), {int(k): v for k, v in d["sizes"].items()}, d["majority"], d["k_max"],
                   d["consensus"])


@dataclass
class SCMoAResult:
    answer: str | None  # QA: the extracted answer; code: the program
    text: str  # the reply the answer was taken from (aggregate, or the best proposal on override)
    record: dict


# ----------------------------------------------------------------------------- pure helpers


def cluster(labels: Sequence[int], quality: Sequence[float], answered: Sequence[bool] | None = None) -> Clusters:
    """Clusters with the J.6 majority: largest; ties by mean quality, then earliest occurrence.

    Only clusters of answered proposals can be the majority (``answered``: one flag per
    proposal; default all answered). Without any answered proposal there is no majority:
    ``majority`` is None and the consensus 0.
    """
    if not labels or len(labels) != len(quality):
        raise ValueError(f"cluster needs one quality per label, got {len(labels)} labels and {len(quality)} scores")
    answered = [True] * len(labels) if answered is None else list(answered)
    if len(answered) != len(labels):
        raise ValueError(f"cluster needs one answered flag per label, got {len(answered)} for {len(labels)}")
    order: dict[int, int] = {}
    for i, lab in enumerate(labels):
        order.setdefault(lab, i)
    sizes = {lab: sum(1 for m in labels if m == lab) for lab in order}
    mean_q = {lab: sum(q for m, q in zip(labels, quality) if m == lab) / sizes[lab] for lab in order}
    eligible = [lab for lab in order if any(a for m, a in zip(labels, answered) if m == lab)]
    if not eligible:
        return Clusters(tuple(labels), sizes, None, 0, 0.0)
    majority = min(eligible, key=lambda lab: (-sizes[lab], -mean_q[lab], order[lab]))
    return Clusters(tuple(labels), sizes, majority, sizes[majority], sizes[majority] / len(labels))


def representative(clusters: Clusters, quality: Sequence[float], label: int | None = None) -> int | None:
    """The proposal standing for a cluster (default: the majority): highest quality, earliest;
    None when there is no majority."""
    members = clusters.members(clusters.majority if label is None else label)
    return min(members, key=lambda i: (-quality[i], i)) if members else None


def best_of_k(task: Task, payloads: Sequence[str | None]) -> tuple[int, list[float]]:
    """Index of the best sample and each sample's agreement fraction among the k.

    Score(r_ij) is the verification score (code: public pass rate; QA: answered or not), and
    within equal scores the sample whose answer most samples share wins (inner self-consistency,
    Proposition 5); remaining ties go to the earliest sample.
    """
    labels = task.group(payloads)
    k = len(payloads)
    agreement = [sum(1 for m in labels if m == lab) / k if p is not None else 0.0 for lab, p in zip(labels, payloads)]
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


def _letter(label: int | None) -> str:
    if label is None:
        return "-"
    return chr(ord("A") + label) if label < 26 else f"C{label}"


def _sample_row(c: Completion, payload: str | None, agreement: float) -> dict:
    return {"text": c.text, "reasoning": c.reasoning, "payload": payload, "agreement": agreement, "usage": c.usage()}


# ----------------------------------------------------------------------------- prompts


def proposal_messages(task: Task, pert: Perturbation, tag: str | None) -> list[dict[str, str]]:
    user = prompts.with_variant(task.cot_template.format(question=pert.question), tag)
    msgs = [{"role": "system", "content": pert.system}] if pert.system else []
    return msgs + [{"role": "user", "content": user}]


def refinement_messages(task: Task, question: str, pert: Perturbation, mine: Proposal, my_quality: float,
                        majority: Proposal, majority_quality: float, k_max: int, n: int,
                        trace_chars: int | None = None) -> list[dict[str, str]]:
    """J.3: persona system prompt; PROBLEM (2,500 chars), YOUR_PROPOSAL, FAILURE_ANALYSIS (code),
    MAJORITY_APPROACH, each proposal as its full trace (reasoning channel and reply)."""
    system = task.refine_system.format(persona_name=pert.persona_name, k_max=k_max, n=n)
    blocks = [
        f"<PROBLEM>\n{question[: prompts.REFINE_PROBLEM_CHARS]}\n</PROBLEM>",
        f"<YOUR_PROPOSAL quality={my_quality:.2f}, intra_agreement={mine.alpha:.2f}>\n{mine.trace(trace_chars)}\n</YOUR_PROPOSAL>",
    ]
    analysis = task.failure_analysis(mine.payload, majority.payload)
    if analysis is not None:
        blocks.append(f"<FAILURE_ANALYSIS>\n{analysis}\n</FAILURE_ANALYSIS>")
    blocks.append(
        f"<MAJORITY_APPROACH quality={majority_quality:.2f}, support={k_max}/{n}>\n{majority.trace(trace_chars)}\n</MAJORITY_APPROACH>"
    )
    blocks.append(prompts.REFINE_FINAL_INSTRUCTION)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(blocks)}]


def consensus_evolution(perts: Sequence[Perturbation], pre: Clusters, post: Clusters, proposals: Sequence[Proposal],
                        n: int, refined: bool = True) -> str:
    """The J.4 consensus record: pre/post-refinement agreement and who switched or defended.
    Without a refinement step (Section 3) it is the one consensus there is: the agreement
    counts and which personas form the majority and which the minority."""
    def shape(c: Clusters) -> str:
        return ", ".join(f"{_letter(lab)}x{size}" for lab, size in c.sizes.items())

    if not refined:
        majority = [p.name for i, p in enumerate(perts) if pre.labels[i] == pre.majority]
        minority = [p.name for i, p in enumerate(perts) if pre.labels[i] != pre.majority]
        return "\n".join([
            f"{pre.k_max}/{n} proposals agree (majority cluster {_letter(pre.majority)}; clusters {shape(pre)}).",
            f"Majority: {', '.join(majority) if majority else 'none'}.",
            f"Minority: {', '.join(minority) if minority else 'none'}.",
        ])
    lines = [f"Pre-refinement: {pre.k_max}/{n} proposals agree (majority cluster {_letter(pre.majority)}; clusters {shape(pre)})."]
    lines.append(f"Post-refinement: {post.k_max}/{n} proposals agree (majority cluster {_letter(post.majority)}; clusters {shape(post)}).")
    for action, verb in (("ADOPTED", "Switched to the majority"), ("IMPROVED", "Revised to a new answer"),
                         ("DEFENDED", "Defended their minority answer")):
        who = [p.name for p, prop in zip(perts, proposals) if prop.action == action]
        lines.append(f"{verb} ({action}): {', '.join(who) if who else 'none'}.")
    return "\n".join(lines)


def consensus_block(perts: Sequence[Perturbation], pre: Clusters, post: Clusters, proposals: Sequence[Proposal],
                    n: int, refined: bool = True) -> str:
    """J.4's CONSENSUS_EVOLUTION block; without refinement a CONSENSUS block (nothing evolved)."""
    tag = "CONSENSUS_EVOLUTION" if refined else "CONSENSUS"
    return f"<{tag}>\n{consensus_evolution(perts, pre, post, proposals, n, refined)}\n</{tag}>"


def proposal_note(i: int, prop: Proposal, clusters: Clusters, refined: bool = True) -> str:
    """A proposal's annotation in the aggregation prompt: J.4's refinement action, or, without a
    refinement step (Section 3), its true cluster role in ``clusters`` (majority or minority;
    with no answered proposal there is no majority and every proposal is a minority)."""
    if refined:
        return prompts.ACTION_ANNOTATIONS[prop.action]
    role = "majority" if clusters.majority is not None and clusters.labels[i] == clusters.majority else "minority"
    return prompts.CLUSTER_ANNOTATIONS[role]


def aggregate_system(task: Task, n: int, k: int, refined: bool = True) -> str:
    """J.4's aggregation system prompt, or its pre-refinement edit when no refinement step ran."""
    return (task.aggregate_system if refined else task.aggregate_system_pre).format(n=n, k=k)


def aggregation_messages(task: Task, question: str, perts: Sequence[Perturbation], proposals: Sequence[Proposal],
                         quality: Sequence[float], pre: Clusters, post: Clusters, n: int, k: int, *,
                         refined: bool = True, trace_chars: int | None = None) -> list[dict[str, str]]:
    """J.4: PROBLEM, PROPOSALS (each trace with persona, cluster, quality, intra-agreement and its
    refinement action), CONSENSUS_EVOLUTION. ``refined=False`` (Section 3): the same proposals
    annotated with their cluster role, the pre-refinement system prompt, a CONSENSUS block."""
    items = []
    for i, (pert, prop) in enumerate(zip(perts, proposals)):
        note = proposal_note(i, prop, post, refined)
        items.append(
            f"<PROPOSAL id={i + 1} persona={pert.name} cluster={_letter(post.labels[i])} "
            f"quality={quality[i]:.2f} intra_agreement={prop.alpha:.2f}> {note}\n{prop.trace(trace_chars)}\n</PROPOSAL>"
        )
    user = "\n\n".join([
        f"<PROBLEM>\n{question}\n</PROBLEM>",
        "<PROPOSALS>\n" + "\n\n".join(items) + "\n</PROPOSALS>",
        consensus_block(perts, pre, post, proposals, n, refined),
    ])
    return [{"role": "system", "content": aggregate_system(task, n, k, refined)}, {"role": "user", "content": user}]


# ----------------------------------------------------------------------------- phases


def generate_proposals(task: Task, perts: Sequence[Perturbation], chat: Chat, k: int, *, prefix: str = "scmoa",
                       sampling: dict[str, Any] | None = None) -> list[Proposal]:
    """k samples per perturbation (variant tags ``{prefix}-{name}-{j}`` when k > 1), best-of-k."""
    if k < 1:
        raise ValueError(f"k (samples per perturbation) must be >= 1, got {k}")
    convs = [proposal_messages(task, p, f"{prefix}-{p.name}-{j}" if k > 1 else None) for p in perts for j in range(k)]
    replies = complete_batch(chat, convs, **(sampling or {}))
    payloads = [task.extract(c.text) for c in replies]
    task.prepare(payloads)
    out = []
    for i, pert in enumerate(perts):
        c_i, p_i = replies[i * k : (i + 1) * k], payloads[i * k : (i + 1) * k]
        best, agreement = best_of_k(task, p_i)
        samples = [_sample_row(c, p, a) for c, p, a in zip(c_i, p_i, agreement)]
        out.append(Proposal(pert.name, c_i[best].text, p_i[best], agreement[best], samples, best,
                            reasoning=c_i[best].reasoning))
    return out


def refine_minorities(task: Task, question: str, perts: Sequence[Perturbation], proposals: Sequence[Proposal],
                      pre: Clusters, quality: Sequence[float], chat: Chat, *,
                      sampling: dict[str, Any] | None = None,
                      trace_chars: int | None = None) -> tuple[list[Proposal], list[dict]]:
    """Phase 2: one refinement call per minority proposal; the majority stays frozen.

    The action is read from the outcome: ADOPTED when the refined answer joins the majority's
    cluster, DEFENDED when it keeps its own, IMPROVED when it moves elsewhere. A reply without an
    answer (or without code) carries no revised position, so the original proposal stands and
    counts as DEFENDED, flagged ``unparsed``. Without an anchor (no proposal answered) nothing
    is refined.
    """
    n = len(proposals)
    anchor = representative(pre, quality)
    if anchor is None:
        return list(proposals), []
    minority = [i for i in range(n) if pre.labels[i] != pre.majority]
    convs = [refinement_messages(task, question, perts[i], proposals[i], quality[i], proposals[anchor],
                                 quality[anchor], pre.k_max, n, trace_chars) for i in minority]
    replies = complete_batch(chat, convs, **(sampling or {})) if convs else []
    refined = list(proposals)  # majority entries are the very same objects: frozen
    log_rows = []
    new_payloads = [task.extract(r.text) for r in replies]
    task.prepare(new_payloads)
    for i, reply, new in zip(minority, replies, new_payloads):
        old = proposals[i]
        unparsed = new is None
        declared = declared_action(reply.text)
        if unparsed:
            action = "DEFENDED"
            updated = Proposal(old.agent, old.text, old.payload, old.alpha, old.samples, old.best, action, declared,
                               old.reasoning)
        else:
            mine, maj, now = task.group([old.payload, proposals[anchor].payload, new])
            action = "ADOPTED" if now == maj else "DEFENDED" if now == mine else "IMPROVED"
            updated = Proposal(old.agent, reply.text, new, old.alpha, old.samples, old.best, action, declared,
                               reply.reasoning)
        refined[i] = updated
        log_rows.append({"agent": old.agent, "index": i, "action": action, "declared": updated.declared,
                         "unparsed": unparsed, "before": task.describe(old.payload),
                         "after": task.describe(updated.payload), "reply": reply.text,
                         "reasoning": reply.reasoning, "usage": reply.usage()})
    return refined, log_rows


def _proposal_rows(task: Task, proposals: Sequence[Proposal], quality: Sequence[float], clusters: Clusters,
                   with_samples: bool) -> list[dict]:
    rows = []
    for i, (p, q) in enumerate(zip(proposals, quality)):
        row = {"agent": p.agent, "summary": task.describe(p.payload), "payload": p.payload, "text": p.text,
               "reasoning": p.reasoning, "alpha": p.alpha, "quality": q, "score": task.score(p.payload),
               "cluster": clusters.labels[i], "action": p.action, "declared": p.declared, "best_sample": p.best}
        if with_samples:  # the k samples are the same before and after refinement: stored once
            row["samples"] = p.samples
        rows.append(row)
    return rows


def proposals_from_rows(rows: Sequence[dict], samples_from: Sequence[dict] | None = None) -> list[Proposal]:
    """Proposals back from a record's ``proposals_pre``/``proposals_post`` rows (ablations re-run
    only the aggregation call on them)."""
    samples_from = samples_from or rows
    return [Proposal(r["agent"], r["text"], r["payload"], r["alpha"], s.get("samples", []), r.get("best_sample", 0),
                     r.get("action", "UNCHANGED"), r.get("declared"), r.get("reasoning"))
            for r, s in zip(rows, samples_from)]


#: Task kinds by name: a factory ``(tests, **options) -> Task`` each.
SCMOA_TASKS: Registry[Callable[..., Task]] = Registry("SC-MoA task")


@SCMOA_TASKS.register("qa")
def _qa_task(tests: Sequence[Any] | None = None, **options: Any) -> Task:
    if tests:
        raise ValueError("QA tasks take no tests; pass task='code' for programs")
    return QATask(clustering=options.get("qa_clustering", "string"))


@SCMOA_TASKS.register("code")
def _code_task(tests: Sequence[Any] | None = None, **options: Any) -> Task:
    if not tests:
        raise ValueError("task='code' needs the public tests (tests=[...]) for clustering and the override")
    options.pop("qa_clustering", None)
    runner = options.pop("runner", None)
    test_names = options.pop("test_names", None)
    if runner is None:
        from concord.papers.scmoa.code_runner import make_runner

        runner = make_runner(**options)
    return CodeTask(public_tests=list(tests), runner=runner, test_names=test_names)


def make_task(task: str | Task, tests: Sequence[Any] | None = None, **code_options: Any) -> Task:
    """``"qa"`` or ``"code"`` (with public ``tests``) as a :class:`Task`; a Task passes through.

    QA options: ``qa_clustering`` = ``"string"`` (J.6, default) or ``"equivalence"``.
    """
    if not isinstance(task, str):
        return task
    return SCMOA_TASKS.get(task)(tests, **code_options)


def run_scmoa(question: str, chat: Chat, *, n: int, k: int, task: str | Task, tests: Sequence[Any] | None = None,
              perturbation: str = "paraphrase", paraphrase_chat: Chat | None = None,
              aggregate_chat: Chat | None = None, paraphrases: Sequence[str] | None = None, refine: bool = True,
              gate: float | None = None, max_paraphrase_attempts: int = 3, on_paraphrase_failure: str = "original",
              sampling: dict[str, Any] | None = None, tag_prefix: str = "scmoa",
              code_options: dict[str, Any] | None = None, trace_chars: int | None = None) -> SCMoAResult:
    """Run SC-MoA (Algorithm 1) on one question.

    Args:
        question: the problem text (ground truth never enters a prompt).
        chat: the proposer (and refiner) model, any :mod:`concord.chat` back-end.
        n: perturbations N; k: samples per perturbation (best-of-k, intra-agreement alpha_i).
        task: ``"qa"``, ``"code"`` (then ``tests`` are the public tests) or a :class:`Task`.
        perturbation: ``paraphrase`` (Appendix L; by ``paraphrase_chat`` if given, else ``chat``),
            ``persona`` (J.1/J.2) or ``none``. ``paraphrases``: reuse ready-made ones.
        aggregate_chat: the aggregator model (default ``chat``; Appendix H.1 uses a weaker one).
        refine: ``False`` skips Phase 2 (the Section 3 controlled setting: synthesis over the
            pre-refinement proposals).
        gate: consensus-gated variant -- when the pre-refinement consensus reaches it, return the
            majority's best proposal without refinement or aggregation (the default ``None``
            always aggregates, as SC-MoA prescribes).
        trace_chars: cap on each trace shown to refiners and the aggregator (default: whole).

    The record holds every proposal's text and reasoning channel, the clusters before and after
    refinement, the refinement log, the aggregate, the override decision and per-phase ``calls``
    and token ``usage``.
    """
    if n < 1:
        raise ValueError(f"n (perturbations) must be >= 1, got {n}")
    if gate is not None and not 0 < gate <= 1:
        raise ValueError(f"gate must be a consensus threshold in (0, 1], got {gate}")
    task_obj = make_task(task, tests, **(code_options or {}))
    sampling = dict(sampling or {})
    logs = {"perturb": CallLog(paraphrase_chat or chat), "propose": CallLog(chat), "refine": CallLog(chat),
            "aggregate": CallLog(aggregate_chat or chat)}

    if paraphrases is not None and perturbation == "paraphrase":
        perts, pert_record = _given_paraphrases(paraphrases, n)
    else:
        perts, pert_record = perturb(question, logs["perturb"], n, mode=perturbation,
                                     personas=task_obj.personas, max_attempts=max_paraphrase_attempts,
                                     on_failure=on_paraphrase_failure, sampling=sampling)

    # Phase 1: proposals, best-of-k, intra-agreement.
    proposals = generate_proposals(task_obj, perts, logs["propose"], k, prefix=tag_prefix, sampling=sampling)
    payloads, quality_pre, pre, vote_pre_idx = _clustered(task_obj, proposals)
    record: dict[str, Any] = {
        "task": task_obj.kind, "n": n, "k": k, "perturbation": pert_record,
        "proposals_pre": _proposal_rows(task_obj, proposals, quality_pre, pre, True),
        "clusters_pre": pre.to_dict(), "vote_pre": payloads[vote_pre_idx] if vote_pre_idx is not None else None,
        "vote_pre_index": vote_pre_idx, "gate": gate, "gated": False, "refined": refine,
    }

    if gate is not None and pre.consensus >= gate:
        record.update(gated=True, refinement=[], clusters_post=pre.to_dict(), vote_post=record["vote_pre"],
                      aggregate=None, override=False, final=record["vote_pre"], final_source="gate", **_accounting(logs))
        return SCMoAResult(record["vote_pre"], proposals[vote_pre_idx].text if vote_pre_idx is not None else "", record)

    # Phase 2: anchored refinement of minorities only.
    if refine:
        post_props, refinement = refine_minorities(task_obj, question, perts, proposals, pre, quality_pre,
                                                   logs["refine"], sampling=sampling, trace_chars=trace_chars)
    else:
        post_props, refinement = list(proposals), []
    post_payloads, quality_post, post, vote_post_idx = _clustered(task_obj, post_props)
    record.update(refinement=refinement, proposals_post=_proposal_rows(task_obj, post_props, quality_post, post, False),
                  clusters_post=post.to_dict(),
                  vote_post=post_payloads[vote_post_idx] if vote_post_idx is not None else None,
                  vote_post_index=vote_post_idx)

    # Phase 3: universal aggregation over all N traces with the consensus-evolution record.
    messages = aggregation_messages(task_obj, question, perts, post_props, quality_post, pre, post, n, k,
                                    refined=refine, trace_chars=trace_chars)
    agg = logs["aggregate"].complete(messages, **sampling)
    final, final_text = _aggregate_or_override(task_obj, agg, post_props, post, record)
    record.update(_accounting(logs))
    return SCMoAResult(final, final_text, record)


def _clustered(task_obj: Task, proposals: Sequence[Proposal]) -> tuple[list, list[float], Clusters, int | None]:
    """A round of proposals' payloads, their quality, their clusters and the vote's index."""
    payloads = [p.payload for p in proposals]
    quality = task_obj.quality(payloads)
    clusters = cluster(task_obj.group(payloads), quality, [p is not None for p in payloads])
    return payloads, quality, clusters, representative(clusters, quality)


def _given_paraphrases(paraphrases: Sequence[str], n: int) -> tuple[list[Perturbation], dict]:
    """Ready-made paraphrases as the perturbations, and their record (no model call)."""
    if len(paraphrases) != n:
        raise ValueError(f"{len(paraphrases)} paraphrases given for n={n}")
    perts = [Perturbation(f"para{i + 1}", t) for i, t in enumerate(paraphrases)]
    return perts, {"mode": "paraphrase", "calls": 0, "given": True, "perturbations": [asdict(p) for p in perts]}


def _accounting(logs: dict[str, CallLog]) -> dict:
    """Calls and token usage per phase (and the total of calls)."""
    calls = {phase: len(lg.completions) for phase, lg in logs.items()}
    usage = {phase: lg.usage() for phase, lg in logs.items()}
    return {"calls": {**calls, "total": sum(calls.values())}, "usage": usage}


def _aggregate_or_override(task_obj: Task, agg, post_props: Sequence[Proposal], post: Clusters,
                           record: dict) -> tuple[Any, str]:
    """The final answer and its text: the aggregate, unless the score-based override fires (code
    only: on QA every answer scores 1.0 and it never does); the decision goes into ``record``."""
    agg_payload = task_obj.extract(agg.text)
    agg_score = task_obj.score(agg_payload)
    post_payloads = [p.payload for p in post_props]
    scores = [task_obj.score(p) for p in post_payloads]
    best = select_override(scores, post)
    fired = bool(task_obj.override) and agg_score < scores[best]
    final, final_text = (post_payloads[best], post_props[best].text) if fired else (agg_payload, agg.text)
    record.update(
        aggregate={"text": agg.text, "reasoning": agg.reasoning, "payload": agg_payload,
                   "summary": task_obj.describe(agg_payload), "score": agg_score, "usage": agg.usage()},
        best_proposal=best, best_score=scores[best], override=fired, final=final,
        final_source="override" if fired else "aggregate",
    )
    return final, final_text
