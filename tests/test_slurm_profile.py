"""`snakemake --profile slurm` from the repository root, the pinned conda envs, and `--lint`.

No cluster and no conda exist on CI machines, so the profile runs as a dry run with the real slurm
executor plugin, and the conda deployment is swapped for env-modules (which needs nothing in a dry
run); the env files themselves are checked for exact pins and for TRL 1.16's vLLM window.
"""

from __future__ import annotations

import os
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from support import REPO
from support.snakemake import snakemake

PROFILE = REPO / "slurm" / "config.yaml"
GPU_RULE_PREFIXES = ("rollouts", "train", "evaluat")


def _snakemake(*args: str) -> subprocess.CompletedProcess:
    # --nolock: other sessions may be running the workflow in this checkout; a dry run writes nothing.
    return snakemake(REPO, "--nolock", *args, snakefile=None, timeout=300)


def _job_resources(dry_run: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every job block a dry run prints."""
    jobs, rule = [], None
    for line in dry_run.splitlines():
        if line.startswith("rule ") or line.startswith("localrule "):
            rule = line.split()[1].rstrip(":")
        elif rule and line.strip().startswith("resources:"):
            pairs = line.split(":", 1)[1].split(",")
            jobs.append((rule, dict(p.strip().split("=", 1) for p in pairs if "=" in p)))
            rule = None
    return jobs


def test_profile_is_a_slurm_profile_with_one_place_for_account_and_partition():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    assert profile["software-deployment-method"] == "conda"
    resources = profile["default-resources"]
    assert {"slurm_account", "slurm_partition", "runtime", "mem_mb"} <= set(resources)
    # Account and partition are set nowhere else in the workflow.
    for path in [REPO / "Snakefile", *REPO.glob("rules/**/*.smk"), *REPO.glob("config/*.yaml"), *REPO.glob("envs/*.yaml")]:
        text = path.read_text()
        assert "slurm_account" not in text and "slurm_partition" not in text, path


def test_slurm_executor_plugin_is_installed():
    # >= 2.7.1 for multi-GPU jobs (see docs); the plugin registers itself under this module name.
    assert Version(metadata.version("snakemake-executor-plugin-slurm")) >= Version("2.7.1")
    import snakemake_executor_plugin_slurm  # noqa: F401


def _filled_profile(tmp_path: Path) -> tuple[Path, list[str]]:
    """The slurm profile with an account, and --config overrides pointing every user-supplied
    input (LiveCodeBench file, SC-MoA files, endpoint) at stand-ins: what a user fills in."""
    profile = tmp_path / "slurm"
    profile.mkdir()
    text = PROFILE.read_text().replace('"YOUR_ACCOUNT"', '"proj123"')
    # The profile names config files relative to the repository root, where Snakemake runs.
    (profile / "config.yaml").write_text(text)
    data = tmp_path / "data"
    (data / "bbh").mkdir(parents=True)
    for name in ("lcb.jsonl", "mmlu.csv", "gpqa.csv", "aime.jsonl"):
        (data / name).write_text("")
    overrides = [
        "--config",
        f"fmv={{benchmarks: {{lcb_v6: {{path: {data / 'lcb.jsonl'}}}}}}}",
        "scmoa={endpoints: {"
        + ", ".join(f"{key}: {{base_url: 'http://gpu-node-7:{8000 + i}/v1'}}"
                    for i, key in enumerate(("gpt-oss-120b", "llama-3.3-70b", "llama-3.1-8b", "gpt-oss-20b")))
        + f"}}, benchmarks: {{bbh3: {{path: {data / 'bbh'}}}, bbh_full: {{path: {data / 'bbh'}}}, "
        f"mmlu_ml: {{path: {data / 'mmlu.csv'}}}, gpqa_diamond: {{path: {data / 'gpqa.csv'}}}, "
        f"aime: {{path: {data / 'aime.jsonl'}}}, lcb_hard: {{path: {data / 'lcb.jsonl'}}}}}}}",
    ]
    return profile, overrides


@pytest.mark.slow
def test_profile_dry_run_is_the_full_reproduction_of_all_three_papers(tmp_path):
    profile, overrides = _filled_profile(tmp_path)
    proc = _snakemake("--profile", str(profile), "-n", "--sdm", "env-modules", *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    out = proc.stdout + proc.stderr
    assert "Using profile" in out
    jobs = _job_resources(out)
    rules = {rule for rule, _ in jobs}
    # CoRE's grid, FMV's and SC-MoA's experiments, and every paper's tables.
    assert {"rollouts", "train", "evaluate", "table1", "table2", "table3", "figure3"} <= rules, sorted(rules)
    assert {"fmv_generate", "fmv_train", "fmv_table1", "fmv_table2"} <= rules, sorted(rules)
    assert {"scmoa_run", "scmoa_report"} <= rules, sorted(rules)
    for rule, res in jobs:
        assert res.get("slurm_account") == "proj123" and res.get("slurm_partition") == "YOUR_PARTITION", rule
    for rule, res in jobs:
        if rule.startswith(GPU_RULE_PREFIXES) or rule in ("fmv_generate", "fmv_train"):
            assert int(res.get("gpu", 0)) >= 1, f"{rule} runs on the cluster without a GPU"


@pytest.mark.slow
def test_the_sc_moa_config_alone_plans_sc_moa_only(tmp_path):
    # `--configfile config/paper_scmoa.yaml` replaces the profile's list: no CoRE keys, no FMV.
    profile, overrides = _filled_profile(tmp_path)
    overrides = [o for o in overrides if not o.startswith("fmv=")]
    proc = _snakemake("--profile", str(profile), "--configfile", "config/paper_scmoa.yaml", "-n",
                      "--sdm", "env-modules", *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    rules = {rule for rule, _ in _job_resources(proc.stdout + proc.stderr)}
    assert {"scmoa_run", "scmoa_report"} <= rules, sorted(rules)
    assert not rules & {"rollouts", "train", "evaluate", "table1", "fmv_generate"}, sorted(rules)


@pytest.mark.slow
def test_missing_user_inputs_stop_the_plan_briefly_saying_how_to_supply_them():
    proc = _snakemake("--profile", "slurm", "-n", "--sdm", "env-modules")
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    message = err[err.index("this run needs inputs only you can supply"):]
    message = message[:message.index("  File ")] if "  File " in message else message
    lines = message.strip().splitlines()
    assert len(lines) <= 7, message
    for needed in ("SLURM account", "slurm/config.yaml", "LiveCodeBench release file", "config/paper_fmv.yaml",
                   "SC-MoA benchmark files", "SC-MoA model endpoint", "config/paper_scmoa.yaml",
                   "without FMV: --configfile config/paper.yaml config/paper_scmoa.yaml"):
        assert needed in message, needed


@pytest.mark.slow
def test_named_targets_plan_only_what_they_read():
    proc = _snakemake("table2", "-n", "--configfile", "config/paper.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rules = {rule for rule, _ in _job_resources(proc.stdout)}
    assert "table2" in rules and not {"table1", "table3", "figure4", "figure5a", "figure5b"} & rules


@pytest.mark.slow
def test_lint_is_clean():
    proc = _snakemake("--lint")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _env(name: str) -> dict:
    return yaml.safe_load((REPO / "envs" / name).read_text())


def _pins(env: dict) -> tuple[dict[str, str], dict[str, str]]:
    conda, pip = {}, {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                req = Requirement(line)
                specs = list(req.specifier)
                assert len(specs) == 1 and specs[0].operator == "==", f"pip dependency not pinned exactly: {line}"
                pip[req.name.lower()] = specs[0].version
        else:
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)=(\d+(?:\.\d+)+)", dep)
            assert match, f"conda dependency not pinned exactly: {dep}"
            conda[match[1]] = match[2]
    return conda, pip


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "envs").glob("*.yaml")))
def test_conda_envs_pin_every_package(name):
    env = _env(name)
    assert env["channels"][0] == "conda-forge" and "nodefaults" in env["channels"]
    conda, pip = _pins(env)
    assert "python" in conda and pip


def test_gpu_env_satisfies_trl_1_16s_vllm_window():
    _, pip = _pins(_env("gpu.yaml"))
    assert pip["trl"] == "1.16.0"
    # The window comes from TRL's own metadata, not from this test: vllm >= 0.22, <= 0.31.
    trl_requires = [Requirement(r) for r in metadata.requires("trl") or []]
    assert metadata.version("trl") == "1.16.0"
    vllm_req = next(r for r in trl_requires if r.name == "vllm")
    assert Version(pip["vllm"]) in vllm_req.specifier, (pip["vllm"], str(vllm_req.specifier))
    assert Version("0.32.0") not in vllm_req.specifier  # the window really is closed above


def test_every_rule_env_exists_and_is_pinned():
    envs = set()
    for smk in REPO.glob("rules/**/*.smk"):
        for match in re.finditer(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            envs.add((smk.parent / match[1]).resolve())
    assert envs, "no rule declares a conda env"
    for env in envs:
        assert env.is_file(), f"rule conda env missing: {env}"
        _pins(yaml.safe_load(env.read_text()))


def test_a_configuration_left_by_a_killed_cluster_is_recognised(tmp_path):
    # A test session killed with -9 never stopped its cluster: its /etc/slurm/slurm.conf link
    # stayed, and every later local cluster refused to start beside it.
    from concord.cluster.local_slurm import _left_by_a_dead_cluster

    state = tmp_path / "slurm0"
    (state / "etc").mkdir(parents=True)
    (state / "run").mkdir()
    conf = state / "etc" / "slurm.conf"
    conf.write_text("# A single-node Slurm cluster written by concord.cluster.local_slurm (state: x).\nClusterName=c\n")
    link = tmp_path / "slurm.conf"
    link.symlink_to(conf)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (state / "run" / "slurmctld.slurm.pid").write_text(f"{gone.pid}\n")
    assert _left_by_a_dead_cluster(link)  # its controller's pid is gone
    (state / "run" / "slurmctld.slurm.pid").write_text(f"{os.getpid()}\n")
    assert _left_by_a_dead_cluster(link)  # the pid is another program's now
    conf.write_text("ClusterName=someone-elses\n")
    assert not _left_by_a_dead_cluster(link)  # not ours: never touched
