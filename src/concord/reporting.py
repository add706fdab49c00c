"""Generic writers for analysis outputs: any DataFrame as CSV + Markdown + LaTeX.

The paper's Tables 1-3 and Figures 4-5 have their own builders (:mod:`concord.papers.core.tables`,
:mod:`concord.papers.core.figures`); this module serves the offline analyses that are plain tables/curves.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from concord.io import atomic_path, write_text



def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def write_table(frame: pd.DataFrame, csv_path: str | Path, caption: str = "", float_format: str = "{:.4f}") -> list[Path]:
    """Write ``frame`` as ``.csv``, ``.md`` and ``.tex`` twins (same stem)."""
    csv_path = Path(csv_path)
    shown = frame.copy()
    for col in shown.select_dtypes("float").columns:
        shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else float_format.format(v))
    md = (f"{caption}\n\n" if caption else "") + shown.to_markdown(index=False) + "\n"
    tex = shown.to_latex(index=False, caption=caption or None, escape=True)
    return [
        write_csv(frame, csv_path),
        write_text(csv_path.with_suffix(".md"), md),
        write_text(csv_path.with_suffix(".tex"), tex),
    ]
