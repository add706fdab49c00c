"""Per-token log-probabilities of roll-outs that share their prompt, with the prompt run once.

TRL 1.16 scores a GRPO micro-batch with one forward pass over every row's whole sequence
(``GRPOTrainer._get_per_token_logps_and_entropies``): a group's prompt is recomputed once for each
of its roll-outs, and off Triton devices its fused LM head projects every position, the prompt's
included (``trl/trainer/utils.py``, ``add_fused_lm_head``: ``compact`` only on Triton). In the
default (a 61-token prompt, 4 training roll-outs of 24 tokens per micro-batch) over two thirds of
the tokens are the same prompt again.

Here each distinct prompt of a micro-batch runs once, all but its last token, into a KV cache
(vLLM's prefix sharing, as :meth:`concord.engines.hf.HFEngine._decode` does for sampling); the
cache is indexed out to the rows that share it, and the rows' tails (the prompt's last token and
the completion) run on top of it through TRL's own fused head, which then projects exactly the
scored positions. Gradients flow back through the indexed cache into the one prompt pass, so every
parameter receives the sum over the rows that the full pass gives. Positions and the attention
mask are the full pass's (``arange`` over the padded sequence, padding masked), so the result is
the same function; only the order of floating-point sums differs (``tests/test_rl_shared_prefix.py``
measures it against TRL's own pass). Transformers has no such scoring API: its caches are built
for generation, so the two passes are written here.
"""

from __future__ import annotations

import inspect

import torch

from concord.engines.hf import cache_keyword


def supports_shared_prefix(model) -> bool:
    """Whether ``model`` (unwrapped) is a decoder whose default cache is transformers' dynamic one."""
    supports = getattr(type(model), "_supports_default_dynamic_cache", None)
    params = inspect.signature(type(model).forward).parameters
    return (
        ("cache" in params or "past_key_values" in params)
        and not getattr(model.config, "is_encoder_decoder", False)
        and callable(supports) and bool(supports())
    )


def shared_prefix_logps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                        compute_entropy: bool, autocast) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (and entropies) of the last ``logits_to_keep`` tokens of each row, as
    TRL's ``model(..., labels=labels, fused_lm_head=True)`` over the whole rows returns them.

    ``model`` carries TRL's fused head (``add_fused_lm_head``); ``autocast`` is the accelerator's
    autocast context factory.
    """
    from transformers import DynamicCache

    prompt_len = input_ids.size(1) - logits_to_keep
    if prompt_len < 2:
        raise ValueError(f"a shared prefix needs a prompt of at least 2 tokens, got {prompt_len}")
    prefix = torch.cat([input_ids[:, :prompt_len], attention_mask[:, :prompt_len]], dim=1)
    distinct, row_of = torch.unique(prefix, dim=0, return_inverse=True)
    keyword = cache_keyword(model)
    cache = DynamicCache(config=model.config)
    head = prompt_len - 1  # the prompt's last token runs with its row: it predicts the first completion token
    with autocast():
        model(input_ids=distinct[:, :head], attention_mask=distinct[:, prompt_len:prompt_len + head],
              use_cache=True, logits_to_keep=1, **{keyword: cache})
        cache.batch_select_indices(row_of)
        tail = input_ids[:, head:]
        labels = tail.masked_fill(attention_mask[:, head:] == 0, -100)
        labels[:, 0] = -100
        outputs = model(input_ids=tail, attention_mask=attention_mask, labels=labels, fused_lm_head=True,
                        **{keyword: cache})
    return outputs.log_probs, (outputs.entropy if compute_entropy else None)
