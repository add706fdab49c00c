"""The answer policy reaches every stage: roll-outs (and their resumable cache), the offline
analysis, the reward of every arm, training validation and diagnostics, evaluation, the config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from concord import preflight
from concord.io import read_parquet_metadata, write_parquet
from concord.papers.core.analysis import class_correctness, diagnose
from concord.papers.core.evaluation import grade_samples
from concord.papers.core.rollouts import COLUMNS, RolloutSpec, answer_policy_of, assign_answers, generate_rollouts, groups
from concord.rl.diagnostics import math_diagnostics
from concord.rl.rewards import MATH_ARMS, score_batch
from concord.rl.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
CONSENSUS = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}
# One question, six roll-outs: three empty generations, an empty box, two boxed "7".
TEXTS = ["", "", "", r"so \boxed{}", r"thus \boxed{7}", r"hence \boxed{7}"]
CONF = [-2.0, -2.1, -1.9, -2.2, -0.3, -0.2]


def _frame(texts=TEXTS, gold="7") -> pd.DataFrame:
    rows = [{"question_id": "q", "rollout_idx": i, "text": t, "n_tokens": 5, "finish_reason": "stop",
             "confidence": c, "answer": None, "answer_class": -1, "gold": gold} for i, (t, c) in enumerate(zip(texts, CONF))]
    return pd.DataFrame(rows, columns=COLUMNS)


# --------------------------------------------------------------------------- roll-outs
def test_assign_answers_per_policy():
    ttrl = assign_answers(_frame(), "ttrl")
    assert ttrl["answer"].tolist() == ["", "", "", "", "7", "7"] and ttrl["answer_class"].tolist() == [0, 0, 0, 0, 1, 1]
    strict = assign_answers(_frame(), "strict")
    assert strict["answer"].tolist() == [None] * 4 + ["7", "7"] and strict["answer_class"].tolist() == [-1] * 4 + [0, 0]


def test_empty_answers_survive_parquet_and_validation(tmp_path):
    from concord.papers.core.rollouts import validate_rollouts

    path = write_parquet(tmp_path / "r.parquet", assign_answers(_frame(), "ttrl"), metadata={"answers": {"policy": "ttrl"}})
    frame = validate_rollouts(pd.read_parquet(path))
    g = groups(frame)[0]
    assert g["answers"][:4] == [""] * 4 and g["classes"].tolist() == [0, 0, 0, 0, 1, 1]
    assert answer_policy_of(path) == ("ttrl", "math")


def test_cached_chunks_are_reread_under_a_new_policy(tmp_path):
    """A resumed roll-out job with another policy reuses the generations, not the answers."""
    cache = tmp_path / "cache"
    write_parquet(cache / "chunk00000.parquet", assign_answers(_frame(), "strict"),
                  metadata={"answers": {"policy": "strict", "task": "math"}})
    questions = [{"id": "q", "prompt": "?", "answer": "7"}]
    spec = RolloutSpec(n=6, chunk_questions=1, policy="ttrl")
    # No engine: every chunk is cached, so nothing may be generated.
    frame = generate_rollouts(None, questions, spec, cache_dir=cache)
    assert frame["answer"].tolist() == ["", "", "", "", "7", "7"]
    assert read_parquet_metadata(cache / "chunk00000.parquet")["answers"] == {"policy": "ttrl", "task": "math"}
    again = generate_rollouts(None, questions, RolloutSpec(n=6, chunk_questions=1, policy="strict"), cache_dir=cache)
    assert again["answer"].tolist()[:4] == [None] * 4


def test_rollout_files_without_a_recorded_policy(tmp_path):
    path = write_parquet(tmp_path / "old.parquet", assign_answers(_frame(), "strict"), metadata={"step": "rollouts"})
    assert answer_policy_of(path, default="strict") == ("strict", "math")
    with pytest.raises(ValueError, match="regenerate the roll-outs"):
        answer_policy_of(path)


# --------------------------------------------------------------------------- offline analysis
def test_class_correctness_grades_the_written_answer():
    texts = [r"\boxed{1 \pm \sqrt{2}}"] * 3 + [r"\boxed{2}"] * 2 + [""]
    g = groups(assign_answers(_frame(texts, gold=r"1\pm\sqrt{2}"), "ttrl"))[0]
    assert "pm" not in g["answers"][0]  # TTRL's vote string lost the \pm ...
    assert class_correctness([g], "ttrl")[0].tolist() == [True, False, False]
    # ... and grading that vote string would have called the right answer wrong.
    from concord.answers import grade

    assert not grade(g["answers"][0], r"1\pm\sqrt{2}")


def test_appendix_h_sees_the_empty_plurality():
    g = groups(assign_answers(_frame(), "ttrl"))
    diag = diagnose(g, class_correctness(g, "ttrl"), CONSENSUS)
    row = diag.iloc[0]
    assert not row.majority_correct and row.core_correct and row.cisc_correct  # the empty class won the vote
    assert row.plurality_size == 4 and row.correct_size == 2
    strict = groups(assign_answers(_frame(), "strict"))
    assert diagnose(strict, class_correctness(strict), CONSENSUS).iloc[0].majority_correct


# --------------------------------------------------------------------------- training
def test_every_arm_scores_the_same_classes_under_a_policy():
    for policy, expected in (("ttrl", [0, 0, 0, 0, 1, 1]), ("strict", [-1, -1, -1, -1, 0, 0])):
        for arm in MATH_ARMS:
            batch = score_batch(arm, ["q"] * 6, TEXTS, CONF, [{}] * 6, 6, CONSENSUS, answer_policy=policy)
            assert batch.groups[0].classes == expected, (arm, policy)
    majority = score_batch("majority", ["q"] * 6, TEXTS, CONF, [{}] * 6, 6, CONSENSUS, answer_policy="ttrl")
    assert majority.groups[0].label == "" and majority.rewards.tolist() == [1, 1, 1, 1, 0, 0]
    core = score_batch("core", ["q"] * 6, TEXTS, CONF, [{}] * 6, 6, CONSENSUS, answer_policy="ttrl")
    assert core.groups[0].label == "7"


def test_diagnostics_grade_the_written_answers():
    texts = [r"\boxed{1 \pm \sqrt{2}}"] * 4 + [r"\boxed{3}"] * 2
    batch = score_batch("majority", ["q"] * 6, texts, CONF, [{}] * 6, 6, CONSENSUS, answer_policy="ttrl")
    record = batch.groups[0]
    assert record.graded[0] == r"1 \pm \sqrt{2}" and record.to_dict()["graded"] == record.graded
    stats = math_diagnostics(batch.groups, {"q": r"1\pm\sqrt{2}"})
    assert stats["label_accuracy"] == 1.0 and stats["rollout_accuracy"] == pytest.approx(4 / 6)
    assert stats["reward_accuracy"] == 1.0


def test_validation_grading_follows_the_policy():
    q = [{"id": "q", "prompt": "?", "answer": "12"}]
    texts = [["The answer is 12.", r"\boxed{12}"]]
    assert get_task("math", "ttrl").grade(q, texts) == [[True, True]]
    assert get_task("math", "strict").grade(q, texts) == [[False, True]]
    assert get_task("math").grade(q, texts) == [[False, True]]  # the registered task reads the last box


# --------------------------------------------------------------------------- evaluation
def test_evaluation_grades_under_the_policy():
    texts = ["The answer is 1/2.", r"\boxed{0.5}", "", r"\boxed{}"]
    ttrl = grade_samples({"id": 1, "answer": r"\frac12"}, texts, "ttrl")
    strict = grade_samples({"id": 1, "answer": r"\frac12"}, texts, "strict")
    assert ttrl["correct"] == [True, True, False, False] and ttrl["answers"][2] == ""
    assert strict["correct"] == [False, True, False, False] and strict["answers"][0] is None


# --------------------------------------------------------------------------- config
def test_paper_and_default_configs_use_ttrl():
    for name in ("config/paper.yaml", "config/config.yaml"):
        assert yaml.safe_load((REPO / name).read_text())["answers"] == {"policy": "ttrl"}, name


def test_unknown_policy_is_a_schema_error_naming_the_allowed_values():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["answers"] = {"policy": "boxed"}
    with pytest.raises(preflight.ConfigError) as info:
        preflight.validate_config(config, REPO / "config/schema.yaml")
    message = str(info.value)
    assert "answers.policy" in message and "ttrl" in message and "strict" in message


def test_missing_answers_section_defaults_to_ttrl():
    from concord.config import resolve

    assert resolve("answers", None) == {"policy": "ttrl"}
    np.testing.assert_equal(resolve("answers", {"policy": "strict"}), {"policy": "strict"})
