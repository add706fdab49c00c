#!/usr/bin/env bash
# A single-node Slurm cluster on this machine (start|stop|status), to try
# `snakemake --profile slurm` before a real cluster (README: "Trying the cluster path on one
# workstation"). Root installs the Debian packages when missing.
#
#   eval "$(bash scripts/slurm_local.sh start)"        # prints `export SLURM_CONF=...`
#   bash scripts/slurm_local.sh start --gpus 4 --accounting
#   bash scripts/slurm_local.sh status
#   eval "$(bash scripts/slurm_local.sh stop)"
#
# State, configuration and logs live in $CONCORD_SLURM_DIR (default $TMPDIR/concord-slurm).
set -euo pipefail
cd "$(dirname "$0")/.."
# Standard library only: runs before (or without) .venv.
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m concord.cluster.local_slurm "$@"
