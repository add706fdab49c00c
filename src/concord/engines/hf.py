"""Hugging Face ``generate`` back-end (CPU or GPU).

Confidence is the log-probability of each sampled token under the distribution it was sampled
from (``output_scores=True``: the logits after temperature and top-p), the one definition used by
roll-outs, rewards in training and the offline analysis alike: TRL scores a training roll-out
under logits / temperature, and vLLM returns ``processed_logprobs`` (what TRL asks of it and what
:class:`concord.engines.vllm.VLLMEngine` asks too). Greedy decoding scores raw logits.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

from concord.engines.base import Generation, Messages, SamplingParams, mean_logprob
from concord.hardware import resolve_dtype

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
        inputs = {"input_ids": enc["input_ids"].index_select(0, rows),
                  "attention_mask": enc["attention_mask"].index_select(0, rows)}
        sampling = (
            {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
            if not params.greedy
            else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        )
        # no_grad, not inference_mode: FSDP2 reuses its all-gather buffers across calls, and a buffer
        # created under inference_mode cannot be written by the training step that follows.
        extra = {} if self.synced_gpus is None else {"synced_gpus": self.synced_gpus}
        with torch.no_grad():
            # Under synced_gpus every rank must run the same forwards; an extra prefill is not one.
            if len(unique) < len(prompts) and self.synced_gpus is None and enc["input_ids"].shape[1] > 1:
                # `past_key_values`, not 5.24's new name `cache`: the GPU env pins transformers 5.17.
                extra["past_key_values"] = self._shared_prefix_cache(enc, rows)
            torch.manual_seed(seed)
            out = self.model.generate(
                **extra,
                **inputs,
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
        return [self._to_generation(new_tokens[i], token_logprobs[i], params) for i in range(len(prompts))]

    def _shared_prefix_cache(self, enc, rows):
        """KV cache of every distinct prompt but its last token, computed once and copied per row.

        ``generate`` repeats the prompt's forward pass for each of the n samples; for short answers
        that prefill is most of the cost (SmolLM2 on CPU: a 65-token prompt, 32 new tokens, n = 16:
        half the time). vLLM shares prompt prefixes the same way. ``generate`` then feeds only the
        last prompt token, at the positions it derives from the attention mask, as here; the
        samples are the same as without the cache (same logits up to float rounding).
        """
        from transformers import DynamicCache

        ids, mask = enc["input_ids"][:, :-1], enc["attention_mask"][:, :-1]
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)
        cache = DynamicCache(config=self.model.config)
        self.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
                   logits_to_keep=1)
        cache.batch_select_indices(rows)
        return cache

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


def _apply_stop_strings(text: str, finish: str, stop: Sequence[str]) -> tuple[str, str]:
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut >= 0:
        return text[:cut], "stop"
    return text, finish
