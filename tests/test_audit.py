"""The run manifest: register, record, verify -- and tampering is caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from concord import audit, io, provenance

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"models": {"m": 1}, "rollouts": {"n": 8}, "consensus": {"tau": 0.25}, "report": {"decimals": 1}}


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """A small results tree: data -> rollouts -> eval -> table, plus a model directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONCORD_CODE_VERSION", "test-version")
    provenance.code_version.cache_clear()  # an earlier test may have cached the git version
    r = Path("results")
    io.write_text(r / "data/bench.jsonl", '{"id": 1}\n')
    io.write_text(Path("config.yaml"), "n: 8\n")  # an input outside the results tree
    io.write_text(r / "models/m/config.json", "{}")
    io.write_text(r / "models/m/weights.bin", "0123")
    audit.register([r / "models/m"], rule="model", inputs=[], config={"models": CONFIG["models"]})
    io.write_text(r / "rollouts/m/bench/seed0.parquet", "rows")
    audit.register([r / "rollouts/m/bench/seed0.parquet"], rule="rollout",
                   inputs=[r / "data/bench.jsonl", r / "models/m", "config.yaml"],
                   config={"rollouts": CONFIG["rollouts"]}, conda_env=None)
    io.write_json(r / "eval/m/bench/core/seed0.json", {"pass_at_1": 0.5})
    audit.register([r / "eval/m/bench/core/seed0.json"], rule="evaluate",
                   inputs=[r / "rollouts/m/bench/seed0.parquet"], config={"consensus": CONFIG["consensus"]})
    io.write_text(r / "tables/table1.csv", "a,b\n")
    io.write_text(r / "tables/table1.md", "| a |\n")
    audit.register([r / "tables/table1.csv", r / "tables/table1.md"], rule="table1",
                   inputs=[r / "eval/m/bench/core/seed0.json"], config={"report": CONFIG["report"]})
    audit.write_manifest(r, config=CONFIG)
    yield r
    provenance.code_version.cache_clear()


def test_clean_tree_verifies(tree):
    report = audit.verify(tree)
    assert report.ok, report.format()
    # data/bench.jsonl has no sidecar: recorded with its hash and rule null.
    manifest = io.read_json(tree / "manifest.json")
    assert set(manifest["artifacts"]) == {
        "data/bench.jsonl", "models/m", "rollouts/m/bench/seed0.parquet", "eval/m/bench/core/seed0.json",
        "tables/table1.csv", "tables/table1.md",
    }
    assert report.checked == 6 and report.untracked == []
    assert manifest["artifacts"]["data/bench.jsonl"]["rule"] is None
    roll = manifest["artifacts"]["rollouts/m/bench/seed0.parquet"]
    assert roll["rule"] == "rollout" and roll["code_version"] == "test-version"
    assert [i["root"] for i in roll["inputs"]] == ["results", "results", "workdir"]
    assert roll["config_sections"] == ["rollouts"]


def test_tampered_file_is_modified_and_dependents_stale(tree):
    (tree / "eval/m/bench/core/seed0.json").write_text('{"pass_at_1": 0.9}\n')
    report = audit.verify(tree)
    assert not report.ok
    assert report.modified == ["eval/m/bench/core/seed0.json"]
    assert set(report.stale) == {"tables/table1.csv", "tables/table1.md"}
    assert "input eval/m/bench/core/seed0.json changed" in report.stale["tables/table1.csv"]


def test_changed_upstream_input_propagates_downstream(tree):
    (tree / "data/bench.jsonl").write_text('{"id": 2}\n')
    report = audit.verify(tree)
    assert report.modified == ["data/bench.jsonl"]
    assert report.stale["rollouts/m/bench/seed0.parquet"] == ["input data/bench.jsonl changed"]
    # Eval's own input (the roll-outs) is byte-identical, but it is downstream of a stale artifact.
    assert report.stale["eval/m/bench/core/seed0.json"] == [
        "upstream rollouts/m/bench/seed0.parquet is missing, modified or stale"
    ]
    assert "tables/table1.csv" in report.stale


def test_file_inside_a_directory_artifact(tree):
    (tree / "models/m/weights.bin").write_text("9999")
    report = audit.verify(tree)
    assert report.modified == ["models/m"]
    assert "rollouts/m/bench/seed0.parquet" in report.stale
    assert report.untracked == []  # files of a registered directory are covered by it


def test_missing_artifact_and_missing_input(tree):
    (tree / "tables/table1.md").unlink()
    Path("config.yaml").unlink()
    report = audit.verify(tree)
    assert report.missing == ["tables/table1.md"]
    assert report.stale["rollouts/m/bench/seed0.parquet"] == ["input workdir:config.yaml is gone"]


def test_config_change_makes_only_readers_of_that_section_stale(tree):
    report = audit.verify(tree, config={**CONFIG, "consensus": {"tau": 0.5}})
    assert set(report.stale) == {"eval/m/bench/core/seed0.json", "tables/table1.csv", "tables/table1.md"}
    assert report.stale["eval/m/bench/core/seed0.json"] == ["config changed (sections: consensus)"]
    assert audit.verify(tree, config={**CONFIG, "scmoa": {"anything": 1}}).ok


def test_stale_against_the_manifests_own_config(tree):
    # The last recorded run used a different report section than table1 was built with.
    audit.write_manifest(tree, config={**CONFIG, "report": {"decimals": 2}})
    report = audit.verify(tree)
    assert set(report.stale) == {"tables/table1.csv", "tables/table1.md"}


def test_untracked_files_are_listed(tree):
    io.write_text(tree / "figures/extra.png", "x")
    report = audit.verify(tree)
    assert report.ok and report.untracked == ["figures/extra.png"]


def test_copied_tree_still_verifies(tree, tmp_path):
    copy = tmp_path / "elsewhere" / "results"
    shutil.copytree(tree, copy)
    assert audit.verify(copy).ok


def test_register_errors_name_the_problem(tree):
    with pytest.raises(ValueError, match="not inside the results directory"):
        audit.register(["config.yaml"], rule="x")
    with pytest.raises(FileNotFoundError, match="output does not exist"):
        audit.register([tree / "nope.json"], rule="x")
    with pytest.raises(FileNotFoundError, match="input does not exist"):
        audit.register([tree / "tables/table1.csv"], rule="x", inputs=["nope.txt"])
    with pytest.raises(ValueError, match="'rule'"):
        audit.register([tree / "tables/table1.csv"], rule="")
    with pytest.raises(FileNotFoundError, match="no manifest"):
        audit.verify(tree / "models")


def test_conda_env_is_recorded(tree, monkeypatch):
    io.write_text(Path("envs/analysis.yaml"), "dependencies: [python=3.11.7]\n")
    monkeypatch.setenv("CONDA_PREFIX", "/opt/envs/abc")
    (sidecar,) = audit.register([tree / "tables/table1.csv"], rule="table1", conda_env="envs/analysis.yaml")
    conda = io.read_json(sidecar)["conda_env"]
    assert conda["file"] == "envs/analysis.yaml" and conda["prefix"] == "/opt/envs/abc"
    assert len(conda["sha256"]) == 64


def _cli(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "CONCORD_CODE_VERSION": "test-version"}
    return subprocess.run([sys.executable, "-m", "concord", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_register_record_verify_and_tamper(tmp_path):
    r = tmp_path / "results"
    io.write_text(r / "eval/m/b/core/seed0.json", '{"pass_at_1": 0.25}\n')
    io.write_text(r / "tables/table1.csv", "x\n")
    proc = _cli("audit", "register", "--rule", "table1", "--outputs", "results/tables/table1.csv",
                "--inputs", "results/eval/m/b/core/seed0.json", "--config-json", json.dumps({"report": {}}),
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _cli("audit", "record", "results", "--config-json", json.dumps({"report": {}}), cwd=tmp_path).returncode == 0
    proc = _cli("audit", "verify", "results", cwd=tmp_path)
    assert proc.returncode == 0 and "0 missing, 0 modified, 0 stale" in proc.stdout

    (r / "eval/m/b/core/seed0.json").write_text('{"pass_at_1": 0.99}\n')  # tamper
    proc = _cli("audit", "verify", "results", "--json", cwd=tmp_path)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["modified"] == ["eval/m/b/core/seed0.json"] and list(result["stale"]) == ["tables/table1.csv"]

    io.write_text(r / "eval/m/b/core/seed0.json", '{"pass_at_1": 0.25}\n')  # restore
    io.write_text(r / "notes.txt", "hand-written\n")
    assert _cli("audit", "verify", "results", cwd=tmp_path).returncode == 0
    proc = _cli("audit", "verify", "results", "--strict", cwd=tmp_path)
    assert proc.returncode == 1 and "UNTRACKED notes.txt" in proc.stdout

    proc = _cli("audit", "verify", "nowhere", cwd=tmp_path)
    assert proc.returncode == 2 and "no manifest" in proc.stderr


# ------------------------------------------------------------------ a real Snakemake run

WORKFLOW = '''
from snakemake.utils import validate
from concord.audit import register_command

configfile: "config.yaml"
validate(config, "{repo}/config/schema.yaml")
ALL_TARGETS = []
include: "{repo}/rules/report.smk"
include: "{repo}/rules/audit.smk"

rule all:
    input: ALL_TARGETS
    default_target: True

rule fake_results:
    input: "seed.txt"
    output: {outputs}
    log: "results/logs/fake_results.log"
    shell: "python make_fake.py {{output}} 2> {{log}} && " + register_command("fake_results", "{repo}/envs/analysis.yaml")
'''

MAKE_FAKE = '''
import hashlib, json, sys
for path in sys.argv[1:]:
    x = int(hashlib.sha256(path.encode()).hexdigest()[:8], 16) / 16**8
    if path.endswith("recovery.json"):
        payload = {"outnumbering_ratio": 1 + 3 * x, "coherence_advantage": 0.5 + 2 * x,
                   "confidence_gap_nats": 0.3, "tau": 0.25, "recovered": int(10 * x), "n_questions": 10}
    else:
        payload = {"pass_at_1": x, "k": 16, "per_question": []}
    with open(path, "w") as fh:
        json.dump(payload, fh)
'''

WF_CONFIG = {
    "models": {"m1": {"source": "tiny-random", "family": "Math"}, "m2": {"source": "tiny-random", "family": "Instruct"}},
    "benchmarks": {"amc": {"source": "synthetic"}, "math_l4": {"source": "synthetic"}},
    "arms": ["majority", "ec", "cisc", "core"],
    "seeds": [0],
    "engine": {}, "rollouts": {}, "consensus": {},
    "report": {"tables": {"table1": ["m1"], "table3": ["m2"]}, "labels": {"math_l4": "MATH-L4"}},
}


def _snakemake(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _jobs(dry_run_output: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in dry_run_output.splitlines() if line.startswith("rule ")}


@pytest.mark.slow
def test_workflow_targets_manifest_report_and_tamper(tmp_path):
    import yaml

    from concord import plots, tables

    outputs = [str(p) for m in WF_CONFIG["models"] for b in WF_CONFIG["benchmarks"]
               for p in [plots.recovery_path("results", m, b)]
               + tables.eval_paths("results", [m], [b], tables.ARMS, WF_CONFIG["seeds"])]
    (tmp_path / "Snakefile").write_text(WORKFLOW.format(repo=REPO, outputs=", ".join(repr(o) for o in outputs)))
    (tmp_path / "make_fake.py").write_text(MAKE_FAKE)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(WF_CONFIG))
    (tmp_path / "seed.txt").write_text("1\n")

    # A named target plans only itself and what it reads.
    proc = _snakemake("-n", "table1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert _jobs(proc.stdout) == {"fake_results", "table1"}

    proc = _snakemake("-c2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    results = tmp_path / "results"
    for name in ("table1.csv", "table1.md", "table1.tex", "table3.tex"):
        assert (results / "tables" / name).is_file()
    for name in ("figure4", "figure5a", "figure5b"):
        assert (results / "figures" / f"{name}.png").is_file() and (results / "figures" / f"{name}.pdf").is_file()

    # Every artifact is in the manifest the onsuccess handler wrote, with its producing rule.
    manifest = io.read_json(results / "manifest.json")
    rules = {path: entry["rule"] for path, entry in manifest["artifacts"].items()}
    assert rules["tables/table1.csv"] == "table1" and rules["figures/figure5b.pdf"] == "figure5b"
    assert rules["eval/m1/amc/core/seed0.json"] == "fake_results"
    assert manifest["artifacts"]["eval/m1/amc/core/seed0.json"]["inputs"][0]["path"] == "seed.txt"
    assert manifest["config"]["report"]["tables"] == WF_CONFIG["report"]["tables"]
    proc = _cli("audit", "verify", "results", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout

    proc = _snakemake("--report", "results/report.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = (results / "report.html").read_text(encoding="utf-8", errors="replace")
    for text in ("Figure 4, the recovery region", "confidence factorial", "Table 3: final pass", '"Figures"', '"Tables"'):
        assert text in html, text

    # Tamper with one evaluation: the manifest check names it and everything built from it.
    (results / "eval/m1/math_l4/core/seed0.json").write_text('{"pass_at_1": 1.0}')
    proc = _cli("audit", "verify", "results", "--json", cwd=tmp_path)
    assert proc.returncode == 1
    found = json.loads(proc.stdout)
    assert found["modified"] == ["eval/m1/math_l4/core/seed0.json"]
    assert {"tables/table1.csv", "figures/figure5a.png", "figures/figure5b.png"} <= set(found["stale"])
    assert not any(p.startswith("tables/table3") for p in found["stale"])  # table3 never read it
