# Variables and input/param functions of the SC-MoA rules (rules/scmoa/scmoa.smk).


import shlex as _scmoa_shlex

from concord.papers.scmoa import report as _scmoa_report

SCMOA = config.get("scmoa") or {}
SCMOA_BENCHMARKS = SCMOA.get("benchmarks") or {}
SCMOA_MODELS = SCMOA.get("models") or MODELS
SCMOA_R = f"{RESULTS}/scmoa"
SCMOA_TABLES = ("accuracy", "significance", "flips", "transition", "diversity", "error_correlation", "reliability",
                "selective", "gating_sweep", "k_sweep", _scmoa_report.KSWEEP_TABLE, *_scmoa_report.optional_tables(SCMOA),
                *_scmoa_report.APPENDIX_TABLES)
SCMOA_FIGURES = ("calibration", "transition", "diversity", "sweeps", *_scmoa_report.APPENDIX_FIGURES)
# The method settings scmoa-run/scmoa-report read (everything except where the questions come from).
SCMOA_SETTINGS = as_json({k: v for k, v in SCMOA.items() if k not in ("benchmarks", "models", "server")})
SCMOA_SERVER = SCMOA.get("server") or {}


def _scmoa_data_input(wildcards):
    spec = SCMOA_BENCHMARKS[wildcards.sbench]
    if spec.get("benchmark"):  # a benchmark of the main workflow, made by rule data
        return [f"{RESULTS}/data/{spec['benchmark']}.jsonl"]
    return [spec["path"]] if spec.get("path") else []


def _scmoa_data_args(wildcards, input):
    spec = SCMOA_BENCHMARKS[wildcards.sbench]
    fmt = "questions" if spec.get("benchmark") else spec["format"]
    args = ["--format", fmt]
    if input:
        args += ["--input", str(input[0])]
    if spec.get("limit"):
        args += ["--limit", str(int(spec["limit"]))]
    if spec.get("public_asserts"):
        args += ["--public-asserts", str(int(spec["public_asserts"]))]
    for key in ("start_date", "end_date"):
        if spec.get(key):
            args += [f"--{key.replace('_', '-')}", str(spec[key])]
    args += ["--seed", str(int(spec.get("seed", 0)))]
    return " ".join(_scmoa_shlex.quote(a) for a in args)


def _scmoa_model_input(wildcards):
    # With an OpenAI-compatible server the model lives behind the URL, not in results/models.
    return [] if SCMOA_SERVER.get("base_url") else [f"{RESULTS}/models/{wildcards.smodel}"]


def _scmoa_backend_args(wildcards, input):
    if SCMOA_SERVER.get("base_url"):
        served = (SCMOA_SERVER.get("served_names") or {}).get(wildcards.smodel, wildcards.smodel)
        return " ".join(_scmoa_shlex.quote(a) for a in (
            "--base-url", SCMOA_SERVER["base_url"], "--model", served,
            "--concurrency", str(int(SCMOA_SERVER.get("concurrency", 8))),
            "--timeout", str(float(SCMOA_SERVER.get("timeout_s", 300))),
        ))
    engine = config.get("engine", {})
    return " ".join(_scmoa_shlex.quote(a) for a in (
        "--model-path", f"{RESULTS}/models/{wildcards.smodel}", "--model", wildcards.smodel, "--engine", engine.get("backend", "hf"),
        "--batch-size", str(int(engine.get("batch_size", 16))), "--dtype", str(engine.get("dtype", "auto")),
    ))


def scmoa_targets():
    """Final SC-MoA outputs: every table, figure and summary per (model, benchmark)."""
    out = []
    for m in SCMOA_MODELS:
        for b in SCMOA_BENCHMARKS:
            base = f"{SCMOA_R}/{m}/{b}/analysis"
            out.append(f"{base}/summary.json")
            out += [f"{base}/{t}.{ext}" for t in SCMOA_TABLES for ext in ("csv", "md", "tex")]
            out += [f"{base}/{f}.{ext}" for f in SCMOA_FIGURES for ext in ("png", "pdf")]
    return out


def scmoa_report_item(path, stem, ext, figure=False):
    """Tables (CSV) and figures (PNG) of SC-MoA in the HTML report, one caption per stem."""
    if ext not in ("csv", "png"):
        return path
    caption = report_caption("scmoa", f"fig_{stem}", "figure") if figure else report_caption("scmoa", stem)
    return in_report(path, caption, "SC-MoA paper", "{smodel} / {sbench}", item=stem, kind="figure" if figure else "table")
