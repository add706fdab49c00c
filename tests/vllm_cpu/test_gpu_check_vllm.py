"""scripts/gpu_check.sh's vLLM section runs here on vLLM's CPU build (``--cpu``): the roll-outs
through ``VLLMEngine`` against the HF engine and GRPO with TRL's colocated engine, so the script
that runs first on a GPU node has run end to end. (Its HF sections: tests/test_gpu_check.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_vllm_section_passes_on_vllm_cpu():
    from concord.hardware import resolve_dtype

    dtype = resolve_dtype("auto", "cpu")  # fp32 on every CPU
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu", "--skip-hf", "--arms", "core,fmv"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=1200)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for line in ("vLLM roll-outs cpu float32 vs HF cpu float32 (greedy): 100% identical", "tokens/s",
                 f"GRPO          core (math, {dtype}, generation vllm {dtype}): 2 steps",
                 f"GRPO           fmv (code, {dtype}, generation vllm {dtype}): 2 steps", "gpu_check PASSED"):
        assert line in out, (line, out[-3000:])
    assert "generation hf" not in out  # --skip-hf: only the vLLM section ran
