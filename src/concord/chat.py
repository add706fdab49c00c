"""One chat interface for every way of calling a model: ``complete(messages, **sampling) -> Completion``.

A :class:`Completion` carries the reply text (``message.content``), the *reasoning channel* that
reasoning models return beside it, and the call's token counts. vLLM's OpenAI-compatible server
with a reasoning parser (gpt-oss, the SC-MoA paper's model) puts the reasoning in
``message.reasoning_content`` (older releases) or ``message.reasoning`` (newer ones, and several
providers); both names are read (:data:`REASONING_FIELDS`, first non-empty wins) and the one
found is recorded, so the aggregator of SC-MoA can read the full trace, not only the final answer.

Back-ends:

* :class:`OpenAIChat` -- any OpenAI-compatible ``/chat/completions`` endpoint (``vllm serve``, a
  provider) through the official ``openai`` client, which owns retries (exponential back-off,
  ``Retry-After``), timeouts and connection pooling; a thread pool issues a batch concurrently.
* :class:`EngineChat` -- the project's in-process engines (:class:`concord.engines.base.Engine`).
* :class:`FunctionChat` -- a plain Python function of the conversation (rule-based agents,
  deterministic scripted agents in tests).

:class:`CachedChat` wraps any of them with an on-disk cache keyed by the SHA-256 of (model,
messages, sampling parameters): a rerun issues no calls and returns identical completions. Each
fresh completion is stored the moment it arrives, so a batch in which some calls fail (an endpoint
that goes down, a timeout after every retry) loses none of the calls that succeeded: the error
names how many failed and a rerun repeats only those. At greedy decoding the SC-MoA variant tags
(``<!-- sample variant: ... -->``) change the messages and hence the key, which is how k distinct
samples are obtained without temperature.

:class:`CallLog` wraps a chat to keep every completion a block of code asked for (cache hits
included), which is how per-method call counts and token totals are accounted (Table 28).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields, replace
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

#: Where OpenAI-compatible servers put the reasoning channel, in the order they are read.
REASONING_FIELDS = ("reasoning_content", "reasoning")

_ROLES = {"system", "user", "assistant"}


class ChatError(RuntimeError):
    """A model call that failed for good (after retries, or with a non-retryable error)."""


@dataclass(frozen=True)
class Completion:
    """One model reply: its text, its reasoning channel (if the server returned one), its cost."""

    text: str
    reasoning: str | None = None
    reasoning_field: str | None = None  # which response field held the reasoning
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # as the server counts them (reasoning included)
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    cached: bool = False  # served from the on-disk cache in this run

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cached")  # a property of one run, not of the call
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | str) -> "Completion":
        if isinstance(data, str):  # cache entries written before the reasoning channel was kept
            return cls(text=data)
        known = {f.name for f in fields(cls)} - {"cached"}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def usage(self) -> dict[str, Any]:
        """The call's accounting fields (what records store per call; whether it was a cache hit
        is left out, so that a rerun writes identical records)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens, "reasoning_field": self.reasoning_field,
                "finish_reason": self.finish_reason}


def as_completion(reply: Any, where: str = "back-end") -> Completion:
    """A back-end's reply as a :class:`Completion` (plain strings are accepted)."""
    if isinstance(reply, Completion):
        return reply
    if isinstance(reply, str):
        return Completion(text=reply)
    raise ChatError(f"{where} returned {type(reply).__name__}, not a str or Completion")


@runtime_checkable
class Chat(Protocol):
    """Anything that turns a conversation into the assistant's reply."""

    def complete(self, messages: Messages, **sampling: Any) -> Completion: ...


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


def complete_batch(chat: Chat, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
    """Complete many conversations, concurrently or batched when the back-end can."""
    batch = getattr(chat, "complete_batch", None)
    if batch is not None:
        out = list(batch(list(conversations), **sampling))
    else:
        out = [chat.complete(messages, **sampling) for messages in conversations]
    return [as_completion(c, chat_model_name(chat)) for c in out]


def complete_each(chat: Chat, conversations: Sequence[Messages], sampling: dict[str, Any],
                  on_result: Callable[[int, Completion], None] | None = None) -> list[Completion | ChatError]:
    """Complete every conversation; a failed call yields its :class:`ChatError` in its slot.

    ``on_result(i, completion)`` runs as each call succeeds (the cache stores it at once).
    """
    each = getattr(chat, "complete_each", None)
    if each is not None:
        return list(each(list(conversations), sampling, on_result))
    try:
        results: list[Completion | ChatError] = list(complete_batch(chat, conversations, **sampling))
    except ChatError as exc:  # a back-end that batches fails as a whole
        return [exc] * len(conversations)
    if on_result is not None:
        for i, c in enumerate(results):
            on_result(i, c)  # type: ignore[arg-type]
    return results


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

    ``expect_reasoning``: the model is a reasoning model behind a server that should return its
    reasoning channel. Single replies without one are recorded as such (``reasoning_field`` null);
    but once ``reasoning_probe`` calls have come back and *none* carried reasoning, the server is
    evidently not parsing it and :class:`ChatError` says how to fix that (the calls stay cached).
    """

    def __init__(self, inner: Chat, cache_dir: str | os.PathLike, *, model_name: str | None = None,
                 defaults: dict[str, Any] | None = None, expect_reasoning: bool = False,
                 reasoning_probe: int = 4):
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.model_name = model_name or chat_model_name(inner)
        self.defaults = dict(defaults or {})
        self.expect_reasoning = expect_reasoning
        self.reasoning_probe = max(1, int(reasoning_probe))
        self.hits = 0
        self.misses = 0
        self.failures = 0
        self.with_reasoning = 0
        self.seen = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _lookup(self, key: str) -> Completion | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ChatError(f"corrupt cache entry {path}: {exc.msg}; delete it to recompute") from exc
        return replace(Completion.from_dict(entry["completion"]), cached=True)

    def _store(self, key: str, messages: Messages, sampling: dict, completion: Completion) -> None:
        write_json(self._path(key), {
            "model": self.model_name, "messages": messages,
            "sampling": {k: list(v) if isinstance(v, tuple) else v for k, v in sampling.items()},
            "completion": completion.to_dict(),
        })

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        resolved = resolve_sampling(sampling, self.defaults)
        convs = [validate_messages(m) for m in conversations]
        keys = [cache_key(self.model_name, m, resolved) for m in convs]
        out: list[Completion | None] = [self._lookup(k) for k in keys]
        # Identical calls inside one batch are issued once.
        todo: dict[str, int] = {}
        for i, (key, value) in enumerate(zip(keys, out)):
            if value is None and key not in todo:
                todo[key] = i
        with self._lock:
            self.hits += sum(v is not None for v in out)
            self.misses += len(todo)
        errors: list[ChatError] = []
        if todo:
            idx = list(todo.values())

            def store(j: int, completion: Completion) -> None:
                i = idx[j]
                self._store(keys[i], convs[i], resolved, completion)

            fresh = complete_each(self.inner, [convs[i] for i in idx], resolved, on_result=store)
            for i, result in zip(idx, fresh):
                if isinstance(result, ChatError):
                    errors.append(result)
                else:
                    out[i] = as_completion(result, self.model_name)
            for i, key in enumerate(keys):
                if out[i] is None:
                    out[i] = out[todo[key]]
        done = [c for c in out if c is not None]
        with self._lock:
            self.failures += len(errors)
            self.seen += len(done)
            self.with_reasoning += sum(c.reasoning is not None for c in done)
        if errors:
            raise ChatError(
                f"{len(errors)} of {len(todo)} call(s) to {self.model_name} failed ({errors[0]}); the "
                f"{len(todo) - len(errors)} that succeeded are cached, so a rerun repeats only the failed ones"
            )
        self._check_reasoning()
        return done  # type: ignore[return-value]

    def _check_reasoning(self) -> None:
        if self.expect_reasoning and self.seen >= self.reasoning_probe and self.with_reasoning == 0:
            raise ChatError(
                f"{self.model_name}: none of {self.seen} replies carried a reasoning channel (looked for "
                f"{', '.join(REASONING_FIELDS)}); start the server with a reasoning parser (vLLM: "
                "`--reasoning-parser openai_gptoss` for gpt-oss) or set expect_reasoning: false for this "
                "endpoint. The replies are cached."
            )

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "failures": self.failures,
                "replies": self.seen, "with_reasoning": self.with_reasoning}


class CallLog:
    """Record every completion a chat returns (cache hits included), for per-method accounting."""

    def __init__(self, inner: Chat):
        self.inner = inner
        self.model_name = chat_model_name(inner)
        self.completions: list[Completion] = []
        self._lock = threading.Lock()

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        out = complete_batch(self.inner, conversations, **sampling)
        with self._lock:
            self.completions.extend(out)
        return out

    def usage(self) -> dict[str, Any]:
        """Calls and token totals (``None`` where the back-end reports no count); identical on a
        rerun served from the cache."""
        return summarize_usage(self.completions)


def summarize_usage(completions: Sequence[Completion]) -> dict[str, Any]:
    def total(attr: str) -> int | None:
        values = [getattr(c, attr) for c in completions]
        return None if any(v is None for v in values) else int(sum(values))

    return {"calls": len(completions), "with_reasoning": sum(c.reasoning is not None for c in completions),
            "prompt_tokens": total("prompt_tokens"), "completion_tokens": total("completion_tokens"),
            "reasoning_tokens": total("reasoning_tokens") if any(c.reasoning_tokens is not None for c in completions) else None}


# ---------------------------------------------------------------------------------------------
# Back-ends


class FunctionChat:
    """A chat whose reply is ``fn(messages, sampling)`` (a str or a :class:`Completion`):
    rule-based agents and scripted tests."""

    def __init__(self, fn: Callable[[Messages, dict[str, Any]], str | Completion], model_name: str = "function"):
        self.fn = fn
        self.model_name = model_name
        self.calls: list[Messages] = []
        self._lock = threading.Lock()

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        messages = validate_messages(messages)
        resolved = resolve_sampling(sampling)
        with self._lock:
            self.calls.append(messages)
        return as_completion(self.fn(messages, resolved), f"{self.model_name}: function")


class EngineChat:
    """Adapter from a :class:`concord.engines.base.Engine` to the chat interface.

    A batch goes to ``engine.generate`` in one call so the engine can pad and batch on its own.
    Token counts: the engine's generated-token count, and the rendered prompt's length when the
    engine exposes its tokenizer.
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

    def _prompt_tokens(self, messages: Messages) -> int | None:
        tokenizer = getattr(self.engine, "tokenizer", None)
        if tokenizer is None or not hasattr(self.engine, "render"):
            return None
        return len(tokenizer(self.engine.render(messages), add_special_tokens=False)["input_ids"])

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        return self.complete_batch([messages], **sampling)[0]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        convs = [validate_messages(m) for m in conversations]
        generations = self.engine.generate(convs, self._params(sampling))
        if len(generations) != len(convs):
            raise ChatError(f"engine {self.model_name} returned {len(generations)} results for {len(convs)} conversations")
        return [Completion(text=gens[0].text, prompt_tokens=self._prompt_tokens(m), completion_tokens=gens[0].n_tokens,
                           finish_reason=gens[0].finish_reason) for m, gens in zip(convs, generations)]


class OpenAIChat:
    """Client for an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8000/v1`` for ``vllm serve``. The API key
    comes from the argument or the ``api_key_env`` environment variable (a local vLLM server needs
    none; the client then sends a placeholder). ``max_retries`` and ``timeout_s`` go to the
    ``openai`` client, which retries connection errors, timeouts, 408/409/429 and 5xx answers with
    exponential back-off and honours ``Retry-After``. ``extra_body`` adds server-specific request
    fields (e.g. ``{"reasoning_effort": "high"}`` for gpt-oss on vLLM).
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0, max_retries: int = 5,
                 concurrency: int = 8, defaults: dict[str, Any] | None = None,
                 extra_body: dict[str, Any] | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required")
        import openai

        self.base_url = base_url.rstrip("/")
        self.model = self.model_name = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.defaults = dict(defaults or {})
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        # A local server takes any key; the client refuses to start without one.
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key or "EMPTY", timeout=timeout_s,
                                    max_retries=max_retries)

    def _request(self, messages: Messages, s: dict[str, Any]) -> dict[str, Any]:
        request = {"model": self.model, "messages": messages, "temperature": s["temperature"], "top_p": s["top_p"],
                   "max_tokens": s["max_tokens"], "seed": s["seed"], "n": 1}
        if s["stop"]:
            request["stop"] = list(s["stop"])
        if self.extra_body:
            request["extra_body"] = dict(self.extra_body)
        return request

    def _describe(self, exc: Exception) -> str:
        import openai

        attempts = f"after {self.max_retries + 1} attempt(s)"
        if isinstance(exc, openai.APITimeoutError):
            return f"{self.base_url}/chat/completions timed out ({self.timeout_s:g} s per attempt) {attempts}"
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return (f"cannot reach {self.base_url}/chat/completions {attempts} ({type(cause).__name__}: {cause}); "
                    "is the server running at that address?")
        if isinstance(exc, openai.APIStatusError):
            detail = (exc.response.text or "")[:300] if exc.response is not None else ""
            retried = attempts if exc.status_code in (408, 409, 429) or exc.status_code >= 500 else "(not retryable)"
            return f"{self.base_url}/chat/completions answered HTTP {exc.status_code} {retried}: {detail}"
        return f"{self.base_url}/chat/completions failed: {type(exc).__name__}: {exc}"

    def complete(self, messages: Messages, **sampling: Any) -> Completion:
        import openai

        messages = validate_messages(messages)
        request = self._request(messages, resolve_sampling(sampling, self.defaults))
        try:
            response = self.client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            raise ChatError(self._describe(exc)) from exc
        return completion_from_response(response, f"{self.base_url}/chat/completions")

    def complete_each(self, conversations: Sequence[Messages], sampling: dict[str, Any],
                      on_result: Callable[[int, Completion], None] | None = None) -> list[Completion | ChatError]:
        conversations = list(conversations)
        out: list[Completion | ChatError | None] = [None] * len(conversations)

        def one(i: int) -> None:
            try:
                out[i] = self.complete(conversations[i], **sampling)
            except ChatError as exc:
                out[i] = exc
                return
            if on_result is not None:
                on_result(i, out[i])  # type: ignore[arg-type]

        if len(conversations) <= 1 or self.concurrency == 1:
            for i in range(len(conversations)):
                one(i)
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(conversations))) as pool:
                for future in as_completed([pool.submit(one, i) for i in range(len(conversations))]):
                    future.result()  # re-raise anything that is not a ChatError (a bug, not an outage)
        return out  # type: ignore[return-value]

    def complete_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[Completion]:
        results = self.complete_each(conversations, sampling)
        errors = [r for r in results if isinstance(r, ChatError)]
        if errors:
            raise ChatError(f"{len(errors)} of {len(results)} call(s) failed; first: {errors[0]}")
        return results  # type: ignore[return-value]


def completion_from_response(response: Any, where: str) -> Completion:
    """A :class:`Completion` from an ``openai`` ``ChatCompletion`` (reasoning in either field)."""
    try:
        choice = response.choices[0]
        message = choice.message
    except (AttributeError, IndexError, TypeError) as exc:
        raise ChatError(f"{where}: response has no choices[0].message: {str(response)[:300]}") from exc
    extra = getattr(message, "model_extra", None) or {}
    reasoning, field = None, None
    for name in REASONING_FIELDS:
        value = extra.get(name, getattr(message, name, None))
        if isinstance(value, str) and value.strip():
            reasoning, field = value, name
            break
    usage = getattr(response, "usage", None)
    details = getattr(usage, "completion_tokens_details", None) if usage is not None else None
    content = message.content if isinstance(message.content, str) else ""
    return Completion(
        text=content, reasoning=reasoning, reasoning_field=field,
        prompt_tokens=getattr(usage, "prompt_tokens", None) if usage is not None else None,
        completion_tokens=getattr(usage, "completion_tokens", None) if usage is not None else None,
        reasoning_tokens=getattr(details, "reasoning_tokens", None) if details is not None else None,
        finish_reason=getattr(choice, "finish_reason", None),
    )
