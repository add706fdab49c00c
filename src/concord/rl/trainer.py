"""``ConsensusGRPOTrainer``: TRL's GRPOTrainer with TTRL's vote/train split and the CoRE gate.

Three changes to the stock trainer, each at the narrowest hook TRL offers (and verl's
learning-rate schedule, one rate per TTRL step: ``create_scheduler``):

1. ``_generate`` -- after sampling, attach each roll-out's confidence c_i (mean token
   log-probability under the sampling policy) as a ``confidence`` column for the reward
   function: vLLM's per-token sampling log-probs when generation ran in vLLM, otherwise one
   no-grad forward pass of the policy (TRL's own ``_get_per_token_logps_and_entropies``, which
   applies the sampling temperature). Every arm gets it the same way, whether it uses it or not.
2. the reward function (:class:`concord.rl.rewards.ConsensusReward`) scores whole groups.
3. ``_generate_and_score_completions`` -- after TRL has built the batch, keep only the
   ``n_train`` training roll-outs of each group, recompute their group-normalised advantages
   over the kept roll-outs, multiply by the group's gate w_q, and recount the loss normaliser.
   For every clipped-surrogate loss TRL offers (grpo, bnpo, dr_grpo, dapo) the per-token loss is
   -min(r A, clip(r) A) (with the dual clip ``delta``: -min(min(r, delta) A, clip(r) A)), positively
   homogeneous in A, so w_q >= 0 scales that question's policy loss exactly. With ``beta > 0`` the KL penalty toward the reference model is *not* gated: it
   regularises every question alike.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager

import numpy as np
import torch
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import pad

from concord.rl.batching import Layout, check_layout, gated_advantages, keep_mask
from concord.rl.rewards import ConsensusReward
from concord.rl.settings import compute_dtype
from concord.rl.shared_prefix import shared_prefix_logps, supports_shared_prefix

log = logging.getLogger(__name__)


class ConsensusGRPOTrainer(GRPOTrainer):
    def __init__(self, *args, consensus_reward: ConsensusReward, n_train: int, share_prompt_prefix: bool = True,
                 **kwargs):
        if "reward_funcs" in kwargs:
            raise TypeError("ConsensusGRPOTrainer takes consensus_reward=..., not reward_funcs")
        #: score each micro-batch's shared prompt once (:mod:`concord.rl.shared_prefix`) where it applies
        self.share_prompt_prefix = bool(share_prompt_prefix)
        train_args = kwargs.get("args")
        dtype = compute_dtype(train_args)  # the engine generates in the compute dtype, not the master weights'
        with _colocated_vllm(dtype, bool(getattr(train_args, "use_vllm", False)), bool(getattr(train_args, "use_cpu", False))):
            super().__init__(*args, reward_funcs=[consensus_reward], **kwargs)
        #: the dtype the colocated vLLM engine generates in (None without vLLM), checked to be the trainer's
        self.vllm_dtype = _check_vllm_dtype(self, dtype) if self.use_vllm and self.vllm_mode == "colocate" else None
        self.consensus_reward = consensus_reward
        self.n_vote = int(self.num_generations)
        self.n_train = int(n_train)
        if consensus_reward.n_vote != self.n_vote:
            raise ValueError(f"reward groups of {consensus_reward.n_vote} but num_generations={self.n_vote}")
        spg, ga = self.args.steps_per_generation, self.args.gradient_accumulation_steps
        if spg % ga:
            raise ValueError(f"steps_per_generation ({spg}) must be a whole number of optimiser updates of "
                             f"gradient_accumulation_steps={ga} micro-batches")
        self.layout = check_layout(Layout(
            prompts_per_step=self.args.generation_batch_size // self.n_vote,
            n_vote=self.n_vote,
            n_train=self.n_train,
            num_processes=self.accelerator.num_processes,
            gradient_accumulation_steps=ga,
            updates_per_generation=spg // ga,
        ))

    # -- learning-rate schedule per TTRL step ---------------------------------------------------
    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """transformers' schedule evaluated at whole TTRL steps, as verl's scheduler, which steps
        once per training step: every update of a step runs at that step's rate.

        ``num_training_steps`` and ``warmup_steps`` arrive in updates
        (:func:`concord.rl.settings.warmup_updates` makes the warm-up whole steps); with one
        update per step this is transformers' own schedule.
        """
        if self.lr_scheduler is not None:
            return self.lr_scheduler
        from torch.optim.lr_scheduler import LambdaLR
        from transformers import get_scheduler

        optimizer = optimizer if optimizer is not None else self.optimizer
        updates = self.layout.updates_per_generation
        if num_training_steps % updates or self.args.get_warmup_steps(num_training_steps) % updates:
            raise ValueError(f"{num_training_steps} updates with a warm-up of {self.args.get_warmup_steps(num_training_steps)} "
                             f"are not whole steps of {updates} updates")
        per_step = get_scheduler(
            self.args.lr_scheduler_type, optimizer=optimizer,
            num_warmup_steps=self.args.get_warmup_steps(num_training_steps) // updates,
            num_training_steps=num_training_steps // updates, scheduler_specific_kwargs=self.args.lr_scheduler_kwargs,
        )
        if updates == 1:
            self.lr_scheduler = per_step
        else:
            step_factors = per_step.lr_lambdas
            self.lr_scheduler = LambdaLR(optimizer, [_at_step(f, updates) for f in step_factors])
        self._created_lr_scheduler = True
        return self.lr_scheduler

    # -- 0. generation on sharded parameters ------------------------------------------------------
    def _generate(self, prompts: list):
        mark_sharded_for_generation(self)
        return self._generate_with_confidence(prompts)

    # -- 0b. roll-outs on the HF engine's decode loop ----------------------------------------------
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """TRL's transformers path, sampled by :meth:`concord.engines.hf.HFEngine._decode` instead of
        ``generate`` where the two sample the same distribution (text-only prompts, temperature and
        top-p only, one EOS, parameters not sharded): the group's prompt is prefilled once, the KV
        cache is written in place, and each token's sampling log-probability comes with it, so
        at top-p 1 (where it is TRL's forward's ``logits / temperature``) the confidence needs no
        second forward pass over every roll-out. Anything else goes to TRL's own path."""
        if not self._engine_generation_applies(images, multimodal_fields):
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        from trl.models import unwrap_model_for_generation

        from concord.engines.base import SamplingParams
        from concord.engines.hf import HFEngine

        device = self.accelerator.device
        unique = list(dict.fromkeys(tuple(ids) for ids in prompt_ids))
        position = {ids: i for i, ids in enumerate(unique)}
        enc = {"input_ids": pad([torch.tensor(ids) for ids in unique], padding_value=self._tokenizer.pad_token_id,
                                padding_side="left").to(device),
               "attention_mask": pad([torch.ones(len(ids), dtype=torch.long) for ids in unique], padding_value=0,
                                     padding_side="left").to(device)}
        rows = torch.tensor([position[tuple(ids)] for ids in prompt_ids], device=device)
        params = SamplingParams(temperature=float(self.temperature), top_p=float(self.top_p),
                                max_new_tokens=int(self.max_completion_length))
        # One draw from torch's global generator (seeded by the trainer) seeds the step's sampler:
        # reruns repeat, and every step and process gets its own stream.
        seed = int(torch.randint(0, 2**62, (1,)).item())
        with (
            unwrap_model_for_generation(
                self.model_wrapped, self.accelerator, gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
        ):
            engine = HFEngine.from_model(unwrapped_model, self._tokenizer)
            tokens, logprobs = engine._decode(enc, rows, params, seed)
        eos = self._tokenizer.eos_token_id
        completion_ids, completion_logprobs = [], []
        for ids, lps in zip(tokens.tolist(), logprobs.tolist()):
            length = ids.index(eos) + 1 if eos in ids else len(ids)  # the EOS is part of the completion
            completion_ids.append(ids[:length])
            completion_logprobs.append(lps[:length])
        return completion_ids, (completion_logprobs if self.top_p == 1.0 else None)

    def _engine_generation_applies(self, images, multimodal_fields) -> bool:
        g = getattr(self, "generation_kwargs", None) or {}
        return (
            not self.use_vllm and not self.use_transformers_continuous_batching
            and images is None and not multimodal_fields and not self._is_vlm and not is_sharded(self)
            and self.pad_to_multiple_of is None
            and len(self.eos_token_ids) == 1 and self.eos_token_ids[0] == self._tokenizer.eos_token_id
            and g.get("top_k") in (None, 0) and g.get("min_p") is None
            and g.get("repetition_penalty") in (None, 1.0) and self.args.generation_kwargs is None
            and g.get("cache_implementation") is None
        )

    # -- 1. confidence ------------------------------------------------------------------------
    # Maintenance note: this unpacks the 8-tuple TRL 1.16's private ``GRPOTrainer._generate(prompts)``
    # returns; tests/test_rl.py::test_trl_private_methods_concord_overrides_keep_their_shape fails
    # in pytest (not mid-training) when a TRL upgrade changes it.
    def _generate_with_confidence(self, prompts: list):
        (prompt_ids, completion_ids, tool_mask, completions, logprobs,
         extra_fields, images, tool_images) = super()._generate(prompts)
        if logprobs is not None:
            # vLLM's per-token sampling log-probs, or the engine decode loop's (top-p 1: logits / T)
            confidence = [_mean_finite(seq) for seq in logprobs]
        else:
            confidence = self._forward_confidence(prompt_ids, completion_ids)
        extra_fields = {**(extra_fields or {}), "confidence": confidence}
        return prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, tool_images

    @torch.no_grad()
    def _forward_confidence(self, prompt_ids: list[list[int]], completion_ids: list[list[int]]) -> list[float]:
        device = self.accelerator.device
        pad_id = self._tokenizer.pad_token_id
        p = pad([torch.tensor(x) for x in prompt_ids], padding_value=pad_id, padding_side="left").to(device)
        pm = pad([torch.ones(len(x), dtype=torch.long) for x in prompt_ids], padding_value=0, padding_side="left").to(device)
        c = pad([torch.tensor(x) for x in completion_ids], padding_value=pad_id, padding_side="right").to(device)
        cm = pad([torch.ones(len(x), dtype=torch.long) for x in completion_ids], padding_value=0, padding_side="right").to(device)
        with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, torch.cat([p, c], dim=1), torch.cat([pm, cm], dim=1), c.size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        cm = cm.to(logps.dtype)
        means = (logps.float() * cm).sum(1) / cm.sum(1).clamp(min=1.0)
        # An empty completion has no tokens to be confident about: never the most confident.
        means = torch.where(cm.sum(1) > 0, means, torch.full_like(means, float("-inf")))
        return means.tolist()

    # -- 2b. log-probabilities with each prompt run once ------------------------------------------
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):
        """TRL's scoring pass, with the prompt a micro-batch's rows share run once
        (:mod:`concord.rl.shared_prefix`) where that is the same function: an unwrapped,
        unsharded decoder with text-only inputs and no gradient checkpointing. Anything else
        goes to TRL's own pass."""
        if not self._shared_prefix_applies(model, input_ids, logits_to_keep, compute_aux_loss, multimodal):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal)
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            chunk = slice(start, start + batch_size)
            lp, ent = shared_prefix_logps(model, input_ids[chunk], attention_mask[chunk], logits_to_keep,
                                          compute_entropy, self.accelerator.autocast)
            logps.append(lp)
            entropies.append(ent)
        return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    def _shared_prefix_applies(self, model, input_ids, logits_to_keep, compute_aux_loss, multimodal) -> bool:
        from accelerate.utils import is_peft_model

        if not self.share_prompt_prefix or compute_aux_loss or any(v is not None for v in multimodal.values()):
            return False
        if self.accelerator.num_processes > 1 or self.accelerator.unwrap_model(model) is not model or is_peft_model(model):
            return False  # DDP, FSDP (which shards in place) and PEFT expect one forward per backward
        checkpointed = getattr(model, "is_activation_checkpointing", None)  # transformers >= 5.2x's name
        if checkpointed is None:
            checkpointed = getattr(model, "is_gradient_checkpointing", False)
        if model.training and (self.args.gradient_checkpointing or checkpointed):
            return False  # checkpointed layers run without a cache
        return input_ids.size(1) - logits_to_keep >= 2 and supports_shared_prefix(model)

    # -- 3. training subset and gate -------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        batch = self.consensus_reward.last_batch
        n_local = output["completion_ids"].size(0)
        n_global = n_local * self.accelerator.num_processes
        if batch is None or len(batch.rewards) != n_global:
            raise RuntimeError("the consensus reward did not score this batch; rewards and roll-outs are out of step")
        advantages = gated_advantages(batch.rewards, batch.gates, self.n_vote, self.n_train, self.scale_rewards)
        keep = keep_mask(n_global, self.n_vote, self.n_train)
        for g, record in enumerate(batch.groups):
            record.kept = keep[g * self.n_vote:(g + 1) * self.n_vote].tolist()
        local = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        local_keep = torch.from_numpy(keep[local]).to(self.accelerator.device)
        out = {}
        for key, value in output.items():
            if isinstance(value, torch.Tensor) and value.ndim > 0 and value.size(0) == n_local:
                out[key] = value[local_keep]
            else:
                out[key] = value
        out["advantages"] = torch.from_numpy(advantages[local][keep[local]]).to(
            device=self.accelerator.device, dtype=output["advantages"].dtype)
        loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        # The DAPO-style normaliser counts the tokens that actually enter the loss.
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return out


@contextmanager
def _colocated_vllm(dtype: str, use_vllm: bool, on_cpu: bool):
    """While the trainer builds its colocated vLLM engine: pass it the training dtype, and on a
    CPU size its KV cache and keep its weights where TRL's sync writes them (:func:`_live_weight_gemm`).

    TRL 1.16 builds the engine as ``LLM(model=..., ...)`` without a dtype
    (``trl/generation/vllm_generation.py``) and offers no setting for one, so vLLM's ``auto`` loads
    an fp32 policy in bf16: roll-outs sampled from another distribution than the one trained
    (0.02 nats mean log-prob gap, importance ratio 1.2 at step 1, measured), and on a CPU without
    native bf16 an emulated, several times slower path. The name TRL calls is wrapped for the
    duration of ``GRPOTrainer.__init__`` only; :func:`_check_vllm_dtype` then verifies the result,
    so a TRL upgrade that builds the engine elsewhere fails loudly instead of drifting.
    On a CPU, vLLM reads ``gpu_memory_utilization`` as a share of host RAM unless
    ``VLLM_CPU_KVCACHE_SPACE`` (GiB) is set: it is set to concord's default when unset.
    """
    if not use_vllm:
        yield
        return
    from trl.generation import vllm_generation

    from concord.engines.vllm import CPU_KV_CACHE_GIB

    patches = []
    if on_cpu:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        from vllm.model_executor.layers import utils as vllm_layer_utils

        patches.append((vllm_layer_utils, "dispatch_cpu_unquantized_gemm", _live_weight_gemm))
    original = vllm_generation.LLM

    def with_dtype(*args, **kwargs):
        kwargs.setdefault("dtype", dtype)
        return original(*args, **kwargs)

    patches.append((vllm_generation, "LLM", with_dtype))
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _live_weight_gemm(layer, remove_weight: bool) -> None:
    """vLLM-CPU's matmul for a colocated engine: ``F.linear`` on the layer's live weight.

    vLLM 0.31's CPU build repacks every linear layer's weight after loading (oneDNN, or AMX
    kernels) and, for all but the embedding, replaces the weight by an empty tensor. TRL's weight
    sync loads the policy's tensors into those weights: it then fails (``'Parameter' object has no
    attribute 'weight_loader'``), and the tied ``lm_head`` would keep computing with its stale
    packed copy. Computing from the live weights keeps the sync real, at the cost of the packed
    kernels' speed (the GPU path is untouched).
    """
    import torch

    layer.cpu_linear = torch.nn.functional.linear


def _check_vllm_dtype(trainer, dtype: str) -> str:
    """The colocated engine's dtype; an error unless it is the training dtype ``dtype``."""
    got = str(trainer.vllm_generation.llm.llm_engine.model_config.dtype).removeprefix("torch.")
    if dtype != "auto" and got != dtype:
        raise RuntimeError(f"the colocated vLLM engine runs in {got}, the trainer in {dtype}: roll-outs would come from "
                           "another distribution than the one trained (has TRL changed how it builds the engine?)")
    return got


def is_sharded(trainer) -> bool:
    """Whether the policy's parameters are split over processes (FSDP or DeepSpeed ZeRO-3)."""
    if trainer.accelerator.num_processes < 2:
        return False
    return bool(trainer._dist.is_fsdp or trainer._dist.is_zero3)


def mark_sharded_for_generation(trainer) -> None:
    """Make transformers' ``generate`` run with ``synced_gpus`` on an FSDP2-sharded policy.

    ``generate`` turns ``synced_gpus`` on by itself only for modules carrying
    ``_is_fsdp_managed_module`` (set by transformers' own FSDP2 loader, not by accelerate's
    ``fully_shard`` path). Without it a process whose sequences end first stops calling the model
    while the others still all-gather its parameter shards: the job hangs. This covers TRL's own
    HF-generation path (training without vLLM) and concord's validation alike.
    """
    if is_sharded(trainer) and trainer._dist.is_fsdp:
        trainer.accelerator.unwrap_model(trainer.model_wrapped)._is_fsdp_managed_module = True


def _at_step(factor, updates: int):
    """A per-step LR factor read at update ``u`` as step ``u // updates``. A plain function, so
    LambdaLR keeps it out of checkpoints (it saves the state of callable objects only)."""

    def lr_factor(update: int) -> float:
        return factor(update // updates)

    return lr_factor


def _mean_finite(values) -> float:
    vals = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    vals = vals[np.isfinite(vals)]
    return float(vals.mean()) if vals.size else float("-inf")
