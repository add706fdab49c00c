"""The code CLI end to end: LiveCodeBench fixture -> candidates -> sandboxed execution ->
GenCluster (real tiny engine) -> analysis (real MiniLM) -> Figure 2 and Tables 1-2; plus
generation and one real TTRL step with a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from concord import io
from concord.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "lcb_release_v6_sample.jsonl"

GOOD_SUM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
BAD_SUM = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
CRASH = "```python\nprint(undefined_name)\n```"
GOOD_PAIR = "```python\nclass Solution:\n    def maxPair(self, nums):\n        s = sorted(nums)\n        return s[-1] + s[-2]\n```"
BAD_PAIR = "```python\nclass Solution:\n    def maxPair(self, nums):\n        return 2 * max(nums)\n```"
GOOD_HALF = "```python\nprint(int(input()) / 2)\n```"
BAD_HALF = "```python\nprint(int(input()) // 2)\n```"

CANDIDATES = {
    # FMV picks the majority behaviour; mean@4 = 0.5, best@4 = 1
    "abc900_a": [BAD_SUM, GOOD_SUM, GOOD_SUM, CRASH],
    # the majority is wrong here: FMV fails, best@4 still 1
    "9001": [BAD_PAIR, BAD_PAIR, GOOD_PAIR, BAD_PAIR],
    "cf1_a": [GOOD_HALF, GOOD_HALF, BAD_HALF, "no code"],
}


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir):
    return tiny_model_dir  # conftest's session-wide tiny Llama with SmolLM2's tokenizer


def _candidates(path: Path) -> Path:
    """Candidates generated elsewhere, as JSONL (the drivers read Parquet or JSONL)."""
    rows = [{"question_id": q, "rollout_idx": i, "text": t, "n_tokens": 10, "finish_reason": "stop", "confidence": -1.0}
            for q, texts in CANDIDATES.items() for i, t in enumerate(texts)]
    io.write_jsonl(path, rows)
    return path


def test_cli_pipeline_on_fixed_candidates(tmp_path, tiny_model):
    data = tmp_path / "data" / "lcb.jsonl"
    spec = json.dumps({"source": "livecodebench", "path": str(FIXTURE)})
    assert main(["fmv-data", "--benchmark-spec", spec, "--out", str(data)]) == 0
    assert [r["id"] for r in io.read_jsonl(data)] == ["abc900_a", "9001", "cf1_a"]

    cands = _candidates(tmp_path / "cand.jsonl")
    exec_path = tmp_path / "exec.parquet"
    assert main(["fmv-execute", "--data", str(data), "--candidates", str(cands), "--out", str(exec_path),
                 "--exec", json.dumps({"timeout_s": 3, "memory_mb": 512})]) == 0
    table = pd.read_parquet(exec_path)
    assert table.groupby("question_id", sort=False)["passed"].apply(list).to_dict() == {
        "abc900_a": [False, True, True, False], "9001": [False, False, True, False], "cf1_a": [True, True, False, False],
    }
    assert io.read_parquet_metadata(exec_path)["step"] == "fmv-execute"

    gc = tmp_path / "gencluster.json"
    # the random tiny judge writes no verdicts: allowed here (max_unparsed_fraction 1), and counted
    spec = {"rounds": 2, "max_clusters": 3, "representative": "longest", "max_unparsed_fraction": 1.0,
            "judge": {"max_new_tokens": 2, "temperature": 0.0, "top_p": 1.0, "thinking": False,
                      "engine": {"backend": "hf", "batch_size": 8}}}
    assert main(["code-gencluster", "--data", str(data), "--exec-table", str(exec_path), "--model-dir", str(tiny_model),
                 "--candidates", str(cands), "--out", str(gc), "--gencluster", json.dumps(spec)]) == 0
    doc = io.read_json(gc)
    picks = doc["picks"]
    assert set(picks) == set(CANDIDATES) and all(p is None or 0 <= p < 4 for p in picks.values())
    # clusters: abc900_a {1,2} {0}; 9001 {0,1,3} {2}; cf1_a {0,1} {2}: two clusters each -> 2 calls each
    assert doc["judge_calls"] == 6 and doc["unparsed"] + sum(sum(t["wins"]) for t in doc["tournaments"].values()) == 6
    assert doc["judge"]["max_new_tokens"] == 2
    unresolved = {**spec, "judge": {"max_new_tokens": None}}
    with pytest.raises(SystemExit, match="judge.max_new_tokens resolved"):
        main(["code-gencluster", "--data", str(data), "--exec-table", str(exec_path), "--model-dir", str(tiny_model),
              "--candidates", str(cands), "--out", str(gc), "--gencluster", json.dumps(unresolved)])

    analysis = tmp_path / "analysis.json"
    assert main(["fmv-analyze", "--data", str(data), "--exec-table", str(exec_path), "--candidates", str(cands),
                 "--gencluster", str(gc), "--out", str(analysis),
                 "--analysis", json.dumps({"n_values": [1, 2, 4], "n_subsamples": 5, "n_resamples": 200})]) == 0
    result = io.read_json(analysis)
    methods = result["methods"]
    assert methods["mean"]["accuracy"] == pytest.approx((0.5 + 0.25 + 0.5) / 3)
    assert methods["best"]["accuracy"] == 1.0
    assert methods["fmv"]["accuracy"] == pytest.approx(2 / 3)  # right on abc900_a and cf1_a, wrong on 9001
    assert {"semantic", "gencluster"} <= set(methods)
    curve = {(r["method"], r["n"]): r["accuracy"] for r in result["scaling"]}
    assert curve[("mean", 1)] == pytest.approx(curve[("fmv", 1)])  # one candidate: FMV is that candidate
    assert curve[("best", 4)] == 1.0 and result["provenance"]["step"] == "fmv-analyze"

    figs = tmp_path / "figs"
    # two seeds of "Tiny=N1" (the same analysis twice): pooled, with the SE over questions and seeds
    assert main(["code-figure2", "--analysis", f"Tiny=N1={analysis}", "--analysis", f"Tiny=N1={analysis}",
                 "--analysis", f"Other={analysis}", "--right", "Tiny=N1", "--out-dir", str(figs),
                 "--n-resamples", "200"]) == 0
    left = pd.read_csv(figs / "figure2_left.csv")
    assert set(left["n_seeds"]) == {1, 2}
    assert left[left["method"] == "fmv"]["accuracy"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert "3 seeds" not in (figs / "figure2_right.md").read_text() and "2 seeds" in (figs / "figure2_right.md").read_text()
    for stem in ("figure2_left", "figure2_right"):
        for ext in ("png", "pdf", "csv", "md", "tex"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 0
    assert "FMV" in (figs / "figure2_left.md").read_text()

    assert main(["fmv-split", "--data", str(data), "--seed", "0", "--train-out", str(tmp_path / "train.jsonl"),
                 "--holdout-out", str(tmp_path / "holdout.jsonl")]) == 0
    train, holdout = io.read_jsonl(tmp_path / "train.jsonl"), io.read_jsonl(tmp_path / "holdout.jsonl")
    assert len(train) == 1 and len(holdout) == 2
    assert sorted(r["id"] for r in train + holdout) == sorted(CANDIDATES)

    stem1 = tmp_path / "tables" / "table1"
    args = ["fmv-table1", "--train-data", str(tmp_path / "train.jsonl"), "--holdout-data", str(tmp_path / "holdout.jsonl"),
            "--n", "4", "--n-resamples", "200", "--out-stem", str(stem1),
            "--labels", json.dumps({"base": "Base", "fmv": "+ FMV TTRL"})]
    for arm in ("base", "fmv"):
        for split in ("train", "holdout"):
            args += ["--exec", f"{arm}:{split}={exec_path}"]
    assert main(args) == 0
    t1 = pd.read_csv(stem1.with_suffix(".csv"))
    assert list(t1["method"]) == ["Base", "+ FMV TTRL"]
    assert list(t1["selection"]) == ["not trained"] * 2  # no --train-provenance given
    with pytest.raises(SystemExit, match="names arms \\['gone'\\]"):
        main(args + ["--train-provenance", f"gone={exec_path}"])
    assert "Hold-Out (mean@4)" in stem1.with_suffix(".md").read_text()
    assert "\\pm" in stem1.with_suffix(".tex").read_text()

    stem2 = tmp_path / "tables" / "table2"
    assert main(["fmv-table2", "--data", str(data), "--exec", f"Base={exec_path}", "--exec", f"+ Joint (N=2)={exec_path}",
                 "--n", "4", "--n-resamples", "200", "--out-stem", str(stem2)]) == 0
    t2 = pd.read_csv(stem2.with_suffix(".csv"))
    assert list(t2["method"]) == ["Base", "+ Joint (N=2)"]
    assert t2["fmv"].iloc[0] == pytest.approx(2 / 3) and t2["best"].iloc[0] == 1.0


def test_generate_and_one_ttrl_step_with_a_tiny_model(tmp_path, tiny_model):
    data = tmp_path / "lcb.jsonl"
    assert main(["fmv-data", "--benchmark-spec", json.dumps({"source": "livecodebench", "path": str(FIXTURE)}),
                 "--out", str(data)]) == 0
    cands = tmp_path / "cand.parquet"
    sampling = json.dumps({"n": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8})
    assert main(["fmv-generate", "--data", str(data), "--model-dir", str(tiny_model), "--out", str(cands),
                 "--sampling", sampling, "--engine", json.dumps({"backend": "hf", "batch_size": 8}), "--seed", "1"]) == 0
    frame = pd.read_parquet(cands)
    assert len(frame) == 6 and set(frame["rollout_idx"]) == {0, 1}
    assert io.read_parquet_metadata(cands)["seed"] == 1

    out = tmp_path / "trained"
    training = {"max_steps": 1, "prompts_per_step": 2, "n_vote": 2, "n_train": 2, "max_completion_length": 8,
                "gradient_checkpointing": False, "eval_every": 0, "eval_at_start": False, "save_every": 1,
                "learning_rate": 1e-6, "lr_scheduler": "constant"}
    assert main(["fmv-train", "--data", str(data), "--model-dir", str(tiny_model), "--out", str(out),
                 "--checkpoint-dir", str(tmp_path / "ckpt"), "--arm", "fmv_pointwise", "--seed", "0",
                 "--training", json.dumps(training), "--exec", json.dumps({"timeout_s": 2, "memory_mb": 512}),
                 "--threads", "1"]) == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    log_rows = io.read_jsonl(out / "log.jsonl")
    assert log_rows and log_rows[-1]["step"] == 1 and "reward" in log_rows[-1]
    assert io.read_json(out / "provenance.json")["arm"] == "fmv_pointwise"
    assert not (tmp_path / "ckpt").exists()  # checkpoints removed after success


def test_generation_refuses_prompts_over_the_prompt_budget(tmp_path, tiny_model):
    data = tmp_path / "lcb.jsonl"
    assert main(["fmv-data", "--benchmark-spec", json.dumps({"source": "livecodebench", "path": str(FIXTURE)}),
                 "--out", str(data)]) == 0
    sampling = json.dumps({"n": 1, "max_new_tokens": 4, "max_prompt_tokens": 64})
    with pytest.raises(ValueError, match=r"3 prompt\(s\) exceed fmv.sampling.max_prompt_tokens = 64 tokens: abc900_a"):
        main(["fmv-generate", "--data", str(data), "--model-dir", str(tiny_model), "--out", str(tmp_path / "c.parquet"),
              "--sampling", sampling, "--engine", json.dumps({"backend": "hf", "batch_size": 8})])
    with pytest.raises(SystemExit, match="unknown key"):
        main(["fmv-generate", "--data", str(data), "--model-dir", str(tiny_model), "--out", str(tmp_path / "c.parquet"),
              "--sampling", json.dumps({"n": 1, "max_tokens": 4}), "--engine", json.dumps({"backend": "hf"})])
