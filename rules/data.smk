# Models and benchmarks: materialised once, shared by every arm and seed.


rule model:
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    params:
        spec=model_spec,
    log:
        f"{LOGS}/model/{{model}}.log",
    benchmark:
        f"{BENCH}/model/{{model}}.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    conda:
        "../envs/gpu.yaml"
    shell:
        audited(
            "python -m concord model --spec {params.spec:q} --out {output:q} > {log:q} 2>&1"
        )


rule data:
    localrule: True  # seconds of work: run where Snakemake runs, not as a batch job
    input:
        # a TTRL-format benchmark file is an input (tracked, hashed into the manifest)
        lambda wc: [config["benchmarks"][wc.benchmark]["path"]] if config["benchmarks"][wc.benchmark].get("path") else [],
    output:
        f"{RESULTS}/data/{{benchmark}}.jsonl",
    params:
        spec=benchmark_spec,
    log:
        f"{LOGS}/data/{{benchmark}}.log",
    benchmark:
        f"{BENCH}/data/{{benchmark}}.tsv"
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord data --spec {params.spec:q} --out {output:q} > {log:q} 2>&1"
        )

