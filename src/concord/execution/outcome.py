"""What one execution returns (:class:`Outcome`), the limits it runs under and the modes."""

from __future__ import annotations

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


# Upper bounds on a candidate's limits: what the kernel's interfaces take (select's timeout,
# cgroup and rlimit values, tmpfs sizes) with room to spare. Larger values failed deep inside a
# worker (OverflowError, EINVAL) instead of here (thirteenth red team).
MAX_TIMEOUT_S = 86_400.0  # a day per input
MAX_PROCS = 65_536
MAX_TMP_MB = 1 << 20  # 1 TiB


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
        if not (0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise ValueError(f"timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S}], got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64 (the interpreter needs it), got {self.memory_mb!r}")
        if self.max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be positive, got {self.max_output_bytes!r}")
        if self.max_kept_output_bytes is not None and self.max_kept_output_bytes < 1:
            raise ValueError(f"max_kept_output_bytes must be positive, got {self.max_kept_output_bytes!r}")
        if not 1 <= self.max_procs <= MAX_PROCS:
            raise ValueError(f"max_procs must be in [1, {MAX_PROCS}], got {self.max_procs!r}")
        if not 1 <= self.tmp_mb <= MAX_TMP_MB:
            raise ValueError(f"tmp_mb must be in [1, {MAX_TMP_MB}], got {self.tmp_mb!r}")


def normalize_mode(mode: str) -> str:
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown execution mode {mode!r}; use 'stdin', 'call' (alias 'functional') or 'humaneval'"
        ) from None
