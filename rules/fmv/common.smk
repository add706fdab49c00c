# Variables and input/param functions of the FMV rules (rules/fmv/fmv.smk).
import shlex as _shlex

shell_quote = _shlex.quote
FMV = config.get("fmv") or {}
FMV_ENABLED = bool(FMV.get("enabled", True))
FMV_SPECS = FMV.get("models") or {m: config["models"][m] for m in MODELS}
FMV_MODELS = list(FMV_SPECS)
FMV_ONLY_MODELS = [m for m in FMV_MODELS if m not in config["models"]]
FMV_BENCHMARKS = list((FMV.get("benchmarks") or {}).keys())
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
    judge = (FMV.get("gencluster") or {}).get("judge") or wildcards.cmodel
    return _fmv_model_dir(judge)


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
    return FMV_SPECS[cmodel].get("label") or (config.get("report") or {}).get("labels", {}).get(cmodel) or cmodel


_FMV_TRAINING = {**(config.get("training") or {}), **(FMV_TTRL.get("training") or {})}


_FMV_TRAIN_GPUS = int(_FMV_TRAINING.get("gpus", 8)) if ON_GPU else 0


def _fmv_accelerate_config(wildcards, resources):
    name = _FMV_TRAINING.get("accelerate_config", "config/accelerate/fsdp.yaml") if resources.gpu > 0 \
        else "config/accelerate/cpu.yaml"
    return name if os.path.isabs(name) else os.path.join(workflow.basedir, name)


_TT_MODEL = FMV_TTRL.get("model") or (FMV_MODELS[0] if FMV_MODELS else None)


_TT_BENCH = FMV_TTRL.get("benchmark") or (FMV_BENCHMARKS[0] if FMV_BENCHMARKS else None)


_TT_SEED = FMV_SEEDS[0]


_TT_ARMS = list(FMV_TTRL.get("arms", ["fmv", "fmv_pointwise"]))


_TT_LABELS = {"base": f"Base ({_fmv_label(_TT_MODEL)})" if _TT_MODEL else "Base",
              "fmv": "with FMV TTRL", "fmv_pointwise": "with Pointwise-FMV TTRL"}


def _exec_path(policy, evalset):
    return f"{CR}/exec/{_TT_MODEL}/{_TT_BENCH}/{policy}/seed{_TT_SEED}/{evalset}.parquet"


def _table1_execs():
    # Each policy samples once on the whole benchmark; the table splits its questions into the
    # train and hold-out halves (the same draws as sampling each half on its own).
    out = {"base:train": _exec_path("base", "all"), "base:holdout": _exec_path("base", "all")}
    n = int(FMV_TTRL.get("table1_n_vote", 64))
    for arm in _TT_ARMS:
        for evalset in ("train", "holdout"):
            out[f"{arm}:{evalset}"] = _exec_path(f"ttrl-{arm}-half-n{n}", "all")
    return out


def _table2_execs():
    out = {f"Base ({_fmv_label(_TT_MODEL)})": _exec_path("base", "all")}
    for n in FMV_TTRL.get("table2_n_vote", [32, 128]):
        for arm, name in (("fmv", "Joint"), ("fmv_pointwise", "Pointwise")):
            if arm in _TT_ARMS:
                out[f"with {name} (N={n})"] = _exec_path(f"ttrl-{arm}-full-n{n}", "all")
    return out


def _pairs_args(mapping):
    return " ".join(f"--exec {shell_quote(f'{k}={v}')}" for k, v in mapping.items())


def fmv_targets():
    """The FMV experiments' final outputs: Figure 2 per benchmark, Tables 1 and 2."""
    if not FMV_ENABLED or not FMV_MODELS or not FMV_BENCHMARKS:
        return []
    out = expand(f"{CR}/figures/{{cbench}}/figure2_{{side}}.png", cbench=FMV_BENCHMARKS, side=["left", "right"])
    if FMV_TTRL.get("enabled", True) and _TT_ARMS:
        out += [f"{CR}/tables/table1.csv", f"{CR}/tables/table2.csv"]
    return out


FMV_TARGETS = fmv_targets()
