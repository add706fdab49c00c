"""Compare a colocated vLLM engine's weights with the policy's (the weight-sync check)."""

from __future__ import annotations


def vllm_weights(llm) -> dict:
    """The engine's parameters by name (vLLM fuses q/k/v into ``qkv_proj`` and gate/up into ``gate_up_proj``)."""
    return llm.apply_model(lambda model: {n: p.detach().clone() for n, p in model.named_parameters()})[0]


def as_vllm(policy_state: dict, name: str):
    """The policy's tensor for vLLM's parameter ``name`` (fused ones concatenated as vLLM loads them)."""
    import torch

    def get(n):
        return policy_state[n] if n in policy_state else policy_state[n.removeprefix("model.")]

    if ".qkv_proj." in name:
        return torch.cat([get(name.replace("qkv_proj", p)) for p in ("q_proj", "k_proj", "v_proj")])
    if ".gate_up_proj." in name:
        return torch.cat([get(name.replace("gate_up_proj", p)) for p in ("gate_proj", "up_proj")])
    if name == "lm_head.weight" and name not in policy_state:
        return get("model.embed_tokens.weight")  # tied
    return get(name)


def fraction_equal(llm, model) -> float:
    """Share of vLLM's parameter tensors bit-equal to the policy's, the policy's cast to the
    engine's dtype (fp32 master weights under bf16 compute reach a bf16 engine rounded)."""
    import torch

    policy = {n: p.detach() for n, p in model.named_parameters()}
    engine = vllm_weights(llm)
    equal = []
    for name, tensor in engine.items():
        ref = as_vllm(policy, name)
        # vLLM pads the vocabulary dimension of the embedding and lm_head (to a multiple of 64).
        equal.append(torch.equal(tensor[: ref.shape[0]], ref.to(tensor.dtype)))
    return sum(equal) / len(equal)


class WeightSyncCheck:
    """A callback factory for ``concord.rl.run.train(callbacks=...)``: right after each optimiser
    update (before validation, which syncs too), the share of the colocated engine's weights equal
    to the policy's before and after TRL's ``sync_weights()`` (the sync TRL runs before each
    generation round)."""

    def __init__(self):
        self.records: list[tuple[float, float]] = []
        self.engine_dtype = None

    def __call__(self, trainer):
        from transformers import TrainerCallback

        check = self

        class _Callback(TrainerCallback):
            def on_optimizer_step(self, args, state, control, **kwargs):
                llm = trainer.vllm_generation.llm
                check.engine_dtype = str(llm.llm_engine.model_config.dtype)
                model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
                before = fraction_equal(llm, model)
                trainer.vllm_generation.sync_weights()
                check.records.append((before, fraction_equal(llm, model)))

        return _Callback()
