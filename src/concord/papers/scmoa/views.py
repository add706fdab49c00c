"""What the aggregator sees: the trace ablation (Table 36) and the information ladder (Table 37).

Both hold Phases 1-3 fixed -- the same proposals, the same refinement, the same post-refinement
clusters, read back from an SC-MoA record -- and change only the Phase 4 aggregation call
(Appendix X.1, X.2). Each *view* builds that call's messages:

========================  ===========================================================================
view                      the aggregator receives
========================  ===========================================================================
``full``                  the unmodified J.4 call (SC-MoA's own aggregate; no extra call)
``answer_only``           J.4 with every proposal reduced to its extracted answer (metadata and the
                          consensus evolution kept) -- the ladder's "Answers + metadata"
``majority_only``         J.4 with only the post-refinement majority's proposals
``minority_only``         J.4 with only the dissenting proposals; when there is none, a message that
                          all N agree on the answer (Appendix X.1, degenerate cases)
``permuted_steps``        J.4 with the lines of every trace shuffled (seeded; the answer line stays last)
``no_metadata``           traces with id, persona and action only (no cluster, quality, agreement),
                          evolution kept -- the ladder's "Traces + partial meta"
``no_evolution``          J.4 without the CONSENSUS_EVOLUTION block -- "Traces - evolution"
``q_only_agg``            the aggregator system prompt and the problem, no proposal (re-solve)
``q_only_cot``            the proposers' chain-of-thought prompt on the problem (re-solve control;
                          the same call as zero-shot CoT)
``answers_bare``          the problem and an unnumbered list of the extracted answers
``traces_bare``           the traces (each capped at 1,800 characters) under generic headers
========================  ===========================================================================

The paper lists the conditions, not their prompt text; the block structure follows J.4 and the
exact wording of the synthetic blocks is concord's (docs/fidelity.md).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from concord.papers.scmoa.perturb import Perturbation
from concord.papers.scmoa.pipeline import Clusters, Proposal, _letter, aggregate_system, consensus_block, proposal_note

#: Table 36 (trace ablation): conditions besides the majority vote, in the paper's order of hypotheses.
TRACE_ABLATION = ("full", "answer_only", "majority_only", "minority_only", "permuted_steps", "no_metadata",
                  "no_evolution")
#: Table 37 (information ladder), by increasing information: (view, row label, group).
INFO_LADDER = (
    ("q_only_agg", "Q-only (agg prompt)", "re-solve"),
    ("q_only_cot", "Q-only (CoT prompt)", "re-solve"),
    ("answers_bare", "Answers bare", "votes"),
    ("answer_only", "Answers + metadata", "votes"),
    ("traces_bare", "Traces bare", "traces"),
    ("no_metadata", "Traces + partial meta", "traces"),
    ("no_evolution", "Traces - evolution", "traces"),
    ("full", "Full (all info)", "traces"),
)
VIEWS = tuple(dict.fromkeys(TRACE_ABLATION + tuple(v for v, _, _ in INFO_LADDER)))
#: Appendix X.2: "full proposal text (1,800 char cap)" in the traces-bare condition.
BARE_TRACE_CHARS = 1800


def check_views(views: Sequence[str]) -> list[str]:
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown aggregator view(s) {unknown}; known: {', '.join(VIEWS)}")
    return list(dict.fromkeys(views))


def _answer_only(task: Any, prop: Proposal) -> Proposal:
    if task.kind == "code":
        text = f"```python\n{prop.payload}```" if prop.payload else "(no program)"
    else:
        text = f"Answer: {prop.payload}" if prop.payload is not None else "(no answer)"
    return Proposal(prop.agent, text, prop.payload, prop.alpha, prop.samples, prop.best, prop.action, prop.declared, None)


def _shuffle_lines(text: str, rng: random.Random, keep_last: bool) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head, tail = (lines[:-1], lines[-1:]) if keep_last and lines else (lines, [])
    rng.shuffle(head)
    return "\n".join(head + tail)


def _permuted(prop: Proposal, rng: random.Random) -> Proposal:
    reasoning = _shuffle_lines(prop.reasoning, rng, keep_last=False) if prop.reasoning else None
    return Proposal(prop.agent, _shuffle_lines(prop.text, rng, keep_last=True), prop.payload, prop.alpha, prop.samples,
                    prop.best, prop.action, prop.declared, reasoning)


def _proposal_block(i: int, pert: Perturbation, prop: Proposal, post: Clusters, quality: float, *,
                    metadata: str, refined: bool = True) -> str:
    note = proposal_note(i, prop, post, refined)
    if metadata == "full":
        head = (f"<PROPOSAL id={i + 1} persona={pert.name} cluster={_letter(post.labels[i])} quality={quality:.2f} "
                f"intra_agreement={prop.alpha:.2f}> {note}")
    elif metadata == "partial":
        head = f"<PROPOSAL id={i + 1} persona={pert.name}> {note}"
    else:
        head = "<PROPOSAL>"
    cap = BARE_TRACE_CHARS if metadata == "none" else None
    return f"{head}\n{prop.trace(cap)}\n</PROPOSAL>"


def view_messages(view: str, task: Any, question: str, perts: Sequence[Perturbation], proposals: Sequence[Proposal],
                  quality: Sequence[float], pre: Clusters, post: Clusters, n: int, k: int, *, seed: str = "0",
                  refined: bool = True) -> list[dict[str, str]]:
    """The aggregation call of one view (see the module docstring)."""
    check_views([view])
    if view == "q_only_cot":
        return [{"role": "user", "content": task.cot_template.format(question=question)}]
    system = {"role": "system", "content": aggregate_system(task, n, k, refined)}
    problem = f"<PROBLEM>\n{question}\n</PROBLEM>"
    if view == "q_only_agg":
        return [system, {"role": "user", "content": problem}]
    if view == "answers_bare":
        listed = ", ".join(task.describe(p.payload) for p in proposals) if task.kind != "code" else \
            "\n\n".join(f"```python\n{p.payload}```" if p.payload else "(no program)" for p in proposals)
        return [system, {"role": "user", "content": f"{problem}\n\n<ANSWERS>\n{listed}\n</ANSWERS>"}]

    props = list(proposals)
    keep = list(range(len(props)))
    if view == "answer_only":
        props = [_answer_only(task, p) for p in props]
    elif view == "permuted_steps":
        rng = random.Random(f"permuted-steps:{seed}")
        props = [_permuted(p, rng) for p in props]
    elif view == "majority_only":
        keep = post.members(post.majority)
    elif view == "minority_only":
        keep = [i for i in keep if post.labels[i] != post.majority]
    metadata = {"no_metadata": "partial", "traces_bare": "none"}.get(view, "full")
    items = [_proposal_block(i, perts[i], props[i], post, quality[i], metadata=metadata, refined=refined) for i in keep]
    if not items:
        summary = task.describe(props[0].payload) if props else "(none)"
        items = [f"All {n} proposals agree on the same answer ({summary}); there is no minority proposal."]
    blocks = [problem, "<PROPOSALS>\n" + "\n\n".join(items) + "\n</PROPOSALS>"]
    if view not in ("no_evolution", "traces_bare"):
        blocks.append(consensus_block(perts, pre, post, props, n, refined))
    return [system, {"role": "user", "content": "\n\n".join(blocks)}]
