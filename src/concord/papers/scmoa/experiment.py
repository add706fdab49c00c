"""Run SC-MoA and the baselines over a benchmark and grade them: one record per question.

Ground truth never enters a prompt: answers are graded after every method has finished. QA
answers are graded with :func:`concord.answers.grade` (option letters compare after
normalisation); a program is correct when it passes every test, public and hidden.

Besides the Table 1 methods, a record can carry

* ``section3``: the Section 3 controlled experiment -- LLM synthesis over the *pre-refinement*
  proposals (no Phase 2) against the majority vote over the same proposals (Tables 29-30). The
  proposals are the SC-MoA run's own (same prompts, same variant tags: served by the call cache),
  so the only new call is the aggregation;
* ``views``: the aggregation call re-run under each requested view of the post-refinement
  proposals (trace ablation, Table 36; information ladder, Table 37; :mod:`concord.papers.scmoa.views`);
* ``usage``: calls and tokens per method (Table 28), from :class:`concord.chat.CallLog`.

A model call that fails for good (:class:`concord.chat.ChatError`) makes the question's record an
``error`` record naming it; the calls that succeeded stay cached.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from concord.chat import CallLog, Chat, ChatError
from concord.papers.scmoa import baselines, prompts, views as views_mod
from concord.papers.scmoa.perturb import Perturbation
from concord.papers.scmoa.pipeline import Clusters, make_task, proposals_from_rows, run_scmoa
from concord.papers.scmoa.tasks import normalise_answer
from concord.registry import Registry

log = logging.getLogger(__name__)

#: Methods a run can add beside SC-MoA (Table 1 and its appendix variants).


def grade_qa(pred: str | None, gold: Any) -> bool:
    if pred is None or gold is None:
        return False
    if normalise_answer(pred) == normalise_answer(str(gold)):
        return True
    from concord.answers import grade

    return bool(grade(pred, str(gold)))


def _grader(question: dict, code_options: dict) -> Callable[[Sequence[str | None]], tuple[list[bool], list[bool] | None]]:
    """Grade many payloads of one question at once (code: one sandbox batch): correctness, and
    for code also whether each passes every *public* test (Table 15)."""
    if question.get("task", "qa") == "qa":
        return lambda payloads: ([grade_qa(p, question["answer"]) for p in payloads], None)
    from concord.papers.scmoa.code_runner import make_runner

    runner = code_options.get("runner") or make_runner(**{k: v for k, v in code_options.items()
                                                          if k not in ("test_names", "qa_clustering")})
    public = list(question["tests_public"])
    tests = public + list(question.get("tests_hidden") or [])

    def grade(payloads):
        todo = list(dict.fromkeys(p for p in payloads if p is not None))
        rows = dict(zip(todo, runner(todo, tests))) if todo else {}
        full = {p: all(r.passed for r in row) for p, row in rows.items()}
        pub = {p: all(r.passed for r in row[: len(public)]) for p, row in rows.items()}
        return [full.get(p, False) for p in payloads], [pub.get(p, False) for p in payloads]

    return grade


def run_views(record: dict, question: str, task: Any, chat: Chat, view_names: Sequence[str], *,
              sampling: dict[str, Any] | None = None, seed: str = "0") -> dict[str, dict]:
    """Re-run the aggregation call of an SC-MoA ``record`` under each view; the extracted answer,
    calls and tokens of each (``full`` reuses the record's own aggregate)."""
    perts = [Perturbation(**p) for p in record["perturbation"]["perturbations"]]
    post_props = proposals_from_rows(record["proposals_post"], record["proposals_pre"])
    quality = [r["quality"] for r in record["proposals_post"]]
    pre, post = Clusters.from_dict(record["clusters_pre"]), Clusters.from_dict(record["clusters_post"])
    out: dict[str, dict] = {}
    for view in views_mod.check_views(view_names):
        if view == "full":
            agg = record["aggregate"]
            out[view] = {"answer": agg["payload"], "calls": 0, "usage": {"calls": 0}}
            continue
        messages = views_mod.view_messages(view, task, question, perts, post_props, quality, pre, post,
                                           record["n"], record["k"], seed=seed, refined=record.get("refined", True))
        calls = CallLog(chat)
        reply = calls.complete(messages, **(sampling or {}))
        out[view] = {"answer": task.extract(reply.text), "calls": 1, "usage": calls.usage()}
    return out


def run_question(question: dict, chat: Chat, *, n: int, k: int, k_sweep: Sequence[int] = (),
                 n_sweep: Sequence[int] = (), methods: Sequence[str] = ("cot", "sc", "moa_para", "self_moa"),
                 sc_k: int = 10, sc_temperatures: Sequence[float] = (0.7,), moa_n: int = 4, self_moa_k: int = 6,
                 persona_moa_n: int = 5, textgrad_iterations: int = 3, moa_pool: Sequence[Chat] | None = None,
                 goa_agents: Sequence[tuple[str, Chat, str]] | None = None, goa_n: int = 3, goa_k: int | None = None,
                 goa_temperature: float = 0.7, gate_thresholds: Sequence[float] = (), perturbation: str = "paraphrase",
                 paraphrase_chat: Chat | None = None, aggregate_chat: Chat | None = None,
                 max_paraphrase_attempts: int = 3, sampling: dict[str, Any] | None = None,
                 code_options: dict[str, Any] | None = None, section3: bool = False,
                 views: Sequence[str] = (), trace_chars: int | None = None,
                 diversity_sources: Sequence[tuple[str, float]] = ()) -> dict:
    """SC-MoA and the requested methods on one question, every answer graded.

    Besides ``methods`` (their answer, correctness, calls, token usage) the record carries the
    SC-MoA record, the graded pre-refinement proposals (``agents_correct``), SC samples
    (``sc_correct``), every sample and refined proposal (``oracle``: whether any is right, Table
    23), the aggregate alone and best-of-N (Table 22), the sweeps over k and N, the Section 3
    experiment, the aggregator views and the diversity-source runs (Table 27) when asked.
    """
    for method in methods:
        SCMOA_METHODS.get(method)  # an unknown name fails here, before any model call
    views = views_mod.check_views(views)
    code_options = dict(code_options or {})
    kind = question.get("task", "qa")
    tests = question.get("tests_public") if kind == "code" else None
    common = {"perturbation": perturbation, "paraphrase_chat": paraphrase_chat, "aggregate_chat": aggregate_chat,
              "max_paraphrase_attempts": max_paraphrase_attempts, "sampling": sampling, "trace_chars": trace_chars}
    task = make_task(kind, tests, **code_options)
    sampling = sampling or {}
    prompt = question["prompt"]

    def scmoa(**over: Any):
        """SC-MoA on this question at the run's settings, ``over`` replacing some."""
        return run_scmoa(prompt, chat, task=task, **{"n": n, "k": k, **common, **over})

    result = scmoa()
    rec = result.record
    out: dict[str, Any] = {"id": question["id"], "task": kind, "gold": question.get("answer"),
                           "subject": question.get("subject"), "record": rec, "methods": {}}
    answers = _scmoa_answers(result.answer, rec)
    extra: dict[str, Any] = {}
    sc_samples: list[str | None] = []
    ctx = MethodContext(prompt=prompt, chat=chat, task=task, sampling=sampling, record=rec, options=dict(
        sc_k=sc_k, sc_temperatures=sc_temperatures, moa_n=moa_n, self_moa_k=self_moa_k, persona_moa_n=persona_moa_n,
        textgrad_iterations=textgrad_iterations, moa_pool=moa_pool, goa_agents=goa_agents, goa_n=goa_n, goa_k=goa_k,
        goa_temperature=goa_temperature, paraphrase_chat=paraphrase_chat,
        max_paraphrase_attempts=max_paraphrase_attempts))
    for method in methods:
        ran = SCMOA_METHODS.get(method)(ctx)
        answers.update(ran.answers)
        extra.update(ran.extra)
        if ran.sc_samples is not None:
            sc_samples = ran.sc_samples

    side = _SideRuns(
        k_sweep=_k_sweep(scmoa, result, k, k_sweep),
        n_sweep=_n_sweep(scmoa, result, n, n_sweep, lambda nn: baselines.self_consistency(
            prompt, chat, task, k=nn, sampling=sampling)),
        section3=_section3(scmoa, rec, question["id"]) if section3 else {},
        diversity=_diversity(scmoa, sampling, diversity_sources),
        views=run_views(rec, prompt, task, aggregate_chat or chat, views, sampling=sampling,
                        seed=str(question["id"])) if views else {})
    _grade(out, question, code_options, answers, sc_samples, side)
    out.update(extra)
    for theta in gate_thresholds:
        # Simulated on this ungated run (Appendix H): an exit returns the pre-refinement vote and
        # stops after the proposals, so it also costs only the proposal calls.
        src = "vote_pre" if rec["clusters_pre"]["consensus"] >= theta else "scmoa"
        label = "gated_inf" if math.isinf(theta) else f"gated_{theta:g}"
        out["methods"][label] = {**out["methods"][src], "answer": baselines.gated_answer(rec, theta)}
    return out


def _scmoa_answers(answer: str | None, rec: dict) -> dict[str, tuple[str | None, int, dict | None]]:
    """(answer, calls, usage) of SC-MoA and its two votes; the votes cost the calls that precede them."""
    calls = rec["calls"]
    return {
        "scmoa": (answer, calls["total"], _total_usage(rec["usage"])),
        "vote_pre": (rec["vote_pre"], calls["perturb"] + calls["propose"],
                     _total_usage({p: rec["usage"][p] for p in ("perturb", "propose")})),
        "vote_post": (rec["vote_post"], calls["total"] - calls["aggregate"],
                      _total_usage({p: rec["usage"][p] for p in ("perturb", "propose", "refine")})),
    }


@dataclass
class _SideRuns:
    """The runs a question's record carries beside the methods (each empty when not asked)."""

    k_sweep: dict[str, Any]
    n_sweep: dict[str, Any]
    section3: dict[str, Any]
    diversity: dict[str, Any]
    views: dict[str, Any]


def _k_sweep(scmoa: Callable, result: Any, k: int, k_sweep: Sequence[int]) -> dict[str, Any]:
    sweep: dict[str, Any] = {}
    for kk in k_sweep:
        if kk == k:
            sweep[str(kk)] = {"answer": result.answer, "calls": result.record["calls"]["total"]}
            continue
        r = scmoa(k=kk)
        sweep[str(kk)] = {"answer": r.answer, "calls": r.record["calls"]["total"]}
    return sweep


def _n_sweep(scmoa: Callable, result: Any, n: int, n_sweep: Sequence[int], self_consistency: Callable) -> dict[str, Any]:
    """Figure 6c: SC-MoA at N perturbations vs SC with N samples."""
    nsweep: dict[str, Any] = {}
    for nn in n_sweep:
        r = scmoa(n=nn) if nn != n else result
        sc_r = self_consistency(nn)
        nsweep[str(nn)] = {"scmoa": r.answer, "sc": sc_r["answer"], "scmoa_calls": r.record["calls"]["total"],
                           "sc_calls": nn}
    return nsweep


def _section3(scmoa: Callable, rec: dict, question_id: Any) -> dict[str, Any]:
    """Section 3: LLM synthesis over the pre-refinement proposals against their majority vote."""
    pre_synth = scmoa(refine=False)
    if pre_synth.record["vote_pre"] != rec["vote_pre"]:  # same cached proposals, same vote
        raise RuntimeError(f"{question_id}: the pre-refinement vote changed between runs; is the cache shared?")
    return {"vote": rec["vote_pre"], "synth": pre_synth.answer, "override": pre_synth.record["override"],
            "aggregate_usage": pre_synth.record["usage"]["aggregate"], "consensus": rec["clusters_pre"]["consensus"]}


def _diversity(scmoa: Callable, sampling: dict[str, Any], sources: Sequence[tuple[str, float]]) -> dict[str, Any]:
    """Table 27: the same pipeline, another source of diversity."""
    diversity: dict[str, Any] = {}
    for pert, temp in sources:
        r = scmoa(perturbation=pert, sampling={**sampling, "temperature": float(temp)})
        diversity[f"{pert}@T={float(temp):g}"] = {"answer": r.answer, "calls": r.record["calls"]["total"],
                                                  "agents": [p["payload"] for p in r.record["proposals_pre"]]}
    return diversity


def _grade(out: dict, question: dict, code_options: dict, answers: dict, sc_samples: list, side: _SideRuns) -> None:
    """Grade every answer of the record in one batch (one sandbox round for code) and write the
    verdicts into ``out`` and the side runs."""
    rec = out["record"]
    names = list(answers)
    agg = (rec.get("aggregate") or {}).get("payload")
    best = rec["proposals_post"][rec["best_proposal"]]["payload"] if "best_proposal" in rec else None
    s3 = side.section3
    groups = {
        "methods": [answers[m][0] for m in names], "agents": [p["payload"] for p in rec["proposals_pre"]],
        "sc": sc_samples, "sweep": [v["answer"] for v in side.k_sweep.values()],
        "nsweep": [x for v in side.n_sweep.values() for x in (v["scmoa"], v["sc"])],
        "s3": [s3["vote"], s3["synth"]] if s3 else [], "views": [v["answer"] for v in side.views.values()],
        "decomp": [agg, best],
        "oracle": [s["payload"] for p in rec["proposals_pre"] for s in p["samples"]]
                  + [p["payload"] for p in rec.get("proposals_post", [])],
        "diversity": [x for v in side.diversity.values() for x in [v["answer"]] + v["agents"]],
    }
    flat = [x for g in groups.values() for x in g]
    correct, public = _grader(question, code_options)(flat)
    it_c, it_p = iter(correct), iter(public if public is not None else [None] * len(flat))
    graded = {g: [(next(it_c), next(it_p)) for _ in vals] for g, vals in groups.items()}
    for m, (c, pub) in zip(names, graded["methods"]):
        out["methods"][m] = {"answer": answers[m][0], "correct": c, "calls": answers[m][1], "usage": answers[m][2]}
        if pub is not None:
            out["methods"][m]["public_pass"] = pub
    out["agents_correct"] = [c for c, _ in graded["agents"]]
    out["sc_correct"] = [c for c, _ in graded["sc"]]
    _grade_side_runs(out, side, graded)
    (agg_c, agg_p), (best_c, _) = graded["decomp"]
    out["decomposition"] = {"aggregate_correct": agg_c, "best_of_n_correct": best_c, "override": rec.get("override", False)}
    if agg_p is not None:
        out["decomposition"]["aggregate_public_pass"] = agg_p
    out["oracle_correct"] = any(c for c, _ in graded["oracle"])
    items = iter(graded["diversity"])
    for v in side.diversity.values():
        v["correct"] = next(items)[0]
        v["agents_correct"] = [next(items)[0] for _ in v["agents"]]
    if side.diversity:
        out["diversity"] = side.diversity


def _grade_side_runs(out: dict, side: _SideRuns, graded: dict[str, list]) -> None:
    """The sweeps', Section 3's and the views' verdicts, into ``out`` in the record's order."""
    for v, (c, _) in zip(side.k_sweep.values(), graded["sweep"]):
        v["correct"] = c
    out["k_sweep"] = side.k_sweep
    pairs = iter(graded["nsweep"])
    for v in side.n_sweep.values():
        v["scmoa_correct"], v["sc_correct"] = next(pairs)[0], next(pairs)[0]
    if side.n_sweep:
        out["n_sweep"] = side.n_sweep
    s3 = side.section3
    if s3:
        (s3["vote_correct"], _), (s3["synth_correct"], _) = graded["s3"]
        out["section3"] = s3
    for v, (c, _) in zip(side.views.values(), graded["views"]):
        v["correct"] = c
    if side.views:
        out["views"] = side.views


def _total_usage(by_phase: dict[str, dict]) -> dict:
    """Sum per-phase usage dicts (a count that any phase lacks is unknown: None)."""
    total: dict[str, Any] = {}
    for usage in by_phase.values():
        for key, value in usage.items():
            if key not in total:
                total[key] = value
            elif total[key] is None or value is None:
                total[key] = None
            else:
                total[key] += value
    return total


def run_benchmark(questions: Sequence[dict], chat: Chat, *,
                  map_questions: Callable[[Callable[[dict], dict], Sequence[dict]], list[dict]] | None = None,
                  **options: Any) -> list[dict]:
    """:func:`run_question` over every question; a question whose model calls fail for good becomes
    ``{"id", "task", "error"}`` and the run goes on (its successful calls are cached).

    ``map_questions`` runs the questions (default: one after another); with
    :meth:`concord.chat.LockstepChat.map` of the chat below ``chat``'s cache, the same phase of
    every question goes to the engine as one batch. Records come back in question order.
    """
    def one(q: dict) -> dict:
        try:
            return run_question(q, chat, **options)
        except ChatError as exc:
            return {"id": q["id"], "task": q.get("task", "qa"), "error": str(exc)}

    records = (map_questions or (lambda fn, qs: [fn(q) for q in qs]))(one, list(questions))
    for i, (q, record) in enumerate(zip(questions, records), 1):
        if "error" in record:
            log.error("scmoa %d/%d %s: %s", i, len(questions), q["id"], record["error"])
        else:
            log.info("scmoa %d/%d %s: scmoa=%s vote=%s", i, len(questions), q["id"],
                     record["methods"]["scmoa"]["correct"], record["methods"]["vote_pre"]["correct"])
    return records


# ------------------------------------------------------------------ the baselines, by name


@dataclass
class MethodContext:
    """What a baseline may use on one question: the prompt, the model, the task, the sampling
    settings, SC-MoA's own record (its Phase 1 proposals, for the selection baselines) and the
    budgets of :func:`run_question` (``options``)."""

    prompt: str
    chat: Chat
    task: Any
    sampling: dict[str, Any]
    record: dict[str, Any]
    options: dict[str, Any]


@dataclass
class MethodRun:
    """A baseline's outcome: ``answers`` row name -> (answer, model calls, token usage); ``extra``
    goes into the question's record; ``sc_samples`` are self-consistency's graded samples."""

    answers: dict[str, tuple[str | None, int, dict | None]]
    extra: dict[str, Any] = field(default_factory=dict)
    sc_samples: list[str | None] | None = None


#: Every baseline of the paper's Table 1 and appendix by name; ``run_question(methods=[...])`` runs them.
SCMOA_METHODS: Registry[Callable[[MethodContext], MethodRun]] = Registry("SC-MoA baseline")


def _one(name: str, r: dict, logged: CallLog) -> MethodRun:
    return MethodRun({name: (r["answer"], r["calls"], logged.usage())})


@SCMOA_METHODS.register("cot")
def _cot(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    return _one("cot", baselines.zero_shot_cot(ctx.prompt, logged, ctx.task, sampling=ctx.sampling), logged)


@SCMOA_METHODS.register("sc")
def _sc(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    r = baselines.self_consistency(ctx.prompt, logged, ctx.task, k=ctx.options["sc_k"], sampling=ctx.sampling)
    run = _one("sc", r, logged)
    run.sc_samples = [s["payload"] for s in r["samples"]]
    return run


@SCMOA_METHODS.register("sc_temp")
def _sc_temp(ctx: MethodContext) -> MethodRun:
    out = {}
    for temp in ctx.options["sc_temperatures"]:
        logged = CallLog(ctx.chat)
        r = baselines.self_consistency_temperature(ctx.prompt, logged, ctx.task, k=ctx.options["sc_k"],
                                                   temperature=temp, sampling=ctx.sampling)
        out[f"sc_t{temp:g}"] = (r["answer"], r["calls"], logged.usage())
    return MethodRun(out)


@SCMOA_METHODS.register("moa")
def _moa(ctx: MethodContext) -> MethodRun:
    pool = [CallLog(c) for c in (ctx.options["moa_pool"] or [ctx.chat] * ctx.options["moa_n"])]
    agg = CallLog(ctx.chat)
    r = baselines.moa_pool(ctx.prompt, pool, agg, ctx.task, sampling=ctx.sampling)
    return MethodRun({"moa": (r["answer"], r["calls"], _total_usage({i: c.usage() for i, c in enumerate(pool + [agg])}))})


@SCMOA_METHODS.register("moa_para")
def _moa_para(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    r = baselines.moa(ctx.prompt, logged, ctx.task, n=ctx.options["moa_n"], paraphrase_chat=ctx.options["paraphrase_chat"],
                      max_paraphrase_attempts=ctx.options["max_paraphrase_attempts"], sampling=ctx.sampling)
    return _one("moa_para", r, logged)


@SCMOA_METHODS.register("persona_moa")
def _persona_moa(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    personas = list(ctx.task.personas.values())[: ctx.options["persona_moa_n"]]
    r = baselines.moa_pool(ctx.prompt, [logged] * len(personas), logged, ctx.task, sampling=ctx.sampling,
                           personas=personas, prefix="pmoa")
    return _one("persona_moa", r, logged)


@SCMOA_METHODS.register("self_moa")
def _self_moa(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    r = baselines.self_moa(ctx.prompt, logged, ctx.task, k=ctx.options["self_moa_k"], sampling=ctx.sampling)
    return _one("self_moa", r, logged)


@SCMOA_METHODS.register("textgrad")
def _textgrad(ctx: MethodContext) -> MethodRun:
    logged = CallLog(ctx.chat)
    r = baselines.textgrad(ctx.prompt, logged, ctx.task, iterations=ctx.options["textgrad_iterations"],
                           sampling=ctx.sampling)
    return _one("textgrad", r, logged)


@SCMOA_METHODS.register("goa")
def _goa(ctx: MethodContext) -> MethodRun:
    members = ctx.options["goa_agents"] or [
        (f"agent{i + 1}", ctx.chat, "the proposer model") for i in range(ctx.options["goa_n"])
    ]
    logs = [CallLog(c) for _, c, _ in members]
    meta = CallLog(ctx.chat)
    r = baselines.goa(ctx.prompt, [(nm, lg, card) for (nm, _, card), lg in zip(members, logs)], meta, ctx.task,
                      k=ctx.options["goa_k"], sampling={**ctx.sampling, "temperature": ctx.options["goa_temperature"]})
    usage = _total_usage({i: c.usage() for i, c in enumerate(logs + [meta])})
    # One run, two read-outs: mean pooling (GoA_Mean) and max pooling.
    return MethodRun({"goa": (r["answer"], r["calls"], usage), "goa_max": (r["max_answer"], r["calls"], usage)})


@SCMOA_METHODS.register("pairwise_judge")
def _pairwise_judge(ctx: MethodContext) -> MethodRun:
    """Selection over SC-MoA's Phase 1 proposals (Table 40)."""
    logged = CallLog(ctx.chat)
    proposals = ctx.record["proposals_pre"]
    traces = [prompts.trace(p["text"], p.get("reasoning")) for p in proposals]
    r = baselines.pairwise_judge(ctx.prompt, traces, logged, ctx.task, sampling=ctx.sampling)
    answer = proposals[r["selected"]]["payload"]
    return MethodRun({"pairwise_judge": (answer, r["calls"], logged.usage())},
                     extra={"pairwise_judge": {"borda": r["borda"], "selected": r["selected"], "games": r["games"]}})


BASELINES = tuple(SCMOA_METHODS.names())
