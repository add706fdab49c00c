"""concord: consensus-based reasoning with language models (CoRE, FMV, SC-MoA)."""

__version__ = "0.1.0"

# One numeric path on every x86 CPU: pin torch's and MKL's CPU kernels before torch computes
# anything (concord.hardware.PORTABLE_CPU_KERNELS says why and how to opt out).
from concord.hardware import pin_portable_cpu_kernels as _pin  # noqa: E402

_pin()
del _pin
