"""Unit tests of the TTRL/GRPO plumbing: batch layout, gated advantages, reward wiring per arm,
the no-gold training data, checkpoints and logs, diagnostics, Figure 3 arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from concord.consensus import score_group
from concord.rl.batching import Layout, check_layout, gated_advantages, keep_mask, train_positions
from concord.rl.diagnostics import majority_ratio, math_diagnostics
from concord.rl.rewards import (
    MATH_ARMS,
    ConsensusReward,
    GroupRecord,
    GroupScore,
    available_arms,
    get_scorer,
    register_scorer,
    score_batch,
)
from concord.config import resolve_section, section_defaults
from concord.rl.checkpoints import RunLog, last_complete_checkpoint
from concord.rl.run import build_train_dataset
from concord.rl.settings import total_steps
from concord.rl.validation import mean_at_k

CONSENSUS = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}


# --------------------------------------------------------------------------- layout
def test_train_positions_are_evenly_spaced():
    assert train_positions(64, 32).tolist() == list(range(0, 64, 2))
    assert train_positions(4, 2).tolist() == [0, 2]
    assert train_positions(6, 6).tolist() == list(range(6))
    assert keep_mask(8, 4, 2).tolist() == [True, False, True, False] * 2
    with pytest.raises(ValueError, match="whole number of groups"):
        keep_mask(6, 4, 2)


def test_layout_straddling_groups_keep_equal_shares():
    # 3 prompts x 4 roll-outs over 2 processes: group 1 straddles, yet each process keeps 3.
    layout = check_layout(Layout(prompts_per_step=3, n_vote=4, n_train=2, num_processes=2))
    assert layout.kept_per_process() == [3, 3]
    assert layout.per_device_train_batch_size == 6
    # The paper's node: 8 prompts x 64 over 8 GPUs, 8 optimiser updates per step (TTRL's
    # ppo_mini_batch_size=1): TRL draws 8 micro-batches of 8 generated (4 kept) per process.
    paper = check_layout(Layout(8, 64, 32, num_processes=8, updates_per_generation=8))
    assert paper.steps_per_generation == 8 and paper.per_device_train_batch_size == 8
    assert paper.kept_per_process() == [32] * 8
    # Updates made of 2 micro-batches each: 16 micro-batches per step.
    halved = check_layout(Layout(8, 64, 32, num_processes=8, gradient_accumulation_steps=2, updates_per_generation=8))
    assert halved.steps_per_generation == 16 and halved.per_device_train_batch_size == 4


@pytest.mark.parametrize(
    "layout, message",
    [
        (Layout(3, 4, 2, num_processes=5), "cannot be split evenly"),
        (Layout(2, 4, 4, num_processes=1, gradient_accumulation_steps=3), "not divisible by updates_per_generation x gradient_accumulation_steps = 1 x 3"),
        (Layout(2, 4, 2, num_processes=1, updates_per_generation=3), "generates 8 roll-outs per step, not divisible by"),
        (Layout(2, 8, 2, num_processes=1, updates_per_generation=8), "trains on 4 roll-outs per step, not divisible by"),
        (Layout(1, 4, 1), "n_train must be >= 2"),
        (Layout(1, 4, 5), "cannot exceed n_vote"),
        (Layout(1, 6, 3, num_processes=2), "lands unevenly"),
    ],
)
def test_layout_errors_name_the_problem(layout, message):
    with pytest.raises(ValueError, match=message):
        check_layout(layout)


# --------------------------------------------------------------------------- advantages
def _trl_advantages(rewards: np.ndarray, group: int) -> np.ndarray:
    """TRL 1.16's own formula (grpo_trainer.py, scale_rewards='group'), with its nanstd."""
    from trl.trainer.utils import nanstd

    r = torch.tensor(rewards, dtype=torch.float32)
    mean = torch.nanmean(r.view(-1, group), dim=1).repeat_interleave(group)
    std = nanstd(r.view(-1, group), dim=1).repeat_interleave(group)
    return torch.nan_to_num((r - mean) / (std + 1e-4), nan=0.0).numpy()


def test_advantages_match_trl_when_all_roll_outs_train_and_gate_is_one():
    rng = np.random.default_rng(0)
    rewards = rng.random(24)
    rewards[8:12] = 1.0  # a zero-variance group
    ours = gated_advantages(rewards, np.ones(24), n_vote=4, n_train=4)
    np.testing.assert_allclose(ours, _trl_advantages(rewards, 4), rtol=1e-6, atol=1e-6)


def test_advantages_normalise_over_kept_roll_outs_then_scale_by_gate():
    rewards = np.array([1.0, 0.0, 0.0, 1.0, 0.2, 0.9, 0.6, 0.1])
    gates = np.repeat([0.5, 2.0], 4)
    adv = gated_advantages(rewards, gates, n_vote=4, n_train=2)
    keep = keep_mask(8, 4, 2)
    assert np.all(adv[~keep] == 0)
    kept = rewards[keep].reshape(2, 2)
    expected = (kept - kept.mean(1, keepdims=True)) / (kept.std(1, ddof=1, keepdims=True) + 1e-4)
    np.testing.assert_allclose(adv[keep], (expected * np.array([[0.5], [2.0]])).ravel(), rtol=1e-5)
    # The gate is a pure scale: it never changes the sign or the relative advantages.
    ungated = gated_advantages(rewards, np.ones(8), n_vote=4, n_train=2)
    np.testing.assert_allclose(adv, ungated * gates, rtol=1e-6)


def test_zero_gate_silences_a_question_and_negative_gate_is_refused():
    rewards = np.array([1.0, 0.0, 1.0, 0.0])
    assert np.all(gated_advantages(rewards, np.zeros(4), 4, 4) == 0)
    with pytest.raises(ValueError, match="gates must be finite and >= 0"):
        gated_advantages(rewards, -np.ones(4), 4, 4)
    with pytest.raises(ValueError, match="scale_rewards"):
        gated_advantages(rewards, np.ones(4), 4, 4, scale_rewards="median")


# --------------------------------------------------------------------------- rewards per arm
# Three low-confidence roll-outs answer 7, two confident ones answer 5, one has no answer.
TEXTS = ["so the sum is \\boxed{7}", "I get \\boxed{7}.", "therefore \\boxed{7}", "carefully: \\boxed{5}",
         "carefully computed: \\boxed{5}", "no idea"]
CONF = [-2.0, -2.1, -1.9, -0.1, -0.12, -0.5]


@pytest.mark.parametrize("arm", MATH_ARMS)
def test_each_arm_wires_the_consensus_library(arm):
    batch = score_batch(arm, ["q"] * 6, TEXTS, CONF, [{}] * 6, n_vote=6, params=CONSENSUS)
    direct = score_group(arm, ["7", "7", "7", "5", "5", None], TEXTS, CONF, **CONSENSUS)
    np.testing.assert_allclose(batch.rewards, direct.rewards)
    (group,) = batch.groups
    assert group.label == direct.label
    assert group.answers == ["7", "7", "7", "5", "5", None]
    if arm in ("majority", "cisc"):
        assert np.all(batch.gates == 1.0)  # w_q = 1 for the vote arms
    else:
        assert np.all(batch.gates == pytest.approx(direct.gate)) and 0 < direct.gate <= 1


def test_arms_disagree_where_the_paper_says_they_should():
    labels = {arm: score_batch(arm, ["q"] * 6, TEXTS, CONF, [{}] * 6, 6, CONSENSUS).groups[0].label for arm in MATH_ARMS}
    assert labels["majority"] == "7" and labels["ec"] == "7"  # counts / graph without confidence
    assert labels["cisc"] == "5" and labels["core"] == "5"  # the confident minority wins


def test_score_batch_scores_each_group_whole_and_checks_contiguity():
    texts = TEXTS[:4] + ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}"]
    batch = score_batch("majority", ["a"] * 4 + ["b"] * 4, texts, CONF[:4] + [-1.0] * 4, [{}] * 8, 4, CONSENSUS)
    assert [g.question_id for g in batch.groups] == ["a", "b"]
    assert batch.rewards.tolist() == [1, 1, 1, 0, 1, 1, 0, 0]
    with pytest.raises(RuntimeError, match="not laid out in contiguous groups"):
        score_batch("majority", ["a", "b", "a", "b"], texts[:4], CONF[:4], [{}] * 4, 2, CONSENSUS)
    with pytest.raises(RuntimeError, match="whole groups"):
        score_batch("majority", ["a"] * 3, texts[:3], CONF[:3], [{}] * 3, 2, CONSENSUS)


def test_registry_takes_plug_in_arms_per_group_or_batched():
    @register_scorer("test_length_parity")
    def parity(group):
        return GroupScore(rewards=np.array([len(t) % 2 for t in group.texts], float), gate=0.25, label=None,
                          answers=[None] * len(group.texts))

    assert "test_length_parity" in available_arms()
    assert set(MATH_ARMS) <= set(available_arms())
    batch = score_batch("test_length_parity", ["q"] * 2, ["ab", "abc"], [0.0, 0.0], [{}, {}], 2, {})
    assert batch.rewards.tolist() == [0.0, 1.0] and batch.gates.tolist() == [0.25, 0.25]
    with pytest.raises(ValueError, match="unknown reward arm 'nope'. Available: .*'core'"):
        get_scorer("nope")


def test_reward_function_speaks_trl_and_refuses_gold_columns():
    reward = ConsensusReward("majority", n_vote=3, params=CONSENSUS)
    completions = [[{"role": "assistant", "content": t}] for t in ["\\boxed{2}", "\\boxed{2}", "\\boxed{3}"]]
    out = reward(prompts=[None] * 3, completions=completions, completion_ids=None, question_id=["q"] * 3,
                 confidence=[-1.0, -1.0, -1.0], trainer_state=None, log_extra=None, log_metric=None)
    assert out == [1.0, 1.0, 0.0]
    assert reward.last_batch.groups[0].label == "2" and len(reward.pending) == 1
    with pytest.raises(RuntimeError, match=r"gold field\(s\) \['answer'\] reached the reward"):
        reward(prompts=[None] * 3, completions=completions, question_id=["q"] * 3, confidence=[0.0] * 3,
               answer=["2"] * 3)
    with pytest.raises(RuntimeError, match="needs the 'question_id'"):
        reward(prompts=[None] * 3, completions=completions)


# --------------------------------------------------------------------------- no gold in training data
QUESTIONS = [
    {"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1), "level": 1, "subject": "arith",
     "source": "test"}
    for i in range(4)
]


def test_training_data_carries_no_gold():
    ds = build_train_dataset(QUESTIONS, "instruct", "math")
    assert set(ds.column_names) == {"prompt", "question_id"}
    blob = json.dumps(ds.to_list())
    assert all(f'"{q["answer"]}"' not in blob for q in QUESTIONS)  # no answer string anywhere as a value
    with pytest.raises(ValueError, match="hold reference answers"):
        build_train_dataset(QUESTIONS, "instruct", "math", context_fields=["answer"])
    extra = build_train_dataset([{**q, "inputs": ["1"]} for q in QUESTIONS], "instruct", "math", ["inputs"])
    assert set(extra.column_names) == {"prompt", "question_id", "inputs"}


# --------------------------------------------------------------------------- config, checkpoints, logs
def test_config_defaults_come_from_the_schema_and_typos_fail():
    d = section_defaults("training")
    assert (d["n_vote"], d["n_train"], d["prompts_per_step"], d["learning_rate"]) == (64, 32, 8, 5e-7)
    assert (d["lr_scheduler"], d["warmup_ratio"], d["temperature"], d["max_completion_length"]) == ("cosine", 0.03, 1.0, 3072)
    assert section_defaults("evaluation") == {"k": 16, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 3072,
                                               "max_questions": None}
    with pytest.raises(ValueError, match=r"unknown key\(s\) 'n_votes' \(did you mean 'n_vote'\?\)"):
        resolve_section("training", {"n_votes": 8})


def test_total_steps_from_epochs_per_benchmark():
    cfg = resolve_section("training", {"prompts_per_step": 8, "epochs": 10, "epochs_by_benchmark": {"aime2024": 80}})
    assert total_steps(30, cfg, "aime2024") == 80 * 3  # TRL drops the partial last batch
    assert total_steps(500, cfg, "math500") == 10 * 62
    assert total_steps(30, {**cfg, "max_steps": 7}, "aime2024") == 7
    with pytest.raises(ValueError, match="cannot fill one step"):
        total_steps(5, cfg, "x")


def test_last_complete_checkpoint_skips_and_removes_a_half_written_one(tmp_path):
    assert last_complete_checkpoint(tmp_path / "missing") is None
    for step in (1, 2, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / "checkpoint-1" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-3" / "model.safetensors").write_text("partial")  # killed mid-save
    assert last_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert not (tmp_path / "checkpoint-3").exists()


def test_run_log_is_cut_back_to_the_resumed_step(tmp_path):
    log = RunLog(tmp_path)
    log.append("log", [{"step": s, "loss": s} for s in range(4)])
    log.append("groups", [{"step": s, "question_id": "q"} for s in (1, 2, 3)])
    log.truncate_after(2)
    assert [r["step"] for r in log.read("log")] == [0, 1, 2]
    assert [r["step"] for r in log.read("groups")] == [1, 2]
    log.reset()
    assert log.read("log") == []


# --------------------------------------------------------------------------- diagnostics
def test_diagnostics_use_gold_only_to_measure():
    groups = [
        GroupRecord("a", ["1", "1", "2", None], [0, 0, 1, -1], [0.0] * 4, [1.0, 1.0, 0.0, 0.0], 1.0, "1"),
        GroupRecord("b", ["3", "4", "4", "4"], [0, 1, 1, 1], [0.0] * 4, [0.0, 0.8, 1.0, 0.9], 0.5, "4"),
    ]
    d = math_diagnostics(groups, {"a": "1", "b": "3"})
    assert d["label_accuracy"] == 0.5
    # a: all 4 pseudo-rewards agree with truth; b: roll-out 0 correct but unrewarded, 1-3 rewarded but wrong.
    assert d["reward_accuracy"] == pytest.approx(4 / 8)
    assert d["rollout_accuracy"] == pytest.approx(3 / 8)
    assert d["majority_ratio"] == pytest.approx((2 / 4 + 3 / 4) / 2)
    assert d["mean_gate"] == pytest.approx(0.75)
    assert majority_ratio([-1, -1]) == 0.0
    with pytest.raises(KeyError, match="no gold answer for question 'b'"):
        math_diagnostics(groups, {"a": "1"})


def test_mean_at_k():
    assert mean_at_k([[True, False], [True, True], [False, False]]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mean_at_k([])


def test_trl_private_methods_concord_overrides_keep_their_shape():
    """ConsensusGRPOTrainer overrides two private TRL methods; a TRL upgrade that changes them
    must fail here, not in the middle of a training job."""
    import ast
    import inspect
    import textwrap

    from trl import GRPOTrainer

    assert list(inspect.signature(GRPOTrainer._generate).parameters) == ["self", "prompts"]
    assert list(inspect.signature(GRPOTrainer._generate_and_score_completions).parameters) == ["self", "inputs"]
    # _generate returns an 8-tuple (prompt_ids, completion_ids, tool_mask, completions, logprobs,
    # extra_fields, images, tool_images): every return statement of TRL's method has 8 elements.
    tree = ast.parse(textwrap.dedent(inspect.getsource(GRPOTrainer._generate)))
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None]
    assert returns and all(isinstance(r, ast.Tuple) and len(r.elts) == 8 for r in returns), ast.dump(returns[0])

