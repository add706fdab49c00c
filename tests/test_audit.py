"""The run manifest: register (job time), record (with Snakemake's metadata), verify -- and
tampering, config edits and removed intermediates are told apart, exactly."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from concord import audit, io, provenance
from support import REPO
from support.snakemake import job_env, snakemake


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """A small results tree: data -> rollouts -> eval -> table, plus a model directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONCORD_CODE_VERSION", "test-version")
    provenance.code_version.cache_clear()  # an earlier test may have cached the git version
    r = Path("results")
    io.write_text(r / "data/bench.jsonl", '{"id": 1}\n')
    audit.register([r / "data/bench.jsonl"], rule="data")
    io.write_text(Path("config.yaml"), "n: 8\n")  # an input outside the results tree
    io.write_text(r / "models/m/config.json", "{}")
    io.write_text(r / "models/m/weights.bin", "0123")
    audit.register([r / "models/m"], rule="model")
    io.write_text(r / "rollouts/m/bench/seed0.parquet", "rows")
    audit.register([r / "rollouts/m/bench/seed0.parquet"], rule="rollout",
                   inputs=[r / "data/bench.jsonl", r / "models/m", "config.yaml"])
    io.write_json(r / "eval/m/bench/core/seed0.json", {"pass_at_1": 0.5})
    audit.register([r / "eval/m/bench/core/seed0.json"], rule="evaluate", inputs=[r / "rollouts/m/bench/seed0.parquet"])
    io.write_text(r / "tables/table1.csv", "a,b\n")
    io.write_text(r / "tables/table1.md", "| a |\n")
    audit.register([r / "tables/table1.csv", r / "tables/table1.md"], rule="table1",
                   inputs=[r / "eval/m/bench/core/seed0.json"])
    audit.write_manifest(r, config={"n": 8})
    yield r
    provenance.code_version.cache_clear()


def test_clean_tree_verifies(tree):
    report = audit.verify(tree)
    assert report.ok and report.exit_code() == audit.EXIT_OK, report.format()
    manifest = io.read_json(tree / "manifest.json")
    assert set(manifest["artifacts"]) == {
        "data/bench.jsonl", "models/m", "rollouts/m/bench/seed0.parquet", "eval/m/bench/core/seed0.json",
        "tables/table1.csv", "tables/table1.md",
    }
    assert report.checked == 6 and report.untracked == []
    roll = manifest["artifacts"]["rollouts/m/bench/seed0.parquet"]
    assert roll["rule"] == "rollout" and roll["code_version"] == "test-version"
    assert [i["root"] for i in roll["inputs"]] == ["results", "results", "workdir"]
    assert roll["env"]["python"] and len(roll["env"]["packages_sha256"]) == 64
    assert roll["params"] is None and roll["snakemake_metadata"] is False  # registered outside Snakemake


def test_the_environment_names_each_distribution_as_importlib_metadata_does():
    # Read from each distribution's header block only (its long description skipped): the same
    # name and version importlib.metadata parses from the whole file, for every installed one.
    from importlib import metadata

    dists = list(metadata.distributions())
    assert len(dists) > 50
    for dist in dists:
        assert provenance._name_and_version(dist) == (dist.metadata["Name"], dist.version), dist._path
    provenance.environment.cache_clear()
    packages = sorted({f"{d.metadata['Name']}=={d.version}".lower() for d in dists if d.metadata["Name"]})
    env = provenance.environment()
    assert env["packages"] == len(packages)
    assert env["packages_sha256"] == hashlib.sha256("\n".join(packages).encode()).hexdigest()


def test_tampered_file_is_modified_and_dependents_stale(tree):
    (tree / "eval/m/bench/core/seed0.json").write_text('{"pass_at_1": 0.9}\n')
    report = audit.verify(tree)
    assert report.modified == ["eval/m/bench/core/seed0.json"]
    assert set(report.stale) == {"tables/table1.csv", "tables/table1.md"}
    assert "input eval/m/bench/core/seed0.json changed" in report.stale["tables/table1.csv"]
    assert report.exit_code() == audit.EXIT_MODIFIED


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


def test_directory_hash_ignores_snakemakes_timestamp_but_not_content(tree):
    # Snakemake writes .snakemake_timestamp into a directory output after the job registered it.
    (tree / "models/m/.snakemake_timestamp").write_text("")
    assert audit.verify(tree).ok
    (tree / "models/m/weights.bin").write_text("9999")
    report = audit.verify(tree)
    assert report.modified == ["models/m"]
    assert "rollouts/m/bench/seed0.parquet" in report.stale
    assert report.untracked == []  # files of a registered directory are covered by it


def test_input_hash_is_reused_only_while_the_input_is_untouched(tree, monkeypatch):
    calls = []
    real = provenance.sha256_path
    monkeypatch.setattr(provenance, "sha256_path", lambda p: calls.append(Path(p).name) or real(p))
    io.write_text(tree / "eval/x.json", "{}")
    audit.register([tree / "eval/x.json"], rule="x", inputs=[tree / "models/m"])
    assert calls == ["x.json"]  # the model directory's recorded hash was reused
    os.utime(tree / "models/m/weights.bin", ns=(1, 1))
    audit.register([tree / "eval/x.json"], rule="x", inputs=[tree / "models/m"])
    assert "m" in calls


def test_missing_artifact_and_missing_input(tree):
    (tree / "tables/table1.md").unlink()
    Path("config.yaml").unlink()
    report = audit.verify(tree)
    assert report.missing == ["tables/table1.md"]
    assert report.stale["rollouts/m/bench/seed0.parquet"] == ["input workdir:config.yaml is gone"]
    assert report.exit_code() == audit.EXIT_MODIFIED


def test_removed_intermediate_is_not_missing(tree):
    facts = audit.WorkflowFacts(temp_patterns=[r"results/models/(?P<model>[^/]+)"])
    audit.write_manifest(tree, facts=facts)
    shutil.rmtree(tree / "models/m")
    report = audit.verify(tree)
    assert report.ok, report.format()
    assert report.intermediate == ["models/m"] and report.missing == []
    entry = io.read_json(tree / "manifest.json")["artifacts"]["models/m"]
    assert entry["intermediate"] and len(entry["sha256"]) == 64  # its hash stays on record
    # Without the temp() flag the same removal is a missing artifact.
    audit.write_manifest(tree)
    assert audit.verify(tree).missing == ["models/m"]


def test_untracked_files_are_listed(tree):
    io.write_text(tree / "figures/extra.png", "x")
    io.write_text(tree / "logs/rule/x.log", "diagnostics are not artifacts")
    report = audit.verify(tree)
    assert report.ok and report.untracked == ["figures/extra.png"]
    assert report.exit_code(strict=True) == audit.EXIT_UNTRACKED


def test_copied_tree_still_verifies(tree, tmp_path):
    copy = tmp_path / "elsewhere" / "results"
    shutil.copytree(tree, copy)
    assert audit.verify(copy).ok


def test_a_tree_from_another_processor_is_named_as_such(tree, monkeypatch):
    """Intact, current files made on another CPU (here: registered as an AVX-512 BF16 machine)
    are neither clean nor stale: their own status, exit code and a line naming both processors."""
    from concord import hardware

    assert audit.verify(tree).exit_code() == audit.EXIT_OK  # made here
    here = hardware.processor()
    other = {**here, "cpu_model": "Other CPU 9000", "native_bf16": not here["native_bf16"],
             "torch_cpu_capability": "AVX512" if here["torch_cpu_capability"] != "AVX512" else "AVX2"}
    with monkeypatch.context() as there:
        there.setattr(hardware, "processor", lambda: other)
        io.write_json(tree / "eval/m/bench/core/seed0.json", {"pass_at_1": 0.5})  # rerun there: same bytes
        audit.register([tree / "eval/m/bench/core/seed0.json"], rule="evaluate",
                       inputs=[tree / "rollouts/m/bench/seed0.parquet"])
        audit.write_manifest(tree, config={"n": 8})

    report = audit.verify(tree)
    assert report.ok and not report.stale and not report.modified
    assert report.exit_code() == audit.EXIT_OTHER_PROCESSOR
    assert report.other_processor == {hardware.processor_label(other): ["eval/m/bench/core/seed0.json"]}
    text = report.format()
    assert "OTHER PROCESSOR: 1 artifact(s) produced on Other CPU 9000" in text and here["cpu_model"] in text
    assert report.to_dict()["other_processor"]
    # A modified file still outranks the processor: the tree differs from its record.
    io.write_text(tree / "tables/table1.csv", "tampered\n")
    assert audit.verify(tree).exit_code() == audit.EXIT_MODIFIED


def test_a_tree_made_with_other_accelerators_is_named_as_such(tree, monkeypatch):
    """A job on a GPU node records its GPUs (model, count, CUDA, driver); verifying the tree
    where other accelerators are (here: none) gives the processor's exit code and names both."""
    from concord import hardware

    here = hardware.accelerators()
    assert set(here) == {"gpus", "gpu_count", "cuda", "driver"}
    h200 = {"gpus": ["NVIDIA H200"] * 8, "gpu_count": 8, "cuda": "12.8", "driver": "570.86.15"}
    with monkeypatch.context() as node:
        node.setattr(hardware, "accelerators", lambda: h200)
        io.write_json(tree / "eval/m/bench/core/seed0.json", {"pass_at_1": 0.5})
        audit.register([tree / "eval/m/bench/core/seed0.json"], rule="evaluate",
                       inputs=[tree / "rollouts/m/bench/seed0.parquet"])
        audit.write_manifest(tree, config={"n": 8})
        prov = provenance.record(step="evaluate")
    assert prov["accelerators"] == h200 and set(prov["software"]) >= {"torch", "transformers", "trl", "vllm"}

    report = audit.verify(tree)
    assert report.ok and report.exit_code() == audit.EXIT_OTHER_PROCESSOR
    assert report.other_accelerators == {"8 x NVIDIA H200 (CUDA 12.8, driver 570.86.15)": ["eval/m/bench/core/seed0.json"]}
    assert "OTHER ACCELERATORS: 1 artifact(s) produced with 8 x NVIDIA H200" in report.format()
    assert report.to_dict()["other_accelerators"]


def test_register_errors_name_the_problem(tree):
    with pytest.raises(ValueError, match="not inside the results directory"):
        audit.register(["config.yaml"], rule="x")
    with pytest.raises(FileNotFoundError, match="output does not exist"):
        audit.register([tree / "nope.json"], rule="x")
    with pytest.raises(FileNotFoundError, match="input does not exist"):
        audit.register([tree / "tables/table1.csv"], rule="x", inputs=["nope.txt"])
    with pytest.raises(FileNotFoundError, match="no manifest"):
        audit.verify(tree / "models")


def test_params_change_is_described_by_config_key():
    old = ["'{\"n\": 8, \"temperature\": 1.0}'", "'synthetic'"]
    new = ["'{\"n\": 4, \"temperature\": 1.0}'", "'synthetic'"]
    assert audit.describe_params_change(old, new) == "n: 8 -> 4"
    assert audit.describe_params_change(["'a'"], ["'b'"]) == '(value): "a" -> "b"'
    # a scalar param takes its rule's name for it (Snakemake records values only)
    assert audit.describe_params_change(["500", "'x'"], ["400", "'x'"], names={"400": "n_resamples"}) == \
        "n_resamples: 500 -> 400"


def _cli(*args, cwd) -> subprocess.CompletedProcess:
    env = job_env(CONCORD_CODE_VERSION="test-version")
    return subprocess.run([sys.executable, "-m", "concord", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_register_record_verify_and_tamper(tmp_path):
    r = tmp_path / "results"
    io.write_text(r / "eval/m/b/core/seed0.json", '{"pass_at_1": 0.25}\n')
    io.write_text(r / "tables/table1.csv", "x\n")
    proc = _cli("audit", "register", "--rule", "table1", "--outputs", "results/tables/table1.csv",
                "--inputs", "results/eval/m/b/core/seed0.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _cli("audit", "record", "results", cwd=tmp_path).returncode == 0
    proc = _cli("audit", "verify", "results", cwd=tmp_path)
    assert proc.returncode == 0 and "0 missing, 0 modified, 0 stale" in proc.stdout, proc.stdout + proc.stderr

    (r / "tables/table1.csv").write_text("y\n")  # tamper
    proc = _cli("audit", "verify", "results", "--json", cwd=tmp_path)
    assert proc.returncode == audit.EXIT_MODIFIED
    assert json.loads(proc.stdout)["modified"] == ["tables/table1.csv"]

    io.write_text(r / "tables/table1.csv", "x\n")  # restore
    io.write_text(r / "notes.txt", "hand-written\n")
    assert _cli("audit", "verify", "results", cwd=tmp_path).returncode == 0
    proc = _cli("audit", "verify", "results", "--strict", cwd=tmp_path)
    assert proc.returncode == audit.EXIT_UNTRACKED and "UNTRACKED notes.txt" in proc.stdout

    proc = _cli("audit", "verify", "nowhere", cwd=tmp_path)
    assert proc.returncode == audit.EXIT_CANNOT_VERIFY and "no manifest" in proc.stderr


# ------------------------------------------------------------------ a real (tiny) Snakemake run

TINY_WORKFLOW = """
import json
from concord.audit import register_command

configfile: "config.yaml"
RESULTS = "results"


def audited(command):
    return command + register_command(RESULTS)


def intermediate(path):
    return path if config.get("keep_models") else temp(path)


rule all:
    input: "results/tables/t.csv"
    default_target: True

rule source:
    output: "results/data/d.txt"
    params: a=lambda wc: json.dumps(config["a"])
    shell: audited("echo {params.a:q} > {output:q}")

rule model:
    input: "results/data/d.txt"
    output: intermediate(directory("results/models/m"))
    shell: audited("mkdir -p {output} && cp {input} {output}/w.bin")

rule consume:
    input: model="results/models/m", data="results/data/d.txt"
    output: "results/eval/e.json"
    shell: audited("cat {input.model}/w.bin {input.data} > {output:q}")

rule table:
    input: "results/eval/e.json"
    output: "results/tables/t.csv"
    params: b=lambda wc: json.dumps(config["b"])
    shell: audited("cat {input:q} > {output:q} && echo {params.b:q} >> {output:q}")

include: "RULES/audit.smk"
"""


def _snakemake(*args, cwd) -> subprocess.CompletedProcess:
    """Snakemake on the Snakefile in ``cwd``."""
    return snakemake(cwd, *args, snakefile=None, timeout=300)


def _tiny(tmp_path, **config) -> Path:
    (tmp_path / "Snakefile").write_text(TINY_WORKFLOW.replace("RULES", str(REPO / "rules")))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"a": {"x": 1}, "b": {"y": 2}, **config}))
    proc = _snakemake("-c1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return tmp_path / "results"


def _verify(tmp_path) -> tuple[int, dict]:
    proc = _cli("audit", "verify", "results", "--json", cwd=tmp_path)
    assert proc.returncode != audit.EXIT_CANNOT_VERIFY, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.slow
def test_snakemake_run_verifies_clean_then_tamper_and_config_edit_are_exact(tmp_path):
    results = _tiny(tmp_path)
    manifest = io.read_json(results / "manifest.json")["artifacts"]
    # Snakemake's own record of every output is in the manifest, next to the content hashes.
    assert {p: e["rule"] for p, e in manifest.items()} == {
        "data/d.txt": "source", "models/m": "model", "eval/e.json": "consume", "tables/t.csv": "table"}
    assert manifest["tables/t.csv"]["params"] == [repr(json.dumps({"y": 2}))]
    assert manifest["eval/e.json"]["input_set"] == ["results/data/d.txt", "results/models/m"]
    assert all(e["snakemake_metadata"] and len(e["code_sha256"]) == 64 for e in manifest.values())
    # The trained-model stand-in is temp(): removed after use, still on record, not missing.
    assert not (results / "models/m").exists() and manifest["models/m"]["intermediate"]
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_OK and found["intermediate"] == ["models/m"] and found["planned"], found

    # One changed byte: that file is modified, what was built from it stale, exit 4.
    original = (results / "eval/e.json").read_bytes()
    (results / "eval/e.json").write_bytes(b"Z" + original[1:])
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_MODIFIED
    assert found["modified"] == ["eval/e.json"] and list(found["stale"]) == ["tables/t.csv"]
    (results / "eval/e.json").write_bytes(original)

    # One config value: stale exactly the rule whose params carry it, and what is downstream.
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"a": {"x": 1}, "b": {"y": 3}}))
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_STALE and found["modified"] == [] and found["missing"] == []
    assert found["stale"] == {"tables/t.csv": ["config changed (y: 2 -> 3)"]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"a": {"x": 7}, "b": {"y": 2}}))
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_STALE
    assert found["stale"]["data/d.txt"] == ["config changed (x: 1 -> 7)"]
    assert set(found["stale"]) == {"data/d.txt", "models/m", "eval/e.json", "tables/t.csv"}

    # The same check as a Snakemake target: fails on the edited config, passes on the original.
    proc = _snakemake("-c1", "audit", cwd=tmp_path)
    assert proc.returncode != 0 and "STALE     data/d.txt: config changed (x: 1 -> 7)" in proc.stdout + proc.stderr
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"a": {"x": 1}, "b": {"y": 2}}))
    proc = _snakemake("-c1", "audit", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_kept_models_are_directories_hashed_like_at_registration(tmp_path):
    results = _tiny(tmp_path, keep_models=True)
    assert (results / "models/m/.snakemake_timestamp").is_file()  # Snakemake wrote it after the job
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_OK and found["intermediate"] == [] and found["modified"] == [], found
    (results / "models/m/w.bin").write_text("changed")
    code, found = _verify(tmp_path)
    assert code == audit.EXIT_MODIFIED and found["modified"] == ["models/m"]
    assert set(found["stale"]) == {"eval/e.json", "tables/t.csv"}


# ------------------------------------------------------------------ a real Snakemake run

WORKFLOW = '''
from snakemake.utils import validate
from concord.audit import register_command

configfile: "config.yaml"
validate(config, "{repo}/config/schema.yaml")
include: "{repo}/rules/common.smk"
include: "{repo}/rules/core/common.smk"
include: "{repo}/rules/core/tables.smk"
include: "{repo}/rules/audit.smk"

rule all:
    input: report_targets()
    default_target: True

rule fake_results:
    input: "seed.txt"
    output: {outputs}
    log: "results/logs/fake_results.log"
    shell: "python make_fake.py {{output}} 2> {{log}}" + register_command("results")
'''

MAKE_FAKE = '''
import hashlib, json, sys
for path in sys.argv[1:]:
    x = int(hashlib.sha256(path.encode()).hexdigest()[:8], 16) / 16**8
    if path.endswith("recovery.json"):
        payload = {"outnumbering_ratio": 1 + 3 * x, "coherence_advantage": 0.5 + 2 * x,
                   "confidence_gap_nats": 0.3, "tau": 0.25, "recovered": int(10 * x), "n_questions": 10}
    else:
        n = round(16 * x)  # one question, 16 samples: the tables' paired tests read per-question records
        payload = {"pass_at_1": n / 16, "k": 16, "per_question": [{"id": "q0", "n_correct": n, "k": 16}]}
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


def _jobs(dry_run_output: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in dry_run_output.splitlines() if line.startswith("rule ")}


@pytest.mark.slow
def test_workflow_targets_manifest_report_and_tamper(tmp_path):
    import yaml

    from concord.papers.core import figures as plots
    from concord.papers.core import tables

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
    for text in ("Figure 4", "confidence factorial", "Table 3: final pass", '"CoRE paper"', '<table border='):
        assert text in html, text

    # Tamper with one evaluation: the manifest check names it and everything built from it.
    (results / "eval/m1/math_l4/core/seed0.json").write_text('{"pass_at_1": 1.0}')
    proc = _cli("audit", "verify", "results", "--json", cwd=tmp_path)
    assert proc.returncode == audit.EXIT_MODIFIED
    found = json.loads(proc.stdout)
    assert found["modified"] == ["eval/m1/math_l4/core/seed0.json"]
    assert {"tables/table1.csv", "figures/figure5a.png", "figures/figure5b.png"} <= set(found["stale"])
    assert not any(p.startswith("tables/table3") for p in found["stale"])  # table3 never read it


# ------------------------------------------------------------------ the repository's workflow


def _tiny_training_config(**extra) -> dict:
    config = {
        "models": {"tiny": {"source": "tiny-random", "family": "Tiny", "prompt_style": "instruct"}},
        "benchmarks": {"synthetic": {"source": "synthetic", "task": "math", "n_questions": 4, "seed": 0}},
        "arms": ["majority"], "seeds": [0],
        "engine": {"backend": "hf", "dtype": "float32", "batch_size": 16},
        "rollouts": {"n": 2, "max_new_tokens": 8},
        "consensus": {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200},
    }
    config["training"] = {"n_vote": 2, "n_train": 2, "prompts_per_step": 1, "max_steps": 1, "max_completion_length": 8,
                          "gradient_checkpointing": False, "gpus": 0, "threads": 1, "eval_every": 0,
                          "eval_at_start": False, "save_every": 1}
    config["evaluation"] = {"k": 1, "max_new_tokens": 8, "max_questions": 2}
    return {**config, **extra}


@pytest.mark.slow
def test_trained_models_are_intermediate_by_default_and_still_audited(tmp_path):
    target = "results/eval/tiny/synthetic/majority/seed0.json"
    proc = snakemake(tmp_path, "-c1", target, config=_tiny_training_config())
    assert proc.returncode == 0, proc.stderr[-5000:]
    results = tmp_path / "results"
    train = results / "train/tiny/synthetic/majority/seed0"
    assert not (train / "model").exists()  # temp(): removed once its evaluation ran
    assert (train / "log.jsonl").is_file() and (train / "provenance.json").is_file()  # the run's record stays
    entry = io.read_json(results / "manifest.json")["artifacts"]["train/tiny/synthetic/majority/seed0/model"]
    assert entry["intermediate"] and entry["rule"] == "train" and len(entry["sha256"]) == 64
    assert any(i["path"] == "train/tiny/synthetic/majority/seed0/model"
               for i in io.read_json(results / "manifest.json")["artifacts"][target.removeprefix("results/")]["inputs"])
    proc = _cli("audit", "verify", "results", "--json", "--snakefile", str(REPO / "Snakefile"),
                "--configfile", "config.yaml", "--targets", target, cwd=tmp_path)
    found = json.loads(proc.stdout)
    assert proc.returncode == audit.EXIT_OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert found["intermediate"] == ["train/tiny/synthetic/majority/seed0/model"] and found["missing"] == []

    # One switch keeps them: the same output is no longer temp() in the plan.
    (tmp_path / "keep.yaml").write_text(yaml.safe_dump(_tiny_training_config(keep_trained_models=True)))
    kept = audit.plan(REPO / "Snakefile", tmp_path, [tmp_path / "keep.yaml"], [target])
    default = audit.plan(REPO / "Snakefile", tmp_path, [tmp_path / "config.yaml"], [target])
    model = "results/train/tiny/synthetic/majority/seed0/model"
    assert default.outputs[model].temp and not kept.outputs[model].temp
