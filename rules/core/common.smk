# Variables, input/param functions and target lists of the CoRE paper's rules (rules/core/*.smk).

from concord.papers.core import figures as _plots
from concord.papers.core import tables as _tables

TRAIN = section("training")
EVALUATION = section("evaluation")
TRAIN_GPUS = int(TRAIN.get("gpus", 8)) if ON_GPU else REHEARSE_GPUS
CURVE_ARMS = ["majority", "core"]


def accelerate_config(wildcards, resources):
    name = TRAIN.get("accelerate_config", "config/accelerate/fsdp.yaml") if ON_GPU and resources.gpu > 0 else "config/accelerate/cpu.yaml"
    return name if os.path.isabs(name) else os.path.join(workflow.basedir, name)


def train_dir(model, benchmark, arm, seed):
    return f"{RESULTS}/train/{model}/{benchmark}/{arm}/seed{seed}"


def eval_model_dir(wildcards):
    """What an evaluation reads: the base model, or the trained model of that arm and seed."""
    if wildcards.arm == "base":
        return f"{RESULTS}/models/{wildcards.model}"
    return f"{train_dir(wildcards.model, wildcards.benchmark, wildcards.arm, wildcards.seed)}/model"


def figure3_cells():
    """(model, benchmark) panels of Figure 3: training.figure3_cells, else every pair."""
    from concord.papers.core.curves import parse_cells

    return parse_cells(TRAIN.get("figure3_cells") or [], MODELS, BENCHMARKS)


def figure3_inputs(wildcards=None):
    return [f"{train_dir(m, b, a, s)}/log.jsonl" for m, b in figure3_cells() for a in CURVE_ARMS for s in SEEDS]


def figure3_base_inputs(wildcards=None):
    return [f"{RESULTS}/eval/{m}/{b}/base/seed{s}.json" for m, b in figure3_cells() for s in SEEDS]


def train_targets():
    return [f"{train_dir(m, b, a, s)}/log.jsonl" for m in MODELS for b in BENCHMARKS for a in ARMS
            for s in _tables.arm_seeds(config, a)]


def eval_targets():
    return [f"{RESULTS}/eval/{m}/{b}/{a}/seed{s}.json" for m in MODELS for b in BENCHMARKS for a in ["base"] + ARMS
            for s in _tables.arm_seeds(config, a)]


def figure3_targets():
    """Figure 3 and its table, when the config trains both arms it compares."""
    if not all(a in ARMS for a in CURVE_ARMS):
        return []
    return [f"{RESULTS}/figures/figure3.png", f"{RESULTS}/tables/figure3_steps_saved.csv"]


def core_targets():
    """The CoRE paper's final outputs: Figure 2 and Appendix H per (model, benchmark), every
    evaluation, Figure 3, Tables 1-3 and Figures 4-5 (those the config supports)."""
    if not CORE_ENABLED:
        return []
    return FIGURE2_TARGETS + APPENDIX_H_TARGETS + eval_targets() + figure3_targets() + report_targets()


# Tables 1-3 and Figures 4-5 (rules/core/tables.smk): the config sections they read travel as JSON.
_REPORT_CONFIG_JSON = json.dumps(
    {k: config[k] for k in ("models", "benchmarks", "arms", "seeds", "report") if k in config},
    sort_keys=True,
)


def report_targets():
    """Tables 1-3 and Figures 4-5 that the config supports (part of core_targets())."""
    return _plots.report_targets(config, RESULTS) if CORE_ENABLED else []
