"""How far one model's samples move between numeric paths (fp32 vs bf16) on this processor.

    .venv/bin/python benchmarks/bench_numeric_path.py [--model-dir results/models/smollm2-135m]
        [--questions results/data/synthetic.jsonl] [--n-questions 8] [--k 4] [--max-new-tokens 24]
        [--temperature 0.6] [--top-p 0.95] [--seed 0] [--answers ttrl] [--prompt-style instruct-short]
        [--threads 1] [--json out.json]

The evaluation protocol of the default run (mean@k at temperature 0.6, top-p 0.95, the same seed)
is sampled once per dtype with the HF engine. Printed per dtype: pass@1 and seconds; between the
two: the share of samples whose tokens are identical, the share of questions whose answers are all
identical, and the largest confidence difference |c_fp32 - c_bf16| over the samples with identical
tokens (nats). The processor line says what was measured: on a CPU without native bf16 (AVX2)
bf16 matrix products are emulated, on one with AVX-512 BF16/AMX they are native and round
differently, so the bf16 numbers of two machines differ while fp32 moves only where the ISA's
reduction order changes the last bits. Run it on each machine to compare them.
"""

from __future__ import annotations

import argparse
import json
import time


def sample(model_dir, questions, args, dtype):
    from concord.data import build_messages
    from concord.engines import SamplingParams, load_engine
    from concord.papers.core.evaluation import grade_samples, mean_at_k

    engine = load_engine("hf", model_dir, dtype=dtype, batch_size=32, threads=args.threads, progress=False)
    params = SamplingParams(n=args.k, temperature=args.temperature, top_p=args.top_p,
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    t0 = time.time()
    gens = engine.generate([build_messages(q["prompt"], args.prompt_style, "math") for q in questions], params)
    seconds = time.time() - t0
    graded = [grade_samples(q, [g.text for g in gs], args.answers) for q, gs in zip(questions, gens)]
    return gens, graded, mean_at_k(graded), seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", default="results/models/smollm2-135m")
    p.add_argument("--questions", default="results/data/synthetic.jsonl")
    p.add_argument("--n-questions", type=int, default=8)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--answers", default="ttrl")
    p.add_argument("--prompt-style", default="instruct-short")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from concord import hardware
    from concord.data import load_questions

    questions = load_questions(args.questions)[: args.n_questions]
    runs = {dtype: sample(args.model_dir, questions, args, dtype) for dtype in ("float32", "bfloat16")}
    (g32, a32, p32, s32), (g16, a16, p16, s16) = runs["float32"], runs["bfloat16"]
    pairs = [(x, y) for xs, ys in zip(g32, g16) for x, y in zip(xs, ys)]
    same_tokens = [(x, y) for x, y in pairs if x.token_ids == y.token_ids]
    same_answers = sum(x["answers"] == y["answers"] for x, y in zip(a32, a16))
    max_dc = max((abs(x.mean_logprob - y.mean_logprob) for x, y in same_tokens), default=float("nan"))
    out = {
        "processor": hardware.processor_label(),
        "questions": len(questions), "k": args.k, "max_new_tokens": args.max_new_tokens,
        "pass_at_1": {"float32": p32, "bfloat16": p16}, "seconds": {"float32": round(s32, 1), "bfloat16": round(s16, 1)},
        "identical_samples": f"{len(same_tokens)}/{len(pairs)}",
        "questions_with_identical_answers": f"{same_answers}/{len(questions)}",
        "max_confidence_difference_on_identical_samples": max_dc,
    }
    print(f"processor: {out['processor']}")
    print(f"{len(questions)} questions x k={args.k}, {args.max_new_tokens} new tokens, seed {args.seed}")
    for dtype in ("float32", "bfloat16"):
        print(f"  {dtype:9s} pass@1 {100 * out['pass_at_1'][dtype]:5.1f}%  ({out['seconds'][dtype]:.1f} s)")
    print(f"  identical samples fp32 vs bf16: {out['identical_samples']}; questions with identical answers: "
          f"{out['questions_with_identical_answers']}; max |c_fp32 - c_bf16| on identical samples: {max_dc:.4f} nats")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
