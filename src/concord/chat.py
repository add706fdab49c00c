"""One chat interface for every way of calling a model: ``complete(messages, **sampling) -> str``.

Back-ends:

* :class:`OpenAIChat` -- any OpenAI-compatible ``/chat/completions`` endpoint (``vllm serve``, a
  provider), stdlib HTTP with a thread pool for concurrency, retries with exponential back-off
  (honouring ``Retry-After``) on transient failures, and a per-request timeout.
* :class:`EngineChat` -- the project's in-process engines (:class:`concord.engines.base.Engine`).
* :class:`FunctionChat` -- a plain Python function of the conversation (rule-based agents,
  deterministic scripted agents in tests).

:class:`CachedChat` wraps any of them with an on-disk cache keyed by the SHA-256 of (model,
messages, sampling parameters): a rerun issues no calls and returns identical text. At greedy
decoding the SC-MoA variant tags (``<!-- sample variant: ... -->``) change the messages and hence
the key, which is how k distinct samples are obtained without temperature.

Every chat object may also offer ``complete_batch(conversations, **sampling) -> list[str]``;
:func:`complete_batch` uses it when present (HTTP concurrency, engine batching) and falls back to
sequential calls otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from concord.io import write_json

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]

#: Sampling parameters every back-end understands, with the defaults of the SC-MoA protocol
#: (greedy decoding; diversity comes from perturbations and variant tags, Appendix J.5).
SAMPLING_DEFAULTS: dict[str, Any] = {
    "temperature": 0.0,
    "top_p": 1.0,
    "max_tokens": 512,
    "seed": 0,
    "stop": (),
}

_ROLES = {"system", "user", "assistant"}


class ChatError(RuntimeError):
    """A model call that failed for good (after retries, or with a non-retryable error)."""


@runtime_checkable
class Chat(Protocol):
    """Anything that turns a conversation into the assistant's reply."""

    def complete(self, messages: Messages, **sampling: Any) -> str: ...


def validate_messages(messages: Any) -> Messages:
    """Check the ``[{"role": ..., "content": ...}]`` shape; return a plain-dict copy."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(f"messages must be a non-empty list of {{role, content}} dicts, got {messages!r:.80}")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or set(msg) != {"role", "content"}:
            raise ValueError(f"message {i} must have exactly the keys 'role' and 'content', got {msg!r:.80}")
        if msg["role"] not in _ROLES:
            raise ValueError(f"message {i} has role {msg['role']!r}; expected one of {sorted(_ROLES)}")
        if not isinstance(msg["content"], str):
            raise ValueError(f"message {i} content must be a string, got {type(msg['content']).__name__}")
        out.append({"role": msg["role"], "content": msg["content"]})
    return out


def resolve_sampling(sampling: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill defaults and reject unknown or out-of-range sampling parameters by name."""
    unknown = set(sampling) - set(SAMPLING_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown sampling parameter(s) {sorted(unknown)}; supported: {sorted(SAMPLING_DEFAULTS)}"
        )
    merged = {**SAMPLING_DEFAULTS, **(defaults or {}), **sampling}
    if merged["temperature"] < 0:
        raise ValueError(f"temperature must be >= 0, got {merged['temperature']}")
    if not 0 < merged["top_p"] <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {merged['top_p']}")
    if int(merged["max_tokens"]) < 1:
        raise ValueError(f"max_tokens must be >= 1, got {merged['max_tokens']}")
    stop = merged["stop"]
    merged["stop"] = tuple([stop] if isinstance(stop, str) else (stop or ()))
    merged["max_tokens"] = int(merged["max_tokens"])
    merged["seed"] = int(merged["seed"])
    merged["temperature"] = float(merged["temperature"])
    merged["top_p"] = float(merged["top_p"])
    return merged


def complete_batch(chat: Chat, conversations: Sequence[Messages], **sampling: Any) -> list[str]:
    """Complete many conversations, concurrently or batched when the back-end can."""
    batch = getattr(chat, "complete_batch", None)
    if batch is not None:
        return list(batch(list(conversations), **sampling))
    return [chat.complete(messages, **sampling) for messages in conversations]


def chat_model_name(chat: Any) -> str:
    return str(getattr(chat, "model_name", None) or getattr(chat, "model", None) or type(chat).__name__)


# ---------------------------------------------------------------------------------------------
# Content-hash cache


def cache_key(model: str, messages: Messages, sampling: dict[str, Any]) -> str:
    """SHA-256 over model, messages and (resolved) sampling parameters, canonical JSON."""
    blob = json.dumps(
        {"model": model, "messages": messages, "sampling": {k: sampling[k] for k in sorted(sampling)}},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=list,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedChat:
    """Wrap a chat object with an on-disk cache: one JSON file per distinct call.

    Files live at ``cache_dir/<key[:2]>/<key>.json`` and are written atomically, so concurrent
    workers (threads or Snakemake jobs) sharing a cache never see a half-written entry. The model
    name is part of the key, so one directory can hold several models' calls.
    """

    def __init__(self, inner: Chat, cache_dir: str | os.PathLike, *, model_name: str | None = None,
                 defaults: dict[str, Any] | None = None):
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.model_name = model_name or chat_model_name(inner)
        self.defaults = dict(defaults or {})
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _lookup(self, key: str) -> str | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ChatError(f"corrupt cache entry {path}: {exc.msg}; delete it to recompute") from exc
        return entry["completion"]

    def _store(self, key: str, messages: Messages, sampling: dict, completion: str) -> None:
        write_json(self._path(key), {
            "model": self.model_name, "messages": messages,
            "sampling": {k: list(v) if isinstance(v, tuple) else v for k, v in sampling.items()},
            "completion": completion,
        })

    def complete(self, messages: Messages, **sampling: Any) -> str:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[str]:
        resolved = resolve_sampling(sampling, self.defaults)
        convs = [validate_messages(m) for m in conversations]
        keys = [cache_key(self.model_name, m, resolved) for m in convs]
        out: list[str | None] = [self._lookup(k) for k in keys]
        # Identical calls inside one batch are issued once.
        todo: dict[str, int] = {}
        for i, (key, value) in enumerate(zip(keys, out)):
            if value is None and key not in todo:
                todo[key] = i
        with self._lock:
            self.hits += sum(v is not None for v in out)
            self.misses += len(todo)
        if todo:
            idx = list(todo.values())
            fresh = complete_batch(self.inner, [convs[i] for i in idx], **resolved)
            for i, text in zip(idx, fresh):
                if not isinstance(text, str):
                    raise ChatError(f"back-end returned {type(text).__name__}, not str, for call {keys[i][:12]}")
                self._store(keys[i], convs[i], resolved, text)
                out[i] = text
            for i, key in enumerate(keys):
                if out[i] is None:
                    out[i] = out[todo[key]]
        return [str(t) for t in out]


# ---------------------------------------------------------------------------------------------
# Back-ends


class FunctionChat:
    """A chat whose reply is ``fn(messages, sampling)``: rule-based agents and scripted tests."""

    def __init__(self, fn: Callable[[Messages, dict[str, Any]], str], model_name: str = "function"):
        self.fn = fn
        self.model_name = model_name
        self.calls: list[Messages] = []
        self._lock = threading.Lock()

    def complete(self, messages: Messages, **sampling: Any) -> str:
        messages = validate_messages(messages)
        resolved = resolve_sampling(sampling)
        with self._lock:
            self.calls.append(messages)
        reply = self.fn(messages, resolved)
        if not isinstance(reply, str):
            raise ChatError(f"{self.model_name}: function returned {type(reply).__name__}, not str")
        return reply


class EngineChat:
    """Adapter from a :class:`concord.engines.base.Engine` to the chat interface.

    A batch goes to ``engine.generate`` in one call so the engine can pad and batch on its own.
    """

    def __init__(self, engine: Any, defaults: dict[str, Any] | None = None):
        for attr in ("generate", "model_name"):
            if not hasattr(engine, attr):
                raise TypeError(f"EngineChat needs an Engine with .{attr}; got {type(engine).__name__}")
        self.engine = engine
        self.model_name = engine.model_name
        self.defaults = dict(defaults or {})

    def _params(self, sampling: dict[str, Any]):
        from concord.engines.base import SamplingParams

        s = resolve_sampling(sampling, self.defaults)
        return SamplingParams(n=1, temperature=s["temperature"], top_p=s["top_p"],
                              max_new_tokens=s["max_tokens"], seed=s["seed"], stop=s["stop"])

    def complete(self, messages: Messages, **sampling: Any) -> str:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[str]:
        convs = [validate_messages(m) for m in conversations]
        generations = self.engine.generate(convs, self._params(sampling))
        if len(generations) != len(convs):
            raise ChatError(f"engine {self.model_name} returned {len(generations)} results for {len(convs)} conversations")
        return [gens[0].text for gens in generations]


#: HTTP statuses worth retrying: rate limits, timeouts, and server-side failures.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIChat:
    """Client for an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8000/v1`` for ``vllm serve``.
    The API key, if any, comes from the argument or the ``api_key_env`` environment variable.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0, max_retries: int = 5,
                 backoff_s: float = 0.5, max_backoff_s: float = 30.0, concurrency: int = 8,
                 defaults: dict[str, Any] | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required")
        self.base_url = base_url.rstrip("/")
        self.model = self.model_name = model
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.concurrency = concurrency
        self.defaults = dict(defaults or {})
        self.n_requests = 0  # HTTP requests sent, retries included (for tests and accounting)
        self._lock = threading.Lock()

    def _payload(self, messages: Messages, s: dict[str, Any]) -> dict[str, Any]:
        payload = {"model": self.model, "messages": messages, "temperature": s["temperature"],
                   "top_p": s["top_p"], "max_tokens": s["max_tokens"], "seed": s["seed"], "n": 1}
        if s["stop"]:
            payload["stop"] = list(s["stop"])
        return payload

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=json.dumps(payload).encode("utf-8"),
            headers=headers, method="POST",
        )
        with self._lock:
            self.n_requests += 1
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return json.loads(response.read().decode("utf-8"))

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass  # an HTTP date; fall back to exponential back-off
        # Full jitter keeps many concurrent workers from retrying in lock-step.
        return random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2 ** attempt))

    def complete(self, messages: Messages, **sampling: Any) -> str:
        messages = validate_messages(messages)
        payload = self._payload(messages, resolve_sampling(sampling, self.defaults))
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                body = self._post(payload)
                return _completion_text(body, self.base_url)
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                last_error = f"HTTP {exc.code}: {detail}"
                if exc.code not in RETRYABLE_STATUS:
                    raise ChatError(f"{self.base_url}/chat/completions rejected the request ({last_error})") from exc
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except json.JSONDecodeError as exc:
                last_error = f"response is not JSON ({exc.msg})"
            if attempt < self.max_retries:
                delay = self._delay(attempt, retry_after)
                log.warning("chat call to %s failed (%s); retry %d/%d in %.2fs",
                            self.base_url, last_error, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        raise ChatError(f"{self.base_url}/chat/completions failed after {self.max_retries + 1} attempts: {last_error}")

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[str]:
        conversations = list(conversations)
        if len(conversations) <= 1 or self.concurrency == 1:
            return [self.complete(m, **sampling) for m in conversations]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(conversations))) as pool:
            return list(pool.map(lambda m: self.complete(m, **sampling), conversations))


def _completion_text(body: dict[str, Any], where: str) -> str:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ChatError(f"{where}: response has no choices[0].message.content: {json.dumps(body)[:300]}") from exc
    return content if isinstance(content, str) else ""
