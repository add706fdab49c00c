"""Selection methods and TTRL rewards for code: mean@N, best@N, semantic voting (real
all-MiniLM-L6-v2), GenCluster tournaments (rule-based judge and a real tiny engine), and the
``fmv`` / ``fmv_pointwise`` rewards through the real sandbox and the trainer's scorer registry."""

from __future__ import annotations

import numpy as np
import pytest

from concord.papers.fmv import baselines
from concord.papers.fmv.rewards import fmv_rewards, vote_rewards
from concord.execution import Outcome


def ok(x):
    return Outcome("ok", x)


ERR = Outcome("error", None, "boom")


def test_mean_and_best_at_n():
    assert baselines.mean_at_n([True, False, False, True]) == 0.5
    assert baselines.best_at_n([False, True]) == 1.0 and baselines.best_at_n([False]) == 0.0
    assert baselines.picked_accuracy([True, False], None) == 0.0
    with pytest.raises(ValueError, match="zero candidates"):
        baselines.mean_at_n([])


def test_semantic_scores_are_mean_cosine_to_the_others():
    emb = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    scores = baselines.semantic_scores(emb)
    np.testing.assert_allclose(scores, [0.5, 0.5, 0.0])
    assert baselines.semantic_select(emb) == 0
    assert baselines.semantic_scores(np.ones((1, 3))).tolist() == [0.0]


def test_semantic_voting_picks_only_candidates_with_code():
    from concord.papers.fmv.experiments import QuestionExec, SELECTION_METHODS

    # The response without a program (index 1) is the most central of all three ...
    emb = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    assert int(np.argmax(baselines.semantic_scores(emb))) == 1
    # ... but the vote runs among the responses with code: 0 and 2 tie, the first wins.
    assert baselines.semantic_select(emb, [True, False, True]) == 0
    assert baselines.semantic_select(emb, [False, False, False]) is None
    # Through Figure 2's method: the no-code candidate "passes" nothing, the others decide.
    q = QuestionExec("q", np.array([False, False, True]), [["1"], [None], ["1"]], ["p0", None, "p2"])
    semantic = SELECTION_METHODS.get("semantic").accuracy
    assert semantic(q, np.arange(3), emb) == 0.0  # candidate 0 (no pass) beats 2 on the tie
    assert semantic(q, np.array([1, 2]), emb) == 1.0  # only candidate 2 has code among {1, 2}
    assert semantic(q, np.array([1]), emb) == 0.0  # no candidate with code: nothing selected


def test_semantic_voting_with_the_packaged_minilm_model():
    texts = [
        "def add(a, b):\n    return a + b",
        "def add(x, y):\n    return x + y",
        "def add(a, b):\n    return a + b  # sum",
        "The weather in Paris is mild in spring, with occasional rain showers.",
    ]
    emb = baselines.embed_texts(texts)
    assert emb.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    scores = baselines.semantic_scores(emb)
    assert int(np.argmin(scores)) == 3  # the off-topic response is the least central
    assert baselines.semantic_select(emb) in (0, 1, 2)


def test_semantic_voting_reads_the_whole_of_long_completions():
    # Thinking-style completions: a shared 400+ word-piece preamble, then different programs.
    embedder = baselines.load_embedder()
    preamble = " ".join(f"Step {i}: consider the constraints of the array and the prefix sums again." for i in range(40))
    sort_prog = "\n```python\ndef solve(a):\n    a = sorted(a)\n    return a[-1] + a[-2]\n```\n"
    sort_prog2 = "\n```python\ndef solve(nums):\n    nums = sorted(nums)\n    return nums[-2] + nums[-1]\n```\n"
    poem = "\nInstead, a poem: the autumn wind carries red leaves over quiet mountain lakes at dusk.\n"
    texts = [preamble + poem, preamble + sort_prog, preamble + sort_prog2]
    assert min(len(embedder.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts) > 300
    # Cut at 256 word pieces, the three are one and the same text: the endings are never read.
    truncated = baselines.embed_texts(texts, embedder)
    np.testing.assert_allclose(truncated[0], truncated[1], atol=1e-6)
    whole = baselines.embed_completions(texts, embedder)
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    scores = baselines.semantic_scores(whole)
    assert int(np.argmin(scores)) == 0 and baselines.semantic_select(whole) in (1, 2)
    # Short texts are embedded exactly as before (one window).
    short = ["def add(a, b):\n    return a + b", "print(1)"]
    np.testing.assert_allclose(baselines.embed_completions(short, embedder), baselines.embed_texts(short, embedder),
                               atol=1e-5)
    # Windows cover the text without gaps or overlaps.
    pieces = baselines.text_chunks(texts[1], embedder.tokenizer, 254)
    assert "".join(p for p, _ in pieces) == texts[1] and len(pieces) >= 2
    record = baselines.embedder_record(embedder)
    assert record["max_seq_length"] == 256 and record["text"] == "whole completion"


def _clustered_question():
    # clusters by execution vector: {0, 2, 4} -> ("1","2"), {1, 3} -> ("1","3"), {5} -> ("9","9"); 6 invalid
    outcomes = [
        [ok("1"), ok("2")], [ok("1"), ok("3")], [ok("1"), ok("2")], [ok("1"), ok("3")],
        [ok("1"), ok("2")], [ok("9"), ok("9")], [ok("1"), ERR],
    ]
    programs = [f"program_{i}" for i in range(len(outcomes))]
    return {"id": "q", "prompt": "do it"}, programs, outcomes


def _shown(conversation):
    text = conversation[-1]["content"]
    return text.split("### Solution A")[1].split("### Solution B")[0], text.split("### Solution B")[1]


class ScriptedJudgeEngine:
    """A judge engine whose replies follow a rule; it records every call and its sampling params."""

    def __init__(self, rule):
        self.rule, self.calls, self.params = rule, [], []

    def generate(self, conversations, params):
        from concord.engines.base import Generation

        self.calls.extend(conversations)
        self.params.append(params)
        out = []
        for conv in conversations:
            text, reason = self.rule(*_shown(conv))
            out.append([Generation(text, 10, reason, -1.0)])
        return out


def _prefers(program):
    def rule(a, b):
        if program in b:
            return "<think>B looks right; A? no.</think>\nFinal answer: B", "stop"
        return "<think>Comparing A and B.</think>\nFinal answer: A", "stop"
    return rule


def test_gencluster_makes_O_of_K_judge_calls_and_balances_positions():
    # 8 singleton clusters; 3 rounds -> 3 x 8 = 24 calls (all pairs in both orders would be 56)
    outcomes = [[ok(str(i))] for i in range(8)]
    programs = [f"program_{i}" for i in range(8)]
    engine = ScriptedJudgeEngine(_prefers("program_5"))
    judge = baselines.engine_judge(engine, max_new_tokens=16384)
    (t,) = baselines.gencluster_tournaments([{"id": "q", "prompt": "p"}], [programs], [outcomes], judge, rounds=3,
                                            thinking=True)
    assert t.n_judge_calls == len(engine.calls) == 24 and t.n_unparsed == 0
    shown_as_a = [int(_shown(c)[0].split("program_")[1][0]) for c in engine.calls]
    shown_as_b = [int(_shown(c)[1].split("program_")[1][0]) for c in engine.calls]
    assert sorted(shown_as_a) == sorted(shown_as_b) == sorted(list(range(8)) * 3)  # each cluster 3x as A, 3x as B
    assert all(a != b for a, b in zip(shown_as_a, shown_as_b))
    assert t.selected == 5 and t.wins[t.representatives.index(5)] == 6  # wins all of its 6 games
    assert sum(t.wins) == 24
    # the number of calls grows linearly with the clusters; rounds >= K - 1 caps at every ordered pair
    for k, rounds, calls in ((16, 3, 48), (4, 3, 12), (4, 10, 12), (2, 5, 2), (1, 5, 0)):
        (t,) = baselines.gencluster_tournaments([{"id": "q", "prompt": "p"}], [programs[:1] * k],
                                                [[[ok(str(i))] for i in range(k)]], lambda c: ["Final answer: A"] * len(c),
                                                rounds=rounds)
        assert t.n_judge_calls == calls
    # the judge runs with the budget it is given (a reasoning judge needs thousands of tokens)
    assert [p.max_new_tokens for p in engine.params] == [16384]


def test_gencluster_with_a_rule_based_judge_picks_the_preferred_cluster():
    question, programs, outcomes = _clustered_question()
    engine = ScriptedJudgeEngine(_prefers("program_3"))
    lengths = [5, 9, 5, 30, 5, 5, 5]  # the representative of {1, 3} is its longest completion, 3
    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes],
                                            baselines.engine_judge(engine, max_new_tokens=64), lengths=[lengths])
    assert t.clusters == [[0, 2, 4], [1, 3], [5]] and t.representatives == [0, 3, 5]
    assert t.selected == 3 and t.n_judge_calls == 6  # 3 clusters: every ordered pair once
    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes],
                                            baselines.engine_judge(engine, max_new_tokens=64), lengths=[lengths],
                                            representative="first")
    assert t.representatives == [0, 1, 5] and t.selected == 0  # program_3 is never shown: A wins by default
    (t,) = baselines.gencluster_tournaments([question], [programs], [[[ERR], [ERR]]], lambda c: [])
    assert t.selected is None and t.n_judge_calls == 0


def test_verdict_parsing_reads_only_the_final_answer():
    parse = baselines.parse_verdict
    assert parse("Final answer: B") == "B" and parse("**Final answer:** A") == "A"
    assert parse("Verdict: (B)") == "B" and parse(r"so the answer is $\boxed{A}$") == "A"
    assert parse("Final answer: A\nWait, no.\nFinal answer: B") == "B"  # the last verdict counts
    # reasoning mentions both letters; only the text after </think> is the answer
    assert parse("<think>Final answer: A? Let me check B.</think>Final answer: B", thinking=True) == "B"
    assert parse("<think>Solution A fails on n=0, so Final answer: B", thinking=True) is None  # never finished
    for reply in ("Solution B is correct.", "A", "**A**", "neither", "", "Final answer: C"):
        assert parse(reply) is None, reply


def test_unparseable_verdicts_are_counted_and_fail_loudly():
    question, programs, outcomes = _clustered_question()
    replies = ["Final answer: A", "I think the first", "Final answer: B", "Final answer: A", "Final answer: B",
               "Final answer: A"]
    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes], lambda c: replies[: len(c)],
                                            max_unparsed_fraction=0.2)
    assert t.n_unparsed == 1 and sum(t.wins) == 5  # the unparsed game gives nobody a point (no silent 0.5)
    assert [g["verdict"] for g in t.games].count(None) == 1

    def cut(a, b):  # a reasoning judge whose budget ends inside its reasoning
        return "<think>Let me trace solution A on the first input...", "length"

    engine = ScriptedJudgeEngine(cut)
    with pytest.raises(baselines.JudgeVerdictError, match=r"6 of 6 .* \(6 of them cut at the judge's token budget\)"):
        baselines.gencluster_tournaments([question], [programs], [outcomes],
                                         baselines.engine_judge(engine, max_new_tokens=16), thinking=True)


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir):
    from concord.engines import load_engine

    return load_engine("hf", tiny_model_dir, batch_size=8, progress=False)


def test_gencluster_with_the_project_engine(tiny_engine):
    # A random tiny model writes no verdicts: allowed here, so the run completes and counts them.
    question, programs, outcomes = _clustered_question()
    judge = baselines.engine_judge(tiny_engine, max_new_tokens=4)
    first = baselines.gencluster_tournaments([question], [programs], [outcomes], judge, max_unparsed_fraction=1.0)
    again = baselines.gencluster_tournaments([question], [programs], [outcomes], judge, max_unparsed_fraction=1.0)
    assert first[0].selected in (0, 1, 5)
    assert first[0].selected == again[0].selected and first[0].wins == again[0].wins  # greedy judge
    assert sum(first[0].wins) + first[0].n_unparsed == first[0].n_judge_calls == 6


# ------------------------------------------------------------------ rewards


def test_vote_rewards_joint_and_pointwise():
    outcomes = [
        [ok("a"), ok("b"), ok("c")],
        [ok("a"), ok("b"), ok("x")],
        [ok("a"), ok("b"), ok("c")],
        [ok("z"), ERR, ok("x")],
        [ok("z"), ok("q"), ok("x")],
    ]
    joint = vote_rewards(outcomes, "joint")
    assert joint.consensus == 0 and joint.label == ["a", "b", "c"]
    assert joint.rewards.tolist() == [1, 0, 1, 0, 0] and joint.mass == 0.4 and joint.gate == 1.0
    point = vote_rewards(outcomes, "pointwise")
    # per input: a (3 of 5), b (3 of 4), x (3 of 5): no candidate matches ["a", "b", "x"] exactly but #1
    assert point.label == ["a", "b", "x"] and point.rewards.tolist() == [0, 1, 0, 0, 0]
    none = vote_rewards([[ERR], [ERR]], "joint")
    assert none.label is None and none.gate == 0.0 and none.rewards.tolist() == [0, 0]
    with pytest.raises(ValueError, match="target"):
        vote_rewards(outcomes, "mode")


def test_fmv_rewards_from_completions_through_the_sandbox():
    completions = [
        "```python\ndef f(x):\n    return x * 2\n```",
        "```python\ndef f(x):\n    return x + x\n```",
        "```python\ndef f(x):\n    return x ** 2\n```",
        "I cannot do that.",
        "```python\ndef f(x):\n    while True:\n        pass\n```",
    ]
    vote = fmv_rewards(completions, ["1", "2", "3"], mode="call", fn_name="f", timeout_s=0.5, memory_mb=256)
    assert vote.label == ["2", "4", "6"]
    assert vote.rewards.tolist() == [1, 1, 0, 0, 0]
    point = fmv_rewards(completions, ["1", "2", "3"], mode="call", fn_name="f", target="pointwise",
                        timeout_s=0.5, memory_mb=256)
    assert point.rewards.tolist() == [1, 1, 0, 0, 0]


def test_fmv_arms_are_registered_with_the_trainer():
    import concord.papers.fmv.rewards  # noqa: F401  (registers the fmv arms)
    from concord.rl.rewards import GroupInput, get_scorer

    completions = ["```python\nprint(int(input()) + 1)\n```"] * 2 + ["```python\nprint(0)\n```"]
    group = GroupInput(question_id="q1", texts=completions, confidences=np.zeros(3),
                       context={"inputs": ["1", "5"], "mode": "stdin", "fn_name": None, "source": "livecodebench"},
                       params={"timeout_s": 2.0, "memory_mb": 256})
    for arm in ("fmv", "fmv_pointwise"):
        (score,) = get_scorer(arm)([group])  # the registry scores a step's groups at once
        assert score.rewards.tolist() == [1.0, 1.0, 0.0]
        assert score.gate == 1.0 and score.label == '["2", "6"]'
        assert score.classes == [0, 0, 1]
    with pytest.raises(ValueError, match="needs the question's 'inputs'"):
        get_scorer("fmv")([GroupInput("q2", ["x"], np.zeros(1), context={"mode": "stdin"})])
