"""The back-ends: a plain function (:class:`FunctionChat`), the project's in-process engines
(:class:`EngineChat`) and any OpenAI-compatible endpoint (:class:`OpenAIChat`)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Sequence

from concord.chat.base import (
    REASONING_FIELDS,
    ChatError,
    Completion,
    Messages,
    as_completion,
    resolve_sampling,
    validate_messages,
)

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
