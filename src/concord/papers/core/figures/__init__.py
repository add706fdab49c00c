"""The paper's figures 4, 5a and 5b, drawn in one shared style.

* Figure 4 -- the recovery region: one point per (model, benchmark) cell at its measured
  outnumbering ratio ``r = m / n*`` and coherence advantage ``c*/c_w``, marked win or loss by
  the cell's CoRE minus Majority final pass@1 (Tables 1-3), with the vote bar ``~ r`` (Prop. 2,
  red) and the confidence-lowered bar ``e^(-delta/tau) r`` (Prop. 3, green).
  Inputs: ``analysis/{model}/{benchmark}/recovery.json`` (schema: :class:`RecoveryCell`) and the
  Majority and CoRE evaluations of every seed.
* Figure 5a -- CoRE vs CISC on the MATH L4/L5 cells, with sign and Wilcoxon tests.
* Figure 5b -- the graph x confidence factorial: mean improvement over Base of
  Majority (neither), EC (graph), CISC (confidence) and CoRE (both).

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so they
render the same under any backend and in parallel jobs. Every figure also writes the numbers
it plots as CSV next to it.

One module per concern: :mod:`.recovery` (Figure 4's input schema), :mod:`.statistics` (the
numbers plotted), :mod:`.drawing` (style and drawing), :mod:`.planning` (what a config can draw
and which files each figure reads and writes) and :mod:`.build` (one registered spec per figure,
and :func:`make_figure`).
"""

from __future__ import annotations

from concord.papers.core.figures.build import make_figure
from concord.papers.core.figures.drawing import (ARM_COLORS, CONFIDENCE_BAR_COLOR, DODGE, METHOD_COLORS, METHOD_LABELS,
                                                 METHOD_LINESTYLES, METHOD_MARKERS, OUTCOME_STYLE, STYLE,
                                                 VOTE_BAR_COLOR, figure4, figure5a, figure5b, label_accuracy_figure,
                                                 new_figure, plot_label_accuracy, style)
from concord.papers.core.figures.planning import (FIGURE_SPECS, FIGURES, FigureSpec, available_figures,
                                                  fig5a_benchmarks, figure_inputs, figure_outputs, figure_problem,
                                                  report_benchmarks, report_targets)
from concord.papers.core.figures.recovery import RECOVERY_KEYS, RecoveryCell, load_recovery, recovery_path
from concord.papers.core.figures.statistics import (FACTORIAL, cell_question_deltas, core_minus_majority, core_vs_cisc,
                                                    factorial, pooled_confidence_factor, recovery_frame)

__all__ = [
    "ARM_COLORS", "CONFIDENCE_BAR_COLOR", "DODGE", "FACTORIAL", "FIGURES", "FIGURE_SPECS", "METHOD_COLORS",
    "METHOD_LABELS", "METHOD_LINESTYLES", "METHOD_MARKERS", "OUTCOME_STYLE", "RECOVERY_KEYS", "STYLE",
    "VOTE_BAR_COLOR", "FigureSpec", "RecoveryCell", "available_figures", "cell_question_deltas",
    "core_minus_majority", "core_vs_cisc", "factorial", "fig5a_benchmarks", "figure4", "figure5a", "figure5b",
    "figure_inputs", "figure_outputs", "figure_problem", "label_accuracy_figure", "load_recovery", "make_figure",
    "new_figure", "plot_label_accuracy", "pooled_confidence_factor", "recovery_frame", "recovery_path",
    "report_benchmarks", "report_targets", "style",
]
