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


def _clustered_question():
    # clusters by execution vector: {0, 2, 4} -> ("1","2"), {1, 3} -> ("1","3"), {5} -> ("9","9"); 6 invalid
    outcomes = [
        [ok("1"), ok("2")], [ok("1"), ok("3")], [ok("1"), ok("2")], [ok("1"), ok("3")],
        [ok("1"), ok("2")], [ok("9"), ok("9")], [ok("1"), ERR],
    ]
    programs = [f"program_{i}" for i in range(len(outcomes))]
    return {"id": "q", "prompt": "do it"}, programs, outcomes


def test_gencluster_tournament_with_a_rule_based_judge():
    question, programs, outcomes = _clustered_question()

    def prefers_program_1(conversations):
        # Always votes for whichever slot shows program_1 (cluster {1, 3}), else for A.
        replies = []
        for conv in conversations:
            text = conv[-1]["content"]
            a = text.split("### Solution A")[1].split("### Solution B")[0]
            b = text.split("### Solution B")[1]
            replies.append("B" if "program_1" in b else "A" if "program_1" in a else "A")
        return replies

    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes], prefers_program_1)
    assert t.clusters == [[0, 2, 4], [1, 3], [5]]
    assert t.selected == 1
    assert t.n_judge_calls == 6  # 3 pairs, both orders

    # An unparseable judge splits every game: the largest cluster wins the tie.
    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes], lambda c: ["?"] * len(c))
    assert t.selected == 0 and t.wins == [2.0, 2.0, 2.0]
    (t,) = baselines.gencluster_tournaments([question], [programs], [outcomes], lambda c: ["A"] * len(c),
                                            max_clusters=2, both_orders=False)
    assert t.clusters == [[0, 2, 4], [1, 3]] and t.n_judge_calls == 1 and t.selected == 0
    (t,) = baselines.gencluster_tournaments([question], [programs], [[[ERR], [ERR]]], lambda c: [])
    assert t.selected is None
    assert baselines.parse_verdict("Solution B is correct") == "B"
    assert baselines.parse_verdict("**A**") == "A" and baselines.parse_verdict("neither") is None


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir):
    from concord.engines import load_engine

    return load_engine("hf", tiny_model_dir, batch_size=8, progress=False)


def test_gencluster_with_the_project_engine(tiny_engine):
    question, programs, outcomes = _clustered_question()
    judge = baselines.engine_judge(tiny_engine, max_new_tokens=4)
    first = baselines.gencluster_tournaments([question], [programs], [outcomes], judge)
    again = baselines.gencluster_tournaments([question], [programs], [outcomes], judge)
    assert first[0].selected in (0, 1, 5)
    assert first[0].selected == again[0].selected and first[0].wins == again[0].wins  # greedy judge
    assert sum(first[0].wins) == 6


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
