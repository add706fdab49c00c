"""The scorecard as files: per paper a CSV (numbers), Markdown and HTML page; a summary page."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from html import escape
from typing import Mapping, Sequence

import pandas as pd

from concord.scorecard.compare import VERDICTS, Row, unprinted_reason
from concord.scorecard.fidelity import FidelityRow
from concord.scorecard.printed import PAPERS, SEED_PREFIX, PrintedCell
from concord.scorecard.readers import Reproduced

LEGEND = (
    "**within**: the run shares the paper's setting (questions, seeds, training, N, k included) and passes a "
    "two-sided 95% test of \"same quantity\": the difference is at most the tolerance shown, built from the "
    "paper's printed spread (its seed count and ddof), the run's own standard error and the printed digits' "
    "rounding (docs/scorecard.md). **outside**: the same setting, beyond that tolerance. "
    "**different setting**: the run produced this number under another setting (named); both are shown, "
    "nothing is judged and no difference is given. "
    "**analogue computed**: the run computed this quantity for another model or benchmark (named), not this one. "
    "**not run**: the run produced no such number."
)
BANNER = ("This run is not the paper's setting. Its numbers stand beside the printed ones they correspond to, or in "
          "the table of numbers the paper does not print, but none is judged against the paper.")

CSV_COLUMNS = ("id", "table", "row", "column", "measure", "printed", "spread_kind", "spread", "ci_lo", "ci_hi",
               "reproduced", "reproduced_spread", "reproduced_se", "difference", "tolerance", "verdict",
               "setting_differences", "reproduced_setting", "analogues", "notes", "fidelity", "produced_file",
               "printed_note")


def _decimals(text: str) -> int:
    return max(0, -int(Decimal(text.lstrip("+")).as_tuple().exponent))


def printed_text(cell: PrintedCell) -> str:
    d = _decimals(cell.text)
    if cell.spread_kind == "lower_bound":
        return f"> {cell.text}"
    if cell.spread_kind == "upper_bound":
        return f"< {cell.text}"
    if cell.spread_kind in ("std", "se"):
        return f"{cell.text} ± {cell.spread:.{d}f} ({cell.spread_kind})"
    if cell.spread_kind == "arm_std":
        return f"{cell.text} (tolerance ± {cell.spread:.{d}f}, its arm's std)"
    if cell.spread_kind == "ci95":
        return f"{cell.text} [{cell.ci_lo:.{d}f}, {cell.ci_hi:.{d}f}]"
    return cell.text


def number_text(value: float | None, like: str, signed: bool = False) -> str:
    """``value`` with one digit more than the printed ``like`` (integers stay integers)."""
    if value is None:
        return ""
    if math.isnan(value):
        return "undefined"
    d = _decimals(like)
    if d == 0 and float(value).is_integer():
        return f"{value:+.0f}" if signed else f"{value:.0f}"
    d = d + 1 if d else 1
    if abs(value) < 10 ** -d and value != 0:
        return f"{value:+.2e}" if signed else f"{value:.2e}"
    return f"{value:+.{d}f}" if signed else f"{value:.{d}f}"


def anchor_labels(rows: Sequence[FidelityRow]) -> dict[str, str]:
    """Short labels (F1, F2, ...) for the fidelity rows of a page, in document order."""
    return {row.anchor: f"F{i}" for i, row in enumerate(rows, start=1)}


def scorecard_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """One line per printed number (the per-paper CSV)."""
    records = []
    for row in rows:
        cell, rep = row.cell, row.reproduced
        records.append({
            "id": cell.id, "table": cell.table, "row": cell.row, "column": cell.column, "measure": cell.measure,
            "printed": cell.value, "spread_kind": cell.spread_kind, "spread": cell.spread, "ci_lo": cell.ci_lo,
            "ci_hi": cell.ci_hi, "reproduced": None if rep is None else rep.value,
            "reproduced_spread": "" if rep is None else rep.spread,
            "reproduced_se": None if rep is None or rep.uncertainty is None else rep.uncertainty.se,
            "difference": row.difference,
            "tolerance": None if row.tolerance is None else row.tolerance.half_width, "verdict": row.verdict,
            "setting_differences": "; ".join(row.setting_differences),
            "reproduced_setting": "" if rep is None else setting_text(rep.setting),
            "analogues": " ".join(row.analogues),
            "notes": "" if rep is None else "; ".join(rep.notes), "fidelity": " ".join(row.fidelity),
            "produced_file": "" if rep is None else rep.source, "printed_note": cell.note,
        })
    return pd.DataFrame(records, columns=list(CSV_COLUMNS))


def setting_text(setting: Mapping[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in setting.items())


def is_not_papers_setting(counts: Mapping[str, int]) -> bool:
    """No number judged, but numbers produced: the run is not the paper's setting."""
    return counts["compared"] == 0 and bool(counts["different setting"] or counts.get("analogue computed")
                                            or counts.get("unprinted"))


def counts_sentence(counts: Mapping[str, int]) -> str:
    return (f"Of {counts['printed']} printed numbers, this run reproduced **{counts['within']}** within the "
            f"paper's uncertainty and **{counts['outside']}** outside it; {counts['different setting']} were produced "
            f"in a different setting, {counts.get('analogue computed', 0)} have an analogue computed on another "
            f"model or benchmark and {counts['not run']} were not run.")


def _display_rows(rows: Sequence[Row], labels: Mapping[str, str], link) -> list[dict[str, str]]:
    out = []
    for row in rows:
        cell, rep = row.cell, row.reproduced
        setting = "; ".join(row.setting_differences + ([] if rep is None else rep.notes))
        if row.analogues:
            setting = "analogue computed: " + ", ".join(row.analogues)
        reproduced = ""
        if rep is not None:
            reproduced = number_text(rep.value, cell.text)
            if rep.spread:
                reproduced += f" {rep.spread}"
        out.append({
            "Row": cell.row, "Column": cell.column, "Printed": printed_text(cell), "Reproduced": reproduced,
            # A row whose setting differs shows no difference: the numbers are not comparable.
            "Difference": number_text(row.difference, cell.text, signed=True),
            "Tolerance": "" if row.tolerance is None else row.tolerance.text(), "Verdict": row.verdict,
            "Setting": setting, "Fidelity": " ".join(link(a, labels[a]) for a in row.fidelity if a in labels),
            "Note": cell.note,
        })
    return out


def _unprinted_rows(unprinted: Sequence[Reproduced], cells: Sequence[PrintedCell]) -> list[dict[str, str]]:
    return [{"Measure": r.measure, "Reproduced": number_text(r.value, "0.0") + (f" {r.spread}" if r.spread else ""),
             "Why no printed counterpart": unprinted_reason(r, cells),
             "Setting": "; ".join(f"{k}={v}" for k, v in r.setting.items()), "Notes": "; ".join(r.notes),
             "File": r.source}
            for r in unprinted]


def _groups(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.cell.table, []).append(row)
    return list(groups.items())


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(records: Sequence[Mapping[str, str]]) -> str:
    if not records:
        return "_none_\n"
    columns = list(records[0])
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_md_escape(r[c]) for c in columns) + " |" for r in records]
    return "\n".join(lines) + "\n"


def paper_markdown(paper: str, rows: Sequence[Row], unprinted: Sequence[Reproduced], counts: Mapping[str, int],
                   fidelity: Sequence[FidelityRow], general: Sequence[FidelityRow],
                   anomalies: Sequence[Mapping[str, str]], run: Mapping[str, str]) -> str:
    labels = anchor_labels(fidelity)
    cells = [r.cell for r in rows]
    parts = [f"# Reproduction scorecard: {PAPERS[paper]}\n",
             f"Run `{run.get('run_name', '?')}` (results `{run.get('results', '?')}`); printed numbers transcribed "
             f"from seed {SEED_PREFIX[paper]}.\n", counts_sentence(counts) + "\n", LEGEND + "\n"]
    if is_not_papers_setting({**counts, "unprinted": len(unprinted)}):
        parts.append(f"> **{BANNER}**\n")
    for table, group in _groups(rows):
        parts.append(f"## {table}\n")
        parts.append(_md_table(_display_rows(group, labels, lambda a, lab: f"[{lab}](#{a})")))
    parts.append("## Numbers this run produced that the paper does not print\n")
    parts.append(_md_table(_unprinted_rows(unprinted, cells)))
    parts.append("## Where concord differs from the paper (docs/fidelity.md)\n")
    if fidelity:
        general_ids = {r.anchor for r in general}
        parts.append(_md_table([{"": f'<a id="{r.anchor}"></a>{labels[r.anchor]}', "Where": r.where,
                                 "Paper says": r.paper_says, "concord does": r.concord_does, "Source": r.source,
                                 "Applies to": "every number" if r.anchor in general_ids else "the rows that link it",
                                 "Section": r.section} for r in fidelity]))
    else:
        parts.append("_docs/fidelity.md records no choice for this paper yet._\n")
    parts.append("## The paper's own anomalies\n")
    parts.append(_md_table([{"Where": a["where"], "Anomaly": a["anomaly"]} for a in anomalies]))
    return "\n".join(parts)


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;line-height:1.35;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}
th,td{border:1px solid #ccc;padding:0.2em 0.45em;vertical-align:top}
th{background:#f2f2f2;text-align:left}
td.num{text-align:right;white-space:nowrap}
.within{background:#d9f2d9}.outside{background:#f8d0d0}.different{background:#fbeecb}.notrun{color:#888}
.analogue{color:#555;background:#eef}
.banner{background:#fbeecb;padding:0.5em 0.8em;border-left:4px solid #d9a400}
"""
_NUMERIC = {"Printed", "Reproduced", "Difference"}
_RAW_HTML = {"Fidelity", "", "Page"}  # columns whose cells are built as (escaped) HTML already
_VERDICT_CLASS = {"within": "within", "outside": "outside", "different setting": "different",
                  "analogue computed": "analogue", "not run": "notrun"}


def _html_table(columns: Sequence[str], records: Sequence[Mapping[str, str]]) -> str:
    # A page of plain tables: the standard library's escaping is all it needs (no template engine).
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    lines = [f"<table><tr>{head}</tr>"]
    for record in records:
        css = record.get("_class")
        cells = []
        for c in columns:
            value = str(record.get(c, ""))
            body = value if c in _RAW_HTML else escape(value)
            cells.append(f'<td class="num">{body}</td>' if c in _NUMERIC else f"<td>{body}</td>")
        lines.append((f'<tr class="{css}">' if css else "<tr>") + "".join(cells) + "</tr>")
    return "\n".join(lines) + "</table>"


def _render_html(title: str, intro: Sequence[str], banner: str, sections: Sequence[Mapping]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{escape(title)}</h1>"]
    parts += [f"<p>{p}</p>" for p in intro]
    if banner:
        parts.append(f'<p class="banner">{escape(banner)}</p>')
    for section in sections:
        parts.append(f"<h2>{escape(section['title'])}</h2>")
        if section["rows"]:
            parts.append(_html_table(section["columns"], section["rows"]))
        else:
            parts.append(f"<p><em>{escape(section.get('empty', 'none'))}</em></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _bold_html(text: str) -> str:
    """Escape, then turn Markdown **bold** into <b>."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", str(escape(text)))


def paper_html(paper: str, rows: Sequence[Row], unprinted: Sequence[Reproduced], counts: Mapping[str, int],
               fidelity: Sequence[FidelityRow], general: Sequence[FidelityRow],
               anomalies: Sequence[Mapping[str, str]], run: Mapping[str, str]) -> str:
    labels = anchor_labels(fidelity)
    cells = [r.cell for r in rows]
    sections = []
    for table, group in _groups(rows):
        display = _display_rows(group, labels, lambda a, lab: f'<a href="#{escape(a)}">{escape(lab)}</a>')
        for record, row in zip(display, group):
            record["_class"] = _VERDICT_CLASS[row.verdict]
        sections.append({"title": table, "columns": [c for c in display[0] if not c.startswith("_")],
                         "rows": display})
    extra = _unprinted_rows(unprinted, cells)
    sections.append({"title": "Numbers this run produced that the paper does not print",
                     "columns": list(extra[0]) if extra else [], "rows": extra, "empty": "none"})
    general_ids = {r.anchor for r in general}
    fid = [{"": f'<a id="{escape(r.anchor)}"></a>{escape(labels[r.anchor])}', "Where": r.where,
            "Paper says": r.paper_says, "concord does": r.concord_does, "Source": r.source,
            "Applies to": "every number" if r.anchor in general_ids else "the rows that link it", "Section": r.section}
           for r in fidelity]
    sections.append({"title": "Where concord differs from the paper (docs/fidelity.md)",
                     "columns": list(fid[0]) if fid else [], "rows": fid,
                     "empty": "docs/fidelity.md records no choice for this paper yet."})
    anomaly_rows = [{"Where": a["where"], "Anomaly": a["anomaly"]} for a in anomalies]
    sections.append({"title": "The paper's own anomalies", "columns": ["Where", "Anomaly"], "rows": anomaly_rows,
                     "empty": "none"})
    banner = BANNER if is_not_papers_setting({**counts, "unprinted": len(unprinted)}) else ""
    intro = [f"Run <code>{escape(run.get('run_name', '?'))}</code> (results <code>{escape(run.get('results', '?'))}"
             f"</code>); printed numbers transcribed from seed {SEED_PREFIX[paper]}.",
             _bold_html(counts_sentence(counts)), _bold_html(LEGEND)]
    return _render_html(f"Reproduction scorecard: {PAPERS[paper]}", intro, banner, sections)


def summary_records(counts: Mapping[str, Mapping[str, int]], ext: str) -> list[dict[str, str]]:
    out = []
    for paper, c in counts.items():
        out.append({"Paper": PAPERS[paper], "Page": f"{paper}.{ext}", "Printed numbers": str(c["printed"]),
                    **{v.capitalize(): str(c.get(v, 0)) for v in VERDICTS},
                    "Produced, not printed": str(c.get("unprinted", 0))})
    return out


def _total(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    return {k: sum(c.get(k, 0) for c in counts.values()) for k in ("printed", *VERDICTS, "compared", "unprinted")}


def summary_markdown(counts: Mapping[str, Mapping[str, int]], run: Mapping[str, str]) -> str:
    total = _total(counts)
    records = summary_records(counts, "md")
    for r in records:
        r["Page"] = f"[{r['Page']}]({r['Page']})"
    parts = ["# Reproduction scorecard\n",
             f"Run `{run.get('run_name', '?')}` (results `{run.get('results', '?')}`). Every number the three papers "
             "print, beside the number this run reproduced.\n"]
    if is_not_papers_setting(total):
        parts.append(f"> **{BANNER}**\n")
    return "\n".join(parts + [counts_sentence(total) + "\n", LEGEND + "\n", _md_table(records)])


def summary_html(counts: Mapping[str, Mapping[str, int]], run: Mapping[str, str]) -> str:
    total = _total(counts)
    records = summary_records(counts, "html")
    for r in records:
        r["Page"] = f'<a href="{escape(r["Page"])}">{escape(r["Page"])}</a>'
    intro = [f"Run <code>{escape(run.get('run_name', '?'))}</code> (results <code>{escape(run.get('results', '?'))}"
             "</code>). Every number the three papers print, beside the number this run reproduced.",
             _bold_html(counts_sentence(total)), _bold_html(LEGEND)]
    banner = BANNER if is_not_papers_setting(total) else ""
    return _render_html("Reproduction scorecard", intro, banner,
                        [{"title": "Papers", "columns": list(records[0]), "rows": records}])
