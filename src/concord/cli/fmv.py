"""`python -m concord fmv-*` (aliases `code-*`): Functional Majority Voting for code (data, generation, execution,
GenCluster judging, analysis, Figure 2, Tables 1-2).

Argument parsing only: each command passes its arguments to one step of
:mod:`concord.papers.fmv.steps`, which reads and writes explicit paths; structured settings come as
JSON strings from the rules (config sections). A step's :class:`~concord.papers.fmv.steps.StepError`
ends the command with its message.
"""

from __future__ import annotations

import functools
from pathlib import Path

from concord.cli._common import json_arg


def _step(run):
    """A command that runs one step; a bad input ends it with the step's message (exit status 1)."""
    @functools.wraps(run)
    def command(args) -> int:
        from concord.papers.fmv.steps import StepError

        try:
            run(args)
        except StepError as exc:
            raise SystemExit(str(exc)) from None
        return 0

    return command


def _steps():
    from concord.papers.fmv import steps

    return steps


@_step
def cmd_data(args) -> None:
    _steps().build_data(args.benchmark_spec, args.exec, args.out)


@_step
def cmd_split(args) -> None:
    _steps().split(args.data, args.seed, args.train_out, args.holdout_out)


@_step
def cmd_generate(args) -> None:
    _steps().generate(args.data, args.model_dir, args.out, args.sampling, args.engine, args.seed, args.threads)


@_step
def cmd_execute(args) -> None:
    _steps().execute(args.data, args.candidates, args.out, args.exec, args.workers, args.thinking)


@_step
def cmd_gencluster(args) -> None:
    _steps().gencluster(args.data, args.exec_table, args.model_dir, args.out, args.gencluster, args.candidates,
                        args.engine, args.seed, args.threads)


@_step
def cmd_analyze(args) -> None:
    _steps().analyze(args.data, args.exec_table, args.candidates, args.gencluster, args.analysis, args.seed, args.out)


@_step
def cmd_figure2(args) -> None:
    _steps().figure2(args.analysis, args.right, args.benchmark_label, args.n_resamples, args.seed, args.out_dir)


@_step
def cmd_table1(args) -> None:
    _steps().table1(args.train_data, args.holdout_data, args.exec, args.labels, args.n, args.n_resamples, args.seed,
                    args.train_provenance, args.out_stem)


@_step
def cmd_table2(args) -> None:
    _steps().table2(args.data, args.exec, args.n, args.n_resamples, args.seed, args.train_provenance, args.out_stem)


@_step
def cmd_validation(args) -> None:
    """The TTRL runs' held-out validation curves: where training saturated and stopped."""
    _steps().validation(args.curve, args.title, args.out_stem)


def cmd_train(args) -> int:
    from concord.papers.fmv.ttrl import train_code
    from concord.rl.config import TrainingRun
    from concord.rl.run import cpu_threads

    cpu_threads(args.threads)
    train_code(TrainingRun(model_dir=args.model_dir, questions_path=args.data, out_dir=args.out,
                           checkpoint_dir=args.checkpoint_dir, run_dir=args.run_dir, arm=args.arm, seed=args.seed,
                           training=args.training, consensus=args.exec, evaluation=args.evaluation))
    return 0


# ------------------------------------------------------------------ arguments


def _args_data(add) -> None:
    p = add("fmv-data", cmd_data, "build a code benchmark's question records (HumanEval or LiveCodeBench)")
    p.add_argument("--benchmark-spec", type=json_arg, required=True,
                   help='JSON: {"source": "humaneval"|"livecodebench", "path", "n_questions", "seed", "max_inputs", ...}')
    p.add_argument("--exec", type=json_arg, default={}, help="JSON execution settings (timeout_s, memory_mb, sandbox)")
    p.add_argument("--out", type=Path, required=True)


def _args_split(add) -> None:
    p = add("fmv-split", cmd_split, "seeded random train / hold-out halves of a code benchmark (Table 1)")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-out", type=Path, required=True)
    p.add_argument("--holdout-out", type=Path, required=True)


def _args_generate(add) -> None:
    p = add("fmv-generate", cmd_generate, "sample N candidate programs per question with a model")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sampling", type=json_arg, required=True, help='JSON: {"n", "temperature", "top_p", "max_new_tokens"}')
    p.add_argument("--engine", type=json_arg, default={"backend": "hf"}, help="JSON: the config's engine section")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)


def _args_execute(add) -> None:
    p = add("fmv-execute", cmd_execute, "run every candidate on its question's oracle inputs and grade it")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--candidates", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exec", type=json_arg, default={}, help="JSON: timeout_s, memory_mb, sandbox, max_output_bytes")
    p.add_argument("--workers", type=int, default=None, help="parallel sandboxes (default: all cores)")
    p.add_argument("--thinking", action="store_true",
                   help="the candidates come from a reasoning model: take code only after </think>")


def _args_gencluster(add) -> None:
    p = add("fmv-gencluster", cmd_gencluster, "GenCluster-style LLM-judge tournament over functional clusters")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--exec-table", type=Path, required=True)
    p.add_argument("--model-dir", type=Path, required=True, help="the judge model")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gencluster", type=json_arg, required=True,
                   help="JSON: the gencluster section with its judge resolved (model, max_new_tokens, temperature, "
                        "top_p, thinking, engine), rounds, max_clusters, representative, max_unparsed_fraction")
    p.add_argument("--candidates", type=Path, default=None, help="completions (token counts pick representatives)")
    p.add_argument("--engine", type=json_arg, default={"backend": "hf"})
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)


def _args_analyze(add) -> None:
    p = add("fmv-analyze", cmd_analyze, "accuracy of mean@N, best@N, FMV, semantic voting, GenCluster; versus N")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--exec-table", type=Path, required=True)
    p.add_argument("--candidates", type=Path, default=None, help="completions (for semantic voting)")
    p.add_argument("--gencluster", type=Path, default=None, help="code-gencluster output (optional)")
    p.add_argument("--analysis", type=json_arg, default={}, help="JSON: n_values, n_subsamples, n_resamples, semantic")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)


def _args_train(add) -> None:
    p = add("fmv-train", cmd_train, "TTRL with FMV rewards (arms fmv, fmv_pointwise) on code questions")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="trained model directory (+ log.jsonl)")
    p.add_argument("--checkpoint-dir", type=Path, required=True, help="resumable checkpoints (outside declared outputs)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where log.jsonl, provenance.json, validation.csv, groups.jsonl go (default: inside --out)")
    p.add_argument("--arm", choices=["fmv", "fmv_pointwise"], required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--training", type=json_arg, default={}, help="JSON: overrides of the training config section")
    p.add_argument("--exec", type=json_arg, default={}, help="JSON: timeout_s, memory_mb, sandbox for the reward")
    p.add_argument("--evaluation", type=json_arg, default={},
                   help="JSON: validation sampling (temperature, top_p, max_new_tokens) when training validates")
    p.add_argument("--threads", type=int, default=None)


def _args_figure2(add) -> None:
    p = add("fmv-figure2", cmd_figure2, "Figure 2: accuracy per method at N (left) and versus N (right)")
    p.add_argument("--analysis", action="append", required=True,
                   help="LABEL=PATH of a code-analyze output (repeat; once per seed for the same label)")
    p.add_argument("--right", default=None, help="which label the right panel shows (default: the first)")
    p.add_argument("--benchmark-label", default="", help="the benchmark's display name, for the figure titles")
    p.add_argument("--n-resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=Path, required=True)


def _args_validation(add) -> None:
    p = add("fmv-validation", cmd_validation, "TTRL validation curves (held-out pass@1 vs step) of the FMV runs")
    p.add_argument("--curve", action="append", required=True,
                   help="LABEL=PATH of a run's validation.csv (repeat; once per seed for the same label)")
    p.add_argument("--title", default="", help="figure title: the trained model and benchmark")
    p.add_argument("--out-stem", type=Path, required=True)


def _args_table1(add) -> None:
    p = add("fmv-table1", cmd_table1, "Table 1: TTRL on a random half, mean@N on train and hold-out")
    p.add_argument("--train-data", type=Path, required=True)
    p.add_argument("--holdout-data", type=Path, required=True)
    p.add_argument("--exec", action="append", required=True,
                   help="ARM:SPLIT=PATH of an execution table (repeat; once per seed for the same key)")
    p.add_argument("--labels", type=json_arg, default={}, help="JSON: arm -> row label")
    p.add_argument("--n", type=int, required=True, help="the evaluation budget N (column header)")
    p.add_argument("--n-resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-provenance", action="append", default=[],
                   help="LABEL=PATH of a trained row's provenance.json (repeat; once per seed): the table's "
                        "selection and question columns")
    p.add_argument("--out-stem", type=Path, required=True)


def _args_table2(add) -> None:
    p = add("fmv-table2", cmd_table2, "Table 2: joint vs pointwise FMV targets at two training budgets")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--exec", action="append", required=True,
                   help="LABEL=PATH of an execution table (repeat, row order; once per seed for the same label)")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--n-resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-provenance", action="append", default=[],
                   help="LABEL=PATH of a trained row's provenance.json (repeat; once per seed): the table's "
                        "selection and question columns")
    p.add_argument("--out-stem", type=Path, required=True)


def register(subparsers) -> None:
    def add(name, func, help_text):
        # `fmv-*` names the FMV paper; the `code-*` names of the first release stay as aliases.
        p = subparsers.add_parser(name, aliases=["code-" + name.removeprefix("fmv-")], help=help_text)
        p.set_defaults(func=func)
        return p

    for arguments in (_args_data, _args_split, _args_generate, _args_execute, _args_gencluster, _args_analyze, _args_train, _args_figure2, _args_validation, _args_table1, _args_table2):
        arguments(add)
