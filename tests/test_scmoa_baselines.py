"""Every Table 1 / appendix baseline driven by a scripted chat: its call pattern and its budget.

Each scripted model recognises the call from its (verbatim) system prompt, records what kind of
call it was, and answers deterministically, so the tests can check the order of calls, their
number (the compute budget the paper states) and how the final answer is chosen.
"""

from __future__ import annotations

import json
import re

import pytest

from concord.chat import FunctionChat
from concord.papers.scmoa import baselines, prompts
from concord.papers.scmoa.experiment import run_question
from concord.papers.scmoa.tasks import QATask

QUESTION = "What is 6 times 7?"


class Script:
    """A scripted model: ``kinds`` logs each call's kind; ``answers`` maps kind -> reply text."""

    def __init__(self, name="m", answers=None):
        self.name = name
        self.kinds: list[str] = []
        self.calls: list[list[dict]] = []
        self.answers = answers or {}
        self.sampling: list[dict] = []

    def kind(self, messages):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        exact = {prompts.TEXTGRAD_EVAL_SYSTEM: "tg_loss", prompts.TEXTGRAD_CODE_EVAL_SYSTEM: "tg_loss",
                 prompts.TEXTGRAD_BACKWARD_SYSTEM: "tg_backward", prompts.TEXTGRAD_OPTIMIZER_SYSTEM: "tg_step",
                 prompts.JUDGE_SYSTEM: "judge", prompts.GOA_NODE_SYSTEM: "goa_node",
                 prompts.GOA_MEAN_POOL_SYSTEM: "goa_mean"}
        if system in exact:
            return exact[system]
        for prefix, kind in ((prompts.MOA_AGGREGATE_SYSTEM, "moa_synth"), ("You rephrase problems", "paraphrase"),
                             ("You are a senior problem-solver", "aggregate")):
            if system.startswith(prefix):
                return kind
        if "score how relevant" in system:
            return "goa_edge"
        if "Revise your answer in light of them" in system:
            return "goa_message"
        if "reviewing your answer" in system:
            return "refine"
        return "persona_propose" if system else "propose"

    def __call__(self, messages, sampling):
        kind = self.kind(messages)
        self.kinds.append(kind)
        self.calls.append(messages)
        self.sampling.append(sampling)
        user = messages[-1]["content"]
        if kind == "paraphrase":
            n = int(re.search(r"Rephrase the following problem (\d+) times", user).group(1))
            return json.dumps([f"Version {i}: what is 6 times 7?" for i in range(n)])
        if kind == "goa_edge":
            names = re.findall(r"<RESPONSE agent=(\S+)>", user)
            return "\n".join(f"{n}: {8 if 'agent1' in n else 2}" for n in names)
        if kind == "judge":
            # Prefer the answer 42 whichever side it is on.
            a, b = re.findall(r"Answer:\s*(\d+)", user)[:2]
            return "[[A]]" if a == "42" else "[[B]]" if b == "42" else "[[A]]"
        if kind == "tg_step":
            value = self.answers.get("tg_step", "42")
            return f"<IMPROVED_VARIABLE>Reconsidered.\nAnswer: {value}</IMPROVED_VARIABLE>"
        return self.answers.get(kind, f"{self.name} thinks.\nAnswer: 42")


def _chat(script):
    return FunctionChat(script, model_name=script.name)


def test_textgrad_runs_loss_backward_step_three_times_and_votes_over_iterates():
    script = Script(answers={"propose": "First try.\nAnswer: 41", "tg_step": "42"})
    r = baselines.textgrad(QUESTION, _chat(script), QATask(), iterations=3)
    assert script.kinds == ["propose"] + ["tg_loss", "tg_backward", "tg_step"] * 3
    assert r["calls"] == 10 == len(script.kinds)  # "TextGrad (~10 calls)"
    assert r["iterates"] == ["41", "42", "42", "42"] and r["answer"] == "42"
    # The loss sees the current prediction, the optimizer the feedback and the answer-format constraint.
    assert "Answer by the language model: First try." in script.calls[1][1]["content"]
    assert prompts.TEXTGRAD_CONSTRAINT_QA in script.calls[3][1]["content"]
    assert "<LM_OUTPUT>" in script.calls[2][1]["content"]


def test_textgrad_on_code_stops_once_the_public_tests_pass():
    from concord.papers.scmoa.tasks import CodeTask, TestResult

    good = "def inc(x):\n    return x + 1\n"

    def runner(programs, tests):
        return [[TestResult(p == good, "" if p == good else "wrong") for _ in tests] for p in programs]

    task = CodeTask(public_tests=[{"type": "assert", "code": "assert candidate(1) == 2", "entry_point": "inc"}],
                    runner=runner)
    script = Script(answers={"propose": "```python\ndef inc(x):\n    return x\n```"})
    script_step = lambda messages, s: (f"<IMPROVED_VARIABLE>```python\n{good}```</IMPROVED_VARIABLE>"
                                       if script.kind(messages) == "tg_step" else script(messages, s))
    r = baselines.textgrad("Write inc.", FunctionChat(script_step), task, iterations=3)
    assert r["answer"] == good and r["calls"] == 4  # zero-shot + one round; the next round sees all tests pass
    assert "test_0: failed (wrong)" in script.calls[1][1]["content"]


def test_goa_call_pattern_both_poolings_and_pruning():
    metas, agents = Script("meta", answers={"goa_mean": "Weighted.\nAnswer: 42"}), [Script(f"a{i}") for i in range(3)]
    agents[1].answers["propose"] = agents[1].answers["goa_message"] = "Answer: 41"
    pool = [(f"agent{i + 1}", _chat(s), f"card {i}") for i, s in enumerate(agents)]
    r = baselines.goa(QUESTION, pool, _chat(metas), QATask())
    # No node-sampling call when every agent is kept; 3 answers, 3 scorings, message passing, 1 pooling.
    assert [s.kinds for s in agents] == [["propose", "goa_edge", "goa_message"]] * 3
    assert metas.kinds == ["goa_mean"] and r["calls"] == 10
    assert r["answer"] == "42" and r["agents"] == ["agent1", "agent2", "agent3"]
    assert r["importance"][0] > r["importance"][1]  # agent1 scores 8 from everyone, others 2
    assert r["max_answer"] == "42"
    # With k < pool the meta agent ranks the model cards first (one more call), and fewer agents answer.
    metas2, agents2 = Script("meta"), [Script(f"b{i}") for i in range(3)]
    pool2 = [(f"agent{i + 1}", _chat(s), f"card {i}") for i, s in enumerate(agents2)]
    r2 = baselines.goa(QUESTION, pool2, _chat(metas2), QATask(), k=2)
    assert metas2.kinds == ["goa_node", "goa_mean"] and agents2[2].kinds == [] and r2["calls"] == 1 + 2 + 2 + 2 + 1
    with pytest.raises(ValueError, match="k must be in 1..3"):
        baselines.goa(QUESTION, pool2, _chat(metas2), QATask(), k=4)


def test_heterogeneous_and_persona_moa_use_2n_plus_1_calls():
    pool = [Script(f"p{i}") for i in range(4)]
    agg = Script("agg")
    r = baselines.moa_pool(QUESTION, [_chat(s) for s in pool], _chat(agg), QATask())
    assert [s.kinds for s in pool] == [["propose", "moa_synth"]] * 4 and agg.kinds == ["moa_synth"]
    assert r["calls"] == 9 and r["answer"] == "42"  # "MoA (9 calls)"
    one = Script("one")
    personas = list(prompts.QA_PERSONAS.values())
    r = baselines.moa_pool(QUESTION, [_chat(one)] * 5, _chat(one), QATask(), personas=personas, prefix="pmoa")
    assert r["calls"] == 11 == len(one.kinds)  # persona-MoA: "N = 5 ... (11 calls)"
    assert [c[0]["content"] for c in one.calls[:5]] == personas


def test_sc_at_temperature_samples_with_distinct_seeds_and_tags():
    script = Script()
    r = baselines.self_consistency_temperature(QUESTION, _chat(script), QATask(), k=4, temperature=0.7)
    assert r["calls"] == 4 and r["answer"] == "42"
    assert [s["temperature"] for s in script.sampling] == [0.7] * 4 and [s["seed"] for s in script.sampling] == [0, 1, 2, 3]
    assert all(f"sample variant: sc-{j}" in c[-1]["content"] for j, c in enumerate(script.calls))


def test_pairwise_judge_compares_each_pair_once_in_a_seeded_random_order():
    script = Script()
    proposals = ["A.\nAnswer: 41", "B.\nAnswer: 42", "C.\nAnswer: 40", "D.\nAnswer: 42", "E.\nAnswer: 39"]
    r = baselines.pairwise_judge(QUESTION, proposals, _chat(script), QATask())
    assert r["calls"] == 10 == script.kinds.count("judge")  # C(5, 2) pairs, once each (Table 40: 21 = 11 + 10)
    shown = [tuple(re.findall(r"Answer:\s*(\d+)", c[-1]["content"])[:2]) for c in script.calls]
    answers = "41 42 40 42 39".split()
    assert sorted(tuple(sorted(s)) for s in shown) == sorted(
        tuple(sorted((answers[a], answers[b]))) for a in range(5) for b in range(a + 1, 5))
    orders = [g["shown"] for g in r["games"]]
    # Not always the lower index first: the order is drawn per pair, so position bias is not index bias.
    assert any(s[0] > s[1] for s in orders) and any(s[0] < s[1] for s in orders)
    # Seeded: the same question and seed show the same orders (and hit the call cache); another seed differs.
    again = baselines.pairwise_judge(QUESTION, proposals, _chat(Script()), QATask())
    assert [g["shown"] for g in again["games"]] == orders
    others = [[g["shown"] for g in baselines.pairwise_judge(QUESTION, proposals, _chat(Script()), QATask(),
                                                           order_seed=s)["games"]] for s in range(1, 6)]
    assert any(o != orders for o in others)
    # The judge prefers 42 on either side, else side A: 42 wins all its games but the one against 42.
    assert r["borda"][1] >= 3 and r["borda"][3] >= 3 and r["answer"] == "42"
    assert sum(r["borda"]) == 10


def test_run_question_records_every_new_method_with_its_budget():
    script = Script()
    q = {"id": "q1", "prompt": QUESTION, "answer": "42", "task": "qa"}
    out = run_question(q, _chat(script), n=3, k=1, methods=["cot", "sc", "sc_temp", "moa", "moa_para", "persona_moa",
                                                             "self_moa", "textgrad", "goa", "pairwise_judge"],
                       sc_k=3, sc_temperatures=[0.7], moa_n=2, self_moa_k=2, persona_moa_n=2, textgrad_iterations=1)
    m = out["methods"]
    assert {"cot", "sc", "sc_t0.7", "moa", "moa_para", "persona_moa", "self_moa", "textgrad", "goa", "goa_max",
            "pairwise_judge", "scmoa", "vote_pre", "vote_post"} <= set(m)
    assert (m["cot"]["calls"], m["sc"]["calls"], m["sc_t0.7"]["calls"]) == (1, 3, 3)
    assert (m["moa"]["calls"], m["persona_moa"]["calls"], m["self_moa"]["calls"]) == (5, 5, 3)
    assert m["textgrad"]["calls"] == 4 and m["goa"]["calls"] == 10 and m["pairwise_judge"]["calls"] == 3
    assert all(v["correct"] for v in m.values())
    # Every method's usage counts the calls it made (cache-free here: a scripted chat).
    assert m["goa"]["usage"]["calls"] == 10 and m["moa"]["usage"]["calls"] == 5
    assert out["oracle_correct"] is True and out["decomposition"]["aggregate_correct"] is True
