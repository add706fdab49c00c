"""Link scorecard rows to the choices ``docs/fidelity.md`` records where concord differs from a paper.

``docs/fidelity.md`` has one section per paper ("## CoRE", "## FMV", "## SC-MoA") and one for the
shared core ("## Shared core"), each a Markdown table ``where | paper says | concord does | source``.
Every row gets an anchor (``fid-<section>-<where, slugged>``). A row is linked to a printed cell
when the row's *where* text (or, if that names nothing, its *paper says* text) names something of
the cell -- its table or figure ("Table 1", "Tables 1-3", "Figure 5a"), its model, benchmark or
method -- and every kind of thing the row names matches the cell (a row on "CISC on GPQA" links
only CISC cells on GPQA). Rows that name none of these apply to every cell and are listed as such
on the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from concord.scorecard.printed import PrintedCell

SECTIONS: dict[str, str] = {"core": "CoRE", "fmv": "FMV", "scmoa": "SC-MoA"}
SHARED_SECTION = "Shared core"


@dataclass(frozen=True)
class FidelityRow:
    section: str  # the heading: CoRE, FMV, SC-MoA, Shared core
    where: str
    paper_says: str
    concord_does: str
    source: str
    anchor: str


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "row"


def _split_row(line: str) -> list[str]:
    # Markdown table cells; a pipe escaped as \| stays inside its cell.
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def parse_fidelity(text: str) -> list[FidelityRow]:
    """Every table row under a level-2 heading; columns located by their header names."""
    rows: list[FidelityRow] = []
    section, header = None, None
    used: set[str] = set()
    for line in text.splitlines():
        heading = re.match(r"^##\s+(.+?)\s*$", line)
        if heading:
            section, header = heading.group(1), None
            continue
        if section is None or not line.lstrip().startswith("|"):
            header = None  # prose or a blank line ends a table; the next table has its own header
            continue
        cells = _split_row(line)
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c):
            continue
        record = dict(zip(header, cells))
        where = record.get("where", cells[0] if cells else "")
        anchor = base = f"fid-{_slug(section)}-{_slug(where)}"
        n = 2
        while anchor in used:
            anchor, n = f"{base}-{n}", n + 1
        used.add(anchor)
        rows.append(FidelityRow(section=section, where=where, paper_says=record.get("paper says", ""),
                                concord_does=record.get("concord does", ""), source=record.get("source", ""),
                                anchor=anchor))
    return rows


def rows_for(paper: str, rows: Iterable[FidelityRow]) -> list[FidelityRow]:
    """The rows of a paper's section and of the shared core."""
    wanted = {SECTIONS[paper].lower(), SHARED_SECTION.lower()}
    return [r for r in rows if r.section.lower() in wanted]


# ------------------------------------------------------------------ what a text names

# Per paper: category -> {key used in measures: pattern naming it in prose}.
VOCABULARY: dict[str, dict[str, dict[str, str]]] = {
    "core": {
        "model": {"qwen2.5-math-1.5b": r"Qwen2\.5-Math-1\.5B", "qwen2.5-math-7b": r"Qwen2\.5-Math-7B",
                  "deepseek-math-7b": r"DeepSeek", "qwen2.5-7b": r"Qwen2\.5-7B", "qwen3-8b": r"Qwen3-8B",
                  "llama-3.1-8b-instruct": r"LLaMA|Llama", "mistral-nemo-instruct": r"Mistral"},
        "benchmark": {"amc": r"\bAMC\b", "aime2024": r"\bAIME", "math500": r"MATH-?500",
                      "math_l4": r"\bL4\b|Level[- ]?4", "math_l5": r"\bL5\b|Level[- ]?5", "gpqa_diamond": r"GPQA"},
        "method": {"base": r"\bBase\b", "majority": r"\bMajority\b", "ec": r"\bEC\b", "cisc": r"\bCISC\b",
                   "core": r"\bCoRE\b"},
    },
    "fmv": {
        "model": {"qwen3-4b-instruct-2507": r"4B-Instruct", "qwen3-4b-thinking-2507": r"4B-Thinking",
                  "qwen3-30b-a3b-instruct-2507": r"30B-A3B-Instruct",
                  "qwen3-30b-a3b-thinking-2507": r"30B-A3B-Thinking"},
        "method": {"mean": r"mean@", "best": r"best@", "semantic": r"[Ss]emantic [Vv]ot", "gencluster": r"GenCluster",
                   "fmv_pointwise": r"[Pp]ointwise", "fmv": r"\bFMV\b(?![- ]TTRL)|\bJoint\b|^vote\b"},
    },
    "scmoa": {
        "benchmark": {"bbh": r"\bBBH", "mmlu_ml": r"MMLU", "gpqa_diamond": r"GPQA", "aime": r"\bAIME",
                      "lcb_hard": r"\bLCB|LiveCodeBench"},
        "method": {"cot": r"[Zz]ero-shot|\bCoT\b", "sc": r"(?<![-\w])SC\b(?!-)|[Ss]elf-consistency",
                   "moa": r"(?<![-\w])MoA\b", "self_moa": r"Self-MoA", "textgrad": r"TextGrad", "goa": r"\bGoA",
                   "scmoa": r"SC-MoA"},
    },
}

_TABLE_RE = re.compile(r"\b(Tables?|Tab\.|Figures?|Fig\.)\s*(\d+[a-z]?)(?:\s*[-–]\s*(\d+))?")


def table_tags(text: str) -> set[str]:
    """``"Tables 1-3 and Fig. 5a"`` -> {"table 1", "table 2", "table 3", "figure 5a"}."""
    tags = set()
    for kind, first, last in _TABLE_RE.findall(text):
        noun = "figure" if kind.lower().startswith("fig") else "table"
        if last and first.isdigit():
            tags |= {f"{noun} {i}" for i in range(int(first), int(last) + 1)}
        else:
            tags.add(f"{noun} {first.lower()}")
    return tags


def text_tags(paper: str, text: str) -> dict[str, set[str]]:
    tags = {"table": table_tags(text)}
    for category, names in VOCABULARY[paper].items():
        tags[category] = {key for key, pattern in names.items() if re.search(pattern, text)}
    return {k: v for k, v in tags.items() if v}


def cell_tags(paper: str, cell: PrintedCell) -> dict[str, set[str]]:
    parts = set()
    for part in cell.measure.split(":")[1:]:
        for piece in part.split("+"):
            parts |= {piece, re.sub(r"_n\d+$", "", piece)}
    tags = {"table": table_tags(cell.table)}
    for category, names in VOCABULARY[paper].items():
        tags[category] = {key for key in names if key in parts}
    return tags


def links(paper: str, row_tags: Mapping[str, set[str]], cell: PrintedCell) -> bool:
    if not row_tags:
        return False
    tags = cell_tags(paper, cell)
    return all(tags.get(category, set()) & named for category, named in row_tags.items())


def link_cells(paper: str, cells: Sequence[PrintedCell], rows: Sequence[FidelityRow]) -> tuple[dict[str, list[str]],
                                                                                                 list[FidelityRow]]:
    """Cell id -> anchors of the rows that concern it; and the rows that concern every cell."""
    specific: dict[str, list[str]] = {cell.id: [] for cell in cells}
    general = []
    for row in rows:
        # What the row's *where* names decides; only a *where* naming nothing falls back to the
        # paper's words (a "paper says" text mentions much that the choice is not about).
        tags = text_tags(paper, row.where) or text_tags(paper, f"{row.where} {row.paper_says}")
        if not tags:
            general.append(row)
            continue
        for cell in cells:
            if links(paper, tags, cell):
                specific[cell.id].append(row.anchor)
    return specific, general
