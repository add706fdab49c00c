# Test-time GRPO (seed 000, section 4): train every (model, benchmark, arm, seed) with the arm's
# consensus reward, evaluate the base model and every trained model (mean@k), and draw Figure 3.
#
# Training resumes: checkpoints live under results/.cache/train/... (CACHE, outside the declared
# outputs, which Snakemake deletes before a job), so a killed job picks up from its last
# checkpoint when rerun. On a GPU node the job asks for `training.gpus` GPUs and launches that
# many processes through accelerate (FSDP2, config/accelerate/fsdp.yaml); on CPU it
# is one process with config/accelerate/cpu.yaml -- the same code path.

rule train:
    input:
        model=f"{RESULTS}/models/{{model}}",
        questions=f"{RESULTS}/data/{{benchmark}}.jsonl",
    output:
        # The weights are intermediate (removed once every evaluation that reads them has run,
        # unless keep_trained_models); the run's logs next to them stay.
        model=trained_model(f"{RESULTS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/model"),
        log=f"{RESULTS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/log.jsonl",
        groups=f"{RESULTS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/groups.jsonl",
        provenance=f"{RESULTS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/provenance.json",
        validation=f"{RESULTS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/validation.csv",
    wildcard_constraints:
        arm=alternatives(ARMS),
    params:
        training=as_json(TRAIN),
        consensus=as_json(section("consensus")),
        answers=as_json(section("answers")),
        evaluation=as_json(EVALUATION),
        model_spec=model_spec,
        task=lambda wc: task_of(wc.benchmark),
        checkpoints=lambda wc: f"{CACHE}/train/{wc.model}/{wc.benchmark}/{wc.arm}/seed{wc.seed}",
        run_dir=lambda wc, output: os.path.dirname(output.log),
        accelerate_config=accelerate_config,
        num_processes=processes_per_gpu_job,
    # The CoRE critical path (train -> evaluate -> tables) starts early.
    priority: 30
    threads: int(TRAIN.get("threads", 2))
    log:
        f"{LOGS}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.tsv"
    resources:
        gpu=TRAIN_GPUS,
        mem_mb=budgeted("train", "mem_mb", TRAIN_GPUS),
        runtime=budgeted("train", "runtime", TRAIN_GPUS),
    conda:
        "../../envs/gpu.yaml"
    shell:
        audited(
            "python -m accelerate.commands.launch --config_file {params.accelerate_config:q}"
            " --num_processes {params.num_processes} --num_cpu_threads_per_process {threads}"
            " -m concord train --model-dir {input.model:q} --questions {input.questions:q} --out {output.model:q}"
            " --checkpoint-dir {params.checkpoints:q} --arm {wildcards.arm} --seed {wildcards.seed}"
            " --training {params.training:q} --consensus {params.consensus:q} --evaluation {params.evaluation:q}"
            " --answers {params.answers:q} --model-spec {params.model_spec:q} --task {params.task}"
            " --benchmark {wildcards.benchmark}"
            " --run-dir {params.run_dir:q} --threads {threads} > {log:q} 2>&1"
        )


rule evaluate:
    input:
        model=eval_model_dir,
        questions=f"{RESULTS}/data/{{benchmark}}.jsonl",
    output:
        f"{RESULTS}/eval/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.json",
    params:
        evaluation=as_json(EVALUATION),
        engine=as_json(ENGINE),
        model_spec=model_spec,
        task=lambda wc: task_of(wc.benchmark),
        answers=as_json(section("answers")),
    # One thread per CPU job: two evaluations share a 2-core machine better than one with two
    # OpenMP threads, which spin badly whenever the cores are contended.
    threads: 4 if ON_GPU else 1
    log:
        f"{LOGS}/eval/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.log",
    benchmark:
        f"{BENCH}/eval/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.tsv"
    resources:
        gpu=gpu_count(ENGINE.get("tensor_parallel_size", 1)),
        mem_mb=budgeted("evaluate", "mem_mb", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
        runtime=budgeted("evaluate", "runtime", gpu_count(ENGINE.get("tensor_parallel_size", 1))),
    conda:
        "../../envs/gpu.yaml"
    shell:
        audited(
            "python -m concord core-evaluate --model-dir {input.model:q} --questions {input.questions:q} --out {output:q}"
            " --arm {wildcards.arm} --seed {wildcards.seed} --evaluation {params.evaluation:q}"
            " --engine {params.engine:q} --model-spec {params.model_spec:q} --task {params.task}"
            " --answers {params.answers:q} --threads {threads} > {log:q} 2>&1"
        )


rule figure3:
    localrule: True  # seconds of work: run where Snakemake runs, not as a batch job
    input:
        logs=figure3_inputs(),
        # Base under the evaluation protocol: the step-0 star beside the validation curves.
        base=figure3_base_inputs(),
        # training.ends_from_evaluation: the trained arms' evaluations are the curves' last points.
        arm_evals=figure3_arm_eval_inputs(),
    output:
        png=in_report(f"{RESULTS}/figures/figure3.png", "core/figure3.rst", "CoRE paper", "Figure 3", item="curves"),
        pdf=f"{RESULTS}/figures/figure3.pdf",
        csv=in_report(
            f"{RESULTS}/tables/figure3_steps_saved.csv",
            "core/figure3_steps_saved.rst",
            "CoRE paper",
            "Figure 3",
            item="steps saved",
        ),
        md=f"{RESULTS}/tables/figure3_steps_saved.md",
        tex=f"{RESULTS}/tables/figure3_steps_saved.tex",
        curves=f"{RESULTS}/tables/figure3_steps_saved_curves.csv",
    params:
        plateau_window=int(TRAIN.get("plateau_window", 1)),
        labels=as_json(section("report").get("labels", {})),
    log:
        f"{LOGS}/report/figure3.log",
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-figure3 --logs {input.logs:q} --base-evals {input.base:q} --arm-evals {input.arm_evals:q}"
            " --figure {output.png:q} --table {output.csv:q}"
            " --plateau-window {params.plateau_window} --labels {params.labels:q} > {log:q} 2>&1"
        )

