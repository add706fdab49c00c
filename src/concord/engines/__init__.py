"""Generation engines behind one interface (see :mod:`concord.engines.base`)."""

from __future__ import annotations

import os

from concord.engines.base import Engine, Generation, Messages, SamplingParams, mean_logprob

BACKENDS = ("hf", "vllm")


def load_engine(backend: str, model_path: str | os.PathLike, **options) -> Engine:
    """Build an engine: ``hf`` (transformers ``generate``, CPU or GPU) or ``vllm`` (GPU)."""
    if backend == "hf":
        from concord.engines.hf import HFEngine

        return HFEngine(model_path, **options)
    if backend == "vllm":
        from concord.engines.vllm import VLLMEngine

        return VLLMEngine(model_path, **options)
    raise ValueError(f"unknown engine backend {backend!r}; choose one of {BACKENDS}")


__all__ = ["BACKENDS", "Engine", "Generation", "Messages", "SamplingParams", "load_engine", "mean_logprob"]
