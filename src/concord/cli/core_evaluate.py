"""``evaluate``: pass@1 as mean@k of a base or trained model on a benchmark."""

from __future__ import annotations

from concord.cli._common import json_arg


def register(subparsers) -> None:
    p = subparsers.add_parser("core-evaluate", aliases=["evaluate"], help="pass@1 (mean@k) of a model directory on a benchmark")
    p.add_argument("--model-dir", required=True, help="base model directory or a trained results/train/... directory")
    p.add_argument("--questions", required=True, help="benchmark JSONL with gold answers")
    p.add_argument("--out", required=True, help="results/eval/{model}/{benchmark}/{arm}/seed{seed}.json")
    p.add_argument("--arm", default="base", help="recorded in the output: base or the training arm")
    p.add_argument("--seed", type=int, required=True, help="sampling seed")
    p.add_argument("--evaluation", type=json_arg, default={}, help="config evaluation section as JSON")
    p.add_argument("--engine", type=json_arg, default={}, help="config engine section as JSON")
    p.add_argument("--model-spec", type=json_arg, default={}, help="config models.<key> entry (prompt_style)")
    p.add_argument("--task", default="math")
    p.add_argument("--answers", type=json_arg, default={}, help="config answers section (answers.policy)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (hf backend)")
    p.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args) -> int:
    from concord.config import resolve
    from concord.papers.core.evaluation import evaluate

    policy = resolve("answers", args.answers)["policy"]
    engine = dict(args.engine)
    if engine.get("backend", "hf") == "hf" and args.threads:
        engine["threads"] = args.threads
    config = {"evaluation": args.evaluation, "engine": args.engine, "model": args.model_spec, "task": args.task,
              "arm": args.arm, "answers": args.answers}
    evaluate(
        model_dir=args.model_dir, questions_path=args.questions, out_path=args.out, seed=args.seed,
        evaluation=args.evaluation, engine=engine, prompt_style=args.model_spec.get("prompt_style", "instruct"),
        task=args.task, arm=args.arm, answers_policy=policy, provenance_config=config,
    )
    return 0
