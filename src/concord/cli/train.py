"""Commands of the training stage: ``train`` (test-time GRPO) and ``figure3`` (training curves).

``train`` is launched through ``accelerate launch -m concord train ...`` by rules/core/train.smk (one
process on CPU, one per GPU on a node); run it directly with ``python -m concord train ...``
for a single process.
"""

from __future__ import annotations

import logging

from concord.cli._common import json_arg

log = logging.getLogger("concord.cli")


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="test-time GRPO with consensus rewards for one (model, benchmark, arm, seed)")
    p.add_argument("--model-dir", required=True, help="Hugging Face model directory to start from")
    p.add_argument("--questions", required=True, help="benchmark JSONL (its answers never enter training)")
    p.add_argument("--out", required=True, help="output directory: trained model (and the run's files unless --run-dir)")
    p.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints, outside the declared outputs")
    p.add_argument("--run-dir", default=None,
                   help="where log.jsonl, groups.jsonl, validation.csv, provenance.json go (default: inside --out)")
    p.add_argument("--arm", required=True, help="reward arm: majority, ec, cisc, core (or a registered plug-in)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--training", type=json_arg, default={}, help="config training section as JSON")
    p.add_argument("--consensus", type=json_arg, default={}, help="config consensus section as JSON")
    p.add_argument("--answers", type=json_arg, default={}, help="config answers section (answers.policy) as JSON")
    p.add_argument("--evaluation", type=json_arg, default={}, help="config evaluation section (validation sampling)")
    p.add_argument("--model-spec", type=json_arg, default={}, help="config models.<key> entry (prompt_style)")
    p.add_argument("--task", default="math")
    p.add_argument("--benchmark", default=None, help="benchmark key (selects epochs_by_benchmark)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch")
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser("core-figure3", aliases=["figure3"], help="Figure 3: validation pass@1 vs step, CoRE vs Majority, steps saved")
    p.add_argument("--logs", nargs="+", required=True,
                   help="training output directories results/train/{model}/{benchmark}/{arm}/seed{seed} (or their log.jsonl)")
    p.add_argument("--figure", required=True, help="PNG path (a PDF twin is written beside it)")
    p.add_argument("--table", required=True, help="CSV path (Markdown and LaTeX twins are written beside it)")
    p.add_argument("--plateau-window", type=int, default=1)
    p.add_argument("--labels", type=json_arg, default={}, help="display names for model/benchmark keys")
    p.add_argument("--base-evals", nargs="*", default=[],
                   help="the base model's evaluations eval/{model}/{benchmark}/base/seed{seed}.json (the step-0 star)")
    p.add_argument("--arm-evals", nargs="*", default=[],
                   help="the trained arms' evaluations eval/{model}/{benchmark}/{arm}/seed{seed}.json: with --base-evals, "
                        "the curves' first and last points (training.ends_from_evaluation)")
    p.set_defaults(func=cmd_figure3)


def cmd_train(args) -> int:
    from concord.rl.config import TrainingRun
    from concord.rl.run import cpu_threads, train

    cpu_threads(args.threads)
    config = {
        "training": args.training, "consensus": args.consensus, "evaluation": args.evaluation,
        "model": args.model_spec, "task": args.task, "arm": args.arm, "benchmark": args.benchmark,
        "answers": args.answers,
    }
    train(TrainingRun(
        model_dir=args.model_dir, questions_path=args.questions, out_dir=args.out, checkpoint_dir=args.checkpoint_dir,
        run_dir=args.run_dir, arm=args.arm, seed=args.seed, training=args.training, consensus=args.consensus,
        evaluation=args.evaluation, prompt_style=args.model_spec.get("prompt_style", "instruct"), task=args.task,
        benchmark=args.benchmark, provenance_config=config, answers=args.answers,
    ))
    return 0


def cmd_figure3(args) -> int:
    from concord.papers.core.curves import figure3

    figure3(args.logs, figure=args.figure, table=args.table, plateau_window=args.plateau_window,
            labels=args.labels, base_evals=args.base_evals, arm_evals=args.arm_evals)
    return 0
