#!/usr/bin/env bash
# Set up (or reuse) .venv and run the embedded default workflow end to end on this machine.
# Extra arguments go to snakemake (e.g. a target: scripts/run_default.sh table1).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
snakemake --cores "${CORES:-$(nproc)}" --rerun-incomplete --printshellcmds "$@"
snakemake --cores 1 --report results/report.html >/dev/null 2>&1 && echo "[run] HTML report: results/report.html" || echo "[run] (report not built)"
echo "[run] done in $(( $(date +%s) - start )) s; results under results/"
