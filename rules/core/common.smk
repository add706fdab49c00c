# Variables, input/param functions and target lists of the CoRE paper's rules (rules/core/*.smk);
# the planning itself is concord.papers.core.planning (unit-tested).

from concord.papers.core import figures as _plots
from concord.papers.core import planning as _core_planning
from concord.papers.core import tables as _tables

CORE_PLAN = _core_planning.CorePlan(config, RESULTS)
TRAIN = section("training")
EVALUATION = section("evaluation")
TRAIN_GPUS = int(TRAIN.get("gpus", 8)) if ON_GPU else REHEARSE_GPUS
CURVE_ARMS = list(_core_planning.CURVE_ARMS)


def accelerate_config(wildcards, resources):
    name = TRAIN.get("accelerate_config", "config/accelerate/fsdp.yaml") if ON_GPU and resources.gpu > 0 else "config/accelerate/cpu.yaml"
    return name if os.path.isabs(name) else os.path.join(workflow.basedir, name)


def train_dir(model, benchmark, arm, seed):
    return CORE_PLAN.train_dir(model, benchmark, arm, seed)


def eval_model_dir(wildcards):
    return CORE_PLAN.eval_model_dir(wildcards.model, wildcards.benchmark, wildcards.arm, wildcards.seed)


def figure3_cells():
    return CORE_PLAN.figure3_cells()


def figure3_inputs(wildcards=None):
    return CORE_PLAN.figure3_inputs()


def figure3_base_inputs(wildcards=None):
    return CORE_PLAN.figure3_base_inputs()


def figure3_arm_eval_inputs(wildcards=None):
    return CORE_PLAN.figure3_arm_eval_inputs()


def train_targets():
    return CORE_PLAN.train_targets()


def eval_targets():
    return CORE_PLAN.eval_targets()


def figure3_targets():
    return CORE_PLAN.figure3_targets()


def core_targets():
    """The CoRE paper's final outputs (concord.papers.core.planning.CorePlan.targets)."""
    return CORE_PLAN.targets()


# Tables 1-3 and Figures 4-5 (rules/core/tables.smk): the config sections they read travel as JSON.
_REPORT_CONFIG_JSON = json.dumps(
    {k: config[k] for k in ("models", "benchmarks", "arms", "seeds", "report") if k in config},
    sort_keys=True,
)


def report_targets():
    """Tables 1-3 and Figures 4-5 that the config supports (part of core_targets())."""
    return CORE_PLAN.report_targets()
