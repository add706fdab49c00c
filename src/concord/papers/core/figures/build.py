"""The figures, one registered :class:`~.planning.FigureSpec` each: what the config must hold, what
it reads, and how its numbers and drawing are made; :func:`make_figure` writes any of them."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from concord import io, provenance
from concord.papers.core import tables
from concord.papers.core.figures.drawing import figure4, figure5a, figure5b
from concord.papers.core.figures.planning import (FIGURE_SPECS, FigureSpec, fig5a_benchmarks, figure_inputs,
                                                  report_benchmarks)
from concord.papers.core.figures.recovery import load_recovery, recovery_path
from concord.papers.core.figures.statistics import (FACTORIAL, cell_question_deltas, core_minus_majority, core_vs_cisc,
                                                    factorial, recovery_frame)


def _seeds(config: Mapping) -> list[int]:
    return [int(s) for s in config["seeds"]]


# ------------------------------------------------------------------ Figure 4: recovery region


def _figure4_problem(config: Mapping) -> str | None:
    if not {"majority", "core"} <= set(config["arms"]):
        return "figure4 marks each cell by CoRE minus Majority final pass@1; add majority and core to config arms"
    return None


def _figure4_inputs(config: Mapping, results_dir: str | Path) -> list[Path]:
    models, benchmarks = tables.figure_models(config), report_benchmarks(config)
    return ([recovery_path(results_dir, m, b) for m in models for b in benchmarks]
            + tables.eval_paths(results_dir, models, benchmarks, ["majority", "core"], _seeds(config)))


def _figure4_build(config: Mapping, inputs: list[Path], stem: Path):
    report = tables.report_section(config)
    cells = [load_recovery(p) for p in inputs if p.name == "recovery.json"]
    evals = tables.load_eval([p for p in inputs if p.name != "recovery.json"])
    outcomes = core_minus_majority(tables.summarise(evals, ddof=int(report["std_ddof"])))
    return recovery_frame(cells, outcomes), figure4(cells, outcomes), []


FIGURE_SPECS.register("figure4", FigureSpec(_figure4_problem, _figure4_inputs, _figure4_build))


# ------------------------------------------------------------------ Figure 5a: CoRE vs CISC


def _figure5a_problem(config: Mapping) -> str | None:
    if not {"cisc", "core"} <= set(config["arms"]):
        return "figure5a compares the cisc and core arms; add both to config arms"
    if not fig5a_benchmarks(config):
        return ("figure5a: none of report.fig5a_benchmarks "
                f"{tables.report_section(config)['fig5a_benchmarks']} is a configured benchmark")
    return None


def _figure5a_inputs(config: Mapping, results_dir: str | Path) -> list[Path]:
    return tables.eval_paths(results_dir, tables.figure_models(config), fig5a_benchmarks(config), ["cisc", "core"],
                             _seeds(config))


def _figure5a_build(config: Mapping, inputs: list[Path], stem: Path):
    report = tables.report_section(config)
    summary = tables.summarise(tables.load_eval(inputs), ddof=int(report["std_ddof"]))
    data, result = core_vs_cisc(summary, tables.figure_models(config), fig5a_benchmarks(config))
    fig = figure5a(data, result, report["labels"])
    sections = {k: config[k] for k in ("models", "benchmarks", "arms", "seeds", "report") if k in config}
    prov = provenance.record(step="figure5a", config=sections, inputs=inputs)
    return data, fig, [io.write_json(stem.with_suffix(".json"), {**result, "provenance": prov})]


FIGURE_SPECS.register("figure5a", FigureSpec(_figure5a_problem, _figure5a_inputs, _figure5a_build, (".json",)))


# ------------------------------------------------------------------ Figure 5b: factorial


def _figure5b_problem(config: Mapping) -> str | None:
    arms = set(config["arms"])
    if not set(FACTORIAL) <= arms:
        return f"figure5b is the 2x2 factorial of {', '.join(FACTORIAL)}; config arms lack {sorted(set(FACTORIAL) - arms)}"
    return None


def _figure5b_inputs(config: Mapping, results_dir: str | Path) -> list[Path]:
    return tables.eval_paths(results_dir, tables.figure_models(config), report_benchmarks(config),
                             ["base", *FACTORIAL], _seeds(config))


def _figure5b_build(config: Mapping, inputs: list[Path], stem: Path):
    report = tables.report_section(config)
    summary = tables.summarise(tables.load_eval(inputs), ddof=int(report["std_ddof"]))
    models, benchmarks = tables.figure_models(config), report_benchmarks(config)
    single = [(m, b) for m in models for b in benchmarks]
    per_question = cell_question_deltas(inputs, *single[0]) if len(single) == 1 else None
    data, effects = factorial(summary, models, benchmarks, **report["bootstrap"], question_deltas=per_question or None)
    return data.assign(**{f"effect_{k}": v for k, v in effects.items()}), figure5b(data, effects), []


FIGURE_SPECS.register("figure5b", FigureSpec(_figure5b_problem, _figure5b_inputs, _figure5b_build))


def make_figure(config: Mapping, name: str, results_dir: str | Path, stem: str | Path) -> list[Path]:
    """Config + results tree -> the figure's PNG, PDF, CSV (and figure5a's test results JSON)."""
    stem = Path(stem)
    inputs = figure_inputs(config, name, results_dir)
    data, fig, written = FIGURE_SPECS.get(name).build(config, inputs, stem)
    written.append(io.write_text(stem.with_suffix(".csv"), data.to_csv(index=False, float_format="%.6f", lineterminator="\n")))
    written.extend(io.save_figure(fig, stem))
    return written
