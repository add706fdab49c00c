"""SC-MoA on code: public-test pass signatures, failure analysis, the override (real sandbox)."""

from __future__ import annotations

import re

import pytest

from concord.chat import FunctionChat
from concord.papers.scmoa import prompts, run_scmoa
from concord.papers.scmoa.code_runner import make_runner
from concord.papers.scmoa.loaders import humaneval_question, split_humaneval_tests

PROBLEM = "Write `absdiff(a, b)` returning the absolute difference of two integers."
PUBLIC = [
    {"type": "assert", "code": "assert candidate(5, 3) == 2", "entry_point": "absdiff"},
    {"type": "assert", "code": "assert candidate(3, 5) == 2", "entry_point": "absdiff"},
]
RIGHT = "def absdiff(a, b):\n    return abs(a - b)\n"
HALF = "def absdiff(a, b):\n    return a - b\n"  # passes the first public test only
WRONG = "def absdiff(a, b):\n    return 0\n"


def _fence(code):
    return f"Here is my solution.\n```python\n{code}```"


class Coders:
    """Proposers answer by perturbation index; refinement returns ``refined``; the aggregator ``aggregate``."""

    def __init__(self, codes, aggregate, refined=RIGHT):
        self.codes, self.aggregate, self.refined = codes, aggregate, refined
        self.kinds = []

    def __call__(self, messages, sampling):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if system.startswith("You are a senior problem-solver synthesising a final Python solution"):
            self.kinds.append("aggregate")
            return _fence(self.aggregate)
        if "reviewing your solution against an ensemble consensus" in system:
            self.kinds.append("refine")
            return _fence(self.refined)
        self.kinds.append("propose")
        persona = list(prompts.CODE_PERSONAS.values()).index(system)
        return _fence(self.codes[persona])


@pytest.fixture(scope="module")
def runner():
    return make_runner(timeout_s=5, memory_mb=512)


def _run(agents, runner, n=3):
    chat = FunctionChat(agents)
    return run_scmoa(PROBLEM, chat, n=n, k=1, task="code", tests=PUBLIC, perturbation="persona",
                     code_options={"runner": runner}), chat


def test_code_clusters_by_pass_signature_and_override_fires_on_a_worse_aggregate(runner):
    agents = Coders([RIGHT, RIGHT, HALF], aggregate=WRONG)
    result, chat = _run(agents, runner)
    rec = result.record
    assert rec["clusters_pre"]["labels"] == [0, 0, 1]
    assert [p["quality"] for p in rec["proposals_pre"]] == [1.0, 1.0, 0.5]
    assert rec["aggregate"]["score"] == 0.0 and rec["best_score"] == 1.0
    assert rec["override"] is True and result.answer == RIGHT
    refine_user = [c for c in chat.calls if "reviewing your solution" in c[0]["content"]][0][1]["content"]
    assert "<FAILURE_ANALYSIS>\n- test_1: you fail, the majority passes" in refine_user
    assert chat.calls[-1][0]["content"] == prompts.AGGREGATE_SYSTEM_CODE.format(n=3, k=1)


def test_override_does_not_fire_when_the_aggregate_scores_as_well(runner):
    agents = Coders([HALF, HALF, HALF], aggregate=RIGHT)
    result, _ = _run(agents, runner)
    assert result.record["clusters_pre"]["consensus"] == 1.0 and agents.kinds.count("aggregate") == 1
    assert result.record["override"] is False and result.answer == RIGHT
    # An aggregate equal to the best proposal's pass rate is kept too (strictly below fires).
    agents = Coders([RIGHT, HALF, HALF], aggregate="def absdiff(a, b):\n    return max(a, b) - min(a, b)\n")
    result, _ = _run(agents, runner)
    assert result.record["aggregate"]["score"] == result.record["best_score"] == 1.0
    assert result.record["override"] is False


def test_humaneval_asserts_split_into_public_and_hidden(runner):
    test = (
        "METADATA = {'author': 'x'}\n\n\ndef check(candidate):\n    import math\n"
        "    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
        "    for x in range(3):\n        assert candidate(x, x) == 2 * x\n"
    )
    tests = split_humaneval_tests(test, "add")
    assert len(tests) == 3 and all(t["code"].startswith("import math") for t in tests)
    q = humaneval_question({"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n",
                            "entry_point": "add", "test": test})
    assert len(q["tests_public"]) == 1 and len(q["tests_hidden"]) == 2 and "```python" in q["prompt"]
    res = runner(["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 3\n"], tests)
    assert [[r.passed for r in row] for row in res] == [[True, True, True], [True, False, False]]
    assert re.search(r"AssertionError", res[1][1].detail)
