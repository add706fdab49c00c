#!/usr/bin/env bash
# GPU check: concord's GPU path on one GPU node in at most 8 minutes, without network.
#
#   bash scripts/gpu_check.sh          # on a GPU node, inside the GPU env (envs/gpu.yaml)
#   bash scripts/gpu_check.sh --cpu    # anywhere: the same checks with both sides on CPU
#
# Roll-outs with confidences (HF engine) on the GPU against the CPU, two real GRPO steps in bf16
# with each arm's reward, peak GPU memory and tokens/s. No model download (see gpu_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES-0}"  # one GPU (an empty value hides them all)
exec timeout --kill-after=10 480 "$PY" scripts/gpu_check.py "$@"
