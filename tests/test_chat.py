"""The chat layer against a real OpenAI-compatible HTTP server on loopback, and the call cache.

The server answers like vLLM's OpenAI-compatible server: ``choices[0].message.content``, the
reasoning channel in ``reasoning_content`` or ``reasoning`` (as the ``reasoning_field`` option
says; ``None`` = a server without a reasoning parser), and ``usage`` with token counts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from concord.chat import (
    CachedChat,
    CallLog,
    ChatError,
    Completion,
    FunctionChat,
    OpenAIChat,
    cache_key,
    complete_batch,
    resolve_sampling,
)


class _Server:
    """A small OpenAI-compatible ``/v1/chat/completions`` server.

    The reply is derived from the request (echo of the last user message, model and temperature),
    so every assertion can check that the right request reached the server. ``fail_first`` makes
    the first requests answer 503 (with a short ``retry-after-ms``), ``delay_s`` slows each answer
    down, ``status`` forces a fixed error status, ``fail_when(body)`` answers 400 to chosen
    requests, and ``reasoning_field`` names the field the reasoning goes into.
    """

    def __init__(self, fail_first: int = 0, delay_s: float = 0.0, status: int | None = None, brain=None,
                 reasoning_field: str | None = None, fail_when=None):
        self.brain = brain  # optional: request body -> reply text, or (reasoning, text)
        self.fail_first = fail_first
        self.delay_s = delay_s
        self.status = status
        self.fail_when = fail_when
        self.reasoning_field = reasoning_field
        self.requests: list[dict] = []
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                    n = len(server.requests)
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    if self.path != "/v1/chat/completions":
                        return self._send(404, {"error": f"no route {self.path}"})
                    if server.status is not None:
                        return self._send(server.status, {"error": "forced"})
                    if n <= server.fail_first:
                        return self._send(503, {"error": "warming up"}, {"retry-after-ms": "5"})
                    if server.fail_when is not None and server.fail_when(body):
                        return self._send(400, {"error": "bad request"})
                    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                    reply = server.brain(body) if server.brain else f"{body['model']}|t={body['temperature']}|{user[::-1]}"
                    reasoning, text = reply if isinstance(reply, tuple) else (f"thinking about {user[:20]}", reply)
                    message = {"role": "assistant", "content": text}
                    if server.reasoning_field and reasoning is not None:
                        message[server.reasoning_field] = reasoning
                    usage = {"prompt_tokens": 10 + len(user), "completion_tokens": 5 + len(text),
                             "total_tokens": 15 + len(user) + len(text),
                             "completion_tokens_details": {"reasoning_tokens": len(reasoning or "")}}
                    self._send(200, {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0,
                                     "model": body["model"], "usage": usage,
                                     "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
                finally:
                    with server.lock:
                        server.active -= 1

            def _send(self, code, obj, headers=None):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _user(text):
    return [{"role": "user", "content": text}]


def _free_port_url():
    """An address on loopback where nothing listens (the port was bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_http_client_sends_openai_request_and_reads_reply():
    with _Server() as srv:
        chat = OpenAIChat(srv.url, "tiny", api_key="k123")
        out = chat.complete([{"role": "system", "content": "be brief"}, *_user("abc")], temperature=0.5, max_tokens=7)
    assert out.text == "tiny|t=0.5|cba"
    assert out.reasoning is None and out.reasoning_field is None  # this server has no reasoning parser
    assert out.prompt_tokens == 13 and out.completion_tokens == 5 + len(out.text) and out.finish_reason == "stop"
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer k123"
    assert req["max_tokens"] == 7 and req["model"] == "tiny"
    assert req["messages"][0] == {"role": "system", "content": "be brief"}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_http_client_keeps_the_reasoning_channel_in_either_field(field):
    with _Server(reasoning_field=field) as srv:
        out = OpenAIChat(srv.url, "m").complete(_user("why"))
    assert out.text == "m|t=0.0|yhw"
    assert out.reasoning == "thinking about why" and out.reasoning_field == field
    assert out.reasoning_tokens == len("thinking about why")


def test_http_client_records_a_reply_without_reasoning_as_such(tmp_path):
    with _Server(reasoning_field="reasoning_content", brain=lambda b: (None, "Answer: 4")) as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m"), tmp_path)
        out = chat.complete(_user("2+2"))
    assert out.text == "Answer: 4" and out.reasoning is None and out.usage()["reasoning_field"] is None
    assert chat.stats()["with_reasoning"] == 0


def test_cache_refuses_a_reasoning_model_whose_server_never_returns_reasoning(tmp_path):
    with _Server(reasoning_field=None) as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m"), tmp_path, expect_reasoning=True, reasoning_probe=3)
        chat.complete_batch([_user("a"), _user("b")])  # too few replies to judge yet
        with pytest.raises(ChatError, match="reasoning-parser"):
            chat.complete(_user("c"))
        assert len(srv.requests) == 3
    assert len(list(tmp_path.rglob("*.json"))) == 3  # every reply is cached all the same


def test_http_client_retries_transient_failures_with_backoff():
    with _Server(fail_first=2) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=3)
        assert chat.complete(_user("xy")).text == "m|t=0.0|yx"
    assert len(srv.requests) == 3


def test_http_client_gives_up_after_max_retries_naming_the_error():
    with _Server(fail_first=10) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=2)
        with pytest.raises(ChatError, match=r"HTTP 503 after 3 attempt"):
            chat.complete(_user("q"))
    assert len(srv.requests) == 3


def test_http_client_does_not_retry_client_errors():
    with _Server(status=400) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=4)
        with pytest.raises(ChatError, match=r"HTTP 400 \(not retryable\)"):
            chat.complete(_user("q"))
    assert len(srv.requests) == 1


def test_http_client_times_out_and_retries():
    with _Server(delay_s=0.8) as srv:
        chat = OpenAIChat(srv.url, "m", timeout_s=0.15, max_retries=1)
        start = time.monotonic()
        with pytest.raises(ChatError, match=r"timed out \(0.15 s per attempt\) after 2 attempt"):
            chat.complete(_user("slow"))
        assert time.monotonic() - start < 1.6  # two 0.15 s timeouts and one back-off, not two 0.8 s answers
    assert len(srv.requests) == 2


def test_http_client_names_an_endpoint_that_is_down():
    chat = OpenAIChat(_free_port_url(), "m", max_retries=0, timeout_s=2)
    with pytest.raises(ChatError, match="cannot reach .* is the server running"):
        chat.complete(_user("q"))


def test_http_client_runs_a_batch_concurrently_in_order():
    with _Server(delay_s=0.2) as srv:
        chat = OpenAIChat(srv.url, "m", concurrency=4)
        start = time.monotonic()
        out = chat.complete_batch([_user(f"q{i}") for i in range(8)])
        elapsed = time.monotonic() - start
    assert [c.text for c in out] == [f"m|t=0.0|{i}q" for i in range(8)]
    assert srv.max_active >= 3
    assert elapsed < 8 * 0.2 * 0.75  # clearly faster than sequential


def test_http_client_rejects_bad_configuration():
    with pytest.raises(ValueError, match="http"):
        OpenAIChat("localhost:8000", "m")
    with pytest.raises(ValueError, match="unknown sampling parameter"):
        resolve_sampling({"temprature": 0.1})
    with pytest.raises(ValueError, match="role"):
        FunctionChat(lambda m, s: "x").complete([{"role": "robot", "content": "x"}])


def test_cache_makes_reruns_identical_and_free(tmp_path):
    with _Server(reasoning_field="reasoning") as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m"), tmp_path / "cache")
        convs = [_user("alpha"), _user("beta"), _user("alpha")]
        first = chat.complete_batch(convs, max_tokens=16)
        assert len(srv.requests) == 2  # the duplicate inside the batch is issued once
        again = CachedChat(OpenAIChat(srv.url, "m"), tmp_path / "cache").complete_batch(convs, max_tokens=16)
        assert [c.text for c in again] == [c.text for c in first] and len(srv.requests) == 2
        # The reasoning channel and the token counts come back from the cache too.
        assert again[0].reasoning == "thinking about alpha" and again[0].cached and not first[0].cached
        assert again[0].prompt_tokens == first[0].prompt_tokens
        # A different sampling parameter or variant tag is a different call.
        chat.complete(_user("alpha"), max_tokens=17)
        chat.complete(_user("alpha\n<!-- sample variant: sc-1 -->"), max_tokens=16)
        assert len(srv.requests) == 4
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 4
    entry = json.loads(entries[0].read_text())
    assert {"model", "messages", "sampling", "completion"} <= set(entry)
    assert {"text", "reasoning", "reasoning_field", "prompt_tokens"} <= set(entry["completion"])


def test_cache_reads_entries_that_hold_only_the_text(tmp_path):
    chat = CachedChat(FunctionChat(lambda m, s: "fresh"), tmp_path, model_name="m")
    key = cache_key("m", _user("q"), resolve_sampling({}))
    path = tmp_path / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"model": "m", "messages": _user("q"), "sampling": {}, "completion": "old"}))
    assert chat.complete(_user("q")).text == "old"


def test_a_batch_with_failed_calls_loses_none_of_the_successful_ones(tmp_path):
    """An endpoint that fails some calls: the error names them, the others are cached, a rerun
    repeats only the failed calls."""
    broken = {"on": True}
    with _Server(fail_when=lambda body: broken["on"] and "bad" in body["messages"][-1]["content"]) as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m", concurrency=3, max_retries=0), tmp_path)
        convs = [_user("good1"), _user("bad"), _user("good2")]
        with pytest.raises(ChatError, match=r"1 of 3 call\(s\) to m failed .*HTTP 400.* 2 that succeeded are cached"):
            chat.complete_batch(convs)
        assert len(srv.requests) == 3 and len(list(tmp_path.rglob("*.json"))) == 2
        broken["on"] = False
        out = chat.complete_batch(convs)
        assert len(srv.requests) == 4  # only the failed call went out again
    assert [c.cached for c in out] == [True, False, True]


def test_cache_key_depends_on_model_messages_and_sampling():
    s = resolve_sampling({})
    base = cache_key("m", _user("q"), s)
    assert base == cache_key("m", _user("q"), resolve_sampling({"temperature": 0}))
    assert base != cache_key("m2", _user("q"), s)
    assert base != cache_key("m", _user("q "), s)
    assert base != cache_key("m", _user("q"), resolve_sampling({"seed": 1}))


def test_complete_batch_falls_back_to_sequential_calls():
    chat = FunctionChat(lambda m, s: m[-1]["content"].upper())
    assert [c.text for c in complete_batch(chat, [_user("a"), _user("b")])] == ["A", "B"]
    assert len(chat.calls) == 2


def test_call_log_counts_calls_and_tokens_of_cache_hits_too(tmp_path):
    reply = Completion(text="ok", reasoning="r", reasoning_field="reasoning", prompt_tokens=7, completion_tokens=3)
    cached = CachedChat(FunctionChat(lambda m, s: reply), tmp_path, model_name="f")
    first, second = CallLog(cached), CallLog(cached)
    first.complete_batch([_user("a"), _user("b")])
    second.complete(_user("a"))
    assert first.usage() == {"calls": 2, "with_reasoning": 2, "prompt_tokens": 14, "completion_tokens": 6,
                             "reasoning_tokens": None}
    # A cache hit costs nothing now but is accounted as the call it stands for.
    assert second.usage() == {**first.usage(), "calls": 1, "with_reasoning": 1, "prompt_tokens": 7,
                              "completion_tokens": 3}
    assert [c.cached for c in second.completions] == [True]


def test_scmoa_runs_over_http_with_concurrency_and_cache(tmp_path):
    """Algorithm 1 end to end through the HTTP client: every call is one request, a rerun none."""
    from concord.papers.scmoa import run_scmoa

    def brain(body):
        system = body["messages"][0]["content"]
        if system.startswith("You rephrase problems"):
            return json.dumps([f"Version {i}: what is 6 times 7?" for i in range(3)])
        if system.startswith("You are a senior problem-solver"):
            return "All traces agree.\nAnswer: 42"
        return "6 x 7 = 42.\nAnswer: 42"

    with _Server(brain=brain, delay_s=0.05, reasoning_field="reasoning_content") as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m", concurrency=4), tmp_path)
        result = run_scmoa("What is 6 times 7?", chat, n=3, k=2, task="qa")
        assert result.answer == "42" and result.record["clusters_pre"]["consensus"] == 1.0
        assert len(srv.requests) == result.record["calls"]["total"] == 1 + 6 + 0 + 1
        assert srv.max_active >= 2  # the six proposals went out concurrently
        again = run_scmoa("What is 6 times 7?", CachedChat(OpenAIChat(srv.url, "m"), tmp_path), n=3, k=2, task="qa")
        assert len(srv.requests) == 8
        assert again.record == result.record


def test_scmoa_run_records_a_failing_endpoint_and_its_rerun_repeats_only_the_failed_calls(tmp_path):
    """scmoa-run against a vLLM-like server whose aggregation calls fail: the job stops naming the
    question and the error, partial records are kept beside the output, no successful call is
    lost; once the server recovers, the rerun sends only the calls that failed, and the records
    carry every proposal's reasoning channel."""
    from concord.cli import main as cli_main

    broken = {"on": True}

    def brain(body):
        system = body["messages"][0]["content"]
        if system.startswith("You rephrase problems"):
            return ("paraphrasing", "not a JSON list")  # a malformed paraphrase list: recorded, slots fall back
        return ("6 times 7 is 42", "Answer: 42")

    def fail(body):
        return broken["on"] and body["messages"][0]["content"].startswith("You are a senior problem-solver")

    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "prompt": "What is 6 times 7?", "answer": "42", "task": "qa"}) + "\n")
    out = tmp_path / "records.json"
    settings = {"n": 2, "k": 1, "methods": ["cot"], "max_paraphrase_attempts": 1, "sampling": {"max_tokens": 8}}
    with _Server(brain=brain, reasoning_field="reasoning", fail_when=fail) as srv:
        endpoints = {"m": {"base_url": srv.url, "model": "served-m", "max_retries": 0, "expect_reasoning": True}}
        argv = ["scmoa-run", "--questions", str(questions), "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
                "--model", "m", "--endpoints", json.dumps(endpoints), "--settings", json.dumps(settings)]
        with pytest.raises(SystemExit, match=r"1 of 1 question\(s\) failed \(q1: .*HTTP 400"):
            cli_main(argv)
        assert not out.exists()
        partial = json.loads(out.with_name("records.json.partial.json").read_text())
        assert partial["questions"] == [{"id": "q1", "task": "qa", "error": partial["questions"][0]["error"]}]
        # The paraphrase call, one proposal call (both slots fell back to the question, so the two
        # proposals are one call) and the failed aggregation.
        first = len(srv.requests)
        assert first == 3 and all(r["model"] == "served-m" for r in srv.requests)
        broken["on"] = False
        assert cli_main(argv) == 0
        assert len(srv.requests) == first + 1  # only the aggregation again (CoT is the cached proposal call)
    rec = json.loads(out.read_text())["questions"][0]
    pert = rec["record"]["perturbation"]
    assert pert["n_fallback"] == 2 and pert["rejected"][0]["reason"] == "no JSON list of strings"
    assert [p["reasoning"] for p in rec["record"]["proposals_pre"]] == ["6 times 7 is 42"] * 2
    assert rec["methods"]["scmoa"]["usage"]["with_reasoning"] == 4 and rec["methods"]["scmoa"]["correct"] is True
