"""Which reader reads a produced file (by its path inside the results tree), and the whole read:
every file through its kind's reader, then the measures that span several files."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from concord.scorecard.readers.base import READERS, Found, ReadContext, Reproduced
from concord.scorecard.readers.core import CoreQuestions, core_aggregates, recovery_aggregates
from concord.scorecard.readers.scmoa import scmoa_aggregates


def classify(rel: str) -> tuple[str, dict] | None:
    """The kind of a produced file (by its path inside the results tree), or None."""
    for name in READERS:
        for pattern in READERS.get(name).patterns:
            match = pattern.match(rel)
            if match:
                return name, match.groupdict()
    return None


def scorecard_inputs(targets: Iterable[str], results_dir: str | Path = "results") -> list[str]:
    """The produced files the scorecard reads, picked from a workflow's final targets.

    Rules list figures by their PNG (FMV Figure 2) or their CSV; the scorecard needs the CSV (and
    Figure 5a's JSON) beside them. Snakemake uses this as the scorecard rule's input function, so
    the scorecard follows whatever subset of the grid the config asks for.
    """
    root = Path(results_dir)
    picked: dict[str, None] = {}
    for target in targets:
        path = Path(str(target))
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        candidates = [rel]
        if rel.endswith(".png") or rel.endswith(".md") or rel.endswith(".tex") or rel.endswith(".pdf"):
            candidates = [rel.rsplit(".", 1)[0] + ".csv", rel.rsplit(".", 1)[0] + ".json"]
        for cand in candidates:
            if classify(cand):
                picked[(root / cand).as_posix()] = None
    return list(picked)


def _found(files: Iterable[str | Path], root: Path, results_dir: str | Path) -> list[tuple[str, Found]]:
    """Each file with its kind, in the order given; a file outside the tree, of no known kind, or
    missing fails naming it."""
    out = []
    for file in files:
        path = Path(file)
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"{file}: not inside the results tree {results_dir}") from None
        kind = classify(rel)
        if kind is None:
            expected = ", ".join(p.pattern for name in READERS for p in READERS.get(name).patterns)
            raise ValueError(f"{rel}: not a table the scorecard reads (expected one of: {expected})")
        if not path.is_file():
            raise FileNotFoundError(f"{file}: produced table missing (run the rule that makes it first)")
        out.append((kind[0], Found(path, rel, kind[1])))
    return out


def read_produced(files: Iterable[str | Path], results_dir: str | Path, config: Mapping,
                  core_families: Mapping[str, set[tuple[str, str]]] | None = None) -> list[Reproduced]:
    """Every measure in ``files`` (paths inside ``results_dir``), plus the cross-table ones."""
    root = Path(results_dir).resolve()
    found = _found(files, root, results_dir)
    ctx = ReadContext(root, config, CoreQuestions(root, config), [], core_families or {})
    for kind, one in found:  # stage 0: file by file, in the order given
        reader = READERS.get(kind)
        if reader.stage == 0:
            ctx.records += reader.read([one], ctx)
    later = sorted((READERS.get(kind).stage, kind) for kind in {k for k, _ in found} if READERS.get(kind).stage)
    for _, kind in later:
        ctx.records += READERS.get(kind).read([f for k, f in found if k == kind], ctx)
    records = ctx.records
    records += core_aggregates(records, ctx.core_families, config)
    records += recovery_aggregates(records, config)
    records += scmoa_aggregates(records, config)
    return records
