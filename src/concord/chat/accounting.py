"""Per-method call accounting: :class:`CallLog` keeps every completion a block of code asked for
(cache hits included), and :func:`summarize_usage` totals their calls and tokens (Table 28)."""

from __future__ import annotations

import threading
from typing import Any, Sequence

from concord.chat.base import Chat, Completion, Messages, chat_model_name, complete_batch

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
