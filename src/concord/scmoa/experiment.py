"""Run SC-MoA and the baselines over a benchmark and grade them: one record per question.

Ground truth never enters a prompt: answers are graded after every method has finished. QA
answers are graded with :func:`concord.answers.grade` (option letters compare after the J.6
normalisation); a program is correct when it passes every test, public and hidden.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Sequence

from concord.chat import Chat
from concord.scmoa import baselines
from concord.scmoa.pipeline import make_task, run_scmoa
from concord.scmoa.tasks import normalise_answer

log = logging.getLogger(__name__)

BASELINES = ("cot", "sc", "moa", "self_moa")


def grade_qa(pred: str | None, gold: Any) -> bool:
    if pred is None or gold is None:
        return False
    if normalise_answer(pred) == normalise_answer(str(gold)):
        return True
    from concord.answers import grade

    return bool(grade(pred, str(gold)))


def _grader(question: dict, code_options: dict) -> Callable[[Sequence[str | None]], list[bool]]:
    """Grade many payloads of one question at once (code: one sandbox batch)."""
    if question.get("task", "qa") == "qa":
        return lambda payloads: [grade_qa(p, question["answer"]) for p in payloads]
    from concord.scmoa.code_runner import make_runner

    runner = code_options.get("runner") or make_runner(**{k: v for k, v in code_options.items() if k != "test_names"})
    tests = list(question["tests_public"]) + list(question.get("tests_hidden") or [])

    def grade(payloads):
        todo = list(dict.fromkeys(p for p in payloads if p is not None))
        verdict = {p: all(r.passed for r in row) for p, row in zip(todo, runner(todo, tests))} if todo else {}
        return [verdict.get(p, False) for p in payloads]

    return grade


def run_question(question: dict, chat: Chat, *, n: int, k: int, k_sweep: Sequence[int] = (),
                 methods: Sequence[str] = BASELINES, sc_k: int = 10, moa_n: int = 4, self_moa_k: int = 6,
                 gate_thresholds: Sequence[float] = (), perturbation: str = "paraphrase",
                 paraphrase_chat: Chat | None = None, max_paraphrase_attempts: int = 3,
                 sampling: dict[str, Any] | None = None, code_options: dict[str, Any] | None = None) -> dict:
    unknown = set(methods) - set(BASELINES)
    if unknown:
        raise ValueError(f"unknown baseline(s) {sorted(unknown)}; expected some of {BASELINES}")
    code_options = dict(code_options or {})
    kind = question.get("task", "qa")
    tests = question.get("tests_public") if kind == "code" else None
    common = {"perturbation": perturbation, "paraphrase_chat": paraphrase_chat,
              "max_paraphrase_attempts": max_paraphrase_attempts, "sampling": sampling,
              "code_options": code_options}
    task = make_task(kind, tests, **code_options)
    result = run_scmoa(question["prompt"], chat, n=n, k=k, task=task, tests=None, **common)
    rec = result.record
    out: dict[str, Any] = {"id": question["id"], "task": kind, "gold": question.get("answer"),
                           "subject": question.get("subject"), "record": rec, "methods": {}}
    answers: dict[str, tuple[str | None, int]] = {
        "scmoa": (result.answer, rec["calls"]["total"]),
        "vote_pre": (rec["vote_pre"], rec["calls"]["perturb"] + rec["calls"]["propose"]),
        "vote_post": (rec["vote_post"], rec["calls"]["total"] - rec["calls"]["aggregate"]),
    }
    sampling = sampling or {}
    if "cot" in methods:
        r = baselines.zero_shot_cot(question["prompt"], chat, task, sampling=sampling)
        answers["cot"] = (r["answer"], r["calls"])
    sc_samples: list[str | None] = []
    if "sc" in methods:
        r = baselines.self_consistency(question["prompt"], chat, task, k=sc_k, sampling=sampling)
        answers["sc"] = (r["answer"], r["calls"])
        sc_samples = [s["payload"] for s in r["samples"]]
    if "moa" in methods:
        r = baselines.moa(question["prompt"], chat, task, n=moa_n, paraphrase_chat=paraphrase_chat,
                          max_paraphrase_attempts=max_paraphrase_attempts, sampling=sampling)
        answers["moa"] = (r["answer"], r["calls"])
    if "self_moa" in methods:
        r = baselines.self_moa(question["prompt"], chat, task, k=self_moa_k, sampling=sampling)
        answers["self_moa"] = (r["answer"], r["calls"])
    sweep: dict[str, Any] = {}
    for kk in k_sweep:
        if kk == k:
            sweep[str(kk)] = {"answer": result.answer}
            continue
        r = run_scmoa(question["prompt"], chat, n=n, k=kk, task=task, **common)
        sweep[str(kk)] = {"answer": r.answer}

    # Grade everything in one batch per question (one sandbox round for code).
    agents = [p["payload"] for p in rec["proposals_pre"]]
    names = list(answers)
    payloads = [answers[m][0] for m in names] + agents + sc_samples + [v["answer"] for v in sweep.values()]
    verdicts = _grader(question, code_options)(payloads)
    for i, m in enumerate(names):
        out["methods"][m] = {"answer": answers[m][0], "correct": verdicts[i], "calls": answers[m][1]}
    pos = len(names)
    out["agents_correct"] = verdicts[pos : pos + len(agents)]
    pos += len(agents)
    out["sc_correct"] = verdicts[pos : pos + len(sc_samples)]
    pos += len(sc_samples)
    for key, v in zip(sweep, verdicts[pos:]):
        sweep[key]["correct"] = v
    out["k_sweep"] = sweep
    for theta in gate_thresholds:
        # Simulated on this ungated run (Appendix H): an exit returns the pre-refinement vote and
        # stops after the proposals, so it also costs only the proposal calls.
        src = "vote_pre" if rec["clusters_pre"]["consensus"] >= theta else "scmoa"
        label = "gated_inf" if math.isinf(theta) else f"gated_{theta:g}"
        out["methods"][label] = {**out["methods"][src], "answer": baselines.gated_answer(rec, theta)}
    return out


def run_benchmark(questions: Sequence[dict], chat: Chat, **options: Any) -> list[dict]:
    """:func:`run_question` over every question, in order."""
    records = []
    for i, q in enumerate(questions, 1):
        records.append(run_question(q, chat, **options))
        log.info("scmoa %d/%d %s: scmoa=%s vote=%s", i, len(questions), q["id"],
                 records[-1]["methods"]["scmoa"]["correct"], records[-1]["methods"]["vote_pre"]["correct"])
    return records
