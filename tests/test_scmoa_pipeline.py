"""SC-MoA Algorithm 1 driven by a scripted chat: anchoring, universal aggregation, override, cache."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concord.chat import CachedChat, Completion, FunctionChat
from concord.papers.scmoa import prompts, run_scmoa
from concord.papers.scmoa.pipeline import cluster, representative, select_override

QUESTION = "A box holds 6 rows of 7 apples. How many apples are in the box?"


class Agents:
    """A scripted ensemble. Each call type is recognised from its (verbatim) system prompt.

    ``answers[i]``: what perturbation i answers (a list: the answer of each variant-tagged sample);
    ``refine[i]``: what minority agent i answers after refinement (None: a reply with no answer);
    ``aggregate``: the aggregator's reply.
    """

    def __init__(self, answers, refine=None, aggregate="The proposals agree.\nAnswer: 42", reasoning=False):
        self.answers = answers
        self.refine = refine or {}
        self.aggregate = aggregate
        self.reasoning = reasoning  # reply like a reasoning model: a reasoning channel beside the text
        self.kinds: list[str] = []

    def _reply(self, text, thought):
        return Completion(text=text, reasoning=thought, reasoning_field="reasoning_content") if self.reasoning else text

    def __call__(self, messages, sampling):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        user = messages[-1]["content"]
        if system.startswith("You rephrase problems"):
            self.kinds.append("paraphrase")
            n = int(re.search(r"Rephrase the following problem (\d+) times", user).group(1))
            return json.dumps([f"Version {i}: there are 6 rows with 7 apples each; count the apples." for i in range(1, n + 1)])
        if "reviewing your answer against an ensemble consensus" in system:
            self.kinds.append("refine")
            agent = int(re.search(r"I am agent (\d+)", user).group(1))
            value = self.refine.get(agent)
            return self._reply(f"I am agent {agent}. On reflection I IMPROVE my reasoning." + (f"\nAnswer: {value}" if value else ""),
                               f"REFINER {agent} THINKS")
        if system.startswith("You are a senior problem-solver"):
            self.kinds.append("aggregate")
            return self._reply(self.aggregate, "AGGREGATOR THINKS")
        self.kinds.append("propose")
        agent = int(re.search(r"Version (\d+)", user).group(1)) - 1 if "Version" in user else 0
        tag = re.search(r"sample variant: scmoa-para\d+-(\d+)", user)
        choice = self.answers[agent]
        value = choice[int(tag.group(1))] if isinstance(choice, list) else choice
        answer = f"\nAnswer: {value}" if value is not None else ""
        return self._reply(f"I am agent {agent}. Rows times apples per row.{answer}", f"AGENT {agent} THINKS: 6*7")


def _run(agents, n=5, k=1, **kw):
    chat = FunctionChat(agents, model_name="scripted")
    return run_scmoa(QUESTION, chat, n=n, k=k, task="qa", **kw), chat


def test_pipeline_clusters_refines_minorities_and_aggregates():
    agents = Agents(["42", "42", "42", "41", "40"], refine={3: "42", 4: "40"})
    result, chat = _run(agents)
    rec = result.record
    assert agents.kinds == ["paraphrase"] + ["propose"] * 5 + ["refine"] * 2 + ["aggregate"]
    assert rec["clusters_pre"]["k_max"] == 3 and rec["clusters_pre"]["consensus"] == pytest.approx(0.6)
    assert [r["action"] for r in rec["refinement"]] == ["ADOPTED", "DEFENDED"]
    assert [p["action"] for p in rec["proposals_post"]] == ["UNCHANGED"] * 3 + ["ADOPTED", "DEFENDED"]
    assert rec["clusters_post"]["k_max"] == 4
    assert result.answer == "42" and rec["override"] is False and rec["final_source"] == "aggregate"
    assert rec["calls"] == {"perturb": 1, "propose": 5, "refine": 2, "aggregate": 1, "total": 9}
    # The aggregator reads every trace, annotated with its action, and the consensus evolution.
    agg_user = chat.calls[-1][-1]["content"]
    assert agg_user.count("<PROPOSAL id=") == 5
    assert agg_user.count(prompts.ACTION_ANNOTATIONS["UNCHANGED"]) == 3
    assert prompts.ACTION_ANNOTATIONS["ADOPTED"] in agg_user and prompts.ACTION_ANNOTATIONS["DEFENDED"] in agg_user
    assert "Pre-refinement: 3/5" in agg_user and "Post-refinement: 4/5" in agg_user
    assert chat.calls[-1][0]["content"] == prompts.AGGREGATE_SYSTEM_QA.format(n=5, k=1)


def test_refinement_prompt_follows_j3():
    agents = Agents(["42", "42", "42", "41", "40"])
    _, chat = _run(agents)
    refine_calls = [c for c in chat.calls if "reviewing your answer" in c[0]["content"]]
    assert len(refine_calls) == 2
    system, user = refine_calls[0][0]["content"], refine_calls[0][1]["content"]
    assert system == prompts.REFINE_SYSTEM_QA.format(persona_name="specialist", k_max=3, n=5)
    assert user.startswith(f"<PROBLEM>\n{QUESTION}\n</PROBLEM>")
    assert "<YOUR_PROPOSAL quality=0.20, intra_agreement=1.00>\nI am agent 3." in user
    assert "<MAJORITY_APPROACH quality=0.60, support=3/5>\nI am agent 0." in user
    assert user.endswith("Produce your refined solution.")


def test_aggregator_is_called_even_at_unanimous_consensus():
    agents = Agents(["42"] * 5, aggregate="Having read all traces, the count is 43.\nAnswer: 43")
    result, _ = _run(agents)
    assert agents.kinds.count("aggregate") == 1 and agents.kinds.count("refine") == 0
    assert result.record["clusters_pre"]["consensus"] == 1.0
    # On QA the override never fires for an answered aggregate: synthesis stands, even against a unanimous vote.
    assert result.answer == "43" and result.record["override"] is False


def test_override_never_fires_on_qa():
    """Section 4 / Appendix N: every QA answer scores 1.0, so the override never fires -- not
    even when the aggregate carries no parseable answer (the problem then counts as unanswered)."""
    no_answer = Agents(["42", "42", "41"], aggregate="I cannot decide.")
    result, _ = _run(no_answer, n=3)
    assert result.record["aggregate"]["score"] == 0.0 and result.record["best_score"] == 1.0
    assert result.record["override"] is False and result.record["final_source"] == "aggregate"
    assert result.answer is None
    answered = Agents(["42", "42", "41"], aggregate="Answer: 41")
    result, _ = _run(answered, n=3)
    assert result.record["override"] is False and result.answer == "41"


def test_reasoning_traces_reach_the_refiners_and_the_aggregator():
    """A reasoning model's reasoning channel is part of every trace the refiners and the
    aggregator read, and the record keeps it (proposals, refinements, aggregate)."""
    agents = Agents(["42", "42", "42", "41", "40"], refine={3: "42", 4: "40"}, reasoning=True)
    result, chat = _run(agents)
    refine_calls = [c for c in chat.calls if "reviewing your answer" in c[0]["content"]]
    user = refine_calls[0][1]["content"]
    assert "<YOUR_PROPOSAL quality=0.20, intra_agreement=1.00>\n<REASONING>\nAGENT 3 THINKS: 6*7\n</REASONING>\nI am agent 3." in user
    assert "<MAJORITY_APPROACH quality=0.60, support=3/5>\n<REASONING>\nAGENT 0 THINKS: 6*7\n</REASONING>" in user
    agg_user = chat.calls[-1][-1]["content"]
    for agent in range(3):  # the frozen majority: its proposal traces
        assert f"<REASONING>\nAGENT {agent} THINKS: 6*7\n</REASONING>\nI am agent {agent}." in agg_user
    for agent in (3, 4):  # the refined minorities: their refinement traces
        assert f"<REASONING>\nREFINER {agent} THINKS\n</REASONING>\nI am agent {agent}. On reflection" in agg_user
    rec = result.record
    assert [p["reasoning"] for p in rec["proposals_pre"]] == [f"AGENT {i} THINKS: 6*7" for i in range(5)]
    assert rec["proposals_pre"][0]["samples"][0]["reasoning"] == "AGENT 0 THINKS: 6*7"
    assert [r["reasoning"] for r in rec["refinement"]] == ["REFINER 3 THINKS", "REFINER 4 THINKS"]
    assert rec["aggregate"]["reasoning"] == "AGGREGATOR THINKS"
    assert rec["usage"]["propose"]["with_reasoning"] == 5 and rec["usage"]["aggregate"]["calls"] == 1


def test_a_proposal_without_an_answer_never_anchors():
    # Every cluster is a singleton: the earliest *answered* proposal is the majority, not agent 0.
    agents = Agents([None, None, "41", "40", "42"], refine={0: "41", 1: None, 3: "41", 4: "42"})
    result, chat = _run(agents)
    rec = result.record
    assert rec["clusters_pre"]["majority"] == rec["clusters_pre"]["labels"][2] and rec["vote_pre"] == "41"
    refine_calls = [c for c in chat.calls if "reviewing your answer" in c[0]["content"]]
    assert all("<MAJORITY_APPROACH quality=0.20, support=1/5>\nI am agent 2." in c[1]["content"] for c in refine_calls)
    assert sorted(r["index"] for r in rec["refinement"]) == [0, 1, 3, 4]
    # No proposal answers at all: no anchor, no refinement, consensus 0 -- and still one aggregation.
    silent = Agents([None] * 3, aggregate="Answer: 42")
    result, _ = _run(silent, n=3)
    rec = result.record
    assert rec["clusters_pre"]["majority"] is None and rec["clusters_pre"]["k_max"] == 0
    assert rec["vote_pre"] is None and rec["refinement"] == [] and "refine" not in silent.kinds
    assert silent.kinds.count("aggregate") == 1 and result.answer == "42"


def test_qa_clustering_is_j6_string_match_by_default():
    from concord.papers.scmoa.tasks import QATask

    payloads = ["(B)", "b", " B ", "1/2", "0.5"]
    assert QATask().group(payloads) == [0, 1, 1, 2, 3]  # lower-cased, stripped: nothing else merges
    merged = QATask(clustering="equivalence").group(payloads)
    assert merged[0] == merged[1] == merged[2] and merged[3] == merged[4]
    with pytest.raises(ValueError, match="clustering must be one of"):
        QATask(clustering="fuzzy")


def test_synthesis_without_refinement_aggregates_the_pre_refinement_proposals():
    # A mixed-answer group: agents 0-2 form the majority (42), agents 3 and 4 two minorities.
    agents = Agents(["42", "42", "41", "42", "40"])
    result, chat = _run(agents, refine=False)
    assert "refine" not in agents.kinds and result.record["refined"] is False
    assert result.record["calls"]["refine"] == 0
    system, agg_user = chat.calls[-1][0]["content"], chat.calls[-1][-1]["content"]
    # Each proposal carries its true cluster role, not J.4's "[UNCHANGED --- majority]".
    notes = re.findall(r"<PROPOSAL id=(\d) [^>]*> (\[[^\]]+\])", agg_user)
    assert notes == [("1", "[majority]"), ("2", "[majority]"), ("3", "[minority]"), ("4", "[majority]"),
                     ("5", "[minority]")]
    assert "UNCHANGED" not in agg_user and "DEFENDED" not in system
    # No word of a refinement step that did not happen, in the system prompt or the user prompt.
    assert system == prompts.AGGREGATE_SYSTEM_QA_PRE.format(n=5, k=1)
    assert "refine" not in system.lower() and "refine" not in agg_user.lower()
    assert "3/5 proposals agree" in agg_user and "Minority: para3, para5." in agg_user


def test_pre_refinement_prompts_are_j4_minus_the_refinement_step():
    # The minimal edit of J.4 (docs/fidelity.md): the same prompt where no refinement is mentioned.
    for full, pre in ((prompts.AGGREGATE_SYSTEM_QA, prompts.AGGREGATE_SYSTEM_QA_PRE),
                      (prompts.AGGREGATE_SYSTEM_CODE, prompts.AGGREGATE_SYSTEM_CODE_PRE)):
        assert "refinement" in full and "refine" not in pre.lower() and "DEFENDED" not in pre
        assert full.split(". ")[:2] == pre.split(". ")[:2]  # identity and best-of-k sentences verbatim
        assert full.split(". ")[-2:] == pre.split(". ")[-2:]  # the output instruction verbatim


def test_best_of_k_with_variant_tags_and_intra_agreement():
    agents = Agents([["41", "42", "42"], "42", "42"])
    result, chat = _run(agents, n=3, k=3)
    first = result.record["proposals_pre"][0]
    assert first["best_sample"] == 1 and first["payload"] == "42" and first["alpha"] == pytest.approx(2 / 3)
    tags = [re.search(r"<!-- sample variant: (\S+) -->", c[-1]["content"]).group(1)
            for c in chat.calls if "Think step by step" in c[-1]["content"]]
    assert tags == [f"scmoa-para{i}-{j}" for i in (1, 2, 3) for j in range(3)]
    assert result.record["calls"]["propose"] == 9


def test_unparsed_refinement_keeps_the_original_proposal():
    agents = Agents(["42", "42", "42", "41", "40"], refine={3: None, 4: "7"})
    result, _ = _run(agents)
    rows = result.record["refinement"]
    assert rows[0]["action"] == "DEFENDED" and rows[0]["unparsed"] is True
    assert result.record["proposals_post"][3]["payload"] == "41"
    assert rows[1]["action"] == "IMPROVED" and result.record["proposals_post"][4]["payload"] == "7"


def test_gated_variant_skips_refinement_and_aggregation():
    agents = Agents(["42", "42", "42", "41", "40"])
    result, _ = _run(agents, gate=0.6)
    assert result.record["gated"] is True and "aggregate" not in agents.kinds and "refine" not in agents.kinds
    assert result.answer == "42"
    agents = Agents(["42", "42", "42", "41", "40"])
    result, _ = _run(agents, gate=0.8)
    assert result.record["gated"] is False and agents.kinds.count("aggregate") == 1


def test_persona_perturbation_uses_the_j1_personas():
    agents = Agents(["42"] * 5)
    result, chat = _run(agents, perturbation="persona")
    systems = [c[0]["content"] for c in chat.calls[:5]]
    assert systems == list(prompts.QA_PERSONAS.values())
    assert "paraphrase" not in agents.kinds and result.record["calls"]["perturb"] == 0
    with pytest.raises(ValueError, match="5 personas"):
        _run(Agents(["42"] * 6), n=6, perturbation="persona")


def test_cached_rerun_is_identical_and_issues_no_calls(tmp_path):
    agents = Agents(["42", "42", "41", "41", "40"], refine={2: "42", 3: "40", 4: "40"})
    inner = FunctionChat(agents, model_name="scripted")
    first = run_scmoa(QUESTION, CachedChat(inner, tmp_path), n=5, k=2, task="qa")
    n_calls = len(inner.calls)
    second_chat = CachedChat(inner, tmp_path)
    second = run_scmoa(QUESTION, second_chat, n=5, k=2, task="qa")
    assert len(inner.calls) == n_calls and second_chat.misses == 0
    assert json.dumps(first.record, sort_keys=True) == json.dumps(second.record, sort_keys=True)


def test_cluster_majority_tie_breaks_follow_j6():
    # Sizes tie (2 vs 2): higher mean quality wins.
    c = cluster([0, 0, 1, 1, 2], [0.2, 0.2, 0.9, 0.7, 1.0])
    assert c.majority == 1 and c.k_max == 2 and c.consensus == pytest.approx(0.4)
    # Sizes and quality tie: the earliest first occurrence wins.
    assert cluster([1, 0, 0, 1], [0.5] * 4).majority == 1
    assert representative(c, [0.2, 0.2, 0.9, 0.7, 1.0]) == 2
    assert select_override([1.0, 0.5, 1.0], cluster([0, 1, 2], [1, 1, 1])) == 0
    assert select_override([1.0, 1.0, 1.0], cluster([0, 1, 1], [1, 1, 1])) == 1
    with pytest.raises(ValueError, match="one quality per label"):
        cluster([0, 1], [1.0])


def test_run_scmoa_validates_its_arguments():
    chat = FunctionChat(Agents(["42"] * 3))
    with pytest.raises(ValueError, match="needs the public tests"):
        run_scmoa(QUESTION, chat, n=3, k=1, task="code")
    with pytest.raises(ValueError, match="unknown SC-MoA task .essay.. Available: .code., .qa."):
        run_scmoa(QUESTION, chat, n=3, k=1, task="essay")
    with pytest.raises(ValueError, match="k .* must be >= 1"):
        run_scmoa(QUESTION, chat, n=3, k=0, task="qa")


@settings(max_examples=40, deadline=None)
@given(
    answers=st.lists(st.sampled_from(["1", "2", "3"]), min_size=3, max_size=7),
    refined=st.lists(st.sampled_from(["1", "2", "3", "9", None]), min_size=7, max_size=7),
)
def test_anchoring_invariant(answers, refined):
    """Refinement never changes the answer of a strict majority, and majority proposals are never rewritten."""
    n = len(answers)
    agents = Agents(answers, refine=dict(enumerate(refined)))
    result, chat = _run(agents, n=n)
    rec = result.record
    pre = rec["clusters_pre"]
    majority = [i for i, lab in enumerate(pre["labels"]) if lab == pre["majority"]]
    for i in majority:
        assert rec["proposals_post"][i]["text"] == rec["proposals_pre"][i]["text"]
        assert rec["proposals_post"][i]["action"] == "UNCHANGED"
    refined_agents = sorted(int(re.search(r"I am agent (\d+)", c[-1]["content"]).group(1))
                            for c in chat.calls if "reviewing your answer" in c[0]["content"])
    assert refined_agents == [i for i in range(n) if i not in majority]
    if pre["k_max"] * 2 > n:
        assert rec["vote_post"] == rec["vote_pre"]
        assert rec["clusters_post"]["k_max"] >= pre["k_max"]


def test_aggregator_views_of_a_pre_refinement_record_keep_its_cluster_roles():
    from concord.papers.scmoa import views
    from concord.papers.scmoa.perturb import Perturbation
    from concord.papers.scmoa.pipeline import Clusters, proposals_from_rows
    from concord.papers.scmoa.tasks import QATask

    result, _ = _run(Agents(["42", "42", "41", "42", "40"]), refine=False)
    rec = result.record
    perts = [Perturbation(**p) for p in rec["perturbation"]["perturbations"]]
    props = proposals_from_rows(rec["proposals_post"], rec["proposals_pre"])
    quality = [r["quality"] for r in rec["proposals_post"]]
    pre, post = Clusters.from_dict(rec["clusters_pre"]), Clusters.from_dict(rec["clusters_post"])
    for view in ("answer_only", "minority_only", "no_metadata"):
        system, user = views.view_messages(view, QATask(), QUESTION, perts, props, quality, pre, post, 5, 1,
                                           refined=False)
        assert system["content"] == prompts.AGGREGATE_SYSTEM_QA_PRE.format(n=5, k=1)
        assert "refine" not in user["content"].lower() and "UNCHANGED" not in user["content"]
    _, user = views.view_messages("minority_only", QATask(), QUESTION, perts, props, quality, pre, post, 5, 1,
                                  refined=False)
    assert user["content"].count("[minority]") == 2 and "[majority]" not in user["content"]
