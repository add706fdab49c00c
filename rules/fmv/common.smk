# Variables and input/param functions of the FMV rules (rules/fmv/fmv.smk).
import shlex as _shlex

from concord.papers.fmv import report as _fmv_report
from concord.papers.fmv import settings as _fmv_settings

shell_quote = _shlex.quote
FMV = config.get("fmv") or {}
FMV_SPECS = FMV.get("models") or {m: config["models"][m] for m in MODELS}
FMV_MODELS = list(FMV_SPECS)
FMV_ONLY_MODELS = [m for m in FMV_MODELS if m not in MODELS]
FMV_BENCHMARKS = list((FMV.get("benchmarks") or {}).keys())
# FMV runs when switched on and given models and benchmarks (a config for another paper alone has none).
FMV_ENABLED = bool(FMV.get("enabled", True)) and bool(FMV_MODELS) and bool(FMV_BENCHMARKS)
FMV_SEEDS = [int(s) for s in FMV.get("seeds", [0])]
FMV_EXEC = FMV.get("execution", {})
FMV_TTRL = FMV.get("ttrl", {})
CR = f"{RESULTS}/fmv"
FMV_ENV = "../../envs/code.yaml"
FMV_WORKERS = FMV_EXEC.get("workers") or 2


def _fmv_bench_spec(wildcards):
    return as_json(FMV["benchmarks"][wildcards.cbench])


def _fmv_model_dir(cmodel):
    return f"{RESULTS}/models/{cmodel}"


def _policy_model(wildcards):
    """The model directory a policy generates with: the base model or a trained TTRL model."""
    if wildcards.policy == "base":
        return _fmv_model_dir(wildcards.cmodel)
    _, arm, split, n = _parse_policy(wildcards.policy)
    return f"{CR}/train/{wildcards.cmodel}/{wildcards.cbench}/{arm}-{split}-n{n}/seed{wildcards.seed}/model"


def _parse_policy(policy):
    # ttrl-{arm}-{half|full}-n{N}; arm itself may contain "_" but never "-"
    kind, arm, split, n = policy.split("-")
    return kind, arm, split, int(n[1:])


def _evalset_data(wildcards):
    suffix = "" if wildcards.evalset == "all" else f".{wildcards.evalset}"
    return f"{CR}/data/{wildcards.cbench}{suffix}.jsonl"


def _train_data(wildcards):
    return f"{CR}/data/{wildcards.cbench}{'.train' if wildcards.split == 'half' else ''}.jsonl"


def _train_overrides(wildcards):
    # the `training` section, overridden by fmv.ttrl.training, with this run's budget
    training = dict(_FMV_TRAINING)
    n = int(wildcards.nvote)
    training["n_vote"] = n
    # the FMV paper's budget N is the group size; train on all of it unless code.ttrl says otherwise
    training["n_train"] = min(int((FMV_TTRL.get("training") or {}).get("n_train", n)), n)
    return as_json(training)


def _judge_dir(wildcards):
    return _fmv_model_dir(_fmv_settings.judge_model(config, wildcards.cmodel))


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
    base = f"{CR}/{{kind}}/{wildcards.cmodel}/{wildcards.cbench}/base/seed{wildcards.seed}/all.parquet"
    out = {
        "data": f"{CR}/data/{wildcards.cbench}.jsonl",
        "exec": base.format(kind="exec"),
        "candidates": base.format(kind="candidates"),
    }
    if (FMV.get("gencluster") or {}).get("enabled", True):
        out["gencluster"] = f"{CR}/gencluster/{wildcards.cmodel}/{wildcards.cbench}/seed{wildcards.seed}.json"
    return out


def _fmv_label(cmodel):
    return (FMV_SPECS.get(cmodel) or {}).get("label") or (config.get("report") or {}).get("labels", {}).get(cmodel) or cmodel


_FMV_TRAINING = {**(config.get("training") or {}), **(FMV_TTRL.get("training") or {})}


_FMV_TRAIN_GPUS = int(_FMV_TRAINING.get("gpus", 8)) if ON_GPU else REHEARSE_GPUS


def _fmv_accelerate_config(wildcards, resources):
    name = _FMV_TRAINING.get("accelerate_config", "config/accelerate/fsdp.yaml") if ON_GPU and resources.gpu > 0 \
        else "config/accelerate/cpu.yaml"
    return name if os.path.isabs(name) else os.path.join(workflow.basedir, name)


_TT_MODEL = FMV_TTRL.get("model") or (FMV_MODELS[0] if FMV_MODELS else None)


_TT_BENCH = FMV_TTRL.get("benchmark") or (FMV_BENCHMARKS[0] if FMV_BENCHMARKS else None)


_TT_ARMS = list(FMV_TTRL.get("arms", ["fmv", "fmv_pointwise"]))


# Table 1's training budget per arm (the paper's Table 1 rows are its Table 2 runs Joint N = 128
# and Pointwise N = 32); the schema default carries them, a config may override per arm.
_TT1_N = {arm: int(n) for arm, n in (FMV_TTRL.get("table1_n_vote") or {"fmv": 128, "fmv_pointwise": 32}).items()}


_TT_LABELS = {"base": f"Base ({_fmv_label(_TT_MODEL)})" if _TT_MODEL else "Base",
              **{arm: _fmv_report.ttrl_label(arm, _TT1_N.get(arm, 0)) for arm in _TT_ARMS}}


def _exec_path(policy, evalset, seed):
    return f"{CR}/exec/{_TT_MODEL}/{_TT_BENCH}/{policy}/seed{seed}/{evalset}.parquet"


def _table1_execs():
    """(key, path) per seed. Each policy samples once on the whole benchmark; the table splits
    its questions into the train and hold-out halves (the same draws as sampling each half)."""
    out = []
    for seed in FMV_SEEDS:
        out += [("base:train", _exec_path("base", "all", seed)), ("base:holdout", _exec_path("base", "all", seed))]
        for arm in _TT_ARMS:
            if arm not in _TT1_N:
                raise ValueError(f"fmv.ttrl.table1_n_vote has no budget for arm {arm!r}; give one per arm in fmv.ttrl.arms")
            for evalset in ("train", "holdout"):
                out.append((f"{arm}:{evalset}", _exec_path(f"ttrl-{arm}-half-n{_TT1_N[arm]}", "all", seed)))
    return out


def _table2_execs():
    """(row label, path) per seed, rows in the paper's order."""
    if not FMV_ENABLED:
        return []
    rows = [(f"Base ({_fmv_label(_TT_MODEL)})", "base")]
    for n in FMV_TTRL.get("table2_n_vote", [32, 128]):
        rows += [(_fmv_report.ttrl_label(arm, n), f"ttrl-{arm}-full-n{n}") for arm in ("fmv", "fmv_pointwise")
                 if arm in _TT_ARMS]
    return [(label, _exec_path(policy, "all", seed)) for label, policy in rows for seed in FMV_SEEDS]


def _train_dir(arm, split, n, seed):
    return f"{CR}/train/{_TT_MODEL}/{_TT_BENCH}/{arm}-{split}-n{n}/seed{seed}"


def _table1_provenance():
    """(arm, provenance.json) of Table 1's training runs, per seed: the table's selection column."""
    return [(arm, f"{_train_dir(arm, 'half', _TT1_N[arm], seed)}/provenance.json") for arm in _TT_ARMS
            for seed in FMV_SEEDS]


def _table2_provenance():
    """(row label, provenance.json) of Table 2's training runs, per seed."""
    if not FMV_ENABLED:
        return []
    return [(_fmv_report.ttrl_label(arm, n), f"{_train_dir(arm, 'full', n, seed)}/provenance.json")
            for n in FMV_TTRL.get("table2_n_vote", [32, 128]) for arm in ("fmv", "fmv_pointwise") if arm in _TT_ARMS
            for seed in FMV_SEEDS]


def _provenance_args(pairs):
    return " ".join(f"--train-provenance {shell_quote(f'{k}={v}')}" for k, v in pairs)


def _validation_curves():
    """(label, validation.csv) of every TTRL run of Tables 1 and 2, per seed."""
    runs = [(f"{_fmv_report.ttrl_label(arm, _TT1_N[arm])} on the train half", arm, "half", _TT1_N[arm]) for arm in _TT_ARMS]
    runs += [(f"{_fmv_report.ttrl_label(arm, n)} on all questions", arm, "full", n)
             for n in FMV_TTRL.get("table2_n_vote", [32, 128]) for arm in _TT_ARMS]
    return [(label, f"{_train_dir(arm, split, n, seed)}/validation.csv") for label, arm, split, n in runs
            for seed in FMV_SEEDS]


def _training_validates():
    return int(_FMV_TRAINING.get("eval_every", 0) or 0) > 0


def _pairs_args(pairs):
    return " ".join(f"--exec {shell_quote(f'{k}={v}')}" for k, v in pairs)


def fmv_targets():
    """The FMV experiments' final outputs: Figure 2 per benchmark, Tables 1 and 2."""
    if not FMV_ENABLED or not FMV_MODELS or not FMV_BENCHMARKS:
        return []
    out = expand(f"{CR}/figures/{{cbench}}/figure2_{{side}}.png", cbench=FMV_BENCHMARKS, side=["left", "right"])
    if FMV_TTRL.get("enabled", True) and _TT_ARMS:
        out += [f"{CR}/tables/table1.csv", f"{CR}/tables/table2.csv"]
        if _training_validates():
            out.append(f"{CR}/figures/ttrl_validation.png")
    return out


FMV_TARGETS = fmv_targets()
