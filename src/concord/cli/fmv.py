"""`python -m concord fmv-*` (aliases `code-*`): Functional Majority Voting for code (data, generation, execution,
GenCluster judging, analysis, Figure 2, Tables 1-2).

Every command reads and writes explicit paths; structured settings come as JSON strings from
the rules (config sections).
"""

from __future__ import annotations

import logging
from pathlib import Path

from concord.cli._common import json_arg

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ helpers


def _read_questions(path) -> list[dict]:
    from concord import io
    from concord.papers.fmv.data import validate_record

    if not Path(path).is_file():
        raise SystemExit(f"questions file not found: {path}")
    records = [validate_record(r) for r in io.read_jsonl(path)]
    if not records:
        raise SystemExit(f"{path}: no questions")
    return records


def _read_parquet(path):
    """A table of candidates or execution results: Parquet, or JSONL (one row per line)."""
    import pandas as pd

    from concord import io

    if not Path(path).is_file():
        raise SystemExit(f"file not found: {path}")
    if str(path).endswith((".jsonl", ".json")):
        return pd.DataFrame(io.read_jsonl(path))
    return pd.read_parquet(path)


def _section(path: str, values: dict | None) -> dict:
    """A config section with the schema's defaults (the one resolver; no command keeps its own)."""
    from concord.config import resolve

    try:
        return resolve(path, values)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def _benchmark_spec(spec: dict) -> dict:
    """One ``fmv.benchmarks`` entry with the schema's defaults (entries are additionalProperties,
    which :func:`concord.config.resolve` does not walk into)."""
    from concord.config import section_schema

    entry = section_schema("fmv.benchmarks")["additionalProperties"]
    known = entry["properties"]
    unknown = sorted(set(spec) - set(known))
    if unknown:
        raise SystemExit(f"unknown key(s) {unknown} in an fmv.benchmarks entry; known keys: {', '.join(sorted(known))}")
    return {**{k: v["default"] for k, v in known.items() if "default" in v}, **spec}


def _exec_settings(spec: dict, workers: int | None = None):
    from concord.papers.fmv.grading import ExecSettings

    spec = _section("fmv.execution", spec)
    return ExecSettings(timeout_s=float(spec["timeout_s"]), memory_mb=int(spec["memory_mb"]),
                        sandbox=spec["sandbox"], workers=workers or spec["workers"],
                        max_output_bytes=int(spec["max_output_bytes"]))




def _pairs(items: list[str], what: str) -> dict[str, list[str]]:
    """LABEL=PATH items, in order; a label given again (one file per seed) collects its paths."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.rpartition("=")  # labels may contain "=" (e.g. N=32), paths do not
        if not sep or not key or not value:
            raise SystemExit(f"{what} must look like LABEL=PATH, got {item!r}")
        out.setdefault(key, []).append(value)
    return out


def _all_paths(pairs: dict[str, list[str]]) -> list[str]:
    return list(dict.fromkeys(p for paths in pairs.values() for p in paths))


# ------------------------------------------------------------------ commands


def cmd_data(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv import data

    spec, exec_spec = _benchmark_spec(args.benchmark_spec), _section("fmv.execution", args.exec)
    source = spec.get("source")
    if source == "humaneval":
        records = data.load_humaneval(spec["n_questions"], seed=int(spec["seed"]), max_inputs=spec["max_inputs"],
                                      task_ids=spec.get("task_ids"),
                                      timeout_s=float(exec_spec["timeout_s"]) + 4.0,
                                      memory_mb=int(exec_spec["memory_mb"]), sandbox=exec_spec["sandbox"])
        inputs = []
    elif source == "livecodebench":
        if not spec.get("path"):
            raise SystemExit("a livecodebench benchmark needs 'path' (a code_generation_lite JSONL file, or with "
                             "'version' a directory of its shards)")
        records = data.load_livecodebench(spec["path"], spec["n_questions"], seed=int(spec["seed"]),
                                          version=spec.get("version"),
                                          expected_questions=spec.get("expected_questions"),
                                          start_date=spec.get("start_date"), end_date=spec.get("end_date"),
                                          max_inputs=spec.get("max_inputs"))
        inputs = [spec["path"]]
    else:
        raise SystemExit(f"unknown code benchmark source {source!r}; use humaneval or livecodebench")
    io.write_jsonl(args.out, records)
    io.write_json(Path(args.out).with_suffix(".provenance.json"),
                  provenance.record(step="fmv-data", config=spec, seed=int(spec["seed"]), inputs=inputs,
                                    n_questions=len(records)))
    log.info("wrote %d %s questions to %s", len(records), source, args.out)
    return 0


def cmd_split(args) -> int:
    from concord import io
    from concord.papers.fmv.experiments import split_questions

    train, holdout = split_questions(_read_questions(args.data), args.seed)
    io.write_jsonl(args.train_out, train)
    io.write_jsonl(args.holdout_out, holdout)
    log.info("split %s: %d train, %d hold-out (seed %d)", args.data, len(train), len(holdout), args.seed)
    return 0


def cmd_generate(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv.experiments import generate_candidates
    from concord.engines import SamplingParams, load_engine

    records = _read_questions(args.data)
    sampling, engine_spec = _section("fmv.sampling", args.sampling), dict(args.engine)
    params = SamplingParams(n=int(sampling["n"]), temperature=float(sampling["temperature"]),
                            top_p=float(sampling["top_p"]), max_new_tokens=int(sampling["max_new_tokens"]),
                            seed=args.seed)
    backend = engine_spec.pop("backend", "hf")
    engine = load_engine(backend, args.model_dir, threads=args.threads, seed=args.seed, **engine_spec)
    frame = generate_candidates(records, engine, params, max_prompt_tokens=int(sampling["max_prompt_tokens"]))
    prov = provenance.record(step="fmv-generate", config={"sampling": sampling, "engine": args.engine},
                             seed=args.seed, inputs=[args.data], model_dir=str(args.model_dir),
                             dtype=getattr(engine, "dtype", None))
    io.write_parquet(args.out, frame, metadata=prov)
    log.info("wrote %d candidates (%d questions x %d) to %s", len(frame), len(records), params.n, args.out)
    return 0


def cmd_execute(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv.experiments import execute_candidates

    records = _read_questions(args.data)
    candidates = _read_parquet(args.candidates)
    frame = execute_candidates(records, candidates, _exec_settings(args.exec, args.workers), thinking=args.thinking)
    prov = provenance.record(step="fmv-execute", config={**args.exec, "thinking": args.thinking},
                             inputs=[args.data, args.candidates])
    io.write_parquet(args.out, frame, metadata=prov)
    log.info("executed %d candidates; %.1f%% pass", len(frame), 100 * frame["passed"].mean())
    return 0


def cmd_gencluster(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv.baselines import engine_judge, gencluster_tournaments
    from concord.papers.fmv.experiments import grouped_lengths, load_exec
    from concord.engines import load_engine

    records = _read_questions(args.data)
    questions = load_exec(records, _read_parquet(args.exec_table))
    given = dict(args.gencluster.get("judge") or {})
    resolved_by_rule = {k: given.pop(k) for k in ("engine", "thinking") if k in given}  # not config keys
    judge_spec = {**_section("fmv.gencluster.judge", given), **resolved_by_rule}
    spec = _section("fmv.gencluster", {k: v for k, v in args.gencluster.items() if k != "judge"})
    if not isinstance(judge_spec.get("max_new_tokens"), int):
        raise SystemExit("--gencluster needs judge.max_new_tokens resolved to a number (the rule resolves it from "
                         "the judge model's generation budget)")
    engine_spec = dict(judge_spec.get("engine") or args.engine)
    backend = engine_spec.pop("backend", "hf")
    engine = load_engine(backend, args.model_dir, threads=args.threads, seed=args.seed, **engine_spec)
    judge = engine_judge(engine, max_new_tokens=judge_spec["max_new_tokens"],
                         temperature=float(judge_spec["temperature"]), top_p=float(judge_spec["top_p"]),
                         seed=args.seed)
    representative = spec["representative"]
    lengths = None
    if representative == "longest":
        if not args.candidates:
            raise SystemExit("representative 'longest' needs --candidates (the completions' token counts)")
        lengths = grouped_lengths(records, _read_parquet(args.candidates))
    tournaments = gencluster_tournaments(
        records, [q.programs for q in questions], [q.vectors for q in questions], judge,
        rounds=int(spec["rounds"]), max_clusters=spec["max_clusters"], representative=representative,
        lengths=lengths, thinking=bool(judge_spec.get("thinking", False)),
        max_unparsed_fraction=float(spec["max_unparsed_fraction"]), seed=args.seed,
    )
    picks = {r["id"]: t.selected for r, t in zip(records, tournaments)}
    inputs = [args.data, args.exec_table] + ([args.candidates] if args.candidates else [])
    doc = {
        "picks": picks,
        "tournaments": {r["id"]: {"clusters": t.clusters, "representatives": t.representatives, "wins": t.wins,
                                  "games": t.games, "judge_calls": t.n_judge_calls, "unparsed": t.n_unparsed,
                                  "truncated": t.n_truncated}
                        for r, t in zip(records, tournaments)},
        "judge_calls": sum(t.n_judge_calls for t in tournaments),
        "unparsed": sum(t.n_unparsed for t in tournaments),
        "truncated": sum(t.n_truncated for t in tournaments),
        "judge": {"model_dir": str(args.model_dir), **{k: v for k, v in judge_spec.items() if k != "engine"}},
        "provenance": provenance.record(step="fmv-gencluster", config=spec, seed=args.seed, inputs=inputs,
                                        model_dir=str(args.model_dir)),
    }
    io.write_json(args.out, doc)
    log.info("GenCluster: %d judge calls over %d questions, %d without a verdict", doc["judge_calls"], len(records),
             doc["unparsed"])
    return 0


def cmd_analyze(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv.experiments import analyze, embed_candidates, grouped_texts

    records = _read_questions(args.data)
    exec_table = _read_parquet(args.exec_table)
    spec = _section("fmv.analysis", args.analysis)
    embeddings = None
    inputs = [args.data, args.exec_table]
    semantic = None
    if spec.get("semantic", True):
        from concord.papers.fmv.baselines import embedder_record, load_embedder

        if not args.candidates:
            raise SystemExit("semantic voting needs --candidates (the completions' text)")
        embedder = load_embedder()
        embeddings = embed_candidates(grouped_texts(records, _read_parquet(args.candidates)), embedder=embedder)
        semantic = embedder_record(embedder)
        inputs.append(args.candidates)
    picks = None
    if args.gencluster:
        picks = io.read_json(args.gencluster)["picks"]
        inputs.append(args.gencluster)
    result = analyze(records, exec_table, embeddings=embeddings, gencluster_picks=picks,
                     n_values=spec.get("n_values"), n_subsamples=int(spec.get("n_subsamples", 20)),
                     seed=args.seed, n_resamples=int(spec.get("n_resamples", 2000)))
    result["semantic_embedding"] = semantic
    result["provenance"] = provenance.record(step="fmv-analyze", config=spec, seed=args.seed, inputs=inputs)
    io.write_json(args.out, result)
    log.info("analysis at N=%d: %s", result["n"],
             ", ".join(f"{m}={v['accuracy']:.3f}" for m, v in result["methods"].items()))
    return 0


def cmd_figure2(args) -> int:
    from concord import io, provenance
    from concord.papers.fmv import report

    paths = _pairs(args.analysis, "--analysis")
    analyses = {label: [io.read_json(p) for p in ps] for label, ps in paths.items()}
    right = args.right or next(iter(analyses))
    if right not in analyses:
        raise SystemExit(f"--right {right!r} is not one of the --analysis labels {sorted(analyses)}")
    out = Path(args.out_dir)
    left_frame = report.figure2_left_frame(analyses, args.n_resamples, args.seed)
    right_frame = report.figure2_right_frame(analyses[right], right, args.n_resamples, args.seed)
    outputs = []
    on = f" on {args.benchmark_label}" if args.benchmark_label else ""
    outputs += io.save_figure(report.figure2_left(left_frame, title=", ".join(analyses) + on), out / "figure2_left")
    outputs += io.save_figure(report.figure2_right(right_frame, title=right + on), out / "figure2_right")
    n, seeds = analyses[right][0]["n"], len(analyses[right])
    over = f"bootstrap SE over questions and {seeds} seeds" if seeds > 1 else "bootstrap SE over questions"
    outputs += report.write_table(left_frame, report.figure_display(left_frame), out / "figure2_left",
                                  f"Figure 2 (left): accuracy per method at N = {n}, ± {over}.")
    outputs += report.write_table(right_frame, report.figure_display(right_frame), out / "figure2_right",
                                  f"Figure 2 (right): accuracy versus N for {right}, ± {over}.")
    io.write_json(out / "figure2.provenance.json",
                  provenance.record(step="fmv-figure2", config={"right": right}, inputs=_all_paths(paths)))
    return 0


def cmd_table1(args) -> int:
    from concord.papers.fmv import report
    from concord.papers.fmv.experiments import question_metrics

    splits = {"train": _read_questions(args.train_data), "holdout": _read_questions(args.holdout_data)}
    entries = _pairs(args.exec, "--exec")
    metrics: dict[str, dict] = {}
    tables = {}
    for key, paths in entries.items():
        arm, _, split = key.partition(":")
        if split not in splits:
            raise SystemExit(f"--exec key must be ARM:train or ARM:holdout, got {key!r}")
        for p in paths:
            tables.setdefault(p, _read_parquet(p))
        metrics.setdefault(arm, {})[split] = [question_metrics(splits[split], tables[p]) for p in paths]
    incomplete = [a for a, s in metrics.items() if set(s) != {"train", "holdout"}]
    if incomplete:
        raise SystemExit(f"arms {incomplete} lack a train or hold-out execution table")
    provenances = _provenances(args.train_provenance, metrics, "arms")
    frame = report.table1(metrics, args.labels, args.n, args.n_resamples, args.seed, provenances)
    seeds = int(frame["n_seeds"].max())
    over = f"over questions and {seeds} seeds" if seeds > 1 else "over questions"
    report.write_table(frame, report.table1_display(frame), args.out_stem,
                       f"Table 1: TTRL on a random half; mean@{args.n} on the train and hold-out halves "
                       f"(%), ± bootstrap standard error of the mean {over}. {report.table_note(frame, 1)}")
    return 0


def _provenances(items: list[str] | None, known, what: str) -> dict[str, list[dict]]:
    """LABEL=PATH of training runs' provenance.json (one per seed) -> label -> their records;
    every label must be one of the table's ``known`` rows."""
    from concord import io

    pairs = _pairs(items or [], "--train-provenance")
    unknown = sorted(set(pairs) - set(known))
    if unknown:
        raise SystemExit(f"--train-provenance names {what} {unknown} that have no execution tables")
    return {label: [io.read_json(p) for p in paths] for label, paths in pairs.items()}


def cmd_table2(args) -> int:
    from concord.papers.fmv import report
    from concord.papers.fmv.experiments import question_metrics

    records = _read_questions(args.data)
    entries = _pairs(args.exec, "--exec")
    provenances = _provenances(args.train_provenance, entries, "rows")
    frame = report.table2([(label, [question_metrics(records, _read_parquet(p)) for p in paths])
                           for label, paths in entries.items()], args.n, args.n_resamples, args.seed, provenances)
    seeds = int(frame["n_seeds"].max())
    over = f"over questions and {seeds} seeds" if seeds > 1 else "over questions"
    report.write_table(frame, report.table2_display(frame), args.out_stem,
                       f"Table 2: TTRL with joint (FMV) and pointwise targets at the training budget(s) in the "
                       f"rows (N = roll-outs per prompt in training); mean@{args.n}, FMV accuracy and "
                       f"best@{args.n} of {args.n} samples (%), ± bootstrap standard error {over}. "
                       f"{report.table_note(frame, 2)}")
    return 0


def cmd_validation(args) -> int:
    """The TTRL runs' held-out validation curves: where training saturated and stopped."""
    import pandas as pd

    from concord import io
    from concord.papers.fmv import report

    curves = _pairs(args.curve, "--curve")
    frames = {}
    for label, paths in curves.items():
        frames[label] = []
        for p in paths:
            if not Path(p).is_file():
                raise SystemExit(f"validation curve not found: {p}")
            frame = pd.read_csv(p)
            if "val_pass_at_1" not in frame.columns or "step" not in frame.columns:
                raise SystemExit(f"{p}: a validation curve needs columns step and val_pass_at_1 (the training "
                                 "config must validate: eval_every > 0)")
            frames[label].append(frame)
    frame = report.validation_frame(frames)
    if frame.empty:
        raise SystemExit("the validation curves hold no validation: set fmv.ttrl.training.eval_every > 0")
    stem = Path(args.out_stem)
    outputs = io.save_figure(report.validation_figure(frame, title=args.title), stem)
    seeds = int(frame["n_seeds"].max())
    outputs += report.write_table(
        frame, frame.assign(val_pass_at_1=(100 * frame["val_pass_at_1"]).round(1)), stem,
        f"TTRL validation pass@1 (%) on the held-out validation questions versus training step, mean over "
        f"{seeds} seed(s) (range shaded); the last point of a run is where it stopped.")
    log.info("wrote %s", ", ".join(str(o) for o in outputs))
    return 0


def cmd_train(args) -> int:
    from concord.papers.fmv.ttrl import train_code
    from concord.rl.run import cpu_threads

    cpu_threads(args.threads)
    train_code(model_dir=args.model_dir, questions_path=args.data, out_dir=args.out,
               checkpoint_dir=args.checkpoint_dir, arm=args.arm, seed=args.seed, training=args.training,
               execution=args.exec, evaluation=args.evaluation)
    return 0


# ------------------------------------------------------------------ registration


def register(subparsers) -> None:
    def add(name, func, help_text):
        # `fmv-*` names the FMV paper; the `code-*` names of the first release stay as aliases.
        p = subparsers.add_parser(name, aliases=["code-" + name.removeprefix("fmv-")], help=help_text)
        p.set_defaults(func=func)
        return p

    p = add("fmv-data", cmd_data, "build a code benchmark's question records (HumanEval or LiveCodeBench)")
    p.add_argument("--benchmark-spec", type=json_arg, required=True,
                   help='JSON: {"source": "humaneval"|"livecodebench", "path", "n_questions", "seed", "max_inputs", ...}')
    p.add_argument("--exec", type=json_arg, default={}, help="JSON execution settings (timeout_s, memory_mb, sandbox)")
    p.add_argument("--out", type=Path, required=True)

    p = add("fmv-split", cmd_split, "seeded random train / hold-out halves of a code benchmark (Table 1)")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-out", type=Path, required=True)
    p.add_argument("--holdout-out", type=Path, required=True)

    p = add("fmv-generate", cmd_generate, "sample N candidate programs per question with a model")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sampling", type=json_arg, required=True, help='JSON: {"n", "temperature", "top_p", "max_new_tokens"}')
    p.add_argument("--engine", type=json_arg, default={"backend": "hf"}, help="JSON: the config's engine section")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)

    p = add("fmv-execute", cmd_execute, "run every candidate on its question's oracle inputs and grade it")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--candidates", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exec", type=json_arg, default={}, help="JSON: timeout_s, memory_mb, sandbox, max_output_bytes")
    p.add_argument("--workers", type=int, default=None, help="parallel sandboxes (default: all cores)")
    p.add_argument("--thinking", action="store_true",
                   help="the candidates come from a reasoning model: take code only after </think>")

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

    p = add("fmv-analyze", cmd_analyze, "accuracy of mean@N, best@N, FMV, semantic voting, GenCluster; versus N")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--exec-table", type=Path, required=True)
    p.add_argument("--candidates", type=Path, default=None, help="completions (for semantic voting)")
    p.add_argument("--gencluster", type=Path, default=None, help="code-gencluster output (optional)")
    p.add_argument("--analysis", type=json_arg, default={}, help="JSON: n_values, n_subsamples, n_resamples, semantic")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)

    p = add("fmv-train", cmd_train, "TTRL with FMV rewards (arms fmv, fmv_pointwise) on code questions")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="trained model directory (+ log.jsonl)")
    p.add_argument("--checkpoint-dir", type=Path, required=True, help="resumable checkpoints (outside declared outputs)")
    p.add_argument("--arm", choices=["fmv", "fmv_pointwise"], required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--training", type=json_arg, default={}, help="JSON: overrides of the training config section")
    p.add_argument("--exec", type=json_arg, default={}, help="JSON: timeout_s, memory_mb, sandbox for the reward")
    p.add_argument("--evaluation", type=json_arg, default={},
                   help="JSON: validation sampling (temperature, top_p, max_new_tokens) when training validates")
    p.add_argument("--threads", type=int, default=None)

    p = add("fmv-figure2", cmd_figure2, "Figure 2: accuracy per method at N (left) and versus N (right)")
    p.add_argument("--analysis", action="append", required=True,
                   help="LABEL=PATH of a code-analyze output (repeat; once per seed for the same label)")
    p.add_argument("--right", default=None, help="which label the right panel shows (default: the first)")
    p.add_argument("--benchmark-label", default="", help="the benchmark's display name, for the figure titles")
    p.add_argument("--n-resamples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=Path, required=True)

    p = add("fmv-validation", cmd_validation, "TTRL validation curves (held-out pass@1 vs step) of the FMV runs")
    p.add_argument("--curve", action="append", required=True,
                   help="LABEL=PATH of a run's validation.csv (repeat; once per seed for the same label)")
    p.add_argument("--title", default="", help="figure title: the trained model and benchmark")
    p.add_argument("--out-stem", type=Path, required=True)

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
