"""A tiny model trains for real: the trainer's training subset, confidences and gate; the
no-gold guarantee; resume after ``kill -9``; whole-group scoring across two processes.

The model is :func:`concord.rl.tiny.build_boxed_tiny_model` (300-token vocabulary, replies
``The answer is \\boxed{d}``, d in 1..3), so every arm sees disagreeing groups and non-zero rewards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from concord.data import write_questions
from concord.io import read_jsonl
from concord.rl.batching import Layout, check_layout, gated_advantages, keep_mask
from concord.rl.rewards import ConsensusReward
from concord.config import resolve_section
from concord.rl.run import build_train_dataset
from concord.rl.settings import grpo_config
from support.data import CONSENSUS, QUESTIONS, TRAINING
from support.fsdp import free_port

pytestmark = [pytest.mark.slow, pytest.mark.transformers]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, boxed_model_dir):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("rl")
    model = boxed_model_dir  # conftest's session-wide boxed tiny model (read-only)
    write_questions(root / "questions.jsonl", QUESTIONS)
    # Same questions and prompts, every gold answer wrong: must not change training one bit.
    write_questions(root / "wrong_gold.jsonl", [{**q, "answer": "999"} for q in QUESTIONS])
    return root, model


def _trainer(model_dir, checkpoint_dir, arm, training=None):
    from transformers import AutoTokenizer

    from concord.rl.trainer import ConsensusGRPOTrainer

    cfg = resolve_section("training", {**TRAINING, **(training or {})})
    layout = check_layout(Layout(cfg["prompts_per_step"], cfg["n_vote"], cfg["n_train"]))
    args = grpo_config(cfg, layout, checkpoint_dir=checkpoint_dir, seed=0, max_steps=cfg["max_steps"], on_gpu=False)
    reward = ConsensusReward(arm, layout.n_vote, CONSENSUS)
    tok = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    trainer = ConsensusGRPOTrainer(model=str(model_dir), args=args, processing_class=tok, consensus_reward=reward,
                                   n_train=layout.n_train, train_dataset=build_train_dataset(QUESTIONS, "instruct", "math"))
    return trainer, reward, layout


def test_one_step_keeps_n_train_gates_advantages_and_scores_confidence(tiny, tmp_path):
    _, model_dir = tiny
    trainer, reward, layout = _trainer(model_dir, tmp_path / "ckpt", "core")
    trainer.model.train()
    batch = next(iter(trainer.get_train_dataloader()))
    assert len(batch) == layout.generation_batch_size == 8 and "answer" not in batch[0]
    out = trainer._generate_and_score_completions(batch)

    scored = reward.last_batch
    keep = keep_mask(8, 4, 2)
    assert out["completion_ids"].shape[0] == out["prompt_ids"].shape[0] == 4  # 2 questions x n_train 2
    assert [g.kept for g in scored.groups] == [[True, False, True, False]] * 2
    gates = np.array([g.gate for g in scored.groups])
    assert np.all((gates > 0) & (gates <= 1)), gates  # CoRE's cohesiveness gate is live
    expected = gated_advantages(scored.rewards, scored.gates, 4, 2)[keep]
    np.testing.assert_allclose(out["advantages"].numpy(), expected, rtol=1e-5, atol=1e-6)
    assert int(out["num_items_in_batch"]) == int(out["completion_mask"].sum())

    # c_i: recompute the mean token log-probability of each kept roll-out with a plain forward pass.
    model = trainer.model
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -out["completion_ids"].size(1) - 1:-1]
    lp = torch.log_softmax(logits.float(), -1).gather(-1, out["completion_ids"].unsqueeze(-1)).squeeze(-1)
    cm = out["completion_mask"].float()
    independent = ((lp * cm).sum(1) / cm.sum(1)).numpy()
    logged = np.array([c for g in scored.groups for c, k in zip(g.confidences, g.kept) if k])
    np.testing.assert_allclose(logged, independent, rtol=1e-4, atol=1e-4)

    # The gate scales the question's loss: halving the advantages halves loss and gradient.
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, outside of which we are

    def loss_and_grad(scale):
        model.zero_grad()
        loss = trainer.compute_loss(model, {**out, "advantages": out["advantages"] * scale})
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()
        return float(loss.detach()), grad

    l1, g1 = loss_and_grad(1.0)
    l2, g2 = loss_and_grad(0.5)
    assert np.any(expected != 0) and abs(l1) > 0
    assert l2 == pytest.approx(0.5 * l1, rel=1e-5)
    torch.testing.assert_close(g2, 0.5 * g1, rtol=1e-4, atol=1e-7)


def test_training_and_offline_confidences_of_the_same_text_agree(tiny, tmp_path):
    """One definition of c_i: the confidence a reward sees in training (TRL's forward pass at the
    training temperature) equals what an offline roll-out records (the HF engine's sampling
    distribution) for the same tokens; at another temperature it does not."""
    from concord.engines import SamplingParams, load_engine

    _, model_dir = tiny
    engine = load_engine("hf", model_dir, dtype="float32", batch_size=4, threads=1, progress=False)
    conversation = build_train_dataset(QUESTIONS[:1], "instruct", "math")[0]["prompt"]
    gens = engine.generate([conversation], SamplingParams(n=4, temperature=0.6, top_p=1.0, max_new_tokens=12, seed=0))[0]
    prompt_ids = engine.tokenizer(engine.render(conversation), add_special_tokens=False)["input_ids"]
    offline = np.array([g.mean_logprob for g in gens])

    def training_confidence(temperature):
        trainer, _, _ = _trainer(model_dir, tmp_path / f"ckpt{temperature}", "cisc", {"temperature": temperature})
        return np.array(trainer._forward_confidence([prompt_ids] * len(gens), [g.token_ids for g in gens]))

    np.testing.assert_allclose(training_confidence(0.6), offline, atol=1e-4)
    assert np.abs(training_confidence(1.0) - offline).max() > 10 * 1e-4  # ten times the tolerance above


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_training_rollouts_come_from_the_engine_decode_loop(tiny, tmp_path, top_p):
    """Roll-outs in training are sampled by the HF engine's decode loop; at top-p 1 its sampling
    log-probabilities are the confidence (no second forward pass), and they equal TRL's forward at
    the training temperature; at top-p < 1 (a renormalised nucleus, which TRL's forward does not
    apply) the forward pass still scores them. A rerun with the same seed samples the same tokens."""
    _, model_dir = tiny
    training = {"temperature": 0.7, "top_p": top_p}
    trainer, reward, _ = _trainer(model_dir, tmp_path / "ckpt", "cisc", training)
    assert trainer._engine_generation_applies(None, {})
    forwards = []
    original = trainer._forward_confidence
    trainer._forward_confidence = lambda p, c: forwards.append(len(p)) or original(p, c)
    batch = next(iter(trainer.get_train_dataloader()))
    prompt_ids = [trainer._tokenizer(trainer._tokenizer.apply_chat_template(x["prompt"], tokenize=False,
                                                                             add_generation_prompt=True),
                                     add_special_tokens=False)["input_ids"] for x in batch]
    torch.manual_seed(3)
    completions, logprobs = trainer._generate_single_turn(prompt_ids, None, {}, 4)
    torch.manual_seed(3)
    assert trainer._generate_single_turn(prompt_ids, None, {}, 4)[0] == completions
    assert all(1 <= len(c) <= 12 for c in completions)
    eos = trainer._tokenizer.eos_token_id
    assert all(eos not in c[:-1] for c in completions)
    trainer.model.train()
    trainer._generate_and_score_completions(batch)
    if top_p == 1.0:
        assert len(logprobs) == len(completions) and not forwards
        offline = np.array(original(prompt_ids, completions))
        np.testing.assert_allclose([np.mean(lp) for lp in logprobs], offline, atol=1e-4)
    else:
        assert logprobs is None and forwards


# --------------------------------------------------------------------------- CLI runs
def _cli(root, model_dir, questions, name, arm="core", training=None, launcher=None):
    results = root / "results"
    out = results / "train" / "tiny" / "synthetic" / arm / name
    ckpt = results / ".cache" / "train" / name
    cmd = [*(launcher or [sys.executable]), "-m", "concord", "train", "--model-dir", str(model_dir), "--questions",
           str(questions), "--out", str(out), "--checkpoint-dir", str(ckpt), "--arm", arm, "--seed", "0",
           "--training", json.dumps({**TRAINING, **(training or {})}), "--consensus", json.dumps(CONSENSUS),
           "--evaluation", json.dumps({"temperature": 0.6, "top_p": 0.95}), "--task", "math", "--threads", "1"]
    env = {**os.environ, "CONCORD_RESULTS_DIR": str(results), "OMP_NUM_THREADS": "1"}
    return cmd, env, out, ckpt


def _run(cmd, env, timeout=300):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def _weights(out):
    from safetensors.torch import load_file

    return load_file(str(Path(out) / "model.safetensors"))


@pytest.fixture(scope="module")
def reference_run(tiny):
    """An uninterrupted 3-step CoRE run with the true gold answers."""
    root, model_dir = tiny
    cmd, env, out, ckpt = _cli(root, model_dir, root / "questions.jsonl", "reference")
    stderr = _run(cmd, env)
    return out, ckpt, stderr


def test_training_runs_and_logs_every_step(reference_run, tiny):
    out, ckpt, stderr = reference_run
    rows = read_jsonl(out / "log.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert all("val_pass_at_1" in r for r in rows)
    for r in rows[1:]:
        for key in ("loss", "reward", "label_accuracy", "reward_accuracy", "majority_ratio", "mean_gate"):
            assert key in r, key
    groups = read_jsonl(out / "groups.jsonl")
    assert len(groups) == 3 * 2 and all(len(g["answers"]) == 4 for g in groups)
    assert not any("gold" in g or "answer" in g for g in groups)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["step"] == "train" and prov["resumed_from"] is None and prov["steps"] == 3
    assert not ckpt.exists()  # checkpoints are dropped once the output is complete
    # The policy moved: its weights differ from the starting model.
    _, model_dir = tiny
    start, end = _weights(model_dir), _weights(out)
    assert any(not torch.equal(start[k], end[k]) for k in start)


def test_validation_under_the_evaluation_protocol_is_the_evaluation_of_the_same_policy(tiny, tmp_path):
    """Figure 3's points and Table 1's numbers: validated with the evaluation's questions, k, seed,
    sampling and batch, step 0 is Base's evaluation and the last step the trained model's, sample
    for sample (one seed at every step: common random numbers)."""
    from concord.papers.core.evaluation import evaluate

    root, model_dir = tiny
    protocol = {"eval_every": 3, "val_questions": 6, "val_k": 4, "val_max_new_tokens": 12, "val_batch_size": 24}
    cmd, env, out, _ = _cli(root, model_dir, root / "questions.jsonl", "validated", training=protocol)
    _run(cmd, env)
    curve = {r["step"]: r["val_pass_at_1"] for r in read_jsonl(out / "log.jsonl") if "val_pass_at_1" in r}
    assert sorted(curve) == [0, 3]
    ev = {"k": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 12, "max_questions": 6}
    engine = {"backend": "hf", "dtype": "float32", "batch_size": 24}
    policy = resolve_section("answers", {})["policy"]  # what the training CLI reads without --answers
    base, trained = (evaluate(model_dir=m, questions_path=root / "questions.jsonl", out_path=tmp_path / f"{name}.json",
                              seed=0, evaluation=ev, engine=engine, arm=name, answers_policy=policy)
                     for name, m in (("base", model_dir), ("core", out)))
    assert curve[0] == base["pass_at_1"] and curve[3] == trained["pass_at_1"]
    assert base["pass_at_1"] != trained["pass_at_1"]  # the policy moved between the two points


def test_curve_ends_left_to_the_evaluations_are_not_sampled_in_training(tiny):
    """training.ends_from_evaluation: the run validates only between its ends, and Figure 3 takes
    step 0 from Base's evaluation and the last step from the trained model's (the identity above)."""
    from concord.papers.core.curves import load_curves, with_evaluation_ends
    from concord.papers.core.evaluation import evaluate

    root, model_dir = tiny
    protocol = {"eval_every": 1, "val_questions": 6, "val_k": 4, "val_max_new_tokens": 12, "val_batch_size": 24,
                "ends_from_evaluation": True}
    cmd, env, out, _ = _cli(root, model_dir, root / "questions.jsonl", "seed0", training=protocol)
    _run(cmd, env)
    logged = {r["step"]: r["val_pass_at_1"] for r in read_jsonl(out / "log.jsonl") if "val_pass_at_1" in r}
    assert sorted(logged) == [1, 2]  # steps 0 and 3 are not sampled a second time
    ev = {"k": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 12, "max_questions": 6}
    engine = {"backend": "hf", "dtype": "float32", "batch_size": 24}
    evals = {}
    for name, m in (("base", model_dir), ("core", out)):
        path = root / "results" / "eval" / "tiny" / "synthetic" / name / "seed0.json"
        evals[name] = (path, evaluate(model_dir=m, questions_path=root / "questions.jsonl", out_path=path, seed=0,
                                      evaluation=ev, engine=engine, arm=name,
                                      answers_policy=resolve_section("answers", {})["policy"]))
    points = with_evaluation_ends(load_curves([out], allow_empty=True), [out], [evals["base"][0]], [evals["core"][0]])
    curve = dict(zip(points["step"], points["val_pass_at_1"]))
    assert sorted(curve) == [0, 1, 2, 3]
    assert curve[0] == evals["base"][1]["pass_at_1"] and curve[3] == evals["core"][1]["pass_at_1"]
    assert curve[1] == logged[1] and curve[2] == logged[2]
    assert set(points["val_k"]) == {4} and set(points["val_questions"]) == {6}


def test_gold_answers_never_reach_training(reference_run, tiny):
    root, model_dir = tiny
    cmd, env, out, _ = _cli(root, model_dir, root / "wrong_gold.jsonl", "wrong_gold")
    _run(cmd, env)
    ref_out = reference_run[0]
    ref, wrong = _weights(ref_out), _weights(out)
    assert ref.keys() == wrong.keys() and all(torch.equal(ref[k], wrong[k]) for k in ref)
    assert read_jsonl(ref_out / "groups.jsonl") == read_jsonl(out / "groups.jsonl")
    # ... while the gold-based diagnostics did see the difference.
    ref_log, wrong_log = read_jsonl(ref_out / "log.jsonl"), read_jsonl(out / "log.jsonl")
    assert all(r["rollout_accuracy"] == 0 and r["label_accuracy"] == 0 for r in wrong_log[1:])
    assert any(r["rollout_accuracy"] > 0 for r in ref_log[1:])


def test_killed_run_resumes_from_its_last_checkpoint(reference_run, tiny):
    root, model_dir = tiny
    cmd, env, out, ckpt = _cli(root, model_dir, root / "questions.jsonl", "killed")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # Killed at the first complete checkpoint seen, step 1's or step 2's: with save_total_limit 1,
        # step 1's lives only until step 2's is written (a few tenths of a second for the tiny model,
        # which a poll every 0.1 s on a loaded machine missed), and the run deletes its checkpoints
        # once it ends.
        deadline = time.time() + 240
        while not any(ckpt.glob("checkpoint-*/trainer_state.json")):
            assert proc.poll() is None, "training ended before a checkpoint was seen"
            assert time.time() < deadline, "no checkpoint within 240 s"
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # kill -9, mid-run
        proc.wait()
    assert not out.exists()
    stderr = _run(cmd, env)
    assert "resuming from" in stderr and "checkpoint-" in stderr
    prov = json.loads((out / "provenance.json").read_text())
    resumed_step = int(Path(prov["resumed_from"]).name.split("-")[1])
    assert 1 <= resumed_step < 3
    assert [r["step"] for r in read_jsonl(out / "log.jsonl")] == [0, 1, 2, 3]  # no step logged twice
    # Resuming replays exactly what the uninterrupted run did.
    ref, resumed = _weights(reference_run[0]), _weights(out)
    assert all(torch.equal(ref[k], resumed[k]) for k in ref)
    assert read_jsonl(reference_run[0] / "groups.jsonl") == read_jsonl(out / "groups.jsonl")


def test_zero_update_arm_reproduces_the_base_model_exactly(tiny, tmp_path):
    """The control: the whole training path (roll-outs, Majority's rewards, TRL's optimiser steps,
    saving) at learning rate 0 leaves every weight as it was, and its evaluation gives Base's
    answer to every sample (the same path at a learning rate moves the weights: the reference run)."""
    from concord.papers.core.evaluation import evaluate

    root, model_dir = tiny
    cmd, env, out, _ = _cli(root, model_dir, root / "questions.jsonl", "zero", arm="zero_update")
    _run(cmd, env)
    start, end = _weights(model_dir), _weights(out)
    assert start.keys() == end.keys() and all(torch.equal(start[k], end[k].to(start[k].dtype)) for k in start)
    rows = read_jsonl(out / "log.jsonl")
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3] and all(r["learning_rate"] == 0.0 for r in rows
                                                                           if "loss" in r)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["arm"] == "zero_update" and prov["reward_arm"] == "majority" and prov["learning_rate"] == 0.0

    ev = {"k": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 12}
    engine = {"backend": "hf", "dtype": "float32", "batch_size": 8}
    base = evaluate(model_dir=model_dir, questions_path=root / "questions.jsonl", out_path=tmp_path / "base.json",
                    seed=0, evaluation=ev, engine=engine, arm="base")
    zero = evaluate(model_dir=out, questions_path=root / "questions.jsonl", out_path=tmp_path / "zero.json",
                    seed=0, evaluation=ev, engine=engine, arm="zero_update")
    assert [q["answers"] for q in zero["per_question"]] == [q["answers"] for q in base["per_question"]]
    assert zero["pass_at_1"] == base["pass_at_1"]
    assert zero["provenance"]["numeric"]["dtype"] == "float32"


def test_two_processes_score_groups_that_straddle_them_whole(tiny):
    """3 prompts x 4 roll-outs over 2 processes: question 2's group is split 2 + 2 by TRL."""
    root, model_dir = tiny
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    training = {"prompts_per_step": 3, "max_steps": 1, "eval_every": 0, "eval_at_start": False}
    cmd, env, out, _ = _cli(root, model_dir, root / "questions.jsonl", "two_proc", arm="majority",
                            training=training, launcher=launcher)
    stderr = _run(cmd, env)
    assert json.loads((out / "provenance.json").read_text())["num_processes"] == 2
    # Each rank closes its gloo group before exit: an open one can abort a finished rank (SIGABRT).
    assert "rank 0 closed its process group" in stderr and "rank 1 closed its process group" in stderr
    groups = read_jsonl(out / "groups.jsonl")
    assert len(groups) == 3
    for g in groups:
        assert len(g["answers"]) == len(g["rewards"]) == 4 and g["kept"] == [True, False, True, False]
        # Majority over the whole group: reward 1 exactly for the label's class, across the split.
        label_class = g["classes"][g["answers"].index(g["label"])]
        assert g["rewards"] == [float(c == label_class) for c in g["classes"]]
    assert len(read_jsonl(out / "log.jsonl")) == 1
