# Variables and input/param functions of the FMV rules (rules/fmv/fmv.smk). The planning itself
# (paths, Tables 1-2 rows, training runs, targets) is concord.papers.fmv.planning, unit-tested.
from concord.papers.fmv import planning as _fmv_planning
from concord.papers.fmv import settings as _fmv_settings

FMV_PLAN = _fmv_planning.FmvPlan(config, RESULTS, MODELS)
FMV = FMV_PLAN.fmv
FMV_SPECS = FMV_PLAN.specs
FMV_MODELS = FMV_PLAN.models
FMV_ONLY_MODELS = FMV_PLAN.fmv_only_models
FMV_BENCHMARKS = FMV_PLAN.benchmarks
FMV_ENABLED = FMV_PLAN.enabled
FMV_SEEDS = FMV_PLAN.seeds
FMV_EXEC = FMV_PLAN.execution
FMV_TTRL = FMV_PLAN.ttrl
CR = FMV_PLAN.root
FMV_ENV = "../../envs/code.yaml"
FMV_WORKERS = FMV_EXEC.get("workers") or 2
FMV_TRAIN_RUN = FMV_PLAN.train_run_pattern()
_FMV_TRAINING = FMV_PLAN.training
_FMV_TRAIN_GPUS = int(_FMV_TRAINING.get("gpus", 8)) if ON_GPU else REHEARSE_GPUS
_TT_BENCH = FMV_PLAN.tt_bench


def _fmv_bench_spec(wildcards):
    return as_json(FMV["benchmarks"][wildcards.cbench])


def _policy_model(wildcards):
    return FMV_PLAN.policy_model(wildcards.cmodel, wildcards.cbench, wildcards.policy, wildcards.seed)


def _evalset_data(wildcards):
    return FMV_PLAN.evalset_data(wildcards.cbench, wildcards.evalset)


def _train_data(wildcards):
    return FMV_PLAN.train_data(wildcards.cbench, wildcards.split)


def _train_overrides(wildcards):
    return as_json(FMV_PLAN.train_overrides(wildcards.nvote))


def _judge_dir(wildcards):
    return FMV_PLAN.model_dir(_fmv_settings.judge_model(config, wildcards.cmodel))


# Per-model settings (concord.papers.fmv.settings): the model's generation budget, an engine
# context that holds prompt + budget, GenCluster's judge resolved, the reasoning flag.
def _generation_sampling(wildcards):
    return as_json(_fmv_settings.sampling_settings(config, wildcards.cmodel))


def _generation_engine(wildcards):
    return as_json(_fmv_settings.generation_engine(config, wildcards.cmodel))


def _gencluster_spec(wildcards):
    return as_json(_fmv_settings.judge_settings(config, wildcards.cmodel))


def _thinking_flag(wildcards):
    return "--thinking" if _fmv_settings.thinking(config, wildcards.cmodel) else ""


def _analysis_inputs(wildcards):
    return FMV_PLAN.analysis_inputs(wildcards.cmodel, wildcards.cbench, wildcards.seed)


def _fmv_accelerate_config(wildcards, resources):
    name = _FMV_TRAINING.get("accelerate_config", "config/accelerate/fsdp.yaml") if ON_GPU and resources.gpu > 0 \
        else "config/accelerate/cpu.yaml"
    return name if os.path.isabs(name) else os.path.join(workflow.basedir, name)


def fmv_targets():
    """The FMV experiments' final outputs: Figure 2 per benchmark, Tables 1 and 2."""
    return FMV_PLAN.targets()


FMV_TARGETS = fmv_targets()
