"""Reproduction scorecard: every number the three papers print beside the number a run reproduced.

The printed numbers ship as data (``printed/{core,fmv,scmoa}.csv``, see :mod:`.printed`); the
produced ones are read from the run's table files by their documented paths and columns
(:mod:`.readers` -- this shared layer imports no paper package); :mod:`.compare` gives each printed
number a difference and a verdict (within or outside a 95% tolerance built by :mod:`.tolerance` from
both sides' uncertainty, a different setting, an analogue computed, not run); :mod:`.fidelity` links rows to the choices ``docs/fidelity.md`` records; :mod:`.render`
writes per paper a CSV, a Markdown and an HTML page, and a summary; :mod:`.statistics` recomputes the
papers' own statistics from their printed inputs (``statistics.csv``, ``statistics.md``).

Example::

    from concord.scorecard import build
    build(["results/tables/table1.csv"], "results", config, "results/scorecard",
          fidelity_text=open("docs/fidelity.md").read())
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from concord import io
from concord.scorecard.compare import VERDICTS, compare, summary
from concord.scorecard.fidelity import link_cells, parse_fidelity, rows_for
from concord.scorecard.printed import PAPERS, PrintedCell, load_anomalies, load_printed
from concord.scorecard.readers import read_produced, scorecard_inputs
from concord.scorecard.render import paper_html, paper_markdown, scorecard_frame, summary_html, summary_markdown
from concord.scorecard.statistics import all_statistics, statistics_frame, statistics_markdown

__all__ = ["PAPERS", "VERDICTS", "build", "core_families", "load_printed", "output_names", "scorecard_inputs"]


def output_names() -> list[str]:
    """The files ``build`` writes into its output folder."""
    names = [f"summary.{ext}" for ext in ("md", "html", "json")]
    names += [f"{paper}.{ext}" for paper in PAPERS for ext in ("csv", "md", "html")]
    # The papers' statistics recomputed from their own printed inputs (needs no run).
    return names + ["statistics.csv", "statistics.md"]


def core_families(cells: Iterable[PrintedCell]) -> dict[str, set[tuple[str, str]]]:
    """``table1``.. -> the (model, benchmark) cells of CoRE's Tables 1-3."""
    families: dict[str, set[tuple[str, str]]] = {}
    for cell in cells:
        parts = cell.measure.split(":")
        if parts[0] == "pass_at_1" and cell.table.startswith("Table "):
            families.setdefault(f"table{cell.table.split()[-1]}", set()).add((parts[1], parts[2]))
    return families


def build(files: Iterable[str | Path], results_dir: str | Path, config: Mapping, out_dir: str | Path, *,
          fidelity_text: str | None = None, run_name: str | None = None) -> list[Path]:
    """Read the produced tables, compare with the printed numbers, write every page; return the paths."""
    out = Path(out_dir)
    records = read_produced(files, results_dir, config, core_families(load_printed("core")))
    fidelity_rows = parse_fidelity(fidelity_text) if fidelity_text else []
    anomalies = load_anomalies()
    run = {"run_name": run_name or str(config.get("run_name") or "unnamed"), "results": str(results_dir)}
    written: list[Path] = []
    counts: dict[str, dict[str, int]] = {}
    for paper in PAPERS:
        cells = load_printed(paper)
        rows, unprinted = compare(cells, [r for r in records if r.paper == paper])
        paper_fidelity = rows_for(paper, fidelity_rows)
        specific, general = link_cells(paper, cells, paper_fidelity)
        for row in rows:
            row.fidelity = specific[row.cell.id]
        counts[paper] = {**summary(rows), "unprinted": len(unprinted)}
        own = [a for a in anomalies if a["paper"] == paper]
        frame = scorecard_frame(rows)
        written.append(io.write_text(out / f"{paper}.csv", frame.to_csv(index=False, lineterminator="\n")))
        written.append(io.write_text(out / f"{paper}.md", paper_markdown(
            paper, rows, unprinted, counts[paper], paper_fidelity, general, own, run)))
        written.append(io.write_text(out / f"{paper}.html", paper_html(
            paper, rows, unprinted, counts[paper], paper_fidelity, general, own, run)))
    statistics = all_statistics()
    written.append(io.write_text(out / "statistics.csv", statistics_frame(statistics).to_csv(
        index=False, lineterminator="\n")))
    written.append(io.write_text(out / "statistics.md", statistics_markdown(statistics)))
    counts_statistics = {"statistics": len(statistics),
                         "reproduced": sum(s.verdict == "reproduces" for s in statistics),
                         "anomalies": sum(bool(s.anomaly) for s in statistics)}
    written.append(io.write_text(out / "summary.md", summary_markdown(counts, run) + (
        f"\nThe papers' own statistics, recomputed from their printed inputs: {counts_statistics['reproduced']} of "
        f"{counts_statistics['statistics']} reproduce to the printed digits; {counts_statistics['anomalies']} rows name "
        "an inconsistency of the paper (statistics.md).\n")))
    written.append(io.write_text(out / "summary.html", summary_html(counts, run)))
    written.append(io.write_text(out / "summary.json", json.dumps({"run": run, "papers": counts,
                                                                  "printed_statistics": counts_statistics}, indent=2,
                                                                  sort_keys=True) + "\n"))
    return sorted(written, key=lambda p: output_names().index(p.name))
