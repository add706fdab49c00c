"""Which figures a config can draw, and exactly which files each one reads and writes.

Pure functions of the config (no file is opened): the rules call them as input functions and for
the workflow's targets, so a dry run plans exactly what a real run reads. Each figure is one
:class:`FigureSpec` in :data:`FIGURE_SPECS`, registered by :mod:`.build` beside the code that
draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from concord.papers.core import tables
from concord.registry import Registry

# The figures in the order they are listed (targets, messages).
FIGURES: tuple[str, ...] = ("figure4", "figure5a", "figure5b")


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the paper.

    Args:
        problem: ``config -> why this config cannot draw it`` (None when it can).
        inputs: ``(config, results_dir) -> the files it reads``, called only when ``problem`` is None.
        build: ``(config, inputs, stem) -> (the plotted numbers, the figure, other files written)``.
        extra_outputs: suffixes written beside the PNG, PDF and CSV (Figure 5a's test results ``.json``).
    """

    problem: Callable[[Mapping], str | None]
    inputs: Callable[[Mapping, str | Path], list[Path]]
    build: Callable
    extra_outputs: tuple[str, ...] = ()


FIGURE_SPECS: Registry[FigureSpec] = Registry("CoRE figure")


def report_benchmarks(config: Mapping) -> list[str]:
    """Benchmarks shown in tables and figures, in display order (``report.benchmarks``)."""
    return tables.report_section(config)["benchmarks"]


def fig5a_benchmarks(config: Mapping) -> list[str]:
    wanted = tables.report_section(config)["fig5a_benchmarks"]
    return [b for b in report_benchmarks(config) if b in wanted]


def figure_problem(config: Mapping, name: str) -> str | None:
    """Why the config cannot produce this figure, or None when it can."""
    if name not in FIGURES or name not in FIGURE_SPECS:
        return f"unknown figure {name!r} (expected one of {', '.join(FIGURES)})"
    return FIGURE_SPECS.get(name).problem(config)


def available_figures(config: Mapping) -> list[str]:
    return [name for name in FIGURES if figure_problem(config, name) is None]


def figure_inputs(config: Mapping, name: str, results_dir: str | Path = "results") -> list[Path]:
    """Exactly the files a figure reads (Snakemake input functions call this)."""
    problem = figure_problem(config, name)
    if problem:
        raise ValueError(problem)
    return FIGURE_SPECS.get(name).inputs(config, results_dir)


def figure_outputs(name: str, results_dir: str | Path = "results") -> dict[str, Path]:
    stem = Path(results_dir) / "figures" / name
    outputs = {"png": stem.with_suffix(".png"), "pdf": stem.with_suffix(".pdf"), "csv": stem.with_suffix(".csv")}
    for suffix in FIGURE_SPECS.get(name).extra_outputs:
        outputs[suffix.lstrip(".")] = stem.with_suffix(suffix)
    return outputs


def report_targets(config: Mapping, results_dir: str | Path = "results") -> list[str]:
    """Every table and every figure the config supports (for the workflow's ``rule all``)."""
    targets = [str(p) for name in tables.report_section(config)["tables"]
               for p in tables.table_outputs(name, results_dir).values()]
    for name in available_figures(config):
        targets += [str(p) for p in figure_outputs(name, results_dir).values()]
    return targets
