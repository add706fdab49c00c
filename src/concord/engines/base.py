"""One generation interface for every back-end (Hugging Face, vLLM, OpenAI-compatible HTTP).

An engine takes chat conversations (``[{"role": "user", "content": ...}]``), renders them with
the model's own chat template, and returns for every conversation ``n`` :class:`Generation`
records carrying what the consensus operators need: the text, its token count, why it
stopped, and the mean token log-probability under the sampling policy (the confidence c_i).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Protocol, Sequence, runtime_checkable

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Generation:
    text: str
    n_tokens: int
    finish_reason: str  # "stop" (end of sequence / stop string) or "length"
    mean_logprob: float  # mean natural-log probability per generated token (nats)
    token_logprobs: list[float] = field(default_factory=list, repr=False)
    token_ids: list[int] = field(default_factory=list, repr=False)  # the sampled tokens (EOS included)

    def to_dict(self, with_tokens: bool = False) -> dict:
        d = asdict(self)
        if not with_tokens:
            d.pop("token_logprobs")
            d.pop("token_ids")
        return d


def mean_logprob(token_logprobs: Sequence[float]) -> float:
    """Mean token log-probability; an empty generation gets -inf (never the most confident)."""
    if len(token_logprobs) == 0:
        return -math.inf
    return float(sum(token_logprobs) / len(token_logprobs))


@runtime_checkable
class Engine(Protocol):
    """What every generation back-end provides."""

    model_name: str

    def generate(self, conversations: Sequence[Messages], params: SamplingParams) -> list[list[Generation]]:
        """Return ``params.n`` generations for each conversation, in order."""
        ...

    def render(self, messages: Messages) -> str:
        """The prompt string the model actually sees (chat template applied)."""
        ...
