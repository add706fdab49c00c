"""The chat interface: a :class:`Completion` (reply, reasoning channel, token counts), the
:class:`Chat` protocol, checked messages and sampling parameters, and batch helpers that work with
any back-end."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

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
