"""Generic writers for analysis outputs: any DataFrame as CSV + Markdown + LaTeX, and Figure 2.

The paper's Tables 1-3 and Figures 4-5 have their own builders (:mod:`concord.tables`,
:mod:`concord.plots`); this module serves the offline analyses that are plain tables/curves.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from concord.io import atomic_path, save_figure, write_text

METHOD_LABELS = {"majority": "Majority (TTRL)", "ec": "EC (graph)", "cisc": "CISC (conf.)", "core": "CoRE"}
METHOD_COLORS = {"majority": "#d62728", "ec": "#9467bd", "cisc": "#ff7f0e", "core": "#2ca02c"}


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


def plot_label_accuracy(summary: pd.DataFrame, png_path: str | Path, title: str = "") -> list[Path]:
    """Figure 2: pseudo-label accuracy versus N per operator, with 95% subsampling bands."""
    from concord.plots import new_figure, style

    with style():
        fig, ax = new_figure(4.2, 3.0)
        for method, sub in summary.groupby("method", sort=False):
            sub = sub.sort_values("n")
            color = METHOD_COLORS.get(method)
            ax.plot(sub["n"], 100 * sub["mean"], marker="o", ms=3, color=color, label=METHOD_LABELS.get(method, method))
            ax.fill_between(sub["n"], 100 * sub["lo"], 100 * sub["hi"], color=color, alpha=0.15, linewidth=0)
        ax.set_xscale("log", base=2)
        ns = sorted(summary["n"].unique())
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("roll-outs per question N")
        ax.set_ylabel("pseudo-label accuracy (%)")
        if title:
            ax.set_title(title)
        ax.legend(frameon=False, fontsize=7)
        return save_figure(fig, png_path)
