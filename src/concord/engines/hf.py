"""Hugging Face transformers back-end (CPU or GPU): the model's forward in a decode loop of its own
(:meth:`HFEngine._decode`), ``generate`` for a policy sharded over processes.

Confidence is the log-probability of each sampled token under the distribution it was sampled
from (the logits after temperature and top-p), the one definition used by
roll-outs, rewards in training and the offline analysis alike: TRL scores a training roll-out
under logits / temperature, and vLLM returns ``processed_logprobs`` (what TRL asks of it and what
:class:`concord.engines.vllm.VLLMEngine` asks too). Greedy decoding scores raw logits.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Sequence

from concord.engines.base import Generation, Messages, SamplingParams, mean_logprob
from concord.hardware import avoid_cpu_flash_attention_amx_fault, resolve_dtype

log = logging.getLogger(__name__)


class HFEngine:
    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        device: str | None = None,
        dtype: str = "auto",
        batch_size: int = 32,
        threads: int | None = None,
        progress: bool = True,
        **_ignored,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(int(threads))
        self.model_name = str(model_path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = resolve_dtype(dtype, self.device)  # the name, recorded in provenance
        avoid_cpu_flash_attention_amx_fault(self.device, self.dtype)
        torch_dtype = getattr(torch, self.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch_dtype).to(self.device)
        self.model.eval()
        self.batch_size = int(batch_size)
        self.progress = progress
        self.synced_gpus = None  # a model of its own is never sharded

    @classmethod
    def from_model(cls, model, tokenizer, *, batch_size: int = 32, progress: bool = False,
                   synced_gpus: bool | None = None) -> "HFEngine":
        """Wrap an already-loaded model (e.g. the policy inside a trainer) without reloading it.

        ``synced_gpus=True`` when the model's parameters are sharded over processes (FSDP, ZeRO-3):
        every process then keeps stepping until all have finished, so their collectives pair up.
        The caller must also give every process the same number of prompts (hence of batches).
        """
        self = cls.__new__(cls)
        self.synced_gpus = synced_gpus
        self.model_name = getattr(model, "name_or_path", "in-memory")
        self.model = model
        self.tokenizer = tokenizer
        self.device = str(next(model.parameters()).device)
        self.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        self.batch_size = batch_size
        self.progress = progress
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return self

    def render(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def generate(self, conversations: Sequence[Messages], params: SamplingParams) -> list[list[Generation]]:
        from tqdm.auto import tqdm

        prompts = [self.render(m) for m in conversations]
        # One row per roll-out, rows of a conversation contiguous, so results regroup trivially.
        rows = [p for p in prompts for _ in range(params.n)]
        flat: list[Generation] = []
        batches = range(0, len(rows), self.batch_size)
        bar = tqdm(batches, desc="generate", unit="batch", disable=not self.progress or len(batches) < 2)
        for b, start in enumerate(bar):
            flat.extend(self._generate_batch(rows[start : start + self.batch_size], params, seed=params.seed + b))
        return [flat[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    def _generate_batch(self, prompts: list[str], params: SamplingParams, seed: int) -> list[Generation]:
        import torch

        # Tokenise each distinct prompt once; rows repeat a prompt n times (contiguously).
        unique = list(dict.fromkeys(prompts))
        position = {p: i for i, p in enumerate(unique)}
        # The chat template already carries BOS/special tokens.
        enc = self.tokenizer(unique, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        rows = torch.tensor([position[p] for p in prompts], device=self.device)
        if self.synced_gpus is None:
            new_tokens, token_logprobs = self._decode(enc, rows, params, seed)
        else:
            new_tokens, token_logprobs = self._hf_generate(enc, rows, params, seed)
        return [self._to_generation(new_tokens[i], token_logprobs[i], params) for i in range(len(prompts))]

    def _decode(self, enc, rows, params: SamplingParams, seed: int):
        """Sample ``params.max_new_tokens`` tokens for every row: (token ids, their log-probabilities).

        A decode loop of its own rather than ``generate``, for speed at the same numerics: each
        distinct prompt is prefilled once into a preallocated (static) KV cache and copied per row
        (vLLM's prefix sharing), every step writes one position of that cache in place (a growing
        cache re-copies all of it each step: 15% of a SmolLM2 step), and sampling is one uniform
        number per row against the cumulative distribution (``multinomial`` and top-p's full-vocabulary
        sort cost 30 and 130 ms a step at 32 rows x 49k tokens on one core; the nucleus is found
        among the top 256 tokens, by a full sort only when they hold less than ``top_p``).
        The distribution sampled and scored is ``generate``'s: logits / temperature, renormalised
        over the top-p nucleus (greedy: argmax, scored under the raw logits). Rows that have
        emitted EOS are fed the pad token until every row has stopped or the budget is spent.
        The random stream is a ``torch.Generator`` seeded with ``seed``: the same seed on the same
        machine gives the same bytes, independent of any other use of torch's global generator.
        """
        import torch

        ids, mask = enc["input_ids"], enc["attention_mask"]
        length, budget, n_rows = ids.shape[1], params.max_new_tokens, rows.numel()
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        cache = static_cache(self.model.config, length + budget)
        generator = torch.Generator(device=self.device).manual_seed(int(seed))
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        tokens = torch.full((n_rows, budget), pad, dtype=torch.long, device=self.device)
        logprobs = torch.zeros((n_rows, budget), dtype=torch.float32, device=self.device)
        done = torch.zeros(n_rows, dtype=torch.bool, device=self.device)
        full_mask = torch.zeros((n_rows, length + budget), dtype=mask.dtype, device=self.device)
        full_mask[:, :length] = mask.index_select(0, rows)
        next_position = positions[:, -1].index_select(0, rows) + 1
        with_cache = {cache_keyword(self.model): cache}
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **with_cache,
                             cache_position=torch.arange(length, device=self.device), use_cache=True, logits_to_keep=1)
            logits = out.logits[:, -1].index_select(0, rows)
            if len(rows) != ids.shape[0] or not torch.equal(rows, torch.arange(len(rows), device=rows.device)):
                for layer in cache.layers:
                    layer.keys, layer.values = layer.keys.index_select(0, rows), layer.values.index_select(0, rows)
                    layer.batch_size = n_rows
            for t in range(budget):
                token, logprob = _sample(logits, params, generator)
                token = token.masked_fill(done, pad)
                tokens[:, t], logprobs[:, t] = token, logprob.masked_fill(done, 0.0)
                done |= token == eos
                if t + 1 == budget or bool(done.all()):
                    break
                full_mask[:, length + t] = 1
                logits = self.model(
                    input_ids=token[:, None], attention_mask=full_mask[:, : length + t + 1],
                    position_ids=(next_position + t)[:, None], **with_cache,
                    cache_position=torch.tensor([length + t], device=self.device), use_cache=True,
                ).logits[:, -1]
        return tokens, logprobs

    def _hf_generate(self, enc, rows, params: SamplingParams, seed: int):
        """transformers' ``generate``, for a policy sharded over processes (``synced_gpus``): every
        rank must run the same forwards until all have finished, which ``generate`` coordinates."""
        import torch

        inputs = {"input_ids": enc["input_ids"].index_select(0, rows),
                  "attention_mask": enc["attention_mask"].index_select(0, rows)}
        sampling = (
            {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
            if not params.greedy
            else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        )
        # no_grad, not inference_mode: FSDP2 reuses its all-gather buffers across calls, and a buffer
        # created under inference_mode cannot be written by the training step that follows.
        with torch.no_grad():
            torch.manual_seed(seed)
            out = self.model.generate(
                **inputs,
                synced_gpus=self.synced_gpus,
                max_new_tokens=params.max_new_tokens,
                return_dict_in_generate=True,
                output_scores=True,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                **sampling,
            )
        new_tokens = out.sequences[:, inputs["input_ids"].shape[1] :]
        # Step by step: stacking (batch, steps, vocab) scores would cost GBs at long lengths.
        token_logprobs = torch.stack(
            [
                torch.log_softmax(step_scores.float(), dim=-1).gather(-1, new_tokens[:, t : t + 1]).squeeze(-1)
                for t, step_scores in enumerate(out.scores)
            ],
            dim=1,
        )
        return new_tokens, token_logprobs

    def _to_generation(self, tokens, logprobs, params: SamplingParams) -> Generation:
        eos = self.tokenizer.eos_token_id
        ids = tokens.tolist()
        stopped = eos in ids
        length = ids.index(eos) if stopped else len(ids)
        # The EOS token is part of the sampled sequence; score it, as vLLM does.
        scored = length + 1 if stopped else length
        lps = [float(x) for x in logprobs[:scored].tolist()]
        text = self.tokenizer.decode(ids[:length], skip_special_tokens=True)
        finish = "stop" if stopped else "length"
        text, finish = _apply_stop_strings(text, finish, params.stop)
        return Generation(text=text, n_tokens=scored, finish_reason=finish, mean_logprob=mean_logprob(lps),
                          token_logprobs=lps, token_ids=ids[:scored])


def static_cache(config, max_cache_len: int):
    """transformers' ``StaticCache``, whose values may come in another dtype than its keys.

    Under autocast (validation inside a bf16 training step, fp32 master weights) the keys leave the
    rotary embedding in fp32 and the values a bf16 projection; transformers before 5.18 (the GPU
    env's, capped by vLLM 0.31) allocates a layer's values in its keys' dtype, so the first write
    fails (``index_copy_``: Float and BFloat16). Values are cast to the keys' dtype: exact (bf16 is
    a subset of fp32), and attention under autocast computes in bf16 either way. A subclass, as
    transformers offers no option for it; a no-op where the dtypes agree.
    """
    return _static_cache_class()(config=config, max_cache_len=max_cache_len)


@functools.cache
def _static_cache_class():
    """The subclass, made once (transformers is imported only where an engine runs)."""
    from transformers import StaticCache

    class _StaticCache(StaticCache):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            if value_states.dtype != key_states.dtype:
                value_states = value_states.to(key_states.dtype)
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    return _StaticCache


def cache_keyword(model) -> str:
    """The keyword under which ``model``'s forward takes a KV cache: transformers 5.x renamed
    ``past_key_values`` to ``cache`` (the old name warns on every call, and goes in 5.40)."""
    import inspect

    params = inspect.signature(type(model).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _apply_stop_strings(text: str, finish: str, stop: Sequence[str]) -> tuple[str, str]:
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut >= 0:
        return text[:cut], "stop"
    return text, finish


#: the nucleus is looked for among this many most probable tokens first (a full sort otherwise)
TOP_P_CANDIDATES = 256


def _sample(logits, params: SamplingParams, generator):
    """One token per row and its log-probability under the distribution it was drawn from.

    Greedy: the argmax, scored under the raw logits. Otherwise logits / temperature, restricted
    to the top-p nucleus as transformers' ``TopPLogitsWarper`` does (a token is kept while the
    probability mass strictly before it, in descending order, is below ``top_p``; the most probable
    always), and drawn by inverse transform sampling with one uniform number per row
    (:func:`_inverse_cdf`).
    """
    import torch

    logits = logits.float()
    if params.greedy:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(-1, token[:, None]).squeeze(-1)
    scaled = logits / params.temperature
    if params.top_p < 1.0:
        scaled = _nucleus(scaled, params.top_p)
    logp = torch.log_softmax(scaled, -1)
    u = torch.rand((logp.shape[0], 1), generator=generator, device=logp.device, dtype=torch.float64)
    token = _inverse_cdf(logp.exp(), u)
    return token, logp.gather(-1, token[:, None]).squeeze(-1)


#: vocabulary block of the two-level inverse CDF
CDF_BLOCK = 256


def _inverse_cdf(probs, u):
    """Per row, the first token whose cumulative probability exceeds ``u`` x the row's total, in two
    levels (block sums, then the one block's own cumulative sum) and in float64: a 49k-long float64
    cumulative sum per row costs more than the rest of sampling. Tokens of zero probability are never
    drawn: the block and the token are each the first whose running sum exceeds the target."""
    import torch

    rows, vocab = probs.shape
    padded = torch.nn.functional.pad(probs, (0, -vocab % CDF_BLOCK)).view(rows, -1, CDF_BLOCK)
    block_cdf = padded.sum(-1, dtype=torch.float64).cumsum(-1)
    target = u * block_cdf[:, -1:]
    block = torch.searchsorted(block_cdf, target, right=True).clamp(max=block_cdf.shape[1] - 1)
    below = torch.where(block > 0, block_cdf.gather(-1, (block - 1).clamp(min=0)), torch.zeros_like(target))
    within = padded[torch.arange(rows, device=probs.device), block.squeeze(-1)].cumsum(-1, dtype=torch.float64)
    # float64 rounding may leave the residual at or past the block's own total: stay inside the block
    residual = torch.minimum(target - below, within[:, -1:] * (1 - 1e-12))
    offset = torch.searchsorted(within, residual, right=True).clamp(max=CDF_BLOCK - 1)
    return (block * CDF_BLOCK + offset).squeeze(-1)


def _nucleus(scaled, top_p: float):
    """``scaled`` with every token outside the top-p nucleus set to -inf."""
    import torch

    probs = torch.softmax(scaled, -1)
    k = min(TOP_P_CANDIDATES, probs.shape[-1])
    top, index = probs.topk(k, dim=-1)
    if bool((top.sum(-1) < top_p).any()):
        top, index = probs.sort(dim=-1, descending=True)
    before = top.cumsum(-1) - top  # mass of the more probable tokens
    keep = before < top_p
    keep[:, 0] = True
    out = torch.full_like(scaled, float("-inf"))
    return out.scatter_(-1, index, torch.where(keep, scaled.gather(-1, index), out[:, :1].expand_as(index)))
