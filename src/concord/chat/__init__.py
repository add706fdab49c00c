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

One concern per module: ``base`` (the interface), ``cache`` (:class:`CachedChat`), ``accounting``
(:class:`CallLog`), ``backends`` (the back-ends), ``lockstep`` (:class:`LockstepChat`: the calls of many
independent tasks batched round by round, deterministically); this package hands on their public names.
"""

from __future__ import annotations

from concord.chat.accounting import CallLog, summarize_usage
from concord.chat.backends import EngineChat, FunctionChat, OpenAIChat, completion_from_response
from concord.chat.base import (
    REASONING_FIELDS,
    SAMPLING_DEFAULTS,
    Chat,
    ChatError,
    Completion,
    Messages,
    as_completion,
    chat_model_name,
    complete_batch,
    complete_each,
    resolve_sampling,
    validate_messages,
)
from concord.chat.cache import CachedChat, cache_key
from concord.chat.lockstep import LockstepChat

__all__ = [
    "CachedChat", "CallLog", "Chat", "ChatError", "Completion", "EngineChat", "FunctionChat", "LockstepChat", "Messages",
    "OpenAIChat", "REASONING_FIELDS", "SAMPLING_DEFAULTS", "as_completion", "cache_key", "chat_model_name",
    "complete_batch", "complete_each", "completion_from_response", "resolve_sampling", "summarize_usage",
    "validate_messages",
]
