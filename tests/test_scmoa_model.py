"""SC-MoA with a real in-process model (SmolLM2-135M when built, else a tiny random Llama),
the engine chat adapter, and the scmoa-run / scmoa-report commands end to end (tiny random
Llama: the commands' plumbing, not the model's quality, is under test there).

Torch runs single-threaded here: on a shared 2-core machine two threads thrash (5-30x slower)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from concord.chat import CachedChat, EngineChat
from concord.cli import main as cli_main
from concord.papers.scmoa import run_scmoa

SMOLLM2 = Path(__file__).resolve().parents[1] / "results" / "models" / "smollm2-135m"
SAMPLING = {"max_tokens": 24}


@pytest.fixture(scope="module")
def tiny_dir(tiny_model_dir):
    return tiny_model_dir  # conftest's session-wide tiny Llama (seed 0, SmolLM2's tokenizer)


@pytest.fixture(scope="module")
def engine(tiny_dir):
    from concord.engines import load_engine

    model_dir = SMOLLM2 if (SMOLLM2 / "config.json").is_file() else tiny_dir
    return load_engine("hf", model_dir, threads=1, progress=False, batch_size=16)


def test_engine_chat_completes_batches(engine):
    chat = EngineChat(engine, defaults={"max_tokens": 8})
    convs = [[{"role": "user", "content": "Say hi."}], [{"role": "user", "content": "What is 2+2?"}]]
    out = chat.complete_batch(convs)
    assert len(out) == 2 and all(isinstance(c.text, str) for c in out)
    assert all(c.completion_tokens >= 1 and c.prompt_tokens > 5 and c.reasoning is None for c in out)
    assert chat.complete(convs[0]) == chat.complete(convs[0])  # greedy: deterministic


def test_scmoa_with_the_real_model_keeps_its_invariants_and_caches(engine, tmp_path):
    chat = CachedChat(EngineChat(engine), tmp_path / "cache", model_name="model", defaults=SAMPLING)
    result = run_scmoa("What is 3 + 4?", chat, n=3, k=2, task="qa")
    rec = result.record
    assert rec["calls"]["aggregate"] == 1 and rec["calls"]["propose"] == 6
    pre = rec["clusters_pre"]
    for i, lab in enumerate(pre["labels"]):
        if lab == pre["majority"]:
            assert rec["proposals_post"][i]["text"] == rec["proposals_pre"][i]["text"]
    # Minorities are refined against the anchor; without any answered proposal there is none.
    assert rec["calls"]["refine"] == (0 if pre["majority"] is None else 3 - pre["k_max"])
    assert rec["override"] is False  # QA: the override never fires
    # The rerun is served entirely from the cache: no model call, every first-run call a hit
    # (identical prompts inside one batch are generated once but looked up once each).
    assert chat.misses >= 1
    again = CachedChat(EngineChat(engine), tmp_path / "cache", model_name="model", defaults=SAMPLING)
    second = run_scmoa("What is 3 + 4?", again, n=3, k=2, task="qa")
    assert again.misses == 0 and again.hits >= chat.misses
    assert json.dumps(second.record, sort_keys=True) == json.dumps(rec, sort_keys=True)


def test_scmoa_run_and_report_commands(tiny_dir, tmp_path):
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"id": "q1", "prompt": "What is 3 + 4?", "answer": "7", "task": "qa"},
        {"id": "q2", "prompt": "What is 10 - 8?", "answer": "2", "task": "qa"},
        {"id": "c1", "prompt": "Write `inc(x)` returning x + 1.", "answer": None, "task": "code",
         "tests_public": [{"type": "assert", "code": "assert candidate(1) == 2", "entry_point": "inc"}],
         "tests_hidden": [{"type": "assert", "code": "assert candidate(-1) == 0", "entry_point": "inc"}]},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = {"n": 3, "k": 1, "k_sweep": [1, 2], "n_sweep": [2],
                "methods": ["cot", "sc", "sc_temp", "moa", "moa_para", "persona_moa", "self_moa", "textgrad", "goa",
                            "pairwise_judge"],
                "sc_k": 3, "moa_n": 2, "self_moa_k": 2, "persona_moa_n": 2, "textgrad_iterations": 1,
                "diversity_sources": [["persona", 0.0]], "gate_thresholds": [0.6, 1.0],
                "sampling": {"max_tokens": 24}, "code": {"timeout_s": 5, "memory_mb": 512}, "n_resamples": 200}
    out = tmp_path / "records.json"
    settings.update(section3=True, views=["answer_only", "q_only_agg", "minority_only"])
    argv = ["scmoa-run", "--questions", str(questions), "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
            "--model-path", str(tiny_dir), "--model", "tiny", "--threads", "1", "--settings", json.dumps(settings)]
    assert cli_main(argv) == 0
    payload = json.loads(out.read_text())
    assert payload["provenance"]["step"] == "scmoa-run" and len(payload["questions"]) == 3
    # The three questions' calls went to the engine together, phase by phase (concord.chat.lockstep).
    cache = payload["provenance"]["cache"]
    assert cache["engine_rows"] == cache["misses"] and 2 * cache["engine_batches"] < cache["misses"]
    assert payload["provenance"]["dtype"]["tiny"] in {"float32", "bfloat16"}
    q = payload["questions"][2]
    assert q["task"] == "code" and set(q["methods"]) >= {"scmoa", "cot", "sc", "moa", "self_moa", "gated_0.6", "gated_1"}
    assert set(q["k_sweep"]) == {"1", "2"} and len(q["agents_correct"]) == 3 and len(q["sc_correct"]) == 3
    assert {"textgrad", "goa", "goa_max", "persona_moa", "moa_para", "sc_t0.7", "pairwise_judge"} <= set(q["methods"])
    assert "public_pass" in q["methods"]["textgrad"] and set(q["n_sweep"]) == {"2"}
    assert payload["questions"][0]["methods"]["sc"]["calls"] == 3
    assert payload["questions"][0]["methods"]["moa"]["calls"] >= 2 * 2 + 1  # 2N+1, plus its paraphrase call(s)
    first = payload["questions"][0]
    assert first["methods"]["sc"]["usage"]["calls"] == 3 and first["methods"]["sc"]["usage"]["completion_tokens"] >= 3
    assert first["methods"]["scmoa"]["usage"]["calls"] == first["methods"]["scmoa"]["calls"]
    assert set(first["views"]) == {"answer_only", "q_only_agg", "minority_only"}
    assert {"vote", "synth", "vote_correct", "synth_correct"} <= set(first["section3"])
    assert cli_main(argv) == 0  # the rerun is served from the cache
    assert json.loads(out.read_text())["provenance"]["cache"]["misses"] == 0

    report_dir = tmp_path / "report"
    assert cli_main(["scmoa-report", "--records", str(out), "--out-dir", str(report_dir), "--title", "tiny",
                     "--settings", json.dumps(settings)]) == 0
    for stem in ("accuracy", "significance", "flips", "transition", "diversity", "error_correlation", "reliability",
                 "selective", "gating_sweep", "k_sweep", "k_sweep_h1",
                 "table13_significance_all_pairs", "table15_public_private", "table17_error_correlation",
                 "table21_override", "table22_override_decomposition", "table23_oracle", "table26_sampling_protocol",
                 "table27_diversity_source", "table28_tokens", "table40_selection"):
        for ext in ("csv", "md", "tex"):
            assert (report_dir / f"{stem}.{ext}").stat().st_size > 0
    for stem in ("calibration", "transition", "diversity", "sweeps", "figure3_pareto", "figure4b_consensus_gain",
                 "figure6c_n_sweep"):
        for ext in ("png", "pdf"):
            assert (report_dir / f"{stem}.{ext}").stat().st_size > 0
    # The extra tables come one at a time, from runs that collected their data.
    assert not (report_dir / "tables29_30_synthesis_vs_vote.csv").exists()
    assert cli_main(["scmoa-report", "--records", str(out), "--out-dir", str(report_dir), "--only",
                     "tables29_30_synthesis_vs_vote", "--settings", json.dumps(settings)]) == 0
    assert "Synthesis correct" in (report_dir / "tables29_30_synthesis_vs_vote.csv").read_text()
    with pytest.raises(SystemExit, match="table36_trace_ablation needs records of a run with the views"):
        cli_main(["scmoa-report", "--records", str(out), "--out-dir", str(report_dir), "--only",
                  "table36_trace_ablation", "--settings", json.dumps(settings)])
    text = (report_dir / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    summary = json.loads(text)
    assert summary["n_questions"] == 3 and summary["transition_below_diagonal"] == 0
    assert "persona-diverse" in (report_dir / "table17_error_correlation.md").read_text()
    assert "Dawid-Skene" in (report_dir / "table40_selection.md").read_text()
    assert "textgrad" in (report_dir / "table28_tokens.csv").read_text()
    assert summary["provenance"]["inputs"]
