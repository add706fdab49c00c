"""The one figure style every concord figure uses (all three papers).

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so they
render the same under any backend and in parallel jobs.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

STYLE: dict = {
    "figure.dpi": 150,
    "font.family": "DejaVu Sans",  # ships with matplotlib: identical glyphs on every machine
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "svg.hashsalt": "concord",  # deterministic ids if anyone saves SVG
    "pdf.fonttype": 42,  # embed TrueType so text stays editable/searchable in the PDF
}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The shared figure style for every concord figure (use around figure construction)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


def new_figure(width: float = 4.0, height: float = 3.0, **subplots):
    """A pyplot-free figure and axes in the shared style."""
    from matplotlib.figure import Figure

    with style():
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = fig.subplots(**subplots)
    return fig, axes
