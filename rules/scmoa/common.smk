# Variables and input/param functions of the SC-MoA rules (rules/scmoa/scmoa.smk). Setups, cells,
# endpoints, command arguments and targets are concord.papers.scmoa.planning (unit-tested); a
# *cell* is a benchmark run under one setup, `<benchmark>` for the setup `main` and
# `<benchmark>@<setup>` for the others, and it names the output directory scmoa/{smodel}/{sbench}/.

from concord.papers.scmoa import planning as _scmoa_planning
from concord.papers.scmoa import report as _scmoa_report

SCMOA_PLAN = _scmoa_planning.ScmoaPlan(config, RESULTS, MODELS)
SCMOA = SCMOA_PLAN.scmoa
SCMOA_BENCHMARKS = SCMOA_PLAN.benchmarks
SCMOA_MODELS = SCMOA_PLAN.models
SCMOA_R = SCMOA_PLAN.root
SCMOA_TABLES = _scmoa_report.TABLES
SCMOA_FIGURES = _scmoa_report.FIGURES
SCMOA_SETUPS = SCMOA_PLAN.setups
SCMOA_ENDPOINTS = SCMOA_PLAN.endpoints
_SCMOA_CELL = SCMOA_PLAN.cell_of
SCMOA_NAMED = _scmoa_planning.NAMED_TARGETS


def scmoa_settings(setup):
    return SCMOA_PLAN.settings(setup)


def scmoa_cells(setup=None):
    return SCMOA_PLAN.cells(setup)


def _cell_settings(wildcards):
    return SCMOA_PLAN.cell_settings(wildcards.sbench)


def _scmoa_data_input(wildcards):
    return SCMOA_PLAN.data_input(wildcards.sdata)


def _scmoa_data_args(wildcards, input):
    return SCMOA_PLAN.data_args(wildcards.sdata, list(input))


def _scmoa_model_input(wildcards):
    return SCMOA_PLAN.model_input(wildcards.smodel)


def _scmoa_backend_args(wildcards, input):
    return SCMOA_PLAN.backend_args(wildcards.smodel, wildcards.sbench)


def scmoa_targets(setup=None, stems=None):
    """Final SC-MoA outputs (see concord.papers.scmoa.planning.ScmoaPlan.targets)."""
    return SCMOA_PLAN.targets(setup, stems)


def scmoa_report_item(path, stem, ext, figure=False):
    """Tables (CSV) and figures (PNG) of SC-MoA in the HTML report, one caption per stem."""
    if ext not in ("csv", "png"):
        return path
    caption = report_caption("scmoa", f"fig_{stem}", "figure") if figure else report_caption("scmoa", stem)
    return in_report(path, caption, "SC-MoA paper", "{smodel} / {sbench}", item=stem, kind="figure" if figure else "table")
