"""What one execution returns (:class:`Outcome`), the limits it runs under and the modes."""

from __future__ import annotations

import math
from dataclasses import dataclass

STATUSES = ("ok", "error", "timeout")
# ``functional`` is LiveCodeBench's name for call-based problems.
MODES = {"stdin": "stdin", "call": "call", "functional": "call", "humaneval": "humaneval"}
REPR_PREFIX = "repr:"  # marks a call-mode return value without a literal form (grades as wrong)


@dataclass(frozen=True)
class Outcome:
    """One program on one input: ``status`` in ok/error/timeout; ``output`` is the normalised
    output when ``status == "ok"``, else None; ``error`` says what went wrong."""

    status: str
    output: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int
    max_output_bytes: int = 4 * 1024 * 1024
    max_procs: int = 8
    tmp_mb: int = 64
    #: What the trusted parent keeps of one program's outputs in one call, as Python stores them
    #: (a text with one character above U+FFFF takes 4 bytes a character); None: 16 x
    #: ``max_output_bytes``. Past it the program's further outputs are errors: ``max_output_bytes``
    #: bounds one input, and 20 inputs of 4 MiB of such text made the caller keep 348 MB for one
    #: candidate (sixth red team).
    max_kept_output_bytes: int | None = None

    @property
    def kept_output_budget(self) -> int:
        return self.max_kept_output_bytes if self.max_kept_output_bytes is not None else 16 * self.max_output_bytes

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64 (the interpreter needs it), got {self.memory_mb!r}")
        if self.max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be positive, got {self.max_output_bytes!r}")
        if self.max_kept_output_bytes is not None and self.max_kept_output_bytes < 1:
            raise ValueError(f"max_kept_output_bytes must be positive, got {self.max_kept_output_bytes!r}")
        if self.max_procs < 1:
            raise ValueError(f"max_procs must be >= 1, got {self.max_procs!r}")
        if self.tmp_mb < 1:
            raise ValueError(f"tmp_mb must be >= 1, got {self.tmp_mb!r}")


def normalize_mode(mode: str) -> str:
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(
            f"unknown execution mode {mode!r}; use 'stdin', 'call' (alias 'functional') or 'humaneval'"
        ) from None
