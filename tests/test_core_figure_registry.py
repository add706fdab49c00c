"""CoRE's figures are registered specs: every listed figure has one, and a config without the
arms a figure compares is told which to add."""

from __future__ import annotations

from concord.papers.core.figures import FIGURE_SPECS, FIGURES, figure_outputs, figure_problem


def test_every_listed_figure_is_registered():
    assert FIGURE_SPECS.names() == sorted(FIGURES)
    assert set(figure_outputs("figure5a")) == {"png", "pdf", "csv", "json"}
    assert set(figure_outputs("figure4")) == {"png", "pdf", "csv"}


def test_problems_name_what_to_change():
    config = {"arms": ["majority"], "report": {}, "models": {}, "benchmarks": {}}
    assert "add majority and core" in figure_problem(config, "figure4")
    assert "add both" in figure_problem(config, "figure5a")
    assert "unknown figure 'figure9'" in figure_problem(config, "figure9")
