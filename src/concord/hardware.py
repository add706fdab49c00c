"""What the processor computes natively, and the dtype an engine should use on it.

Machines of one kind differ: some CPUs have AVX-512 BF16 or AMX, others only AVX2, where bf16
matrix products are emulated and several times slower than fp32 (and round differently). So a
default dtype must be chosen by capability, never tuned to one machine, and every artifact records
the processor and numeric path it was produced on (``processor()``), so that two trees produced on
different processors are told apart instead of being called equal or stale.
"""
from __future__ import annotations

import functools
import platform
from pathlib import Path

# CPU flags (as /proc/cpuinfo names them) that give native bf16 matrix arithmetic.
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
DTYPES = ("float32", "bfloat16", "float16")


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in /proc/cpuinfo; ("", {}) where absent."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine(), frozenset()
    name, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Processor", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
        if name and flags:
            break
    return name or platform.machine(), flags


def cpu_has_native_bf16() -> bool:
    """True where the CPU computes bf16 matrix products in hardware (AVX-512 BF16 or AMX)."""
    return any(f in _cpuinfo()[1] for f in NATIVE_BF16_CPU_FLAGS)


def torch_cpu_capability() -> str | None:
    """The instruction set torch's CPU kernels dispatch to (e.g. "AVX2", "AVX512"), or None."""
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # torch absent or too old: the record says so rather than failing a job
        return None


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """The concrete dtype name for ``dtype`` on ``device``.

    ``auto`` is bf16 on a GPU and on a CPU with native bf16, fp32 everywhere else (bf16 on an AVX2
    CPU is emulated: slower than fp32, and its roundings differ from a native path).
    """
    if dtype == "auto":
        if device.startswith("cuda"):
            return "bfloat16"
        return "bfloat16" if cpu_has_native_bf16() else "float32"
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, {', '.join(DTYPES)}")
    return dtype


@functools.lru_cache(maxsize=1)
def processor() -> dict:
    """The processor and numeric path of this machine, as recorded in provenance."""
    name, flags = _cpuinfo()
    return {
        "machine": platform.machine(),
        "cpu_model": name,
        "native_bf16": cpu_has_native_bf16(),
        "cpu_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4"))),
        "torch_cpu_capability": torch_cpu_capability(),
    }


def processor_label() -> str:
    """One line naming the processor, for figures, logs and the README's measurements."""
    p = processor()
    isa = p["torch_cpu_capability"] or ("AVX-512 BF16" if p["native_bf16"] else "?")
    bf16 = "native bf16" if p["native_bf16"] else "no native bf16"
    return f"{p['cpu_model']} ({isa}, {bf16})"
