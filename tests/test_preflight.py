"""Planning fails fast and briefly: schema errors in a few lines, config paths that do not exist
named before any job runs (real `snakemake -n` on the repository's Snakefile)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from concord import preflight
from support import REPO
from support.snakemake import snakemake


def _default_config() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


def _dry_run(tmp_path: Path, config: dict) -> subprocess.CompletedProcess:
    return snakemake(tmp_path, "-n", config=config, timeout=300)


def _schema_error(config: dict) -> str:
    with pytest.raises(preflight.ConfigError) as info:
        preflight.validate_config(config, REPO / "config/schema.yaml")
    return str(info.value)


def test_misspelled_top_level_key_names_it_and_the_allowed_keys():
    config = _default_config()
    config["rollout"] = config.pop("rollouts")
    message = _schema_error(config)
    assert len(message.splitlines()) == 3
    assert "unknown key 'rollout' at the top level" in message
    assert "rule broken: additionalProperties" in message
    assert "allowed: keys " in message and "rollouts" in message.splitlines()[2]


def test_out_of_range_and_enum_values_name_key_rule_and_allowed():
    config = _default_config()
    config["rollouts"]["n"] = 0
    message = _schema_error(config)
    assert message.startswith("Invalid config: rollouts.n = 0") and "minimum" in message
    assert "allowed: integer, minimum 1" in message
    config = _default_config()
    config["arms"] = ["majority", "cor"]
    message = _schema_error(config)
    assert 'arms[1] = "cor"' in message and '"core"' in message.splitlines()[2]


def test_valid_config_gets_schema_defaults():
    config = _default_config()
    preflight.validate_config(config, REPO / "config/schema.yaml")
    assert config["engine"]["tensor_parallel_size"] == 1  # filled from the schema's default


def test_missing_paths_are_named_with_their_config_keys(tmp_path):
    (tmp_path / "present.json").write_text("[]")
    config = {"benchmarks": {"a": {"source": "ttrl_json", "path": "present.json"},
                             "b": {"source": "ttrl_json", "path": "data/absent.json"}},
              "models": {"m": {"source": "local", "id": "ckpt/missing"}, "h": {"source": "hub", "id": "org/x"}},
              "scmoa": {"benchmarks": {"s": {"format": "bbh", "path": "data/bbh"}}}}
    assert preflight.missing_paths(config, tmp_path) == [
        ("benchmarks.b.path", "data/absent.json"), ("models.m.id", "ckpt/missing"),
        ("scmoa.benchmarks.s.path", "data/bbh")]
    with pytest.raises(preflight.ConfigError, match="3 file"):
        preflight.check_paths(config, tmp_path)


@pytest.mark.slow
def test_dry_run_fails_fast_on_a_missing_benchmark_path_and_briefly_on_schema_errors(tmp_path):
    config = _default_config()
    config["benchmarks"]["aime"] = {"source": "ttrl_json", "path": "data/ttrl/AIME-TTT/test.json"}
    proc = _dry_run(tmp_path, config)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "benchmarks.aime.path: data/ttrl/AIME-TTT/test.json" in out and "do not exist" in out
    assert len(out.splitlines()) < 15, out

    (tmp_path / "data/ttrl/AIME-TTT").mkdir(parents=True)
    (tmp_path / "data/ttrl/AIME-TTT/test.json").write_text("[]")
    proc = _dry_run(tmp_path, config)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]

    config["rollout"] = config.pop("rollouts")
    proc = _dry_run(tmp_path, config)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "unknown key 'rollout' at the top level" in out
    assert len(out.splitlines()) < 15, out  # not the whole schema and config
