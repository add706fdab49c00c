#!/usr/bin/env bash
# Set up (or reuse) .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
