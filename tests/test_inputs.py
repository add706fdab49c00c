"""Inputs only the user can supply: what is missing, and the plan-time message."""

from __future__ import annotations

import pytest

from concord.inputs import MissingInputError, check_inputs, missing_inputs

PAPERS = {
    "fmv": {"enabled": True, "benchmarks": {"lcb_v6": {"source": "livecodebench", "path": "lcb.jsonl"}}},
    "scmoa": {"models": ["gpt-oss-120b"], "server": {"base_url": "http://127.0.0.1:8000/v1"},
              "benchmarks": {"bbh": {"path": "bbh"}, "aime": {"path": "aime.jsonl"}}},
}


def test_a_local_run_checks_only_files(tmp_path):
    found = missing_inputs(PAPERS, workdir=tmp_path)
    assert [m.what for m in found] == ["LiveCodeBench release file (FMV)", "SC-MoA benchmark files"]
    assert "aime.jsonl, bbh not found" in found[1].fix
    (tmp_path / "lcb.jsonl").write_text("")
    (tmp_path / "bbh").mkdir()
    (tmp_path / "aime.jsonl").write_text("")
    assert missing_inputs(PAPERS, workdir=tmp_path) == []  # loopback endpoint is fine on one machine


def test_a_cluster_run_needs_an_account_and_a_reachable_endpoint(tmp_path):
    for name in ("lcb.jsonl", "aime.jsonl"):
        (tmp_path / name).write_text("")
    (tmp_path / "bbh").mkdir()
    found = missing_inputs(PAPERS, account="YOUR_ACCOUNT", workdir=tmp_path)
    assert [m.what for m in found] == ["SLURM account", "SC-MoA model endpoint"]
    reachable = {**PAPERS, "scmoa": {**PAPERS["scmoa"], "server": {"base_url": "http://node7:8000/v1"}}}
    assert missing_inputs(reachable, account="proj1", workdir=tmp_path) == []


def test_a_disabled_paper_needs_nothing(tmp_path):
    config = {"fmv": {**PAPERS["fmv"], "enabled": False}}
    assert missing_inputs(config, workdir=tmp_path) == []


def test_the_message_is_short_and_says_how_to_run_the_other_papers(tmp_path):
    with pytest.raises(MissingInputError) as err:
        check_inputs(PAPERS, account="", workdir=tmp_path)
    lines = str(err.value).splitlines()
    assert len(lines) == 6
    assert lines[-1] == ("Or run the other papers: without FMV: --configfile config/paper.yaml config/paper_scmoa.yaml; "
                         "without SC-MoA: --configfile config/paper.yaml config/paper_fmv.yaml; "
                         "CoRE alone: --configfile config/paper.yaml")


def test_sc_moa_endpoints_still_placeholders_or_on_loopback_are_named(tmp_path):
    (tmp_path / "bbh").mkdir()
    (tmp_path / "aime.jsonl").write_text("")
    scmoa = {**PAPERS["scmoa"], "server": {},
             "endpoints": {"gpt-oss-120b": {"base_url": "http://YOUR-GPU-NODE:8000/v1", "model": "openai/gpt-oss-120b"},
                           "llama-3.1-8b": {"base_url": "http://127.0.0.1:8002/v1", "model": "m"}}}
    found = missing_inputs({"scmoa": scmoa}, workdir=tmp_path)
    assert [m.what for m in found] == ["SC-MoA model endpoint"]
    assert "scmoa.endpoints.gpt-oss-120b.base_url (http://YOUR-GPU-NODE:8000/v1)" in found[0].fix
    scmoa["endpoints"]["gpt-oss-120b"]["base_url"] = "http://node7:8000/v1"
    assert missing_inputs({"scmoa": scmoa}, workdir=tmp_path) == []  # one machine: loopback is fine
    found = missing_inputs({"scmoa": scmoa}, account="proj1", workdir=tmp_path)
    assert "scmoa.endpoints.llama-3.1-8b.base_url (http://127.0.0.1:8002/v1): a loopback address" in found[0].fix
