# N roll-outs per (model, benchmark, seed): the raw material of every consensus operator.


rule rollouts:
    input:
        model=f"{RESULTS}/models/{{model}}",
        questions=f"{RESULTS}/data/{{benchmark}}.jsonl",
    output:
        f"{RESULTS}/rollouts/{{model}}/{{benchmark}}/seed{{seed}}.parquet",
    params:
        rollouts=as_json(section("rollouts")),
        engine=as_json(ENGINE),
        model_spec=model_spec,
        task=lambda wc: task_of(wc.benchmark),
        answers=as_json(section("answers")),
        cache=lambda wc: f"{CACHE}/rollouts/{wc.model}/{wc.benchmark}/seed{wc.seed}",
    # Longest jobs first (roll-outs, SC-MoA, training). One thread on a CPU: Snakemake's scheduler
    # maximises the summed priority of what runs, so two one-thread jobs (SC-MoA's 40 + 40) beat one
    # two-thread job (50) whenever both cores are free, and a two-thread roll-out job waited until
    # nothing else was left (measured: it started at 650 s of a 919-s run and ran alone).
    priority: 50
    threads: 2 if ON_GPU else 1
    log:
        f"{LOGS}/rollouts/{{model}}/{{benchmark}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/rollouts/{{model}}/{{benchmark}}/seed{{seed}}.tsv"
    resources:
        gpu=gpu_count(ENGINE.get("tensor_parallel_size", 1)),
        mem_mb=budgeted("rollouts", "mem_mb", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
        runtime=budgeted("rollouts", "runtime", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
    conda:
        "../../envs/gpu.yaml"
    shell:
        audited(
            "python -m concord core-rollouts --model-dir {input.model:q} --questions {input.questions:q}"
            " --out {output:q} --seed {wildcards.seed} --rollouts {params.rollouts:q} --engine {params.engine:q}"
            " --model-spec {params.model_spec:q} --task {params.task} --answers {params.answers:q}"
            " --cache-dir {params.cache:q}"
            " --threads {threads} > {log:q} 2>&1"
        )
