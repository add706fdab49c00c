"""``concord.engines.vllm.VLLMEngine`` on vLLM's CPU build, against the HF reference.

One engine per dtype for the module (building one costs seconds; importing vLLM, most of the
start-up, happens once). Every roll-out's per-token log-probabilities are checked against a
teacher-forced forward pass of the HF model over the same tokens, in the same dtype; greedy
output must equal the HF engine's token for token (fp32); seeds reproduce and differ; a request
that does not fit the context is refused before anything is generated.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from concord.engines.base import SamplingParams

pytestmark = pytest.mark.slow

CONVERSATIONS = [[{"role": "user", "content": f"What is {a} + {b}?"}] for a, b in ((1, 2), (3, 4), (0, 5))]
MAX_MODEL_LEN = 128
#: Largest |vLLM - HF| per-token log-prob (nats), and per roll-out confidence, by dtype. fp32 agrees
#: to float rounding (measured 7.6e-7 on SmolLM2); bf16 rounds differently in each library's kernels.
TOLERANCE = {"float32": (1e-4, 1e-5), "bfloat16": (0.25, 0.05)}


@pytest.fixture(scope="module")
def model_dir(vllm_boxed_model_dir):
    torch.set_num_threads(1)
    return vllm_boxed_model_dir  # conftest's session-wide model (read-only)


@pytest.fixture(scope="module")
def engines(model_dir):
    from concord.engines.vllm import VLLMEngine

    built = {}

    def get(dtype):
        if dtype not in built:
            built[dtype] = VLLMEngine(model_dir, dtype=dtype, max_model_len=MAX_MODEL_LEN, seed=0)
        return built[dtype]

    return get


def teacher_forced(model_dir, dtype, prompt_ids, completion_ids) -> list[float]:
    """Log-probability of each completion token under the HF model (raw logits, no warping)."""
    from transformers import AutoModelForCausalLM

    model = teacher_forced.cache.get(dtype)
    if model is None:
        model = teacher_forced.cache[dtype] = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=getattr(torch, dtype)).eval()
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion_ids)[:, None]).squeeze(-1).tolist()


teacher_forced.cache = {}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rollouts_and_confidences_match_hf_teacher_forcing(engines, model_dir, dtype):
    engine = engines(dtype)
    assert engine.dtype == dtype and engine.device == "cpu"
    assert str(engine.llm.llm_engine.model_config.dtype) == f"torch.{dtype}"  # passed explicitly, never vLLM's auto
    gens = engine.generate(CONVERSATIONS, SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=3))
    assert [len(g) for g in gens] == [4, 4, 4]
    token_tol, conf_tol = TOLERANCE[dtype]
    worst_token = worst_conf = 0.0
    for conv, samples in zip(CONVERSATIONS, gens):
        prompt_ids = engine.tokenizer(engine.render(conv), add_special_tokens=False)["input_ids"]
        for g in samples:
            assert g.n_tokens == len(g.token_ids) == len(g.token_logprobs) > 0
            ref = teacher_forced(model_dir, dtype, prompt_ids, g.token_ids)
            worst_token = max(worst_token, float(np.max(np.abs(np.array(ref) - np.array(g.token_logprobs)))))
            worst_conf = max(worst_conf, abs(float(np.mean(ref)) - g.mean_logprob))
    assert worst_token < token_tol and worst_conf < conf_tol, (worst_token, worst_conf)


def test_greedy_output_is_token_identical_to_the_hf_engine(engines, model_dir):
    from concord.engines.hf import HFEngine

    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=16, seed=0)
    ours = engines("float32").generate(CONVERSATIONS, params)
    hf = HFEngine(model_dir, dtype="float32", progress=False).generate(CONVERSATIONS, params)
    assert [g[0].token_ids for g in ours] == [g[0].token_ids for g in hf]
    assert [g[0].text for g in ours] == [g[0].text for g in hf]
    np.testing.assert_allclose([g[0].mean_logprob for g in ours], [g[0].mean_logprob for g in hf], atol=1e-4)


def test_a_seed_reproduces_its_samples_and_another_seed_differs(engines):
    engine = engines("float32")

    def sample(seed):
        return [[g.token_ids for g in s] for s in engine.generate(CONVERSATIONS, SamplingParams(
            n=4, temperature=1.0, max_new_tokens=12, seed=seed))]

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first


def test_a_request_that_does_not_fit_the_context_is_refused(engines):
    engine = engines("float32")
    with pytest.raises(ValueError, match=rf"max_new_tokens={MAX_MODEL_LEN} exceeds the engine's max_model_len={MAX_MODEL_LEN}"):
        engine.generate(CONVERSATIONS[:1], SamplingParams(n=1, max_new_tokens=MAX_MODEL_LEN))
