"""The FMV workflow's steps, one function each, on explicit paths and resolved config sections:
benchmark data by source, splitting, generation, execution, the GenCluster tournament and its
record, analysis, Figure 2, Tables 1-2 and the validation curves, with their captions.

``concord fmv-*`` (:mod:`concord.cli.fmv`) only parses arguments and calls these. A step that
cannot run on what it was given raises :class:`StepError` naming the problem; the command line
turns it into a short exit message.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from concord.registry import Registry

log = logging.getLogger(__name__)


class StepError(ValueError):
    """A step's input is missing or malformed; the message says which and how to fix it."""


# ------------------------------------------------------------------ inputs


def read_questions(path) -> list[dict]:
    from concord import io
    from concord.papers.fmv.data import validate_record

    if not Path(path).is_file():
        raise StepError(f"questions file not found: {path}")
    records = [validate_record(r) for r in io.read_jsonl(path)]
    if not records:
        raise StepError(f"{path}: no questions")
    return records


def read_table(path):
    """A table of candidates or execution results: Parquet, or JSONL (one row per line)."""
    import pandas as pd

    from concord import io

    if not Path(path).is_file():
        raise StepError(f"file not found: {path}")
    if str(path).endswith((".jsonl", ".json")):
        return pd.DataFrame(io.read_jsonl(path))
    return pd.read_parquet(path)


def section(path: str, values: dict | None) -> dict:
    """A config section with the schema's defaults (the one resolver; no command keeps its own)."""
    from concord.config import resolve

    try:
        return resolve(path, values)
    except ValueError as exc:
        raise StepError(str(exc)) from None


def benchmark_spec(spec: dict) -> dict:
    """One ``fmv.benchmarks`` entry with the schema's defaults (entries are additionalProperties,
    which :func:`concord.config.resolve` does not walk into)."""
    from concord.config import section_schema

    entry = section_schema("fmv.benchmarks")["additionalProperties"]
    known = entry["properties"]
    unknown = sorted(set(spec) - set(known))
    if unknown:
        raise StepError(f"unknown key(s) {unknown} in an fmv.benchmarks entry; known keys: {', '.join(sorted(known))}")
    return {**{k: v["default"] for k, v in known.items() if "default" in v}, **spec}


def exec_settings(spec: dict, workers: int | None = None):
    from concord.papers.fmv.grading import ExecSettings

    spec = section("fmv.execution", spec)
    return ExecSettings(timeout_s=float(spec["timeout_s"]), memory_mb=int(spec["memory_mb"]),
                        sandbox=spec["sandbox"], workers=workers or spec["workers"],
                        max_output_bytes=int(spec["max_output_bytes"]))


def pairs(items: Sequence[str], what: str) -> dict[str, list[str]]:
    """LABEL=PATH items, in order; a label given again (one file per seed) collects its paths."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.rpartition("=")  # labels may contain "=" (e.g. N=32), paths do not
        if not sep or not key or not value:
            raise StepError(f"{what} must look like LABEL=PATH, got {item!r}")
        out.setdefault(key, []).append(value)
    return out


def all_paths(by_label: Mapping[str, list[str]]) -> list[str]:
    return list(dict.fromkeys(p for paths in by_label.values() for p in paths))


def train_provenances(items: Sequence[str] | None, known, what: str) -> dict[str, list[dict]]:
    """LABEL=PATH of training runs' provenance.json (one per seed) -> label -> their records;
    every label must be one of the table's ``known`` rows."""
    from concord import io

    by_label = pairs(items or [], "--train-provenance")
    unknown = sorted(set(by_label) - set(known))
    if unknown:
        raise StepError(f"--train-provenance names {what} {unknown} that have no execution tables")
    return {label: [io.read_json(p) for p in paths] for label, paths in by_label.items()}


# ------------------------------------------------------------------ data


#: ``source -> load(benchmark spec, execution section) -> (records, input files)``.
BENCHMARK_SOURCES: Registry[Callable[[dict, dict], tuple[list[dict], list[str]]]] = Registry(
    "code benchmark source", hint="fmv.benchmarks.*.source")


@BENCHMARK_SOURCES.register("humaneval")
def _humaneval(spec: dict, exec_spec: dict) -> tuple[list[dict], list[str]]:
    from concord.papers.fmv import data

    records = data.load_humaneval(spec["n_questions"], seed=int(spec["seed"]), max_inputs=spec["max_inputs"],
                                  task_ids=spec.get("task_ids"), timeout_s=float(exec_spec["timeout_s"]) + 4.0,
                                  memory_mb=int(exec_spec["memory_mb"]), sandbox=exec_spec["sandbox"])
    return records, []


@BENCHMARK_SOURCES.register("livecodebench")
def _livecodebench(spec: dict, exec_spec: dict) -> tuple[list[dict], list[str]]:
    from concord.papers.fmv import data

    if not spec.get("path"):
        raise StepError("a livecodebench benchmark needs 'path' (a code_generation_lite JSONL file, or with "
                        "'version' a directory of its shards)")
    records = data.load_livecodebench(spec["path"], spec["n_questions"], seed=int(spec["seed"]),
                                      version=spec.get("version"), expected_questions=spec.get("expected_questions"),
                                      start_date=spec.get("start_date"), end_date=spec.get("end_date"),
                                      max_inputs=spec.get("max_inputs"))
    return records, [spec["path"]]


def build_data(benchmark: dict, execution: dict, out) -> int:
    """A code benchmark's question records (and their provenance beside them)."""
    from concord import io, provenance

    spec, exec_spec = benchmark_spec(benchmark), section("fmv.execution", execution)
    source = spec.get("source")
    if source not in BENCHMARK_SOURCES:
        raise StepError(f"unknown code benchmark source {source!r}; use humaneval or livecodebench")
    records, inputs = BENCHMARK_SOURCES.get(source)(spec, exec_spec)
    io.write_jsonl(out, records)
    io.write_json(Path(out).with_suffix(".provenance.json"),
                  provenance.record(step="fmv-data", config=spec, seed=int(spec["seed"]), inputs=inputs,
                                    n_questions=len(records)))
    log.info("wrote %d %s questions to %s", len(records), source, out)
    return len(records)


def split(data, seed: int, train_out, holdout_out) -> None:
    from concord import io
    from concord.papers.fmv.experiments import split_questions

    train, holdout = split_questions(read_questions(data), seed)
    io.write_jsonl(train_out, train)
    io.write_jsonl(holdout_out, holdout)
    log.info("split %s: %d train, %d hold-out (seed %d)", data, len(train), len(holdout), seed)


# ------------------------------------------------------------------ generation and execution


def _engine(engine: Mapping, model_dir, threads: int | None, seed: int):
    from concord.engines import load_engine

    spec = dict(engine)
    backend = spec.pop("backend", "hf")
    return load_engine(backend, model_dir, threads=threads, seed=seed, **spec)


def generate(data, model_dir, out, sampling: dict, engine: dict, seed: int, threads: int | None) -> None:
    from concord import io, provenance
    from concord.engines import SamplingParams
    from concord.papers.fmv.experiments import generate_candidates

    records = read_questions(data)
    sampling = section("fmv.sampling", sampling)
    params = SamplingParams(n=int(sampling["n"]), temperature=float(sampling["temperature"]),
                            top_p=float(sampling["top_p"]), max_new_tokens=int(sampling["max_new_tokens"]), seed=seed)
    model = _engine(engine, model_dir, threads, seed)
    frame = generate_candidates(records, model, params, max_prompt_tokens=int(sampling["max_prompt_tokens"]))
    prov = provenance.record(step="fmv-generate", config={"sampling": sampling, "engine": engine}, seed=seed,
                             inputs=[data], model_dir=str(model_dir), dtype=getattr(model, "dtype", None))
    io.write_parquet(out, frame, metadata=prov)
    log.info("wrote %d candidates (%d questions x %d) to %s", len(frame), len(records), params.n, out)


def execute(data, candidates, out, execution: dict, workers: int | None, thinking: bool) -> None:
    from concord import io, provenance
    from concord.papers.fmv.experiments import execute_candidates

    records = read_questions(data)
    frame = execute_candidates(records, read_table(candidates), exec_settings(execution, workers), thinking=thinking)
    prov = provenance.record(step="fmv-execute", config={**execution, "thinking": thinking}, inputs=[data, candidates])
    io.write_parquet(out, frame, metadata=prov)
    log.info("executed %d candidates; %.1f%% pass", len(frame), 100 * frame["passed"].mean())


# ------------------------------------------------------------------ GenCluster


def gencluster_settings(gencluster: Mapping) -> tuple[dict, dict]:
    """(the tournament's section, its judge's section), each resolved; the judge's ``engine`` and
    ``thinking`` come from the rule (they follow the judge model), not from config keys."""
    given = dict(gencluster.get("judge") or {})
    resolved_by_rule = {k: given.pop(k) for k in ("engine", "thinking") if k in given}
    judge = {**section("fmv.gencluster.judge", given), **resolved_by_rule}
    spec = section("fmv.gencluster", {k: v for k, v in gencluster.items() if k != "judge"})
    if not isinstance(judge.get("max_new_tokens"), int):
        raise StepError("--gencluster needs judge.max_new_tokens resolved to a number (the rule resolves it from "
                        "the judge model's generation budget)")
    return spec, judge


def tournament_record(records: Sequence[dict], tournaments: Sequence, judge: Mapping, model_dir) -> dict[str, Any]:
    """What ``fmv-gencluster`` writes: each question's pick, every tournament's clusters and games,
    and the judge's call counts (provenance is added by the caller)."""
    return {
        "picks": {r["id"]: t.selected for r, t in zip(records, tournaments)},
        "tournaments": {r["id"]: {"clusters": t.clusters, "representatives": t.representatives, "wins": t.wins,
                                  "games": t.games, "judge_calls": t.n_judge_calls, "unparsed": t.n_unparsed,
                                  "truncated": t.n_truncated}
                        for r, t in zip(records, tournaments)},
        "judge_calls": sum(t.n_judge_calls for t in tournaments),
        "unparsed": sum(t.n_unparsed for t in tournaments),
        "truncated": sum(t.n_truncated for t in tournaments),
        "judge": {"model_dir": str(model_dir), **{k: v for k, v in judge.items() if k != "engine"}},
    }


def gencluster(data, exec_table, model_dir, out, gencluster: dict, candidates, engine: dict, seed: int,
               threads: int | None) -> None:
    from concord import io, provenance
    from concord.papers.fmv.baselines import engine_judge, gencluster_tournaments
    from concord.papers.fmv.experiments import grouped_lengths, load_exec

    records = read_questions(data)
    questions = load_exec(records, read_table(exec_table))
    spec, judge_spec = gencluster_settings(gencluster)
    model = _engine(judge_spec.get("engine") or engine, model_dir, threads, seed)
    judge = engine_judge(model, max_new_tokens=judge_spec["max_new_tokens"],
                         temperature=float(judge_spec["temperature"]), top_p=float(judge_spec["top_p"]), seed=seed)
    lengths = None
    if spec["representative"] == "longest":
        if not candidates:
            raise StepError("representative 'longest' needs --candidates (the completions' token counts)")
        lengths = grouped_lengths(records, read_table(candidates))
    tournaments = gencluster_tournaments(
        records, [q.programs for q in questions], [q.vectors for q in questions], judge,
        rounds=int(spec["rounds"]), max_clusters=spec["max_clusters"], representative=spec["representative"],
        lengths=lengths, thinking=bool(judge_spec.get("thinking", False)),
        max_unparsed_fraction=float(spec["max_unparsed_fraction"]), seed=seed,
    )
    inputs = [data, exec_table] + ([candidates] if candidates else [])
    doc = tournament_record(records, tournaments, judge_spec, model_dir)
    doc["provenance"] = provenance.record(step="fmv-gencluster", config=spec, seed=seed, inputs=inputs,
                                          model_dir=str(model_dir))
    io.write_json(out, doc)
    log.info("GenCluster: %d judge calls over %d questions, %d without a verdict", doc["judge_calls"], len(records),
             doc["unparsed"])


# ------------------------------------------------------------------ analysis


def analyze(data, exec_table, candidates, gencluster, analysis: dict, seed: int, out) -> None:
    from concord import io, provenance
    from concord.papers.fmv.experiments import analyze as analyze_methods
    from concord.papers.fmv.experiments import embed_candidates, grouped_texts

    records = read_questions(data)
    table = read_table(exec_table)
    spec = section("fmv.analysis", analysis)
    embeddings, semantic = None, None
    inputs = [data, exec_table]
    if spec.get("semantic", True):
        from concord.papers.fmv.baselines import embedder_record, load_embedder

        if not candidates:
            raise StepError("semantic voting needs --candidates (the completions' text)")
        embedder = load_embedder()
        embeddings = embed_candidates(grouped_texts(records, read_table(candidates)), embedder=embedder)
        semantic = embedder_record(embedder)
        inputs.append(candidates)
    picks = None
    if gencluster:
        picks = io.read_json(gencluster)["picks"]
        inputs.append(gencluster)
    result = analyze_methods(records, table, embeddings=embeddings, gencluster_picks=picks,
                             n_values=spec.get("n_values"), n_subsamples=int(spec.get("n_subsamples", 20)),
                             seed=seed, n_resamples=int(spec.get("n_resamples", 2000)))
    result["semantic_embedding"] = semantic
    result["provenance"] = provenance.record(step="fmv-analyze", config=spec, seed=seed, inputs=inputs)
    io.write_json(out, result)
    log.info("analysis at N=%d: %s", result["n"],
             ", ".join(f"{m}={v['accuracy']:.3f}" for m, v in result["methods"].items()))


# ------------------------------------------------------------------ Figure 2, Tables 1-2, validation curves


def _over(seeds: int, prefix: str = "over questions") -> str:
    return f"{prefix} and {seeds} seeds" if seeds > 1 else prefix


def figure2(analysis: Sequence[str], right: str | None, benchmark_label: str, n_resamples: int, seed: int,
            out_dir) -> None:
    from concord import io, provenance
    from concord.papers.fmv import report

    paths = pairs(analysis, "--analysis")
    analyses = {label: [io.read_json(p) for p in ps] for label, ps in paths.items()}
    right = right or next(iter(analyses))
    if right not in analyses:
        raise StepError(f"--right {right!r} is not one of the --analysis labels {sorted(analyses)}")
    out = Path(out_dir)
    left_frame = report.figure2_left_frame(analyses, n_resamples, seed)
    right_frame = report.figure2_right_frame(analyses[right], right, n_resamples, seed)
    on = f" on {benchmark_label}" if benchmark_label else ""
    io.save_figure(report.figure2_left(left_frame, title=", ".join(analyses) + on), out / "figure2_left")
    io.save_figure(report.figure2_right(right_frame, title=right + on), out / "figure2_right")
    n, seeds = analyses[right][0]["n"], len(analyses[right])
    over = _over(seeds, "bootstrap SE over questions")
    report.write_table(left_frame, report.figure_display(left_frame), out / "figure2_left",
                       f"Figure 2 (left): accuracy per method at N = {n}, ± {over}.")
    report.write_table(right_frame, report.figure_display(right_frame), out / "figure2_right",
                       f"Figure 2 (right): accuracy versus N for {right}, ± {over}.")
    io.write_json(out / "figure2.provenance.json",
                  provenance.record(step="fmv-figure2", config={"right": right}, inputs=all_paths(paths)))


def table1_caption(frame, n: int) -> str:
    from concord.papers.fmv import report

    over = _over(int(frame["n_seeds"].max()))
    return (f"Table 1: TTRL on a random half; mean@{n} on the train and hold-out halves "
            f"(%), ± bootstrap standard error of the mean {over}. {report.table_note(frame, 1)}")


def table1(train_data, holdout_data, execs: Sequence[str], labels: Mapping, n: int, n_resamples: int, seed: int,
           train_provenance: Sequence[str], out_stem) -> None:
    from concord.papers.fmv import report
    from concord.papers.fmv.experiments import question_metrics

    splits = {"train": read_questions(train_data), "holdout": read_questions(holdout_data)}
    metrics: dict[str, dict] = {}
    tables = {}
    for key, paths in pairs(execs, "--exec").items():
        arm, _, part = key.partition(":")
        if part not in splits:
            raise StepError(f"--exec key must be ARM:train or ARM:holdout, got {key!r}")
        for p in paths:
            tables.setdefault(p, read_table(p))
        metrics.setdefault(arm, {})[part] = [question_metrics(splits[part], tables[p]) for p in paths]
    incomplete = [a for a, s in metrics.items() if set(s) != {"train", "holdout"}]
    if incomplete:
        raise StepError(f"arms {incomplete} lack a train or hold-out execution table")
    provenances = train_provenances(train_provenance, metrics, "arms")
    frame = report.table1(metrics, labels, n, n_resamples, seed, provenances)
    report.write_table(frame, report.table1_display(frame), out_stem, table1_caption(frame, n))


def table2_caption(frame, n: int) -> str:
    from concord.papers.fmv import report

    over = _over(int(frame["n_seeds"].max()))
    return (f"Table 2: TTRL with joint (FMV) and pointwise targets at the training budget(s) in the "
            f"rows (N = roll-outs per prompt in training); mean@{n}, FMV accuracy and "
            f"best@{n} of {n} samples (%), ± bootstrap standard error {over}. "
            f"{report.table_note(frame, 2)}")


def table2(data, execs: Sequence[str], n: int, n_resamples: int, seed: int, train_provenance: Sequence[str],
           out_stem) -> None:
    from concord.papers.fmv import report
    from concord.papers.fmv.experiments import question_metrics

    records = read_questions(data)
    entries = pairs(execs, "--exec")
    provenances = train_provenances(train_provenance, entries, "rows")
    frame = report.table2([(label, [question_metrics(records, read_table(p)) for p in paths])
                           for label, paths in entries.items()], n, n_resamples, seed, provenances)
    report.write_table(frame, report.table2_display(frame), out_stem, table2_caption(frame, n))


def _read_curve(path: str):
    import pandas as pd

    if not Path(path).is_file():
        raise StepError(f"validation curve not found: {path}")
    frame = pd.read_csv(path)
    if "val_pass_at_1" not in frame.columns or "step" not in frame.columns:
        raise StepError(f"{path}: a validation curve needs columns step and val_pass_at_1 (the training "
                        "config must validate: eval_every > 0)")
    return frame


def validation(curve: Sequence[str], title: str, out_stem) -> list[Path]:
    """The TTRL runs' held-out validation curves: where training saturated and stopped."""
    from concord import io
    from concord.papers.fmv import report

    frames = {label: [_read_curve(p) for p in paths] for label, paths in pairs(curve, "--curve").items()}
    frame = report.validation_frame(frames)
    if frame.empty:
        raise StepError("the validation curves hold no validation: set fmv.ttrl.training.eval_every > 0")
    stem = Path(out_stem)
    outputs = io.save_figure(report.validation_figure(frame, title=title), stem)
    seeds = int(frame["n_seeds"].max())
    outputs += report.write_table(
        frame, frame.assign(val_pass_at_1=(100 * frame["val_pass_at_1"]).round(1)), stem,
        f"TTRL validation pass@1 (%) on the held-out validation questions versus training step, mean over "
        f"{seeds} seed(s) (range shaded); the last point of a run is where it stopped.")
    log.info("wrote %s", ", ".join(str(o) for o in outputs))
    return outputs
