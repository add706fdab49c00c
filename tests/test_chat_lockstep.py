"""LockstepChat: the calls of many tasks batched round by round, deterministically, with the
same results as running the tasks one after another (SC-MoA's questions over one engine)."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from concord.chat import CachedChat, ChatError, Completion, FunctionChat, LockstepChat
from concord.papers.scmoa.experiment import run_benchmark


class _BatchRecorder:
    """An engine-like chat: one reply per conversation, a pure function of it; every batch it is
    given is recorded (its conversations' last words and its sampling), from whichever thread."""

    model_name = "recorder"

    def __init__(self, fail_on: str | None = None):
        self.batches: list[tuple[list[str], dict]] = []
        self.threads: set[int] = set()
        self.fail_on = fail_on

    def complete_batch(self, conversations, **sampling):
        self.threads.add(threading.get_ident())
        words = [m[-1]["content"] for m in conversations]
        self.batches.append((words, dict(sampling)))
        if self.fail_on is not None and self.fail_on in words:
            raise ChatError(f"the engine failed on {self.fail_on}")
        return [Completion(text=f"re:{w}") for w in words]


def _task(chat, name: str, rounds: int, *, temperature: float = 0.0):
    """A task whose i-th call depends on its previous reply (as SC-MoA's phases do)."""
    reply = name
    for i in range(rounds):
        width = 1 + (i % 2)
        reply = chat.complete_batch([[{"role": "user", "content": f"{reply}|{i}.{j}"}] for j in range(width)],
                                    temperature=temperature)[0].text
    return reply


def test_tasks_get_the_replies_they_would_get_alone_and_their_calls_share_batches(caplog):
    alone = _BatchRecorder()
    expected = [_task(LockstepChat(alone), name, rounds) for name, rounds in (("a", 3), ("b", 1), ("c", 2))]
    engine = _BatchRecorder()
    chat = LockstepChat(engine)
    with caplog.at_level("INFO", logger="concord.chat.lockstep"):
        assert chat.map(lambda item: _task(chat, *item), [("a", 3), ("b", 1), ("c", 2)]) == expected
    # Each round logs its progress: the tasks still running, their conversations, the engine calls.
    rounds = [r.getMessage() for r in caplog.records if r.name == "concord.chat.lockstep"]
    assert [m.split(" s since")[0].rsplit(";", 1)[0] for m in rounds] == [
        "round 1: 3 of 3 tasks waited on 3 conversations, sent in 1 engine batch(es)",
        "round 2: 2 of 3 tasks waited on 4 conversations, sent in 1 engine batch(es)",
        "round 3: 1 of 3 tasks waited on 1 conversations, sent in 1 engine batch(es)",
    ]
    # Round 1: every task's first call in one batch, in task order; then the tasks still running.
    assert [len(words) for words, _ in engine.batches] == [3, 4, 1]
    assert engine.batches[0][0] == ["a|0.0", "b|0.0", "c|0.0"]
    assert sum(len(w) for w, _ in engine.batches) == sum(len(w) for w, _ in alone.batches)
    assert (chat.rounds, chat.rows) == (3, 8) and len(alone.batches) == 6
    # The engine is called from the thread that runs map, never from a task's thread.
    assert engine.threads == {threading.get_ident()}


def test_batches_are_the_same_on_every_run_and_split_by_sampling():
    runs = []
    for _ in range(3):
        engine = _BatchRecorder()
        chat = LockstepChat(engine)
        chat.map(lambda item: _task(chat, item[0], 2, temperature=item[1]), [("a", 0.0), ("b", 0.7), ("c", 0.0)])
        runs.append(engine.batches)
    assert runs[0] == runs[1] == runs[2]
    first = runs[0][:2]
    assert [(w, s["temperature"]) for w, s in first] == [(["a|0.0", "c|0.0"], 0.0), (["b|0.0"], 0.7)]


def test_a_failed_engine_call_fails_only_the_tasks_that_made_it_and_task_errors_come_back_in_order():
    engine = _BatchRecorder(fail_on="b|0.0")
    chat = LockstepChat(engine)

    def task(name):
        try:
            return _task(chat, name, 2, temperature=0.7 if name == "b" else 0.0)
        except ChatError as exc:
            return f"error: {exc}"

    assert chat.map(task, ["a", "b", "c"]) == [_task(LockstepChat(_BatchRecorder()), n, 2) if n != "b" else
                                              "error: the engine failed on b|0.0" for n in ["a", "b", "c"]]

    chat = LockstepChat(_BatchRecorder())

    def boom(name):
        _task(chat, name, 1)
        if name != "a":
            raise ValueError(f"task {name} broke")
        return name

    with pytest.raises(ValueError, match="task b broke"):
        chat.map(boom, ["a", "b", "c"])
    assert chat.map(boom, ["a"]) == ["a"]  # the chat is usable after a failed map


def test_calls_outside_map_go_straight_to_the_engine():
    engine = _BatchRecorder()
    chat = LockstepChat(engine)
    assert chat.complete([{"role": "user", "content": "x"}]).text == "re:x"
    assert engine.batches == [(["x"], {})]
    assert chat.map(lambda _: chat.complete_batch([]), [1, 2]) == [[], []]  # an empty call needs no round
    assert engine.batches == [(["x"], {})] and chat.rounds == 0


def _scripted(messages, sampling) -> str:
    """A deterministic agent: an answer chosen by the conversation's hash."""
    digest = int(hashlib.sha256(json.dumps(messages).encode()).hexdigest(), 16)
    return f"Thinking. The answer is \\boxed{{{digest % 3}}}."


class _Counted:
    """A deterministic scripted model that counts the batches it is given."""

    model_name = "scripted"

    def __init__(self):
        self.inner, self.batches = FunctionChat(_scripted), 0

    def complete_batch(self, conversations, **sampling):
        self.batches += 1
        return [self.inner.complete(m, **sampling) for m in conversations]


def test_scmoa_records_are_the_same_with_questions_in_lockstep(tmp_path):
    questions = [{"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": str(i % 3), "task": "qa"} for i in range(4)]
    options = dict(n=3, k=2, k_sweep=[1, 2], methods=["cot", "sc", "moa", "self_moa"], sc_k=3, moa_n=2, self_moa_k=2,
                   gate_thresholds=[0.6, 1.0], perturbation="persona", sampling={"max_tokens": 32})
    alone = _Counted()
    sequential = run_benchmark(questions, CachedChat(alone, tmp_path / "a", model_name="m"), **options)
    lockstep = LockstepChat(_Counted())
    together = run_benchmark(questions, CachedChat(lockstep, tmp_path / "b", model_name="m"),
                             map_questions=lockstep.map, **options)
    assert json.dumps(together, sort_keys=True) == json.dumps(sequential, sort_keys=True)
    # The same conversations in far fewer engine calls (4 questions in step; long and short prompts apart).
    assert lockstep.inner.batches == lockstep.rounds and lockstep.rows == len(alone.inner.calls)
    assert 2 * lockstep.rounds < alone.batches


def test_long_and_short_prompts_go_to_separate_batches():
    engine = _BatchRecorder()
    chat = LockstepChat(engine)
    prompts = ["a" * 100, "b" * 900, "c" * 120, "d" * 1000]
    assert [r.text for r in chat.map(lambda p: chat.complete([{"role": "user", "content": p}]), prompts)] == [
        f"re:{p}" for p in prompts]
    # Padding a 100-character prompt to 1,000 would prefill 10x its tokens: two batches instead.
    assert [words for words, _ in engine.batches] == [[prompts[0], prompts[2]], [prompts[1], prompts[3]]]
