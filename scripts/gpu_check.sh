#!/usr/bin/env bash
# GPU check: concord's GPU path on one GPU node in at most 8 minutes, without network.
#
#   bash scripts/gpu_check.sh          # on a GPU node, inside the GPU env (envs/gpu.yaml)
#   bash scripts/gpu_check.sh --cpu    # anywhere: the same checks with both sides on CPU, vLLM's
#                                      # CPU build in .venv-vllm (set up by scripts/setup_vllm.sh)
#
# Roll-outs with confidences (HF engine) on the GPU against the CPU, two real GRPO steps in bf16
# with each arm's reward, vLLM roll-outs (VLLMEngine) and GRPO with TRL's colocated vLLM engine,
# peak memory and tokens/s. No model download (see gpu_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=480
if [[ " $* " == *" --cpu "* ]]; then
  # vLLM on CPU is vLLM's CPU build, in its own env; the shared 2-core machines take longer.
  if [ -z "${PYTHON:-}" ]; then bash scripts/setup_vllm.sh; PYTHON=.venv-vllm/bin/python; fi
  export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" VLLM_CPU_CI_ENV="${VLLM_CPU_CI_ENV:-1}"
  export VLLM_ENABLE_V1_MULTIPROCESSING="${VLLM_ENABLE_V1_MULTIPROCESSING:-0}" VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-nobind}"
  LIMIT=2700  # 45 min: measured 25+ min for all arms at load 10-15 on a shared 2-core machine
fi
PY=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES-0}"  # one GPU (an empty value hides them all)
exec timeout --kill-after=10 "$LIMIT" "$PY" scripts/gpu_check.py "$@"
