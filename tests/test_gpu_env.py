"""The GPU env's numerics stack against the CPU lock, and the tests that run transformers code
under the GPU env's transformers.

envs/gpu.yaml and requirements/cpu.lock pin the same torch and trl. transformers cannot match:
vLLM 0.31 caps it below 5.18 while the CPU lock carries a newer one, so the second test installs
the GPU env's transformers (and the huggingface_hub it needs) into a directory placed first on
``PYTHONPATH`` and runs again the tests marked ``transformers``: those whose code path runs
transformers (the HF engine, tokenizers and chat templates, TRL's ``GRPOConfig`` and trainer,
the learning-rate schedule). Everything else is the same code on the same torch and trl in both
envs, so its result cannot depend on which transformers is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.pins import cpu_pins, gpu_pins

REPO = Path(__file__).resolve().parents[1]
#: Packages installed over the CPU environment to reproduce the GPU env's transformers.
OVERLAY = ("transformers", "huggingface_hub", "httpx", "httpcore", "h11")
#: The modules holding tests marked ``transformers`` (engines, training settings, GRPO training runs).
TESTS = ("tests/test_engines.py", "tests/test_rl_run.py", "tests/test_rl_train.py", "tests/test_paper_configs.py")


def test_gpu_env_and_cpu_lock_share_torch_and_trl():
    gpu, cpu = gpu_pins(), cpu_pins()
    for name in ("torch", "trl", "accelerate", "datasets", "tokenizers", "safetensors"):
        assert gpu[name] == cpu[name], f"{name}: envs/gpu.yaml {gpu[name]} vs requirements/cpu.lock {cpu[name]}"
    assert all(name in gpu for name in OVERLAY), "the GPU env must pin every package the overlay installs"


@pytest.mark.slow
def test_unit_tests_pass_under_the_gpu_envs_transformers(tmp_path_factory):
    pins = gpu_pins()
    overlay = tmp_path_factory.mktemp("gpu-transformers")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target",
         str(overlay), *(f"{name}=={pins[name]}" for name in OVERLAY)],
        capture_output=True, text=True, timeout=600)
    if pip.returncode != 0 and ("Could not find a version" in pip.stderr or "connection" in pip.stderr.lower()):
        pytest.skip(f"PyPI unreachable, cannot install the GPU env's transformers: {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay), str(REPO / "src")])}
    probe = subprocess.run([sys.executable, "-c", "import transformers; print(transformers.__version__)"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == pins["transformers"], probe.stderr[-2000:]
    # (The kill-and-resume test retrains from scratch: left to the main run.)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "transformers",
                          "-k", "not killed", *TESTS],
                         cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
