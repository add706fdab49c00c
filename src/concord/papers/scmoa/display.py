"""How SC-MoA's numbers are shown: method labels, and one table as CSV (full precision), Markdown
and LaTeX (rounded, percentages, "n/a" for undefined values)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from concord import io

LABELS = {"scmoa": "SC-MoA", "vote_pre": "Majority vote (pre-refinement)", "vote_post": "Majority vote (post-refinement)",
          "cot": "Zero-shot CoT", "sc": "Self-consistency (greedy + tag)", "moa": "MoA (proposer pool)",
          "moa_para": "MoA (para)", "persona_moa": "Persona-MoA", "self_moa": "Self-MoA", "textgrad": "TextGrad",
          "goa": "GoA (mean pooling)", "goa_max": "GoA (max pooling)", "pairwise_judge": "Pairwise LLM judge"}


def label(method: str) -> str:
    if method.startswith("gated_"):
        theta = method.split("_", 1)[1]
        return f"SC-MoA gated (theta={'inf' if theta == 'inf' else theta})"
    if method.startswith("sc_t"):
        return f"Self-consistency (T={method[4:]})"
    return LABELS.get(method, method)


#: Columns holding counts: shown as integers when every value is whole (mean calls of a fixed budget).
_COUNT_COLUMN = re.compile(r"(^n$|^n_|calls|tokens|count)")


def write_table(frame: pd.DataFrame, stem: str | Path, caption: str, decimals: int = 3,
                percent: Sequence[str] = ()) -> list[Path]:
    """``stem.csv`` (full precision), ``stem.md`` and ``stem.tex`` (rounded).

    ``percent``: fraction columns written in percent as ``{column}_pct`` (every accuracy in
    concord's tables is a percentage). Undefined values (NaN, e.g. an AUROC over one class, a flip
    ratio without flips) read "n/a"; a ratio over zero harmful flips reads "inf".
    """
    stem = Path(stem)
    frame = frame.copy()
    for col in percent:
        frame[col] = 100.0 * frame[col].astype(float)
    frame = frame.rename(columns={col: f"{col}_pct" for col in percent})
    paths = [stem.with_suffix(".csv"), stem.with_suffix(".md"), stem.with_suffix(".tex")]
    io.write_text(paths[0], frame.to_csv(index=False))
    shown = frame.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            values = shown[col].to_numpy(dtype=float)
            finite = values[np.isfinite(values)]
            whole = bool(_COUNT_COLUMN.search(str(col))) and finite.size and np.all(finite == np.round(finite))
            counts = bool(_COUNT_COLUMN.search(str(col)))
            places = 0 if whole else (1 if counts or str(col).endswith("_pct") else decimals)
            shown[col] = [_cell(v, places) for v in values]
    shown = shown.astype(str).replace({"<NA>": "n/a", "None": "n/a", "nan": "n/a"})
    io.write_text(paths[1], f"**{caption}**\n\n" + shown.to_markdown(index=False, disable_numparse=True) + "\n")
    escaped = shown.map(_latex_escape)
    escaped.columns = [_latex_escape(str(c)) for c in escaped.columns]
    body = escaped.to_latex(index=False, escape=False)
    io.write_text(paths[2], "\\begin{table}[t]\n\\centering\n\\caption{" + _latex_escape(caption) + "}\n"
                  + body + "\\end{table}\n")
    return paths


def _cell(value: float, places: int) -> str:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{places}f}"


def na(value: float, spec: str = ".3f") -> str:
    """A number for a caption or figure title, "n/a" when undefined (NaN or None)."""
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))
