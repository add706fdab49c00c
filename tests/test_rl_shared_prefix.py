"""Scoring roll-outs with their shared prompt run once (:mod:`concord.rl.shared_prefix`) is TRL's
own scoring pass: the same log-probabilities, entropies and gradients, on the default's real model
and inside the trainer's loss; and the trainer falls back to TRL's pass where sharing does not apply.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from concord.hardware import avoid_cpu_flash_attention_amx_fault
from concord.rl.batching import Layout, check_layout
from concord.rl.rewards import ConsensusReward
from concord.config import resolve_section
from concord.rl.run import build_train_dataset
from concord.rl.settings import grpo_config
from support.data import CONSENSUS, QUESTIONS, TRAINING

pytestmark = [pytest.mark.slow, pytest.mark.transformers]

COMPLETION = 24


def _batch(vocab: int, pad_id: int):
    """Five rows of two prompts (74 and 70 real tokens, left-padded to 74), interleaved, with
    completions of 24, 20, 24, 10 and 1 real tokens (right-padded)."""
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, vocab, (2, 74), generator=g)
    prompt_mask = torch.ones(2, 74, dtype=torch.long)
    prompts[1, :4], prompt_mask[1, :4] = pad_id, 0
    rows = torch.tensor([0, 1, 0, 1, 0])
    completions = torch.randint(0, vocab, (5, COMPLETION), generator=g)
    completion_mask = torch.ones(5, COMPLETION, dtype=torch.long)
    for row, length in enumerate([24, 20, 24, 10, 1]):
        completion_mask[row, length:] = 0
    completions = completions.masked_fill(completion_mask == 0, pad_id)
    return torch.cat([prompts[rows], completions], 1), torch.cat([prompt_mask[rows], completion_mask], 1)


def _score(model, ids, mask, weights, shared: bool):
    """Log-probs, entropies and the gradient of a weighted sum of the log-probs."""
    from concord.rl.shared_prefix import shared_prefix_logps

    model.zero_grad()
    if shared:
        logps, entropy = shared_prefix_logps(model, ids, mask, COMPLETION, True, nullcontext)
    else:  # TRL's pass (GRPOTrainer._get_per_token_logps_and_entropies, one chunk)
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-COMPLETION] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        logps, entropy = out.log_probs[:, -COMPLETION:], out.entropy[:, -COMPLETION:]
    (logps * weights).sum().backward()
    grad = torch.cat([p.grad.flatten().float() for p in model.parameters() if p.grad is not None])
    return logps.detach().float(), entropy.detach().float(), grad


def test_shared_prompt_scoring_is_trls_pass_on_the_default_model(smollm2_dir):
    """fp32: TRL's numbers up to the order of sums. bf16: about as far from fp32 as TRL's own pass."""
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.set_num_threads(1)
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        avoid_cpu_flash_attention_amx_fault("cpu", str(dtype).removeprefix("torch."))  # as training does
        model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=dtype)
        add_fused_lm_head(model, temperature=0.6, outputs=("log_probs", "entropy"))
        model.train()
        ids, mask = _batch(model.config.vocab_size, model.config.pad_token_id or 0)
        weights = torch.randn(ids.size(0), COMPLETION, generator=torch.Generator().manual_seed(1))
        weights = weights * mask[:, -COMPLETION:]
        for shared in (False, True):
            results[dtype, shared] = _score(model, ids, mask, weights, shared)
    completion_mask = mask[:, -COMPLETION:].bool()

    trl, ours = results[torch.float32, False], results[torch.float32, True]
    assert torch.all(ours[0][~completion_mask] == 0) and torch.all(ours[1][~completion_mask] == 0)
    torch.testing.assert_close(ours[0], trl[0], rtol=0, atol=2e-4)  # log-probs around -15 nats
    torch.testing.assert_close(ours[1], trl[1], rtol=0, atol=2e-4)
    assert (ours[2] - trl[2]).norm() <= 1e-5 * trl[2].norm()

    def error(result, reference):
        return [(result[i] - reference[i]).norm().item() for i in range(3)]

    trl_bf16 = error(results[torch.bfloat16, False], trl)
    ours_bf16 = error(results[torch.bfloat16, True], trl)
    assert all(e > 0 for e in trl_bf16), trl_bf16  # bf16 really rounds
    # Either pass's bf16 error is a sum of many roundings, and sharing changes which (measured:
    # 0.9-1.2x TRL's); a wrong mask or position would be off by whole nats, orders above this bound.
    assert all(o <= 1.5 * t for o, t in zip(ours_bf16, trl_bf16)), (ours_bf16, trl_bf16)


def _trainer(model_dir, checkpoint_dir, share: bool, training=None):
    from transformers import AutoTokenizer

    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg = resolve_section("training", {**TRAINING, **(training or {})})
    layout = check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"]))
    args = grpo_config(cfg, layout, checkpoint_dir=checkpoint_dir, seed=0, max_steps=cfg["max_steps"], on_gpu=False)
    tok = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    return ConsensusGRPOTrainer(
        model=str(model_dir), args=args, processing_class=tok, n_train=layout.n_train,
        consensus_reward=ConsensusReward("core", layout.n_vote, CONSENSUS), share_prompt_prefix=share,
        train_dataset=build_train_dataset(QUESTIONS[:3], "instruct", "math"))  # three distinct prompts


def test_the_trainers_loss_and_gradient_are_the_same_with_the_prompt_shared(boxed_model_dir, tmp_path, monkeypatch):
    """One real generated micro-batch (two questions' training roll-outs): GRPO loss and gradient
    with the prompt shared equal TRL's pass, and the shared pass is the one that ran."""
    import concord.rl.trainer as trainer_module

    torch.set_num_threads(1)
    calls = []
    real = trainer_module.shared_prefix_logps
    monkeypatch.setattr(trainer_module, "shared_prefix_logps", lambda *a, **k: calls.append(a[1].shape) or real(*a, **k))

    losses = {}
    for share in (False, True):
        trainer = _trainer(boxed_model_dir, tmp_path / f"ckpt{share}", share)
        trainer.model.train()
        torch.manual_seed(0)
        batch = next(iter(trainer.get_train_dataloader()))
        out = trainer._generate_and_score_completions(batch)
        assert out["prompt_ids"].size(0) == 4 and len({tuple(r) for r in out["prompt_ids"].tolist()}) == 2
        trainer.current_gradient_accumulation_steps = 1
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, out)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        losses[share] = (out["completion_ids"], float(loss.detach()), grad.clone())
        assert len(calls) == (1 if share else 0), calls  # confidences come from the decode loop, not a pass

    assert torch.equal(losses[False][0], losses[True][0])  # the same roll-outs were scored
    assert losses[True][1] == pytest.approx(losses[False][1], rel=1e-5, abs=1e-7)
    torch.testing.assert_close(losses[True][2], losses[False][2], rtol=1e-4, atol=1e-6)
    assert losses[False][2].abs().max() > 0


def test_sharing_falls_back_to_trls_pass_where_it_would_not_be_the_same_function(boxed_model_dir, tmp_path):
    trainer = _trainer(boxed_model_dir, tmp_path / "ckpt", True, {"gradient_checkpointing": True})
    ids = torch.ones(2, 10, dtype=torch.long)
    trainer.model.train()
    assert not trainer._shared_prefix_applies(trainer.model, ids, 4, False, {})  # checkpointed layers drop caches
    trainer.args.gradient_checkpointing = False
    (getattr(trainer.model, "activation_checkpointing_enable", None) or trainer.model.gradient_checkpointing_enable)()
    assert not trainer._shared_prefix_applies(trainer.model, ids, 4, False, {})
    trainer.model.eval()
    assert trainer._shared_prefix_applies(trainer.model, ids, 4, False, {})
    assert not trainer._shared_prefix_applies(trainer.model, ids, 9, False, {})  # a one-token prompt
    assert not trainer._shared_prefix_applies(trainer.model, ids, 4, True, {})  # MoE auxiliary loss
    assert not trainer._shared_prefix_applies(trainer.model, ids, 4, False, {"pixel_values": torch.zeros(1)})
    trainer.share_prompt_prefix = False
    assert not trainer._shared_prefix_applies(trainer.model, ids, 4, False, {})
