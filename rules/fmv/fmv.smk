"""Functional Majority Voting for code (concord.papers.fmv, concord.execution; `fmv` config section).

    data -> candidates (generation) -> exec (sandboxed runs + hidden-test grades)
         -> gencluster (LLM-judge tournament) -> analysis -> Figure 2 (left, right)
    data -> halves -> TTRL (fmv, fmv_pointwise) -> candidates/exec of the trained policies
         -> Table 1 (random half, hold-out) and Table 2 (joint vs pointwise at two budgets)

Paths live under results/fmv/. A *policy* is `base` (the model itself) or
`ttrl-{arm}-{half|full}-n{N}` (trained on the train half or the full set with roll-out budget N);
an *evalset* is `all`, `train` or `holdout`. `FMV_TARGETS` lists the final outputs (already
requested by rule all through get_final_output()).
"""


wildcard_constraints:
    cmodel="|".join(re.escape(m) for m in FMV_MODELS) or "^$",
    cbench="|".join(re.escape(b) for b in FMV_BENCHMARKS) or "^$",
    policy=r"base|ttrl-(fmv|fmv_pointwise)-(half|full)-n\d+",
    evalset="all|train|holdout",
    split="half|full",
    carm="fmv|fmv_pointwise",
    nvote=r"\d+",


if FMV_ONLY_MODELS:

    # Models only the code experiments use (e.g. Qwen3-2507 in config/paper.yaml).
    rule fmv_model:
        output:
            directory(f"{RESULTS}/models/{{xmodel}}"),
        wildcard_constraints:
            xmodel="|".join(re.escape(m) for m in FMV_ONLY_MODELS),
        params:
            spec=lambda wc: as_json(FMV_SPECS[wc.xmodel]),
        log:
            f"{LOGS}/model/{{xmodel}}.log",
        benchmark:
            f"{BENCH}/model/{{xmodel}}.tsv"
        resources:
            mem_mb=8000,
            runtime=60,
        conda:
            FMV_ENV
        shell:
            audited(
                "python -m concord model --spec {params.spec:q} --out {output:q} > {log:q} 2>&1"
            )


rule fmv_data:
    input:
        # a LiveCodeBench release file is an input (HumanEval ships inside its package)
        lambda wc: [FMV["benchmarks"][wc.cbench]["path"]] if FMV["benchmarks"][wc.cbench].get("path") else [],
    output:
        questions=f"{CR}/data/{{cbench}}.jsonl",
        provenance=f"{CR}/data/{{cbench}}.provenance.json",
    params:
        spec=_fmv_bench_spec,
        exec=as_json(FMV_EXEC),
    # Seconds of work that gate the whole FMV chain (split, four trainings, candidates): first.
    # A job of as many threads as the machine has cores runs only when both are free, which
    # Snakemake's scheduler grants once no pair of one-thread jobs outweighs it in priority.
    priority: 60
    threads: FMV_WORKERS
    log:
        f"{LOGS}/fmv/data/{{cbench}}.log",
    benchmark:
        f"{BENCH}/fmv/data/{{cbench}}.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-data --benchmark-spec {params.spec:q} --exec {params.exec:q} --out {output.questions:q}"
            " > {log:q} 2>&1"
        )


rule fmv_split:
    input:
        f"{CR}/data/{{cbench}}.jsonl",
    output:
        train=f"{CR}/data/{{cbench}}.train.jsonl",
        holdout=f"{CR}/data/{{cbench}}.holdout.jsonl",
    params:
        seed=int(FMV_TTRL.get("split_seed", 0)),
    log:
        f"{LOGS}/fmv/split/{{cbench}}.log",
    priority: 60  # gates the FMV-TTRL trainings, like fmv_data
    localrule: True
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-split --data {input:q} --seed {params.seed} --train-out {output.train:q}"
            " --holdout-out {output.holdout:q} > {log:q} 2>&1"
        )


rule fmv_generate:
    input:
        model=_policy_model,
        data=_evalset_data,
    output:
        f"{CR}/candidates/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.parquet",
    params:
        sampling=_generation_sampling,
        engine=_generation_engine,
    # The trained policies' candidates come as soon as their training ends (the FMV chain
    # train -> generate -> execute -> analyse is the default run's last). One thread on a CPU:
    # a two-thread job waits for both cores (rules/core/rollouts.smk) and used about one.
    priority: 20
    threads: 2 if ON_GPU else 1
    log:
        f"{LOGS}/fmv/generate/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.log",
    benchmark:
        f"{BENCH}/fmv/generate/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.tsv"
    resources:
        gpu=gpu_count(ENGINE.get("tensor_parallel_size", 1)),
        mem_mb=budgeted("fmv_generate", "mem_mb", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
        runtime=budgeted("fmv_generate", "runtime", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-generate --data {input.data:q} --model-dir {input.model:q} --out {output:q}"
            " --sampling {params.sampling:q} --engine {params.engine:q} --seed {wildcards.seed} --threads {threads}"
            " > {log:q} 2>&1"
        )


rule fmv_execute:
    input:
        data=_evalset_data,
        candidates=f"{CR}/candidates/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.parquet",
    output:
        f"{CR}/exec/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.parquet",
    params:
        exec=as_json(FMV_EXEC),
        thinking=_thinking_flag,
    # Above the candidate generations and the evaluations: a policy's candidates run as soon as
    # they exist (with fmv.execution.workers above 1, once both cores are free: see fmv_data).
    priority: 25
    threads: FMV_WORKERS
    log:
        f"{LOGS}/fmv/exec/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.log",
    benchmark:
        f"{BENCH}/fmv/exec/{{cmodel}}/{{cbench}}/{{policy}}/seed{{seed}}/{{evalset}}.tsv"
    resources:
        mem_mb=8000,
        runtime=240,
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-execute --data {input.data:q} --candidates {input.candidates:q} --out {output:q}"
            " --exec {params.exec:q} --workers {threads} {params.thinking} > {log:q} 2>&1"
        )


rule fmv_gencluster:
    input:
        data=f"{CR}/data/{{cbench}}.jsonl",
        exec=f"{CR}/exec/{{cmodel}}/{{cbench}}/base/seed{{seed}}/all.parquet",
        candidates=f"{CR}/candidates/{{cmodel}}/{{cbench}}/base/seed{{seed}}/all.parquet",
        judge=_judge_dir,
    output:
        f"{CR}/gencluster/{{cmodel}}/{{cbench}}/seed{{seed}}.json",
    params:
        gencluster=_gencluster_spec,
        engine=as_json(ENGINE),
    # Right after the base policy's executions, between the candidate generations (20) and the
    # executions (25): at priority 0 it ran last, alone on one core, after every evaluation.
    priority: 22
    threads: 2 if ON_GPU else 1  # one on a CPU: see fmv_generate
    log:
        f"{LOGS}/fmv/gencluster/{{cmodel}}/{{cbench}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/fmv/gencluster/{{cmodel}}/{{cbench}}/seed{{seed}}.tsv"
    resources:
        gpu=gpu_count(ENGINE.get("tensor_parallel_size", 1)),
        mem_mb=16000,
        runtime=240,
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-gencluster --data {input.data:q} --exec-table {input.exec:q}"
            " --candidates {input.candidates:q} --model-dir {input.judge:q} --out {output:q} --gencluster {params.gencluster:q}"
            " --engine {params.engine:q} --seed {wildcards.seed} --threads {threads} > {log:q} 2>&1"
        )


rule fmv_analyze:
    input:
        unpack(_analysis_inputs),
    output:
        f"{CR}/analysis/{{cmodel}}/{{cbench}}/seed{{seed}}.json",
    params:
        analysis=as_json(FMV.get("analysis", {})),
        gencluster=lambda wc, input: f"--gencluster {input.gencluster}" if "gencluster" in input.keys() else "",
    threads: 2
    log:
        f"{LOGS}/fmv/analysis/{{cmodel}}/{{cbench}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/fmv/analysis/{{cmodel}}/{{cbench}}/seed{{seed}}.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-analyze --data {input.data:q} --exec-table {input.exec:q}"
            " --candidates {input.candidates:q} {params.gencluster} --analysis {params.analysis:q}"
            " --seed {wildcards.seed} --out {output:q} > {log:q} 2>&1"
        )


rule fmv_figure2:
    input:
        # every model, every seed: the figure pools seeds (mean, bootstrap SE over questions and seeds)
        expand(f"{CR}/analysis/{{cmodel}}/{{{{cbench}}}}/seed{{seed}}.json", cmodel=FMV_MODELS, seed=FMV_SEEDS),
    output:
        left_png=in_report(f"{CR}/figures/{{cbench}}/figure2_left.png", "fmv/figure2_left.rst", "FMV paper",
                           "Figure 2", benchmark="{cbench}", panel="left"),
        left_pdf=f"{CR}/figures/{{cbench}}/figure2_left.pdf",
        left_csv=f"{CR}/figures/{{cbench}}/figure2_left.csv",
        left_md=f"{CR}/figures/{{cbench}}/figure2_left.md",
        left_tex=f"{CR}/figures/{{cbench}}/figure2_left.tex",
        right_png=in_report(f"{CR}/figures/{{cbench}}/figure2_right.png", "fmv/figure2_right.rst", "FMV paper",
                            "Figure 2", benchmark="{cbench}", panel="right"),
        right_pdf=f"{CR}/figures/{{cbench}}/figure2_right.pdf",
        right_csv=f"{CR}/figures/{{cbench}}/figure2_right.csv",
        right_md=f"{CR}/figures/{{cbench}}/figure2_right.md",
        right_tex=f"{CR}/figures/{{cbench}}/figure2_right.tex",
        provenance=f"{CR}/figures/{{cbench}}/figure2.provenance.json",
    params:
        analyses=lambda wc, input: _fmv_planning.label_path_args(
            "--analysis", zip([FMV_PLAN.label(m) for m in FMV_MODELS for _ in FMV_SEEDS], input)
        ),
        resamples=int(FMV.get("analysis", {}).get("n_resamples", 2000)),
        right=lambda wc: FMV_PLAN.label(FMV.get("figure2_right") or FMV_MODELS[0]),
        bench_label=lambda wc: FMV_PLAN.bench_label(wc.cbench),
        out_dir=lambda wc, output: os.path.dirname(output.left_png),
    log:
        f"{LOGS}/fmv/figure2/{{cbench}}.log",
    localrule: True
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-figure2 {params.analyses} --right {params.right:q} --out-dir {params.out_dir:q}"
            " --n-resamples {params.resamples} --benchmark-label {params.bench_label:q}"
            " > {log:q} 2>&1"
        )


# ------------------------------------------------------------------ TTRL (Tables 1 and 2)


# The same GRPO trainer as the math arms (accelerate launch: FSDP on GPU nodes, one CPU process
# otherwise); checkpoints under CACHE so a killed job resumes.
rule fmv_train:
    input:
        model=lambda wc: FMV_PLAN.model_dir(wc.cmodel),
        data=_train_data,
    output:
        # Intermediate weights (see trained_model in rules/common.smk); the run's files stay.
        model=trained_model(f"{FMV_TRAIN_RUN}/model"),
        log=f"{FMV_TRAIN_RUN}/log.jsonl",
        provenance=f"{FMV_TRAIN_RUN}/provenance.json",
        validation=f"{FMV_TRAIN_RUN}/validation.csv",
        groups=f"{FMV_TRAIN_RUN}/groups.jsonl",
    params:
        training=_train_overrides,
        exec=as_json(FMV_EXEC),
        checkpoints=lambda wc: f"{CACHE}/fmv-train/{wc.cmodel}/{wc.cbench}/{wc.carm}-{wc.split}-n{wc.nvote}/seed{wc.seed}",
        run_dir=lambda wc, output: os.path.dirname(output.log),
        accelerate_config=_fmv_accelerate_config,
        num_processes=processes_per_gpu_job,
    # As long as a CoRE training (the full-set runs): started with them, not after them.
    priority: 30
    threads: int(_FMV_TRAINING.get("threads", 2))
    log:
        f"{LOGS}/fmv/train/{{cmodel}}/{{cbench}}/{{carm}}-{{split}}-n{{nvote}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/fmv/train/{{cmodel}}/{{cbench}}/{{carm}}-{{split}}-n{{nvote}}/seed{{seed}}.tsv"
    resources:
        gpu=_FMV_TRAIN_GPUS,
        mem_mb=budgeted("fmv_train", "mem_mb", _FMV_TRAIN_GPUS),
        runtime=budgeted("fmv_train", "runtime", _FMV_TRAIN_GPUS),
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m accelerate.commands.launch --config_file {params.accelerate_config:q}"
            " --num_processes {params.num_processes} --num_cpu_threads_per_process {threads}"
            " -m concord fmv-train --data {input.data:q} --model-dir {input.model:q} --out {output.model:q}"
            " --checkpoint-dir {params.checkpoints:q} --arm {wildcards.carm} --seed {wildcards.seed}"
            " --run-dir {params.run_dir:q} --training {params.training:q} --exec {params.exec:q} --threads {threads}"
            " > {log:q} 2>&1"
        )


rule fmv_table1:
    input:
        train=f"{CR}/data/{_TT_BENCH}.train.jsonl",
        holdout=f"{CR}/data/{_TT_BENCH}.holdout.jsonl",
        execs=list(dict.fromkeys(p for _, p in FMV_PLAN.table1_execs())),
        provenance=[p for _, p in FMV_PLAN.table1_provenance()],
    output:
        csv=in_report(f"{CR}/tables/table1.csv", "fmv/table1.rst", "FMV paper", "Table 1"),
        md=f"{CR}/tables/table1.md",
        tex=f"{CR}/tables/table1.tex",
    params:
        execs=_fmv_planning.label_path_args("--exec", FMV_PLAN.table1_execs()),
        provenance=_fmv_planning.label_path_args("--train-provenance", FMV_PLAN.table1_provenance()),
        labels=as_json(FMV_PLAN.table1_labels()),
        n=int(FMV.get("sampling", {}).get("n", 64)),
        resamples=int(FMV.get("analysis", {}).get("n_resamples", 2000)),
        stem=lambda wc, output: os.path.splitext(output.csv)[0],
    log:
        f"{LOGS}/fmv/table1.log",
    localrule: True
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-table1 --train-data {input.train:q} --holdout-data {input.holdout:q} {params.execs}"
            " --labels {params.labels:q} --n {params.n} --n-resamples {params.resamples} {params.provenance}"
            " --out-stem {params.stem:q}"
            " > {log:q} 2>&1"
        )


rule fmv_table2:
    input:
        data=f"{CR}/data/{_TT_BENCH}.jsonl",
        execs=list(dict.fromkeys(p for _, p in FMV_PLAN.table2_execs())),
        provenance=[p for _, p in FMV_PLAN.table2_provenance()],
    output:
        csv=in_report(f"{CR}/tables/table2.csv", "fmv/table2.rst", "FMV paper", "Table 2"),
        md=f"{CR}/tables/table2.md",
        tex=f"{CR}/tables/table2.tex",
    params:
        execs=_fmv_planning.label_path_args("--exec", FMV_PLAN.table2_execs()),
        provenance=_fmv_planning.label_path_args("--train-provenance", FMV_PLAN.table2_provenance()),
        n=int(FMV.get("sampling", {}).get("n", 64)),
        resamples=int(FMV.get("analysis", {}).get("n_resamples", 2000)),
        stem=lambda wc, output: os.path.splitext(output.csv)[0],
    log:
        f"{LOGS}/fmv/table2.log",
    localrule: True
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-table2 --data {input.data:q} {params.execs} --n {params.n}"
            " --n-resamples {params.resamples} {params.provenance} --out-stem {params.stem:q} > {log:q} 2>&1"
        )


rule fmv_validation:
    input:
        list(dict.fromkeys(p for _, p in FMV_PLAN.validation_curves())),
    output:
        png=f"{CR}/figures/ttrl_validation.png",
        pdf=f"{CR}/figures/ttrl_validation.pdf",
        csv=f"{CR}/figures/ttrl_validation.csv",
        md=f"{CR}/figures/ttrl_validation.md",
        tex=f"{CR}/figures/ttrl_validation.tex",
    params:
        curves=lambda wc: _fmv_planning.label_path_args("--curve", FMV_PLAN.validation_curves()),
        stem=lambda wc, output: os.path.splitext(output.png)[0],
        title=lambda wc: f"{FMV_PLAN.label(FMV_PLAN.tt_model)} on {FMV_PLAN.bench_label(_TT_BENCH)}",
    log:
        f"{LOGS}/fmv/validation.log",
    localrule: True
    conda:
        FMV_ENV
    shell:
        audited(
            "python -m concord fmv-validation {params.curves} --out-stem {params.stem:q} --title {params.title:q}"
            " > {log:q} 2>&1"
        )


rule fmv_all:
    input:
        FMV_TARGETS,
    localrule: True


# The first release's name for fmv_all; kept as an alias for one release.
rule code_all:
    input:
        FMV_TARGETS,
    localrule: True
