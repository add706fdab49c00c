"""Pure parts of a training run: validation hold-out and shards, early stopping, prompt budget,
vLLM context sizing, the saved dtype."""

from __future__ import annotations

import pytest
import torch

from concord.rl.publish import cast_state_dict, drop_tied_copies
from concord.rl.run import check_prompt_budget
from concord.rl.validation import EarlyStopping, equal_shard, holdout_split
from concord.engines.vllm import check_context, context_length

QUESTIONS = [{"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(20)]


# --------------------------------------------------------------------------- hold-out split
def test_holdout_split_is_disjoint_stable_and_the_same_whatever_the_order():
    train, val = holdout_split(QUESTIONS, 0.25)
    assert len(val) == 5 and len(train) == 15
    assert not {q["id"] for q in train} & {q["id"] for q in val}
    assert [q["id"] for q in train] == [q["id"] for q in QUESTIONS if q in train]  # input order kept
    train2, val2 = holdout_split(list(reversed(QUESTIONS)), 0.25)
    assert {q["id"] for q in val2} == {q["id"] for q in val}
    # Adding questions never moves a held-out one into training unless it is displaced by a
    # question ranking lower: the split depends only on ids.
    more = QUESTIONS + [{"id": f"x{i}", "prompt": "p", "answer": "1"} for i in range(20)]
    _, val3 = holdout_split(more, 0.25)
    assert len(val3) == 10


def test_holdout_split_none_validates_on_the_training_questions():
    train, val = holdout_split(QUESTIONS, None)
    assert train == val == QUESTIONS


@pytest.mark.parametrize("fraction, n, expected", [(0.01, 20, 1), (0.99, 20, 19), (0.5, 3, 2)])
def test_holdout_split_keeps_at_least_one_on_each_side(fraction, n, expected):
    train, val = holdout_split(QUESTIONS[:n], fraction)
    assert len(val) == expected and len(train) == n - expected


def test_holdout_split_errors():
    with pytest.raises(ValueError, match="at least 2 questions"):
        holdout_split(QUESTIONS[:1], 0.5)
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        holdout_split(QUESTIONS, 1.0)


# --------------------------------------------------------------------------- equal shards
@pytest.mark.parametrize("n, world", [(3, 2), (5, 4), (1, 2), (8, 8), (7, 3)])
def test_equal_shards_have_one_size_and_cover_every_item_once(n, world):
    items = list(range(n))
    shards = [equal_shard(items, r, world) for r in range(world)]
    assert len({len(s) for s, _ in shards}) == 1  # same number of generate calls on every process
    real = sorted(x for s, k in shards for x in s[:k])
    assert real == items


def test_equal_shard_of_nothing_and_a_bad_rank():
    assert equal_shard([], 0, 2) == ([], 0)
    with pytest.raises(ValueError, match="outside a world of 2"):
        equal_shard([1], 2, 2)


# --------------------------------------------------------------------------- early stopping
def test_early_stopping_waits_patience_validations_without_a_gain_above_min_delta():
    stop = EarlyStopping(patience=2, min_delta=0.01)
    assert not stop.update(0, 0.10)  # baseline
    assert not stop.update(5, 0.20)  # gain
    assert not stop.update(10, 0.205)  # within min_delta: no gain (1)
    assert stop.update(15, 0.19)  # no gain (2): stop
    assert stop.summary() == {"patience": 2, "min_delta": 0.01, "best_step": 5, "best_val_pass_at_1": 0.20,
                              "stopped_at": 15}


def test_early_stopping_resets_on_a_gain_and_never_stops_without_patience():
    stop = EarlyStopping(patience=2)
    for step, value in [(0, 0.1), (1, 0.1), (2, 0.3), (3, 0.3)]:
        assert not stop.update(step, value)
    assert stop.update(4, 0.2)
    never = EarlyStopping(None)
    assert not any(never.update(s, 0.0) for s in range(100))
    with pytest.raises(ValueError, match="patience must be >= 1"):
        EarlyStopping(0)


# --------------------------------------------------------------------------- budgets
def test_prompt_budget_names_the_longest_offenders():
    assert check_prompt_budget({"a": 10, "b": 512}, 512) == 512
    with pytest.raises(ValueError, match=r"1 prompt\(s\) exceed training.max_prompt_length=512 tokens \(longest: b: 513\)"):
        check_prompt_budget({"a": 10, "b": 513}, 512)


def test_vllm_context_is_prompt_plus_the_longest_completion_and_is_checked():
    assert context_length(512, 3072) == 3584
    assert context_length(1024, 3072, 8192) == 9216
    with pytest.raises(ValueError, match="completion budget"):
        context_length(512)
    check_context([100, 1024], 3072, 4096)
    with pytest.raises(ValueError, match="a prompt of 1025 tokens \\+ max_new_tokens=3072 exceeds the engine's max_model_len=4096"):
        check_context([1025], 3072, 4096)


# --------------------------------------------------------------------------- saved dtype
def test_cast_state_dict_casts_floats_only():
    sd = {"w": torch.ones(2, dtype=torch.float32), "steps": torch.tensor([3]), "h": torch.ones(1, dtype=torch.float16)}
    out = cast_state_dict(sd, "bfloat16")
    assert out["w"].dtype == out["h"].dtype == torch.bfloat16 and out["steps"].dtype == torch.int64


def test_drop_tied_copies_keeps_the_source_and_untied_weights():
    emb = torch.arange(6.0).view(3, 2)
    sd = {"model.embed_tokens.weight": emb, "lm_head.weight": emb.clone(), "x": torch.ones(1)}
    assert set(drop_tied_copies(sd, {"lm_head.weight": "model.embed_tokens.weight"})) == {"model.embed_tokens.weight", "x"}
    untied = {**sd, "lm_head.weight": emb + 1}  # trained apart: not a copy, kept
    assert "lm_head.weight" in drop_tied_copies(untied, {"lm_head.weight": "model.embed_tokens.weight"})


def test_validation_through_colocated_vllm_says_clearly_when_vllm_is_missing():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here: this test checks the error where it is not")
    except ImportError:
        pass
    from concord.engines.base import SamplingParams
    from concord.engines.vllm import VLLMUnavailableError
    from concord.rl.validation import vllm_validation_texts

    with pytest.raises(VLLMUnavailableError, match="needs the vllm package"):
        vllm_validation_texts(None, [[{"role": "user", "content": "1 + 1?"}]], SamplingParams(n=1, max_new_tokens=4))


# --------------------------------------------------------------------------- learning-rate schedule
def _schedule(training: dict) -> tuple[list[float], int, float]:
    """The learning rate of every optimiser update, as ConsensusGRPOTrainer schedules it."""
    from types import SimpleNamespace

    from concord.rl.settings import grpo_config, job_layout, resolve_training
    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg, _ = resolve_training({"gpus": 0, "gradient_checkpointing": False, **training})
    layout = job_layout(cfg, 1)
    args = grpo_config(cfg, layout, checkpoint_dir="ckpt", seed=0, max_steps=int(cfg["max_steps"]), on_gpu=False)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
    fake = SimpleNamespace(lr_scheduler=None, optimizer=opt, args=args, layout=layout)
    sched = ConsensusGRPOTrainer.create_scheduler(fake, args.max_steps, opt)
    lrs = []
    for _ in range(args.max_steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs, layout.updates_per_generation, args.learning_rate


@pytest.mark.transformers
def test_learning_rate_follows_verls_schedule_at_whole_steps():
    """verl (TTRL): int(ratio x steps) warm-up steps, cosine after, the scheduler stepped once per
    training step (verl/utils/torch_functional.py get_cosine_schedule_with_warmup,
    workers/fsdp_workers.py); TRL's updates within a step share the step's rate."""
    import math

    lrs, updates, lr = _schedule({"max_steps": 10, "warmup_ratio": 0.25, "lr_scheduler": "cosine", "learning_rate": 1e-5,
                                  "prompts_per_step": 4, "n_vote": 4, "n_train": 2, "updates_per_generation": 4})
    warmup = int(0.25 * 10)  # 2 (verl rounds down)

    def verl(step):
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, 10 - warmup))))

    assert updates == 4 and len(lrs) == 40
    assert lrs == pytest.approx([lr * verl(u // updates) for u in range(40)], rel=1e-9, abs=1e-15)
    assert all(len(set(lrs[s * 4:(s + 1) * 4])) == 1 for s in range(10))  # one rate per step


@pytest.mark.transformers
def test_the_default_run_never_trains_at_learning_rate_zero():
    """transformers rounds a 3% warm-up of two steps up to one step at rate 0; verl rounds it down
    to none: the default config's every update has a positive rate."""
    from pathlib import Path

    import yaml

    default = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())["training"]
    lrs, _, lr = _schedule(default)
    assert len(lrs) >= 2 and min(lrs) > 0, lrs
    # The case that used to fail: 2 steps at the schema's 3% warm-up.
    lrs, _, _ = _schedule({**default, "max_steps": 2, "warmup_ratio": 0.03})
    assert min(lrs) > 0 and lrs[0] == pytest.approx(lr)
