"""Commands of the CoRE paper's experiment: roll-outs, offline consensus analysis (Figure 2, Appendix H).

Command names carry the paper's prefix (``core-rollouts``); the unprefixed names of the first
release stay as aliases for one release.
"""

from __future__ import annotations

import logging

from concord.cli._common import json_arg

log = logging.getLogger("concord.cli")


def register(subparsers) -> None:
    p = subparsers.add_parser("core-rollouts", aliases=["rollouts"], help="sample N roll-outs per question and store them as Parquet")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--rollouts", type=json_arg, required=True, help="config rollouts section")
    p.add_argument("--engine", type=json_arg, required=True, help="config engine section")
    p.add_argument("--model-spec", type=json_arg, required=True, help="config models.<key> entry")
    p.add_argument("--task", default="math")
    p.add_argument("--answers", type=json_arg, default={}, help="config answers section (answers.policy)")
    p.add_argument("--cache-dir", default=None, help="resumable chunk cache (outside declared outputs)")
    p.add_argument("--threads", type=int, default=None)
    p.set_defaults(func=cmd_rollouts)

    p = subparsers.add_parser("core-label-accuracy", aliases=["label-accuracy"], help="Figure 2: pseudo-label accuracy versus N")
    p.add_argument("--rollouts", required=True)
    p.add_argument("--consensus", type=json_arg, required=True)
    p.add_argument("--analysis", type=json_arg, default={})
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--title", default="")
    p.add_argument("--table", required=True, help="CSV output (a .md twin is written beside it)")
    p.add_argument("--figure", required=True, help="PNG output (a .pdf twin is written beside it)")
    p.set_defaults(func=cmd_label_accuracy)

    p = subparsers.add_parser("core-recovery", aliases=["recovery"], help="Appendix H recovery analysis and Figure 4 inputs")
    p.add_argument("--rollouts", required=True)
    p.add_argument("--consensus", type=json_arg, required=True)
    p.add_argument("--questions-out", required=True, help="per-question CSV")
    p.add_argument("--summary-out", required=True, help="recovery.json")
    p.add_argument("--markdown-out", required=True)
    p.set_defaults(func=cmd_recovery)


def cmd_rollouts(args) -> int:
    from concord import provenance
    from concord.config import resolve
    from concord.data import load_questions

    answers = resolve("answers", args.answers)
    rollouts = resolve("rollouts", args.rollouts)
    prompt_style = args.model_spec.get("prompt_style", "instruct")  # the schema's default for models.<key>
    questions = load_questions(args.questions)
    # The log's first line says what was sampled, before the engine's own output.
    log.info("roll-outs of model %s: %d questions x N=%d at temperature %s, top-p %s, up to %d new tokens "
             "(prompt style %s, answer policy %s, seed %d)", args.model_dir, len(questions),
             rollouts["n"], rollouts["temperature"], rollouts["top_p"], rollouts["max_new_tokens"], prompt_style,
             answers["policy"], args.seed)
    from concord.engines import load_engine
    from concord.io import write_parquet
    from concord.papers.core.rollouts import RolloutSpec, generate_rollouts

    engine_cfg = dict(args.engine)
    backend = engine_cfg.pop("backend", "hf")
    options = engine_cfg
    if backend == "hf" and args.threads:
        options["threads"] = args.threads
    if backend == "vllm":
        options["seed"] = args.seed
    engine = load_engine(backend, args.model_dir, **options)
    spec = RolloutSpec(
        n=int(rollouts["n"]),
        temperature=float(rollouts["temperature"]),
        top_p=float(rollouts["top_p"]),
        max_new_tokens=int(rollouts["max_new_tokens"]),
        seed=args.seed,
        prompt_style=prompt_style,
        task=args.task,
        chunk_questions=int(rollouts["chunk_questions"]),
        policy=answers["policy"],
    )
    frame = generate_rollouts(engine, questions, spec, cache_dir=args.cache_dir)
    config = {"rollouts": args.rollouts, "engine": args.engine, "model": args.model_spec, "task": args.task,
              "answers": args.answers}
    # The resolved policy travels with the file: the offline analysis grades with it.
    prov = provenance.record(step="rollouts", config=config, seed=args.seed, inputs=[args.questions], model=args.model_dir,
                             answers={"policy": answers["policy"], "task": args.task},
                             dtype=getattr(engine, "dtype", None),  # engine.dtype auto, resolved (concord.hardware)
                             numeric=provenance.numeric_path(provenance.engine_dtype(engine)))
    write_parquet(args.out, frame, metadata=prov)
    log.info("wrote %d roll-outs for %d questions to %s", len(frame), len(questions), args.out)
    return 0


def cmd_label_accuracy(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from concord.papers.core.analysis import (
        class_correctness, default_n_values, label_accuracy_curve, load_answer_policy, load_groups,
    )
    from concord.papers.core.figures import plot_label_accuracy
    from concord.reporting import write_table

    from concord.config import resolve

    analysis = resolve("analysis", args.analysis)
    consensus = resolve("consensus", args.consensus)
    groups = load_groups(args.rollouts)
    policy, task = load_answer_policy(args.rollouts)
    n_max = min(len(g["answers"]) for g in groups)
    n_values = analysis.get("n_values") or default_n_values(n_max)
    n_values = sorted({n for n in n_values if n <= n_max} | {n_max})
    summary = label_accuracy_curve(
        groups, class_correctness(groups, policy, task), n_values, int(analysis["n_subsamples"]), args.seed,
        consensus=consensus,
    )
    # Accuracies in percent, as in every concord table (the curve itself is computed in [0, 1]).
    percent = summary.assign(**{c: 100 * summary[c] for c in ("mean", "std", "lo", "hi")})
    write_table(percent, args.table, float_format="{:.1f}",
                caption=f"Pseudo-label accuracy (%) versus N: mean, std and 95% band over subsets. {args.title}")
    plot_label_accuracy(summary, args.figure, title=args.title)
    return 0


def cmd_recovery(args) -> int:
    from concord import provenance
    from concord.papers.core.analysis import class_correctness, diagnose, load_answer_policy, load_groups, recovery_summary
    from concord.io import write_json, write_text
    from concord.reporting import write_csv

    from concord.config import resolve

    consensus = resolve("consensus", args.consensus)
    groups = load_groups(args.rollouts)
    policy, task = load_answer_policy(args.rollouts)
    diag = diagnose(groups, class_correctness(groups, policy, task), consensus)
    summary = recovery_summary(diag, tau=float(consensus["tau"]))
    summary["provenance"] = provenance.record(step="recovery", config={"consensus": args.consensus}, inputs=[args.rollouts],
                                              answers={"policy": policy, "task": task})
    write_csv(diag, args.questions_out)
    write_json(args.summary_out, summary)
    write_text(args.markdown_out, recovery_markdown(summary))
    return 0


def recovery_markdown(s: dict) -> str:
    def fmt(v, spec="+.2f"):
        return "n/a" if v is None else format(v, spec)

    return (
        "# Recovery analysis (CoRE paper, Appendix H)\n\n"
        f"- questions: {s['n_questions_total']}; majority-wrong: {s['majority_wrong']}\n"
        f"- label accuracy (%): majority {100 * s['majority_accuracy']:.1f}, EC {100 * s['ec_accuracy']:.1f}, "
        f"CISC {100 * s['cisc_accuracy']:.1f}, CoRE {100 * s['core_accuracy']:.1f}\n"
        f"- CoRE recovers {s['recovered_total']} question(s) the vote got wrong against {s['regressions']} regression(s) "
        f"(net {s['net']:+d}); CISC recovers {s['recovered_by_cisc_too']} of them too; "
        f"{s['recovered_by_core_only']} only CoRE recovers\n"
        f"- on recovered questions the correct cluster is {fmt(s['recovered_confidence_gap_nats'])} nats more confident "
        f"than the wrong plurality and receives {fmt(s['recovered_reward_gap'])} more graded reward\n"
        f"- CoRE's cohesiveness gate on the recovered questions averages {fmt(s['mean_gate_recovered'], '.3f')} "
        f"(over all questions: {s['mean_gate_all_questions']:.3f})\n"
        f"- contested questions (vote wrong, correct minority of >= 2 present): {s['n_questions']}, {s['recovered']} recovered; mean outnumbering ratio "
        f"r = {fmt(s['outnumbering_ratio'], '.2f')}, coherence advantage c*/c_w = {fmt(s['coherence_advantage'], '.2f')}, "
        f"confidence gap = {fmt(s['confidence_gap_nats'])} nats\n"
    )
