"""The verdict of ``audit verify``: what was found, as lines for a reader, a dict for ``--json``,
and the exit code (:data:`EXIT_CODES`)."""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_OK, EXIT_CANNOT_VERIFY, EXIT_STALE, EXIT_MODIFIED, EXIT_UNTRACKED, EXIT_OTHER_PROCESSOR = 0, 2, 3, 4, 5, 6
EXIT_CODES = {
    EXIT_OK: "verified: nothing missing, modified or stale, produced on this processor and accelerators",
    EXIT_CANNOT_VERIFY: "cannot verify (no or unreadable manifest, workflow does not plan, bad arguments)",
    EXIT_STALE: "stale only: every recorded artifact is intact, but inputs, config, code or env changed since",
    EXIT_MODIFIED: "missing or modified artifacts: the tree differs from its record",
    EXIT_UNTRACKED: "with --strict: files nobody registered",
    EXIT_OTHER_PROCESSOR: ("intact and current, but produced on another processor (CPU model, instruction set or "
                           "native bf16 differ) or with other accelerators (GPU model, count, CUDA or driver): a "
                           "rerun here may print other numbers"),
}


@dataclass
class AuditReport:
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # artifact -> reasons
    intermediate: list[str] = field(default_factory=list)  # temp() outputs removed after use: fine
    pending: list[str] = field(default_factory=list)  # planned outputs never built
    unplanned: list[str] = field(default_factory=list)  # recorded, no longer produced by the workflow
    untracked: list[str] = field(default_factory=list)
    planned: bool = False
    # artifacts produced on a processor other than this one: label of that processor -> paths
    other_processor: dict[str, list[str]] = field(default_factory=dict)
    no_processor: list[str] = field(default_factory=list)  # recorded before processors were
    this_processor: str = ""
    # artifacts produced with other accelerators (GPU models, count, CUDA, driver): label -> paths
    other_accelerators: dict[str, list[str]] = field(default_factory=dict)
    these_accelerators: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.modified or self.stale or self.pending)

    def exit_code(self, strict: bool = False) -> int:
        if self.missing or self.modified:
            return EXIT_MODIFIED
        if self.stale or self.pending:
            return EXIT_STALE
        if self.other_processor or self.other_accelerators:
            return EXIT_OTHER_PROCESSOR
        if strict and self.untracked:
            return EXIT_UNTRACKED
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"checked": self.checked, "ok": self.ok, "planned": self.planned, "missing": self.missing,
                "modified": self.modified, "stale": self.stale, "intermediate": self.intermediate,
                "pending": self.pending, "unplanned": self.unplanned, "untracked": self.untracked,
                "this_processor": self.this_processor, "other_processor": self.other_processor,
                "no_processor": self.no_processor, "these_accelerators": self.these_accelerators,
                "other_accelerators": self.other_accelerators}

    def format(self, limit: int = 50) -> str:
        lines = [f"checked {self.checked} artifact(s): "
                 f"{len(self.missing)} missing, {len(self.modified)} modified, {len(self.stale)} stale, "
                 f"{len(self.untracked)} untracked, {len(self.intermediate)} intermediate removed"
                 + (f", {len(self.pending)} pending" if self.pending else "")
                 + ("" if self.planned else " (not re-planned: config/code changes not checked)")]
        for label, paths in self.other_processor.items():
            lines.append(f"OTHER PROCESSOR: {len(paths)} artifact(s) produced on {label}, not on this machine's "
                         f"{self.this_processor}; their numbers may differ from a rerun here (README: Auditing results)")
        for label, paths in self.other_accelerators.items():
            lines.append(f"OTHER ACCELERATORS: {len(paths)} artifact(s) produced with {label}, not with this machine's "
                         f"{self.these_accelerators}; their numbers may differ from a rerun here (README: Auditing results)")
        if self.no_processor:
            lines.append(f"{len(self.no_processor)} artifact(s) record no processor (registered by an older concord)")
        rows = [f"MISSING   {p}" for p in self.missing] + [f"MODIFIED  {p}" for p in self.modified]
        rows += [f"STALE     {p}: {'; '.join(r)}" for p, r in self.stale.items()]
        rows += [f"PENDING   {p}: planned, never built" for p in self.pending]
        rows += [f"UNPLANNED {p}: no longer produced by the workflow" for p in self.unplanned]
        rows += [f"UNTRACKED {p}" for p in self.untracked]
        if len(rows) > limit:
            rows = rows[:limit] + [f"... {len(rows) - limit} more (--json lists all)"]
        return "\n".join(lines + rows)
