"""Read the tables a run produced into measures the printed numbers can be matched against.

The scorecard imports no paper package: it reads the produced files by their documented paths
(relative to the results tree) and columns (docs/CONTRIBUTING.md, "Artifact contracts"). Columns
not listed as required are optional: a table written before a column existed still reads.

=============================================  ==========================================================
path                                           columns read
=============================================  ==========================================================
``tables/table{N}.csv``                        ``model, benchmark, {arm}_mean, {arm}_std, {arm}_n,
                                               delta_{arm}`` (percent; CoRE Tables 1-3; the Mean-Δ row,
                                               ``model == "Mean Δ vs. Base"``, is recomputed, not read);
                                               optional ``n_questions``
``figures/figure5a.json`` + ``figure5a.csv``   ``wins, n_cells, sign_test_p, wilcoxon_p``; the csv's
                                               ``model, benchmark`` (the cells compared)
``tables/figure3_steps_saved.csv``             ``model, benchmark, steps_saved_pct``; optional ``n_seeds``
``analysis/{model}/{bench}/recovery.json``     Appendix H: ``n_questions_total, majority_wrong,
                                               recovered_total, regressions, net, recovered_confidence_gap_nats,
                                               recovered_reward_gap, mean_gate_recovered, confidence_gap_nats,
                                               n_questions, tau``; its SEs from ``recovery_questions.csv`` beside it
``fmv/tables/table1.csv``                     ``method, train_mean, train_se, holdout_mean, holdout_se``
                                               (fractions; FMV Table 1)
``fmv/tables/table2.csv``                     ``method, mean, mean_se, fmv, fmv_se, best, best_se``
``fmv/figures/{bench}/figure2_{left,right}``  ``model`` (label), ``method, n, accuracy, se``; optional
``.csv``                                       ``n_questions, n_seeds``
``scmoa/{model}/{cell}/analysis/*.csv``        ``accuracy``: ``method, n, accuracy_pct``; ``significance``:
                                               ``method, baseline, wins, losses, mcnemar_p, ci_hi_pct``;
                                               ``flips``: ``beneficial, harmful, mcnemar_p, F_s, P_c``;
                                               ``tables29_30_synthesis_vs_vote``: the section-3 2x2 table;
                                               ``k_sweep``/``k_sweep_h1``: ``k, accuracy_pct,
                                               delta_prev_pp``; ``table21_override``: ``override_rate_pct,
                                               n``; ``error_correlation``: ``condition, rho_bar, ci_lo,
                                               ci_hi``; ``table37_information_ladder``: ``condition,
                                               accuracy_pct, beneficial, harmful, ratio, p_holm``;
                                               ``summary.json``: ``diversity_test.t, .p``
=============================================  ==========================================================

An SC-MoA *cell* directory is ``{benchmark key}`` (setup ``main``) or ``{benchmark key}@{setup}``
(rules/scmoa/common.smk). The benchmark key is mapped to the paper's benchmark by its config
entry (``format: bbh, subset: bbh3`` is the paper's BBH-3, whatever the key), and the setup's own
settings (``n``, ``k``, sampling, roles) override the section's, as the rules do.

FMV rows are told apart by an ``arm`` column when a table has one, else by their labels
("Base ...", "... Pointwise ...", "... N=32 ..."). The setting a number was produced in comes from
the workflow config (the same keys the rules read) and from the files themselves (question and
seed counts): every reproduced number records its scale (questions, seeds, training epochs, N, k),
so that a comparison is only judged where the run shares the paper's setting. Every reproduced
number also carries the run's own standard error (``Reproduced.uncertainty``, see
:mod:`concord.scorecard.tolerance`).

One module per paper (:mod:`.core`, :mod:`.fmv`, :mod:`.scmoa`) registers a reader for each kind
of file it reads (:func:`.base.register_reader`: a name, the path patterns, the function);
:mod:`.dispatch` picks the reader by path. A new reader is a function and its registration in
the paper's module, nothing else.
"""

from __future__ import annotations

from concord.scorecard.readers.base import READERS, Found, ReadContext, Reproduced, fmt_setting, register_reader
from concord.scorecard.readers.core import (CORE_ARMS, MEAN_ROW_LABEL, CoreQuestions, config_seeds, core_aggregates,
                                            core_epochs, core_setting, read_core_figure3, read_core_figure5a,
                                            read_core_recovery, read_core_table, recovery_aggregates)
from concord.scorecard.readers.dispatch import classify, read_produced, scorecard_inputs
from concord.scorecard.readers.fmv import (fmv_model_label, fmv_row_key, fmv_setting, fmv_ttrl_cell, read_fmv_figure2,
                                           read_fmv_table)
from concord.scorecard.readers.scmoa import (LADDER_VIEWS, RHO_CONDITIONS, SCMOA_BBH_SUBSETS, SCMOA_FORMATS,
                                             SCMOA_QA_BENCHMARKS, SCMOA_STEMS, SCMOA_T13_BASELINES, SCMOA_T13_BENCHMARKS,
                                             SCMOA_TABLES, SECTION3_TABLE, _flip_uncertainties, read_scmoa_dir,
                                             scmoa_aggregates, scmoa_cell, scmoa_paper_benchmark, scmoa_setting)

__all__ = [
    "CORE_ARMS", "LADDER_VIEWS", "MEAN_ROW_LABEL", "READERS", "RHO_CONDITIONS", "SCMOA_BBH_SUBSETS", "SCMOA_FORMATS",
    "SCMOA_QA_BENCHMARKS", "SCMOA_STEMS", "SCMOA_T13_BASELINES", "SCMOA_T13_BENCHMARKS", "SCMOA_TABLES",
    "SECTION3_TABLE", "CoreQuestions", "Found", "ReadContext", "Reproduced", "_flip_uncertainties", "classify",
    "config_seeds", "core_aggregates", "core_epochs", "core_setting", "fmt_setting", "fmv_model_label", "fmv_row_key",
    "fmv_setting", "fmv_ttrl_cell", "read_core_figure3", "read_core_figure5a", "read_core_recovery",
    "read_core_table", "read_fmv_figure2", "read_fmv_table", "read_produced", "read_scmoa_dir", "recovery_aggregates",
    "register_reader",
    "scmoa_aggregates", "scmoa_cell", "scmoa_paper_benchmark", "scmoa_setting", "scorecard_inputs",
]
