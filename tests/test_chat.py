"""The chat layer against a real OpenAI-compatible HTTP server on loopback, and the call cache."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from concord.chat import (
    CachedChat,
    ChatError,
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
    the first requests answer 503 (with Retry-After), ``delay_s`` slows each answer down, and
    ``status`` forces a fixed error status.
    """

    def __init__(self, fail_first: int = 0, delay_s: float = 0.0, status: int | None = None, brain=None):
        self.brain = brain  # optional: request body -> reply text
        self.fail_first = fail_first
        self.delay_s = delay_s
        self.status = status
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
                        return self._send(503, {"error": "warming up"}, {"Retry-After": "0"})
                    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                    text = server.brain(body) if server.brain else f"{body['model']}|t={body['temperature']}|{user[::-1]}"
                    self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
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


def test_http_client_sends_openai_request_and_reads_reply():
    with _Server() as srv:
        chat = OpenAIChat(srv.url, "tiny", api_key="k123", backoff_s=0.01)
        out = chat.complete([{"role": "system", "content": "be brief"}, *_user("abc")], temperature=0.5, max_tokens=7)
    assert out == "tiny|t=0.5|cba"
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer k123"
    assert req["max_tokens"] == 7 and req["model"] == "tiny"
    assert req["messages"][0] == {"role": "system", "content": "be brief"}


def test_http_client_retries_transient_failures_with_backoff():
    with _Server(fail_first=2) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=3, backoff_s=0.01)
        assert chat.complete(_user("xy")) == "m|t=0.0|yx"
    assert len(srv.requests) == 3 and chat.n_requests == 3


def test_http_client_gives_up_after_max_retries_naming_the_error():
    with _Server(fail_first=10) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=2, backoff_s=0.01)
        with pytest.raises(ChatError, match=r"after 3 attempts: HTTP 503"):
            chat.complete(_user("q"))
    assert len(srv.requests) == 3


def test_http_client_does_not_retry_client_errors():
    with _Server(status=400) as srv:
        chat = OpenAIChat(srv.url, "m", max_retries=4, backoff_s=0.01)
        with pytest.raises(ChatError, match="HTTP 400"):
            chat.complete(_user("q"))
    assert len(srv.requests) == 1


def test_http_client_times_out_and_retries():
    with _Server(delay_s=0.6) as srv:
        chat = OpenAIChat(srv.url, "m", timeout_s=0.15, max_retries=1, backoff_s=0.01)
        start = time.monotonic()
        with pytest.raises(ChatError, match="after 2 attempts"):
            chat.complete(_user("slow"))
        assert time.monotonic() - start < 1.0  # two 0.15 s timeouts, not two 0.6 s answers
    assert len(srv.requests) == 2


def test_http_client_runs_a_batch_concurrently_in_order():
    with _Server(delay_s=0.2) as srv:
        chat = OpenAIChat(srv.url, "m", concurrency=4)
        start = time.monotonic()
        out = chat.complete_batch([_user(f"q{i}") for i in range(8)])
        elapsed = time.monotonic() - start
    assert out == [f"m|t=0.0|{i}q" for i in range(8)]
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
    with _Server() as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m"), tmp_path / "cache")
        convs = [_user("alpha"), _user("beta"), _user("alpha")]
        first = chat.complete_batch(convs, max_tokens=16)
        assert len(srv.requests) == 2  # the duplicate inside the batch is issued once
        again = CachedChat(OpenAIChat(srv.url, "m"), tmp_path / "cache").complete_batch(convs, max_tokens=16)
        assert again == first and len(srv.requests) == 2
        # A different sampling parameter or variant tag is a different call.
        chat.complete(_user("alpha"), max_tokens=17)
        chat.complete(_user("alpha\n<!-- sample variant: sc-1 -->"), max_tokens=16)
        assert len(srv.requests) == 4
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 4
    entry = json.loads(entries[0].read_text())
    assert {"model", "messages", "sampling", "completion"} <= set(entry)


def test_cache_key_depends_on_model_messages_and_sampling():
    s = resolve_sampling({})
    base = cache_key("m", _user("q"), s)
    assert base == cache_key("m", _user("q"), resolve_sampling({"temperature": 0}))
    assert base != cache_key("m2", _user("q"), s)
    assert base != cache_key("m", _user("q "), s)
    assert base != cache_key("m", _user("q"), resolve_sampling({"seed": 1}))


def test_complete_batch_falls_back_to_sequential_calls():
    chat = FunctionChat(lambda m, s: m[-1]["content"].upper())
    assert complete_batch(chat, [_user("a"), _user("b")]) == ["A", "B"]
    assert len(chat.calls) == 2


def test_scmoa_runs_over_http_with_concurrency_and_cache(tmp_path):
    """Algorithm 1 end to end through the HTTP client: every call is one request, a rerun none."""
    from concord.scmoa import run_scmoa

    def brain(body):
        system = body["messages"][0]["content"]
        if system.startswith("You rephrase problems"):
            return json.dumps([f"Version {i}: what is 6 times 7?" for i in range(3)])
        if system.startswith("You are a senior problem-solver"):
            return "All traces agree.\nAnswer: 42"
        return "6 x 7 = 42.\nAnswer: 42"

    with _Server(brain=brain, delay_s=0.05) as srv:
        chat = CachedChat(OpenAIChat(srv.url, "m", concurrency=4), tmp_path)
        result = run_scmoa("What is 6 times 7?", chat, n=3, k=2, task="qa")
        assert result.answer == "42" and result.record["clusters_pre"]["consensus"] == 1.0
        assert len(srv.requests) == result.record["calls"]["total"] == 1 + 6 + 0 + 1
        assert srv.max_active >= 2  # the six proposals went out concurrently
        again = run_scmoa("What is 6 times 7?", CachedChat(OpenAIChat(srv.url, "m"), tmp_path), n=3, k=2, task="qa")
        assert len(srv.requests) == 8 and again.record == result.record
