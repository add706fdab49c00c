"""The paper configs resolved into what each GPU job hands TRL and vLLM, read against the papers.

No GPU is needed: :func:`concord.rl.settings.grpo_settings` is the pure function ``train`` builds its
``GRPOConfig`` from, resolved here for the cluster job (8 processes, bf16, colocated vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from concord.config import resolve_section
from concord.rl.settings import grpo_settings, job_layout, resolve_training, total_steps

REPO = Path(__file__).resolve().parents[1]
TTRL_DATA = REPO.parent.parent / "shared" / "data" / "ttrl"  # real TTRL test sets, when present
PAPER = REPO / "config" / "paper.yaml"
OVERLAYS = sorted(p for p in (REPO / "config").glob("paper_*.yaml"))
# Question counts of TTRL's test sets (PRIME-RL/TTRL data/{AIME,AMC}-TTT), checked against the
# files themselves when ../shared/data/ttrl is present.
TTRL_COUNTS = {"aime2024": ("AIME", 30), "amc": ("AMC", 83)}


def load(*paths: Path) -> dict:
    """Config files merged as ``snakemake --configfile a b`` merges them, validated with defaults."""
    from snakemake.utils import update_config, validate

    config: dict = {}
    for path in paths:
        update_config(config, yaml.safe_load(path.read_text(encoding="utf-8")))
    validate(config, str(REPO / "config" / "schema.yaml"))
    return config


def gpu_job(training: dict, n_questions: int, benchmark: str | None = None,
            evaluation: dict | None = None) -> tuple[dict, object, int]:
    cfg, _ = resolve_training(training, evaluation)
    layout = job_layout(cfg, cfg["gpus"])
    steps = total_steps(n_questions, cfg, benchmark)
    return grpo_settings(cfg, layout, checkpoint_dir="ckpt", seed=0, max_steps=steps, on_gpu=True), layout, steps


@pytest.mark.parametrize("benchmark", sorted(TTRL_COUNTS))
def test_ttrl_setup_resolves_into_trl_field_by_field(benchmark):
    """TTRL's verl/examples/ttrl/{aime,amc}.sh, expressed through TRL's GRPOConfig."""
    folder, n_questions = TTRL_COUNTS[benchmark]
    if TTRL_DATA.is_dir():
        assert len(json.loads((TTRL_DATA / folder / "test.json").read_text())) == n_questions
    config = load(PAPER)
    settings, layout, steps = gpu_job(config["training"], n_questions, benchmark, config["evaluation"])
    processes = 8

    # 8 prompts per step (data.train_batch_size=8), vote over 64, train on 32 of each.
    assert settings["num_generations"] == 64 and layout.n_train == 32
    generated = settings["per_device_train_batch_size"] * processes * settings["steps_per_generation"]
    assert generated == 8 * 64
    # ppo_mini_batch_size=1 prompt: 8 optimiser updates per generation step, each on 32 kept roll-outs.
    assert settings["steps_per_generation"] // settings["gradient_accumulation_steps"] == 8
    assert layout.kept_per_process() == [32] * processes
    per_update = (layout.kept_per_process()[0] // settings["steps_per_generation"]
                  * settings["gradient_accumulation_steps"] * processes)
    assert per_update == 32  # one prompt's worth of trained roll-outs per update, as verl's mini-batch
    # episodes: 80 AIME (30 questions -> 3 steps an epoch), 30 AMC (83 -> 10); TRL counts updates.
    assert steps == {"aime2024": 80 * 3, "amc": 30 * 10}[benchmark]
    assert settings["max_steps"] == steps * 8
    # use_kl_loss=True, kl_loss_coef 0.001 (verl default); TRL's KL is k3 (= low_var_kl, unclamped).
    assert settings["beta"] == 0.001
    # optim.lr=5e-7, warmup_style cosine, lr_warmup_steps_ratio 0.03; verl's AdamW weight decay 0.01.
    assert settings["learning_rate"] == 5e-7 and settings["lr_scheduler_type"] == "cosine"
    # verl: int(0.03 x total steps) whole warm-up steps (rounded down: AIME 7 of 240, AMC 9 of 300),
    # in TRL's updates; the schedule itself is read per step (ConsensusGRPOTrainer.create_scheduler).
    assert settings["warmup_steps"] == {"aime2024": 7, "amc": 9}[benchmark] * 8 and settings["weight_decay"] == 0.01
    # rollout.temperature=1.0 (top-p 1), 3072 response tokens, max_model_len = prompt + response.
    assert settings["temperature"] == 1.0 and settings["top_p"] == 1.0
    assert settings["max_completion_length"] == 3072
    assert settings["vllm_max_model_length"] == 1024 + 3072
    # clip_ratio 0.2 both ways, dual-clip clip_ratio_c 3.0 (TRL delta), one PPO epoch, GRPO group
    # normalisation; the k3 KL without TRL's importance-ratio factor (verl's low_var_kl has none).
    assert settings["epsilon"] == 0.2 and settings["epsilon_high"] is None and settings["delta"] == 3.0
    assert settings["use_bias_correction_kl"] is False
    assert settings["num_iterations"] == 1 and settings["scale_rewards"] == "group"
    # loss_agg_mode token-mean per micro-batch (ppo_micro_batch_size_per_gpu=2), divided by the
    # micro-batches of an update (2 = 4 roll-outs per GPU per mini-batch / 2): TRL's bnpo with
    # 2 kept roll-outs per micro-batch and 2 micro-batches per update.
    assert settings["loss_type"] == "bnpo" and settings["gradient_accumulation_steps"] == 2
    kept_per_micro_batch = layout.kept_per_process()[0] // settings["steps_per_generation"]
    assert kept_per_micro_batch == 2
    # bf16 compute on the node over fp32 master weights (verl creates the actor in fp32), vLLM
    # colocated (rollout.name=vllm) without TRL's IS correction (verl has none).
    assert settings["bf16"] and settings["model_init_kwargs"] == {"dtype": "float32"}
    assert settings["use_vllm"] and settings["vllm_mode"] == "colocate"
    assert settings["vllm_importance_sampling_correction"] is False
    # Checkpoints and log rows fall on step boundaries.
    assert settings["save_steps"] % 8 == 0 and settings["logging_steps"] == 8


@pytest.mark.transformers
def test_trl_accepts_the_resolved_settings():
    """Every resolved key is a GRPOConfig field; the GPU-only ones swapped for a CPU machine."""
    from trl import GRPOConfig

    settings, layout, _ = gpu_job(load(PAPER)["training"], 30, "aime2024")
    cpu = {**settings, "bf16": False, "use_cpu": True, "use_vllm": False, "vllm_max_model_length": None,
           "model_init_kwargs": {"dtype": "float32"}}
    args = GRPOConfig(**cpu)
    assert args.steps_per_generation == 16 and args.beta == 0.001 and args.weight_decay == 0.01
    assert args.generation_batch_size == settings["per_device_train_batch_size"] * 1 * 16  # one process here
    assert args.delta == 3.0 and args.use_bias_correction_kl is False and args.loss_type == "bnpo"


def _combos():
    yield (PAPER,)
    for overlay in OVERLAYS:
        yield (PAPER, overlay)
    yield (PAPER, *OVERLAYS)


@pytest.mark.parametrize("paths", list(_combos()), ids=lambda ps: "+".join(p.stem for p in ps))
def test_every_paper_job_fits_its_vllm_context(paths):
    """Prompt budget + completion budget <= max_model_len for every (model, benchmark) job."""
    config = load(*paths)
    training = resolve_section("training", config["training"])
    prompt = training["max_prompt_length"]
    engine = config["engine"]
    assert engine["backend"] == "vllm"
    for model in config["models"]:
        for benchmark in config["benchmarks"]:
            where = f"{model}/{benchmark}"
            assert prompt + config["rollouts"]["max_new_tokens"] <= engine["max_model_len"], where
            assert prompt + config["evaluation"]["max_new_tokens"] <= engine["max_model_len"], where
            settings, _, _ = gpu_job(config["training"], 500, benchmark, config["evaluation"])
            validation = resolve_training(config["training"], config["evaluation"])[0]["val_max_new_tokens"]
            assert settings["vllm_max_model_length"] == prompt + max(settings["max_completion_length"], validation), where

    fmv = config.get("fmv") or {}
    if fmv.get("enabled"):
        check_fmv_jobs(config, fmv)


#: The FMV paper's generation budgets (Appendix A): 8,192 new tokens for Instruct models, 16,384 for Thinking.
FMV_BUDGETS = {"instruct": 8192, "thinking": 16384}


def check_fmv_jobs(config: dict, fmv: dict) -> None:
    from concord.papers.fmv import settings

    for model in fmv["models"]:
        kind = "thinking" if "thinking" in model else "instruct"
        sampling = settings.sampling_settings(config, model)
        assert sampling["max_new_tokens"] == FMV_BUDGETS[kind], model
        engine = settings.generation_engine(config, model)
        assert engine["max_model_len"] == sampling["max_prompt_tokens"] + sampling["max_new_tokens"], model
        judge = settings.judge_settings(config, model)["judge"]
        assert judge["engine"]["max_model_len"] >= judge["max_prompt_tokens"] + judge["max_new_tokens"], model
    ttrl = fmv.get("ttrl") or {}
    if not ttrl.get("enabled"):
        return
    # The FMV TTRL jobs: the `training` section overridden by fmv.ttrl.training (rules/fmv), one per budget N.
    merged = {**config["training"], **(ttrl.get("training") or {})}
    model = ttrl.get("model") or next(iter(fmv["models"]))
    budget = settings.generation_budget(config, model)
    for n_vote in sorted(set(ttrl.get("table2_n_vote", [])) | set((ttrl.get("table1_n_vote") or {}).values())):
        job, _, _ = gpu_job({**merged, "n_vote": n_vote, "n_train": n_vote}, 100, evaluation=config["evaluation"])
        assert job["max_completion_length"] == budget, "FMV training must sample the paper's budget"
        assert job["vllm_max_model_length"] == merged["max_prompt_length"] + budget
        # Training prompts are the generation prompts: the same budget.
        assert merged["max_prompt_length"] >= settings.sampling_settings(config, model)["max_prompt_tokens"]
        cfg = resolve_section("training", {**merged, "n_vote": n_vote, "n_train": n_vote})
        # Validation samples what evaluation samples; no label chooses a checkpoint (test time has none):
        # a fixed budget, no held-out split, no early stopping.
        assert cfg["val_max_new_tokens"] == budget
        assert cfg["validation_fraction"] is None and cfg["early_stopping_patience"] is None


def test_the_schema_refuses_vllm_server_mode_saying_what_to_use():
    from concord.preflight import ConfigError, validate_config

    config = load(PAPER)
    config["training"]["vllm_mode"] = "server"
    with pytest.raises(ConfigError, match="colocate"):
        validate_config(config, REPO / "config" / "schema.yaml")
