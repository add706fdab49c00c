"""Figure 4's input: the recovery summary of one (model, benchmark) cell, as ``concord core-recovery``
writes it (``analysis/{model}/{benchmark}/recovery.json``), checked on load."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


from concord import io

RECOVERY_KEYS: tuple[str, ...] = (
    "outnumbering_ratio",
    "coherence_advantage",
    "confidence_gap_nats",
    "tau",
    "recovered",
    "n_questions",
)


@dataclass(frozen=True)
class RecoveryCell:
    """``analysis/{model}/{benchmark}/recovery.json``: the recovery statistics of one cell.

    Required keys (other keys, e.g. ``provenance``, are allowed and ignored):

    * ``n_questions`` (int >= 0): contested questions -- a correct answer class exists but a
      larger wrong class outnumbers it -- that the statistics below summarise.
    * ``outnumbering_ratio`` (float > 0, or null iff ``n_questions == 0``): ``r = m / n*``, wrong
      plurality size over correct class size, aggregated over the contested questions.
    * ``coherence_advantage`` (float > 0, or null iff ``n_questions == 0``): measured ``c* / c_w``,
      mean within-class affinity of the correct class over that of the wrong plurality.
    * ``confidence_gap_nats`` (float, or null iff ``n_questions == 0``): ``delta = c̄* - c̄_w``, the
      gap in mean token log-probability (nats) between correct and wrong roll-outs.
    * ``tau`` (float > 0): the confidence temperature used by CoRE.
    * ``recovered``: bool (the cell as a whole was recovered) or int in ``[0, n_questions]``
      (contested questions whose correct minority CoRE's extraction selected).
    """

    model: str
    benchmark: str
    outnumbering_ratio: float | None
    coherence_advantage: float | None
    confidence_gap_nats: float | None
    tau: float
    recovered: bool | int
    n_questions: int

    @classmethod
    def from_dict(cls, data: Mapping, model: str, benchmark: str, source: str = "recovery.json") -> "RecoveryCell":
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in RECOVERY_KEYS if k not in data]
        if missing:
            raise ValueError(f"{source}: missing required key(s) {missing}")
        n = data["n_questions"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{source}: 'n_questions' must be an integer >= 0, got {n!r}")
        tau = _number(source, "tau", data["tau"])
        if tau <= 0:
            raise ValueError(f"{source}: 'tau' must be > 0, got {tau!r}")
        measured = {}
        for key, positive in (("outnumbering_ratio", True), ("coherence_advantage", True), ("confidence_gap_nats", False)):
            value = data[key]
            if value is None:
                if n > 0:
                    raise ValueError(f"{source}: '{key}' is null although n_questions = {n} > 0")
                measured[key] = None
                continue
            value = _number(source, key, value)
            if positive and value <= 0:
                raise ValueError(f"{source}: '{key}' must be > 0, got {value!r}")
            measured[key] = value
        recovered = data["recovered"]
        if isinstance(recovered, bool):
            pass
        elif isinstance(recovered, int):
            if not 0 <= recovered <= n:
                raise ValueError(f"{source}: 'recovered' count {recovered} is outside [0, n_questions={n}]")
        else:
            raise ValueError(f"{source}: 'recovered' must be a bool or an integer count, got {recovered!r}")
        return cls(model=model, benchmark=benchmark, tau=tau, recovered=recovered, n_questions=n, **measured)

    @property
    def measured(self) -> bool:
        return self.outnumbering_ratio is not None

    @property
    def confidence_factor(self) -> float:
        """``e^(-delta/tau)``: how much confidence lowers the extraction bar (Prop. 3)."""
        return math.exp(-self.confidence_gap_nats / self.tau)

    @property
    def vote_bar(self) -> float:
        """Coherence advantage needed from the barycentre start: ``(m-1)/(n*-1) ~ r`` (Prop. 2)."""
        return self.outnumbering_ratio

    @property
    def confidence_bar(self) -> float:
        return self.confidence_factor * self.outnumbering_ratio

    @property
    def recovered_fraction(self) -> float:
        if isinstance(self.recovered, bool):
            return float(self.recovered)
        return self.recovered / self.n_questions if self.n_questions else float("nan")


def _number(source: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{source}: '{key}' must be a finite number, got {value!r}")
    return float(value)


def recovery_path(results_dir: str | Path, model: str, benchmark: str) -> Path:
    return Path(results_dir) / "analysis" / model / benchmark / "recovery.json"


def load_recovery(path: str | Path, model: str | None = None, benchmark: str | None = None) -> RecoveryCell:
    """Read and validate one ``recovery.json``; model/benchmark default to its path."""
    path = Path(path)
    if model is None or benchmark is None:
        if path.parent.parent.parent.name != "analysis":
            raise ValueError(f"{path}: expected analysis/{{model}}/{{benchmark}}/recovery.json")
        model, benchmark = path.parent.parent.name, path.parent.name
    try:
        data = io.read_json(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"recovery statistics missing: {path}") from None
    return RecoveryCell.from_dict(data, model=model, benchmark=benchmark, source=str(path))
