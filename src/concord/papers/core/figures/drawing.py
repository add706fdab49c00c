"""How the figures look: one style and palette, and one drawing function per figure (matplotlib
:class:`~matplotlib.figure.Figure` objects, never pyplot state)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io
from concord.papers.core import tables
from concord.papers.core.figures.recovery import RecoveryCell
from concord.papers.core.figures.statistics import _outcome, pooled_confidence_factor
# The shared style lives in concord.plotting; re-exported for the paper's figure code.
from concord.plotting import STYLE, new_figure, style  # noqa: F401

# One colour per arm, used by every figure (colour-blind safe Okabe-Ito palette).
ARM_COLORS: dict[str, str] = {
    "base": "#999999",
    "majority": "#D55E00",
    "ec": "#56B4E9",
    "cisc": "#E69F00",
    "core": "#009E73",
}
VOTE_BAR_COLOR = "#C0392B"
CONFIDENCE_BAR_COLOR = "#1E8449"


# How Figure 4 marks a cell by CoRE minus Majority (Tables 1-3).
OUTCOME_STYLE: dict[str, dict] = {
    "win": {"marker": "o", "color": ARM_COLORS["core"], "label": "win: CoRE > Majority"},
    "loss": {"marker": "X", "color": ARM_COLORS["majority"], "label": "loss: CoRE < Majority"},
    "tie": {"marker": "s", "color": ARM_COLORS["base"], "label": "tie"},
    "not evaluated": {"marker": "o", "color": "white", "label": "not evaluated"},
}


def figure4(cells: Sequence[RecoveryCell], outcomes: Mapping[tuple[str, str], float] | None = None):
    """Recovery region: measured (r, c*/c_w) per cell against the vote and confidence bars,
    each point marked win, loss or tie by ``outcomes`` (CoRE minus Majority final pass@1 per
    (model, benchmark), :func:`core_minus_majority`).

    Cells without contested questions have nothing to place; when no cell has any (e.g. a tiny
    model on an easy set) the figure says so instead of failing the run.
    """
    from matplotlib.lines import Line2D

    outcomes = outcomes or {}
    measured = [c for c in cells if c.measured]
    r = np.array([c.outnumbering_ratio for c in measured])
    adv = np.array([c.coherence_advantage for c in measured])

    fig, ax = new_figure(4.6, 3.4)
    with style():
        x_hi = max(float(r.max()) * 1.1, 1.5) if measured else 4.0
        xs = np.linspace(0.0, x_hi, 200)
        ax.plot(xs, xs, color=VOTE_BAR_COLOR, lw=1.4, label="vote bar  ≈ r")
        ax.set_xlim(0.0, x_hi)
        ax.set_xlabel("outnumbering ratio  r = m / n*")
        ax.set_ylabel("coherence advantage  c* / c$_w$")
        unmeasured = len(cells) - len(measured)
        title = f"Recovery region ({len(measured)} cells"
        title += f"; {unmeasured} without contested questions)" if unmeasured else ")"
        ax.set_title(title)
        if not measured:
            ax.set_ylim(0.0, x_hi * 1.05)
            ax.text(0.5, 0.5, "no cell has contested questions\n(no correct minority was outvoted)",
                    transform=ax.transAxes, ha="center", va="center")
            ax.legend(loc="upper left")
            return fig
        factor = pooled_confidence_factor(cells)
        ax.plot(xs, factor * xs, color=CONFIDENCE_BAR_COLOR, lw=1.4,
                label=f"confidence bar  e$^{{-\\delta/\\tau}}$r ≈ {factor:.2f} r")
        # Each cell's own bar: a tick from its vote bar down to its confidence bar.
        for cell in measured:
            ax.plot([cell.outnumbering_ratio] * 2, [cell.vote_bar, cell.confidence_bar],
                    color=CONFIDENCE_BAR_COLOR, lw=0.6, alpha=0.5)
            ax.plot(cell.outnumbering_ratio, cell.confidence_bar, marker="_", ms=7, color=CONFIDENCE_BAR_COLOR)
        kinds = [_outcome(outcomes.get((c.model, c.benchmark))) for c in measured]
        for kind, spec in OUTCOME_STYLE.items():
            chosen = [i for i, k in enumerate(kinds) if k == kind]
            if chosen:
                ax.scatter(r[chosen], adv[chosen], marker=spec["marker"], color=spec["color"], s=36,
                           edgecolors="black", linewidths=0.5, zorder=3, label=spec["label"])
        ax.set_ylim(0.0, max(float(adv.max()), x_hi) * 1.05)
        handles, _ = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], color=CONFIDENCE_BAR_COLOR, marker="_", lw=0.6, label="a cell's own bar"))
        ax.legend(handles=handles, loc="upper left", fontsize="small")
    return fig


def figure5a(cells: pd.DataFrame, result: Mapping, labels: Mapping[str, str] | None = None):
    """CoRE minus CISC per cell, with the win count and both tests in the title."""
    labels = labels or {}
    ordered = cells.sort_values("delta").reset_index(drop=True)
    names = [f"{labels.get(m, m)} · {labels.get(b, b)}" for m, b in zip(ordered["model"], ordered["benchmark"])]
    colors = [ARM_COLORS["core"] if d > 0 else (ARM_COLORS["majority"] if d < 0 else ARM_COLORS["base"])
              for d in ordered["delta"]]
    fig, ax = new_figure(4.6, max(2.2, 0.28 * len(ordered) + 1.2))
    with style():
        ax.barh(np.arange(len(ordered)), ordered["delta"], color=colors)
        ax.axvline(0.0, color="black", lw=0.8)
        ax.set_yticks(np.arange(len(ordered)), names)
        ax.set_xlabel("CoRE − CISC  (pass@1 points)")
        ax.set_title(
            f"CoRE > CISC on {result['wins']}/{result['n_cells']} cells\n"
            f"sign test p = {_p(result['sign_test_p'])}, Wilcoxon p = {_p(result['wilcoxon_p'])}"
        )
    return fig


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def figure5b(frame: pd.DataFrame, effects: Mapping):
    """2x2 heat map: rows graph (no/yes), columns confidence (no/yes)."""
    grid = np.full((2, 2), np.nan)
    text = [["", ""], ["", ""]]
    for _, row in frame.iterrows():
        i, j = int(row["graph"]), int(row["confidence"])
        grid[i, j] = row["mean_delta"]
        se = "" if math.isnan(row["se"]) else f"\n± {row['se']:.1f}"
        text[i][j] = f"{tables.ARM_LABELS[row['arm']]}\n{row['mean_delta']:+.1f}{se}"
    fig, ax = new_figure(3.6, 3.0)
    with style():
        # Symmetric diverging scale: gains green, losses red, no change neutral.
        span = float(np.nanmax(np.abs(grid))) or 1.0
        image = ax.imshow(grid, cmap="RdYlGn", vmin=-span, vmax=span)
        ax.grid(False)
        for i in range(2):
            for j in range(2):
                shade = float(image.norm(grid[i, j]))
                ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8,
                        color="white" if shade > 0.8 or shade < 0.2 else "black")
        ax.set_xticks([0, 1], ["no", "yes"])
        ax.set_yticks([0, 1], ["no", "yes"])
        ax.set_xlabel("confidence")
        ax.set_ylabel("graph")
        over = sorted({str(v) for v in frame.get("se_over", pd.Series(dtype=str)) if isinstance(v, str) and v})
        se_note = f"± bootstrap SE over {' / '.join(over)}" if over else "no SE (one cell, no per-question data)"
        ax.set_title(f"Mean Δ vs. Base (points), {se_note}\ninteraction {effects['interaction']:+.1f}", fontsize=8)
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


METHOD_LABELS = {"majority": "Majority (TTRL)", "ec": "EC (graph)", "cisc": "CISC (conf.)", "core": "CoRE"}
METHOD_COLORS = {"majority": "#d62728", "ec": "#9467bd", "cisc": "#ff7f0e", "core": "#2ca02c"}
# Operators often give the same label (at N = 1 all four coincide): a marker shape and line style
# per operator, and a small horizontal offset, keep every curve visible where they overlap.
METHOD_MARKERS = {"majority": "o", "ec": "s", "cisc": "^", "core": "D"}
METHOD_LINESTYLES = {"majority": "-", "ec": "--", "cisc": "-.", "core": ":"}
DODGE = 0.04  # log2 units between neighbouring operators' points


def plot_label_accuracy(summary: pd.DataFrame, png_path: str | Path, title: str = "") -> list[Path]:
    """Figure 2 as PNG + PDF (see :func:`label_accuracy_figure`)."""
    return io.save_figure(label_accuracy_figure(summary, title), png_path)


def label_accuracy_figure(summary: pd.DataFrame, title: str = ""):
    """Figure 2: pseudo-label accuracy versus N per operator, with 95% subsampling bands."""
    from matplotlib.ticker import NullFormatter, NullLocator

    methods = list(dict.fromkeys(summary["method"]))
    with style():
        fig, ax = new_figure(4.2, 3.0)
        for k, method in enumerate(methods):
            sub = summary[summary["method"] == method].sort_values("n")
            color = METHOD_COLORS.get(method)
            x = sub["n"] * 2.0 ** (DODGE * (k - (len(methods) - 1) / 2))
            ax.plot(x, 100 * sub["mean"], marker=METHOD_MARKERS.get(method, "o"), ms=4, mfc="none",
                    linestyle=METHOD_LINESTYLES.get(method, "-"), color=color, label=METHOD_LABELS.get(method, method))
            ax.fill_between(x, 100 * sub["lo"], 100 * sub["hi"], color=color, alpha=0.12, linewidth=0)
        ax.set_xscale("log", base=2)
        ns = sorted(int(n) for n in summary["n"].unique())
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(0, 100)
        ax.set_xlabel("roll-outs per question N")
        ax.set_ylabel("pseudo-label accuracy (%)")
        if title:
            ax.set_title(title)
        ax.legend(frameon=False, fontsize=7, loc="lower right")
    return fig
