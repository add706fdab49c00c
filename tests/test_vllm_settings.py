"""What the vLLM path needs from the project, checked without vLLM: the explicit opt-in for vLLM
on a CPU (never a silent fall-back), dtypes by capability, tiny models vLLM's CPU attention can
run, and context budgets that fit the model's positions, checked when the workflow is planned.
(The vLLM code itself runs in tests/vllm_cpu/, in the vLLM-CPU env.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from concord import hardware, preflight
from concord.config import resolve_section
from concord.rl.settings import check_model_positions, context_budget, resolve_dtype, resolve_training, resolve_use_vllm

REPO = Path(__file__).resolve().parents[1]


def training(**values):
    return resolve_training(values)[0]


@pytest.mark.parametrize("use_vllm, vllm_on_cpu, on_gpu, expected", [
    ("auto", False, True, True), ("auto", False, False, False), ("auto", True, False, True),
    (True, False, True, True), (True, True, False, True), (False, True, True, False), (False, True, False, False),
])
def test_vllm_is_used_exactly_where_the_config_says(use_vllm, vllm_on_cpu, on_gpu, expected):
    assert resolve_use_vllm(training(use_vllm=use_vllm, vllm_on_cpu=vllm_on_cpu), on_gpu) is expected


def test_asking_for_vllm_on_a_cpu_without_the_opt_in_fails_naming_the_fix():
    with pytest.raises(ValueError, match=r"use_vllm: true .* no GPU: set training.vllm_on_cpu: true .*setup_vllm.sh"):
        resolve_use_vllm(training(use_vllm=True), on_gpu=False)
    assert resolve_section("training", {})["use_vllm"] == "auto"  # the schema's default never errs


def test_auto_dtype_is_fp32_on_every_cpu_and_bf16_on_a_gpu(monkeypatch):
    # The same answer whether or not this CPU has native bf16: the default's numbers must not
    # depend on the processor kind (both kinds are simulated, whichever this machine is).
    for native in (True, False):
        monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda native=native: native)
        assert resolve_dtype(training(), on_gpu=False) == "float32" == hardware.resolve_dtype("auto", "cpu")
    assert resolve_dtype(training(dtype="bfloat16"), on_gpu=False) == "bfloat16"  # the explicit opt-in
    assert resolve_dtype(training(), on_gpu=True) == "bfloat16"
    assert resolve_dtype(training(dtype="float32"), on_gpu=True) == "float32"
    assert resolve_section("engine", {})["dtype"] == "auto"
    assert yaml.safe_load((REPO / "config" / "config.yaml").read_text())["engine"]["dtype"] == "auto"


def test_the_hf_engine_resolves_auto_to_fp32_on_a_cpu_and_says_which(tiny_model_dir):
    from concord.engines.hf import HFEngine

    engine = HFEngine(tiny_model_dir, dtype="auto", progress=False)
    assert engine.dtype == hardware.resolve_dtype("auto", "cpu") == "float32"
    assert str(next(engine.model.parameters()).dtype) == f"torch.{engine.dtype}"


def test_tiny_models_have_heads_and_positions_vllm_cpu_can_run(boxed_model_dir, tiny_model_dir):
    from transformers import AutoConfig

    from concord.models import TINY_RANDOM_POSITIONS
    from concord.rl.tiny import TINY_MAX_POSITIONS

    for model, positions in ((boxed_model_dir, TINY_MAX_POSITIONS), (tiny_model_dir, TINY_RANDOM_POSITIONS)):
        config = AutoConfig.from_pretrained(str(model))
        assert config.hidden_size // config.num_attention_heads in (32, 64, 80, 96, 112, 128)  # vLLM-CPU head sizes
        assert config.max_position_embeddings == positions
        check_model_positions(training(), positions)  # the schema's prompt budget 1024 + a completion fits


def test_a_context_over_the_models_positions_is_refused():
    cfg = training(max_prompt_length=1024, max_completion_length=3072)
    assert context_budget(cfg) == 1024 + 3072
    with pytest.raises(ValueError, match=r"= 4096 tokens exceeds the 2048 positions of tiny"):
        check_model_positions(cfg, 2048, "tiny")
    # Validation's budget counts only when validation runs.
    assert context_budget(training(max_prompt_length=1024, max_completion_length=64, eval_every=0)) == 1024 + 64
    check_model_positions(cfg, None)  # unknown (a hub model before download): the job checks


def test_every_shipped_config_fits_its_models_positions_at_plan_time():
    for path in sorted((REPO / "config").glob("*.yaml")):
        if path.name != "schema.yaml":
            preflight.check_context_budgets(yaml.safe_load(path.read_text()) or {}, REPO)


def test_plan_time_check_names_every_training_and_model_that_does_not_fit(tmp_path):
    local = tmp_path / "local-model"
    local.mkdir()
    (local / "config.json").write_text('{"max_position_embeddings": 512}')
    config = {"models": {"tiny": {"source": "tiny-random"}, "mine": {"source": "local", "id": str(local)},
                         "big": {"source": "hub", "id": "org/model"}},
              "training": {"max_prompt_length": 2048, "max_completion_length": 1100},
              "fmv": {"ttrl": {"enabled": True, "training": {"max_completion_length": 64}}}}
    with pytest.raises(preflight.ConfigError) as err:
        preflight.check_context_budgets(config)
    text = str(err.value)
    assert "training: max_prompt_length 2048 + completion budget 3072 = 5120 tokens > 4096 positions of model tiny" in text
    assert "positions of model mine" in text and "model big" not in text  # a hub model's positions are unknown here
    assert "fmv.ttrl.training: max_prompt_length 2048 + completion budget 3072" in text  # val = evaluation's 3072
    config["models"]["big"]["max_positions"] = 1024
    assert "model big" in str(pytest.raises(preflight.ConfigError, preflight.check_context_budgets, config).value)


@pytest.mark.slow
def test_smollm2_positions_constant_is_its_ggufs_context_length():
    import gguf

    from concord.models import SMOLLM2_POSITIONS, smollm2_gguf_path

    field = gguf.GGUFReader(str(smollm2_gguf_path())).fields["llama.context_length"]
    assert int(field.parts[field.data[0]][0]) == SMOLLM2_POSITIONS


def test_vllm_cpu_lock_pins_the_gpu_envs_versions_without_cuda_only_packages():
    from support.pins import gpu_pins

    lock = {}
    for line in (REPO / "requirements" / "vllm-cpu.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            lock[name.strip().lower().replace("-", "_")] = version.strip()
    gpu = gpu_pins()
    assert lock["vllm_cpu"] == gpu["vllm"] and "vllm" not in lock  # the CPU build at the GPU env's version
    assert lock["torch"] == gpu["torch"] + "+cpu"
    for name, version in gpu.items():
        if name not in ("torch", "torchvision", "torchaudio", "vllm"):
            assert lock[name] == version, (name, lock.get(name), version)
    # PyPI's builds of these are CUDA-only: with torch+cpu they break `import transformers`.
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(lock)
