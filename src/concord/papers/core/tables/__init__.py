"""Tables 1-3 of the paper: final pass@1 per (family, model, benchmark) and arm.

Input: the evaluation JSONs ``eval/{model}/{benchmark}/{arm}/seed{seed}.json`` (key
``pass_at_1`` in [0, 1], and ``per_question`` records). Output: one row per (family, model,
benchmark) with each arm's mean +/- std over seeds in percent, each arm minus Base (percentage
points) with a paired test beside it, the best improvement marked, and a final Mean-Delta row --
as CSV (numbers), Markdown and LaTeX.

Controls: every Delta carries a 95% paired bootstrap interval that resamples questions and
training seeds (each question's accuracy in each seed minus Base's on the same question,
:func:`concord.stats.bootstrap_questions_and_seeds`; the Mean-Delta row resamples each cell's
questions and seeds within the cell) and, in the CSV, a paired sign-flip permutation p-value
(:mod:`concord.stats`, scipy). The zero-update arm (the training path at learning rate 0,
``concord.rl.settings.ZERO_UPDATE_ARM``) is a column of its own, never "best"; the table says
whether it reproduces Base sample for sample. Two arms whose trained weights hash the same in
every seed are one model: the table names the later one as identical to the earlier.

Which models go into which table is ``config["report"]["tables"]`` (table name -> model keys);
a model's family is ``config["models"][key]["family"]``.

One concern per module: ``spec`` (arms, :class:`TableSpec` from the config), ``evals`` (the
evaluation files), ``controls`` (the paired tests and checks against Base), ``build`` (the table,
its text forms and files); this package hands on their public names.
"""

from __future__ import annotations

from concord.papers.core.tables.build import (
    build_table,
    caption_for,
    display_name,
    make_table,
    to_latex,
    to_markdown,
    write_table,
)
from concord.papers.core.tables.controls import Comparisons, compare_to_base, seed_differences
from concord.papers.core.tables.evals import (
    eval_path,
    eval_paths,
    load_eval,
    parse_eval_path,
    summarise,
    table_inputs,
    table_outputs,
)
from concord.papers.core.tables.spec import (
    ARM_LABELS,
    ARM_NOTES,
    ARMS,
    CONFIDENCE_LEVEL,
    CONTROL_ARMS,
    DEFAULT_FIG5A_BENCHMARKS,
    MEAN_ROW_LABEL,
    ZERO_UPDATE,
    TableSpec,
    arm_seeds,
    figure_models,
    report_section,
    table_spec,
)

__all__ = [
    "ARMS", "ARM_LABELS", "ARM_NOTES", "CONFIDENCE_LEVEL", "CONTROL_ARMS", "Comparisons", "DEFAULT_FIG5A_BENCHMARKS",
    "MEAN_ROW_LABEL", "TableSpec", "ZERO_UPDATE", "arm_seeds", "build_table", "caption_for", "compare_to_base",
    "display_name", "eval_path", "eval_paths", "figure_models", "load_eval", "make_table", "parse_eval_path",
    "report_section", "seed_differences", "summarise", "table_inputs", "table_outputs", "table_spec", "to_latex",
    "to_markdown", "write_table",
]
