"""The processor and accelerators a job runs on, and the dtype an engine computes in there.

Machines of one kind differ: some CPUs have AVX-512 BF16 or AMX, others only AVX2, where bf16
matrix products are emulated. A dtype chosen by capability would make the same commit print other
numbers on each kind (measured: 9 of 32 evaluation samples and 6 points of pass@1 on the default),
so ``auto`` is fp32 on every CPU -- one numeric path whatever the instruction set -- and bf16 on a
CPU is an explicit opt-in (``dtype: bfloat16``). On a GPU ``auto`` is bf16, as the papers train.
Every artifact records the processor (``processor()``) and accelerators (``accelerators()``) it
was produced on, so that two trees produced on different hardware are told apart.
"""
from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The CPU kernels every concord process computes with unless told otherwise: torch's ATen kernels
#: and MKL's BLAS (MKL's conditional numerical reproducibility branch) at AVX2, on every x86 CPU
#: that has it. fp32 alone is not enough for one set of numbers: on an AVX-512 machine the native
#: kernels sum in another order than AVX2's, and the same sampled tokens came with log-probs up to
#: 3e-5 nats apart (measured on SmolLM2-135M); pinned, an AVX-512 machine computes what an AVX2
#: one does. Set before torch computes anything (both are read at first use); an explicit setting
#: in the environment wins, and ``CONCORD_NATIVE_CPU_KERNELS=1`` leaves the processor's own
#: kernels (faster on some CPUs, other low-order bits). bf16 matrix products (oneDNN) are not
#: pinned: bf16 on a CPU is an opt-in that gives other numbers anyway.
PORTABLE_CPU_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}


def pin_portable_cpu_kernels() -> dict:
    """Set :data:`PORTABLE_CPU_KERNELS` in this process's environment (where unset, and unless
    ``CONCORD_NATIVE_CPU_KERNELS=1``); the settings in force after the call."""
    if os.environ.get("CONCORD_NATIVE_CPU_KERNELS") != "1":
        for key, value in PORTABLE_CPU_KERNELS.items():
            os.environ.setdefault(key, value)
    return {key: os.environ.get(key) for key in PORTABLE_CPU_KERNELS}


def avoid_cpu_flash_attention_amx_fault(device: str, dtype: str) -> bool:
    """Keep bf16/fp16 attention on a CPU off torch's flash kernel where that kernel faults; True
    where it did.

    torch 2.13's CPU flash attention (``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``) packs
    bf16 blocks for AMX whenever the *processor* has AMX, but the packing routine (``pack_vnni2``)
    exists only in its AVX-512 kernels: with ATen held at AVX2 (:data:`PORTABLE_CPU_KERNELS`) on an
    AMX processor, bf16 attention over a query of about 256 tokens or more raises ``pack_vnni2 is
    only supported when avx512 is supported`` (measured on an Intel Xeon with AMX: bf16 training,
    shared-prefix scoring and the GPU check's CPU run all failed; the same code passes on an
    AVX-512 BF16 EPYC without AMX). There, attention takes torch's math kernel instead. The switch
    is torch's one process-wide flash flag, so it is only ever thrown for a CPU computation; fp32
    never reaches the packing and keeps its kernel.
    """
    if device != "cpu" or dtype not in ("bfloat16", "float16"):
        return False
    amx = "amx_bf16" if dtype == "bfloat16" else "amx_fp16"
    if amx not in _cpuinfo()[1]:
        return False
    import torch

    if torch.backends.cpu.get_cpu_capability().upper().startswith("AVX512"):
        return False
    torch.backends.cuda.enable_flash_sdp(False)  # read by CPU kernel selection too (sdp_utils_cpp)
    return True


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
    """The instruction set torch's CPU kernels dispatch to (e.g. "AVX2", "AVX512"), or None.

    A pure function of the torch build, the processor and ``ATEN_CPU_CAPABILITY``, so it is kept
    in a small per-user cache under that key: the audit registers every job's outputs in a
    process of its own, and importing torch only to ask would cost that process about 1 s of a
    1.7-s run, 52 times in the default run."""
    key, cache = _capability_key(), _capability_cache()
    known = _read_cache(cache) if key is not None and cache is not None else {}
    if key in known:
        return known[key]
    try:
        import torch

        value = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # torch absent or too old: the record says so rather than failing a job
        return None
    if key is not None and cache is not None:
        _remember(cache, {**known, key: value})
    return value


def _read_cache(cache: Path) -> dict:
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in known.items() if isinstance(v, str)} if isinstance(known, dict) else {}


def _capability_key() -> str | None:
    """What torch's choice of CPU kernels depends on: the installed torch (found, not imported),
    the processor, the host and ATEN_CPU_CAPABILITY; None where torch is not installed."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    try:
        stat = os.stat(spec.origin)
    except OSError:
        return None
    name, flags = _cpuinfo()
    parts = [spec.origin, stat.st_size, stat.st_mtime_ns, name, sorted(flags), platform.node(),
             os.environ.get("ATEN_CPU_CAPABILITY")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _capability_cache() -> Path | None:
    root = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.path.expanduser("~"), ".cache")
                                                if os.path.expanduser("~") != "~" else None)
    return Path(root) / "concord" / "torch-cpu-capability.json" if root else None


def _remember(cache: Path, known: dict) -> None:
    """Write the cache atomically; a cache that cannot be written is no error (it is only a cache)."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps(known, sort_keys=True))
        os.replace(tmp, cache)
    except OSError:
        pass


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """The concrete dtype name for ``dtype`` on ``device``.

    ``auto`` is bf16 on a GPU and fp32 on every CPU, whatever its instruction set: the same default
    computes the same numbers on an AVX2 and an AVX-512 BF16 machine. bf16 on a CPU must be asked
    for by name (native on AVX-512 BF16/AMX, emulated elsewhere: same roundings, slower).
    """
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
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
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
    }


def processor_label(p: Mapping[str, Any] | None = None) -> str:
    """One line naming a processor (this machine's by default, or one recorded in provenance), for
    figures, logs, audits and the README's measurements: the CPU, the instruction set torch's kernels
    used (AVX2 where the reproducibility pin holds them there on an AVX-512 machine), and whether the
    processor itself has native bf16."""
    p = processor() if p is None else p
    name = p.get("cpu_model") or p.get("machine") or "unknown CPU"
    kernels = p.get("torch_cpu_capability") or "?"
    bf16 = "native bf16" if p.get("native_bf16") else "no native bf16"
    return f"{name} (torch kernels {kernels}; processor with {bf16})"


def _nvml_gpus() -> tuple[list[str], str | None] | None:
    """(GPU names, driver version) from NVML, which reads them without creating a CUDA context
    (a context in the parent would break vLLM's forked workers); None where NVML is absent."""
    try:
        import pynvml  # nvidia-ml-py, a dependency of vLLM's GPU build
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver on this node: no GPU to record
        return None
    try:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        count = pynvml.nvmlDeviceGetCount()
        indices = range(count)
        if visible is not None and visible.strip() != "":
            indices = [int(i) for i in visible.split(",") if i.strip().isdigit() and int(i) < count]
        names = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in indices]
        return names, _text(pynvml.nvmlSystemGetDriverVersion())
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvidia_smi_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def _gpu_device_nodes() -> bool:
    """Whether this node exposes an NVIDIA (``/dev/nvidia0``...) or AMD (``/dev/kfd``) GPU device:
    without one torch.cuda.is_available() is False on Linux."""
    import glob

    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


@functools.lru_cache(maxsize=1)
def accelerators() -> dict:
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` applied): model names, count, the
    CUDA version torch was built with and the driver's version; an empty list on a CPU node.
    Two trees made on other GPU models, counts, CUDA or drivers compute other numbers at bf16, so
    the audit tells them apart as it does processors."""
    record = {"gpus": [], "gpu_count": 0, "cuda": None, "driver": None}
    if not _gpu_device_nodes():
        return record  # no device for CUDA or ROCm to open: no GPU, and no torch import to learn it
    try:
        import torch
    except ImportError:
        return record
    if not torch.cuda.is_available():
        return record
    nvml = _nvml_gpus()
    if nvml is not None:
        names, driver = nvml
    else:
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        driver = _nvidia_smi_driver()
    return {"gpus": names, "gpu_count": len(names), "cuda": torch.version.cuda, "driver": driver}


SOFTWARE = ("torch", "transformers", "trl", "vllm", "accelerate")


@functools.lru_cache(maxsize=1)
def software() -> dict:
    """Versions of the numeric stack (None: not installed in this env)."""
    from importlib import metadata

    versions = {}
    for name in SOFTWARE:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def accelerator_label(a: dict) -> str:
    """One line naming a job's accelerators, for the audit and logs."""
    if not a.get("gpus"):
        return "no GPU"
    names = sorted(set(a["gpus"]))
    return f"{a['gpu_count']} x {', '.join(names)} (CUDA {a.get('cuda')}, driver {a.get('driver')})"


def load_label() -> str:
    """The machine's load averages (1, 5, 15 minutes), printed beside every benchmark figure."""
    return "load %.2f/%.2f/%.2f" % os.getloadavg()
