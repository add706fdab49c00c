"""The versions the GPU env (envs/gpu.yaml) and the CPU lock (requirements/cpu.lock) pin."""

from __future__ import annotations

import yaml
from packaging.requirements import Requirement

from support import REPO


def gpu_pins() -> dict[str, str]:
    env = yaml.safe_load((REPO / "envs" / "gpu.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return {Requirement(r).name.lower().replace("-", "_"): str(Requirement(r).specifier)[2:] for r in pip}


def cpu_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements" / "cpu.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("-", "_")] = version.split(";")[0].strip()
    return pins
