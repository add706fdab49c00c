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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io, provenance, stats
from concord.papers.core import tables

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


# The shared style lives in concord.plotting; re-exported for the paper's figure code.
from concord.plotting import STYLE, new_figure, style  # noqa: E402,F401


# ------------------------------------------------------------------ Figure 4: recovery region

RECOVERY_KEYS: tuple[str, ...] = (
    "outnumbering_ratio",
    "coherence_advantage",
    "confidence_gap_nats",
    "tau",
    "recovered",
    "n_questions",
)


@dataclass(frozen=True)
class RecoveryCell:
    """``analysis/{model}/{benchmark}/recovery.json``: the recovery statistics of one cell.

    Required keys (other keys, e.g. ``provenance``, are allowed and ignored):

    * ``n_questions`` (int >= 0): contested questions -- a correct answer class exists but a
      larger wrong class outnumbers it -- that the statistics below summarise.
    * ``outnumbering_ratio`` (float > 0, or null iff ``n_questions == 0``): ``r = m / n*``, wrong
      plurality size over correct class size, aggregated over the contested questions.
    * ``coherence_advantage`` (float > 0, or null iff ``n_questions == 0``): measured ``c* / c_w``,
      mean within-class affinity of the correct class over that of the wrong plurality.
    * ``confidence_gap_nats`` (float, or null iff ``n_questions == 0``): ``delta = c̄* - c̄_w``, the
      gap in mean token log-probability (nats) between correct and wrong roll-outs.
    * ``tau`` (float > 0): the confidence temperature used by CoRE.
    * ``recovered``: bool (the cell as a whole was recovered) or int in ``[0, n_questions]``
      (contested questions whose correct minority CoRE's extraction selected).
    """

    model: str
    benchmark: str
    outnumbering_ratio: float | None
    coherence_advantage: float | None
    confidence_gap_nats: float | None
    tau: float
    recovered: bool | int
    n_questions: int

    @classmethod
    def from_dict(cls, data: Mapping, model: str, benchmark: str, source: str = "recovery.json") -> "RecoveryCell":
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in RECOVERY_KEYS if k not in data]
        if missing:
            raise ValueError(f"{source}: missing required key(s) {missing}")
        n = data["n_questions"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{source}: 'n_questions' must be an integer >= 0, got {n!r}")
        tau = _number(source, "tau", data["tau"])
        if tau <= 0:
            raise ValueError(f"{source}: 'tau' must be > 0, got {tau!r}")
        measured = {}
        for key, positive in (("outnumbering_ratio", True), ("coherence_advantage", True), ("confidence_gap_nats", False)):
            value = data[key]
            if value is None:
                if n > 0:
                    raise ValueError(f"{source}: '{key}' is null although n_questions = {n} > 0")
                measured[key] = None
                continue
            value = _number(source, key, value)
            if positive and value <= 0:
                raise ValueError(f"{source}: '{key}' must be > 0, got {value!r}")
            measured[key] = value
        recovered = data["recovered"]
        if isinstance(recovered, bool):
            pass
        elif isinstance(recovered, int):
            if not 0 <= recovered <= n:
                raise ValueError(f"{source}: 'recovered' count {recovered} is outside [0, n_questions={n}]")
        else:
            raise ValueError(f"{source}: 'recovered' must be a bool or an integer count, got {recovered!r}")
        return cls(model=model, benchmark=benchmark, tau=tau, recovered=recovered, n_questions=n, **measured)

    @property
    def measured(self) -> bool:
        return self.outnumbering_ratio is not None

    @property
    def confidence_factor(self) -> float:
        """``e^(-delta/tau)``: how much confidence lowers the extraction bar (Prop. 3)."""
        return math.exp(-self.confidence_gap_nats / self.tau)

    @property
    def vote_bar(self) -> float:
        """Coherence advantage needed from the barycentre start: ``(m-1)/(n*-1) ~ r`` (Prop. 2)."""
        return self.outnumbering_ratio

    @property
    def confidence_bar(self) -> float:
        return self.confidence_factor * self.outnumbering_ratio

    @property
    def recovered_fraction(self) -> float:
        if isinstance(self.recovered, bool):
            return float(self.recovered)
        return self.recovered / self.n_questions if self.n_questions else float("nan")


def _number(source: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{source}: '{key}' must be a finite number, got {value!r}")
    return float(value)


def recovery_path(results_dir: str | Path, model: str, benchmark: str) -> Path:
    return Path(results_dir) / "analysis" / model / benchmark / "recovery.json"


def load_recovery(path: str | Path, model: str | None = None, benchmark: str | None = None) -> RecoveryCell:
    """Read and validate one ``recovery.json``; model/benchmark default to its path."""
    path = Path(path)
    if model is None or benchmark is None:
        if path.parent.parent.parent.name != "analysis":
            raise ValueError(f"{path}: expected analysis/{{model}}/{{benchmark}}/recovery.json")
        model, benchmark = path.parent.parent.name, path.parent.name
    try:
        data = io.read_json(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"recovery statistics missing: {path}") from None
    return RecoveryCell.from_dict(data, model=model, benchmark=benchmark, source=str(path))


def recovery_frame(cells: Sequence[RecoveryCell], outcomes: Mapping[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """Figure 4's numbers: one row per cell, with its bars, which side of them it lies on and,
    given ``outcomes``, its CoRE minus Majority final pass@1 (points) and win/loss/tie."""
    outcomes = outcomes or {}
    rows = []
    for cell in cells:
        row = asdict(cell)
        row["recovered_fraction"] = cell.recovered_fraction
        row["confidence_factor"] = cell.confidence_factor if cell.measured else float("nan")
        row["confidence_bar"] = cell.confidence_bar if cell.measured else float("nan")
        row["above_vote_bar"] = bool(cell.measured and cell.coherence_advantage > cell.vote_bar)
        row["above_confidence_bar"] = bool(cell.measured and cell.coherence_advantage > cell.confidence_bar)
        delta = outcomes.get((cell.model, cell.benchmark))
        row["core_minus_majority"] = float("nan") if delta is None else delta
        row["outcome"] = _outcome(delta)
        rows.append(row)
    return pd.DataFrame(rows)


def core_minus_majority(summary: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Per (model, benchmark): CoRE's minus Majority's final pass@1, means over seeds in points
    (the two columns Tables 1-3 print), from :func:`tables.summarise`."""
    means = summary["mean"]
    out = {}
    for model, benchmark in dict.fromkeys((m, b) for m, b, _ in summary.index):
        if (model, benchmark, "core") in means.index and (model, benchmark, "majority") in means.index:
            out[(model, benchmark)] = float(means[(model, benchmark, "core")] - means[(model, benchmark, "majority")])
    return out


def _outcome(delta: float | None) -> str:
    if delta is None:
        return "not evaluated"
    return "win" if delta > 0 else "loss" if delta < 0 else "tie"


# How Figure 4 marks a cell by CoRE minus Majority (Tables 1-3).
OUTCOME_STYLE: dict[str, dict] = {
    "win": {"marker": "o", "color": ARM_COLORS["core"], "label": "win: CoRE > Majority"},
    "loss": {"marker": "X", "color": ARM_COLORS["majority"], "label": "loss: CoRE < Majority"},
    "tie": {"marker": "s", "color": ARM_COLORS["base"], "label": "tie"},
    "not evaluated": {"marker": "o", "color": "white", "label": "not evaluated"},
}


def pooled_confidence_factor(cells: Sequence[RecoveryCell]) -> float:
    """Question-weighted geometric mean of ``e^(-delta/tau)`` over measured cells."""
    measured = [c for c in cells if c.measured and c.n_questions > 0]
    if not measured:
        raise ValueError("no recovery cell has contested questions; Figure 4 has nothing to show")
    weights = np.array([c.n_questions for c in measured], dtype=float)
    logs = np.array([-c.confidence_gap_nats / c.tau for c in measured])
    return float(np.exp(np.average(logs, weights=weights)))


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


# ------------------------------------------------------------------ Figure 5a: CoRE vs CISC


def core_vs_cisc(summary: pd.DataFrame, models: Sequence[str], benchmarks: Sequence[str]) -> tuple[pd.DataFrame, dict]:
    """Per (model, benchmark) cell: CoRE and CISC pass@1 (%, mean over seeds) and the tests.

    Wins/losses count cells where CoRE's mean beats/trails CISC's (ties dropped); the sign test
    and the Wilcoxon signed-rank test run on these per-cell means, as in the paper's section 6.
    """
    if not benchmarks:
        raise ValueError("Figure 5a: none of the configured report.fig5a_benchmarks is a configured benchmark")
    rows = []
    for model in models:
        for bench in benchmarks:
            try:
                core = float(summary.loc[(model, bench, "core"), "mean"])
                cisc = float(summary.loc[(model, bench, "cisc"), "mean"])
            except KeyError:
                raise ValueError(f"Figure 5a: no core/cisc evaluation for {model}/{bench}") from None
            rows.append({"model": model, "benchmark": bench, "cisc": cisc, "core": core, "delta": core - cisc})
    cells = pd.DataFrame(rows)
    wins = int((cells["delta"] > 0).sum())
    losses = int((cells["delta"] < 0).sum())
    result = {
        "n_cells": int(len(cells)),
        "wins": wins,
        "losses": losses,
        "ties": int(len(cells)) - wins - losses,
        "mean_delta": float(cells["delta"].mean()),
        "sign_test_p": stats.sign_test(wins, losses),
        "wilcoxon_p": stats.wilcoxon(cells["core"], cells["cisc"]),
    }
    return cells, result


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


# ------------------------------------------------------------------ Figure 5b: factorial

FACTORIAL: dict[str, tuple[bool, bool]] = {
    # arm: (graph, confidence)
    "majority": (False, False),
    "ec": (True, False),
    "cisc": (False, True),
    "core": (True, True),
}


def factorial(
    summary: pd.DataFrame,
    models: Sequence[str],
    benchmarks: Sequence[str],
    n_resamples: int = 2000,
    seed: int = 0,
    question_deltas: Mapping[str, np.ndarray] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Mean improvement over Base (points) of each graph x confidence arm, over all cells.

    Returns the 2x2 frame (arm, graph, confidence, mean_delta, se, se_over, n_cells) and the
    effects: ``interaction = (CoRE - CISC) - (EC - Majority)``, positive when graph and confidence
    reinforce each other. SEs are bootstrap SEs over cells (fixed ``seed``); a grid of one cell
    has no spread over cells, so there the SE resamples that cell's questions and seeds instead
    (``question_deltas``: arm -> seeds x questions matrix of arm minus Base, points; see
    :func:`cell_question_deltas`), and ``se_over`` says which.
    """
    deltas: dict[str, list[float]] = {arm: [] for arm in FACTORIAL}
    for model in models:
        for bench in benchmarks:
            try:
                base = float(summary.loc[(model, bench, "base"), "mean"])
                for arm in FACTORIAL:
                    deltas[arm].append(float(summary.loc[(model, bench, arm), "mean"]) - base)
            except KeyError:
                raise ValueError(
                    f"Figure 5b needs base, majority, ec, cisc and core evaluations; {model}/{bench} lacks one"
                ) from None
    rows = []
    for arm, (graph, confidence) in FACTORIAL.items():
        values = np.array(deltas[arm])
        se, se_over = float("nan"), ""
        if values.size >= 2:
            se, se_over = stats.bootstrap_se(values, n_resamples=n_resamples, seed=seed), "cells"
        elif question_deltas is not None and np.shape(question_deltas[arm])[-1] >= 2:
            se = stats.bootstrap_se_seeds_questions(question_deltas[arm], n_resamples=n_resamples, seed=seed)
            se_over = "questions x seeds"
        rows.append({"arm": arm, "graph": graph, "confidence": confidence, "mean_delta": float(values.mean()),
                     "se": se, "se_over": se_over, "n_cells": int(values.size)})
    frame = pd.DataFrame(rows)
    m = frame.set_index("arm")["mean_delta"]
    effects = {
        "graph_given_confidence": float(m["core"] - m["cisc"]),
        "graph_without_confidence": float(m["ec"] - m["majority"]),
        "confidence_given_graph": float(m["core"] - m["ec"]),
        "confidence_without_graph": float(m["cisc"] - m["majority"]),
        "interaction": float((m["core"] - m["cisc"]) - (m["ec"] - m["majority"])),
    }
    return frame, effects


def cell_question_deltas(paths: Sequence[str | Path], model: str, benchmark: str) -> dict[str, np.ndarray]:
    """Per arm, the seeds x questions matrix of (arm minus Base) per-question accuracy in points,
    paired by seed and question id, from one cell's evaluation files (their ``per_question``)."""
    accuracy: dict[tuple[str, int], dict[str, float]] = {}
    for path in paths:
        info = tables.parse_eval_path(path)
        if (info["model"], info["benchmark"]) != (model, benchmark):
            continue
        rows = io.read_json(path).get("per_question") or []
        accuracy[(info["arm"], info["seed"])] = {str(r["id"]): 100.0 * r["n_correct"] / r["k"] for r in rows}
    seeds = sorted(s for a, s in accuracy if a == "base")
    out = {}
    for arm in FACTORIAL:
        matrix = []
        for s in seeds:
            base, other = accuracy.get(("base", s), {}), accuracy.get((arm, s))
            if other is None:
                continue
            shared = [q for q in base if q in other]
            matrix.append([other[q] - base[q] for q in shared])
        if matrix and len({len(r) for r in matrix}) == 1:
            out[arm] = np.array(matrix, dtype=float)
    return out if len(out) == len(FACTORIAL) else {}


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


# ------------------------------------------------------------------ config-driven entry points

FIGURES: tuple[str, ...] = ("figure4", "figure5a", "figure5b")


def report_benchmarks(config: Mapping) -> list[str]:
    """Benchmarks shown in tables and figures, in display order (``report.benchmarks``)."""
    return tables.report_section(config)["benchmarks"]


def fig5a_benchmarks(config: Mapping) -> list[str]:
    wanted = tables.report_section(config)["fig5a_benchmarks"]
    return [b for b in report_benchmarks(config) if b in wanted]


def figure_problem(config: Mapping, name: str) -> str | None:
    """Why the config cannot produce this figure, or None when it can."""
    if name not in FIGURES:
        return f"unknown figure {name!r} (expected one of {', '.join(FIGURES)})"
    arms = set(config["arms"])
    if name == "figure4" and not {"majority", "core"} <= arms:
        return "figure4 marks each cell by CoRE minus Majority final pass@1; add majority and core to config arms"
    if name == "figure5a":
        if not {"cisc", "core"} <= arms:
            return "figure5a compares the cisc and core arms; add both to config arms"
        if not fig5a_benchmarks(config):
            return ("figure5a: none of report.fig5a_benchmarks "
                    f"{tables.report_section(config)['fig5a_benchmarks']} is a configured benchmark")
    if name == "figure5b" and not set(FACTORIAL) <= arms:
        return f"figure5b is the 2x2 factorial of {', '.join(FACTORIAL)}; config arms lack {sorted(set(FACTORIAL) - arms)}"
    return None


def available_figures(config: Mapping) -> list[str]:
    return [name for name in FIGURES if figure_problem(config, name) is None]


def figure_inputs(config: Mapping, name: str, results_dir: str | Path = "results") -> list[Path]:
    """Exactly the files a figure reads (Snakemake input functions call this)."""
    problem = figure_problem(config, name)
    if problem:
        raise ValueError(problem)
    models = tables.figure_models(config)
    seeds = [int(s) for s in config["seeds"]]
    if name == "figure4":
        benchmarks = report_benchmarks(config)
        return ([recovery_path(results_dir, m, b) for m in models for b in benchmarks]
                + tables.eval_paths(results_dir, models, benchmarks, ["majority", "core"], seeds))
    if name == "figure5a":
        return tables.eval_paths(results_dir, models, fig5a_benchmarks(config), ["cisc", "core"], seeds)
    if name == "figure5b":
        return tables.eval_paths(results_dir, models, report_benchmarks(config), ["base", *FACTORIAL], seeds)
    raise AssertionError(name)  # figure_problem rejected unknown names above


def figure_outputs(name: str, results_dir: str | Path = "results") -> dict[str, Path]:
    stem = Path(results_dir) / "figures" / name
    outputs = {"png": stem.with_suffix(".png"), "pdf": stem.with_suffix(".pdf"), "csv": stem.with_suffix(".csv")}
    if name == "figure5a":
        outputs["json"] = stem.with_suffix(".json")
    return outputs


def report_targets(config: Mapping, results_dir: str | Path = "results") -> list[str]:
    """Every table and every figure the config supports (for the workflow's ``rule all``)."""
    targets = [str(p) for name in tables.report_section(config)["tables"]
               for p in tables.table_outputs(name, results_dir).values()]
    for name in available_figures(config):
        targets += [str(p) for p in figure_outputs(name, results_dir).values()]
    return targets


def make_figure(config: Mapping, name: str, results_dir: str | Path, stem: str | Path) -> list[Path]:
    """Config + results tree -> the figure's PNG, PDF, CSV (and figure5a's test results JSON)."""
    report = tables.report_section(config)
    labels = report["labels"]
    stem = Path(stem)
    inputs = figure_inputs(config, name, results_dir)
    written: list[Path] = []
    if name == "figure4":
        cells = [load_recovery(p) for p in inputs if p.name == "recovery.json"]
        evals = tables.load_eval([p for p in inputs if p.name != "recovery.json"])
        outcomes = core_minus_majority(tables.summarise(evals, ddof=int(report["std_ddof"])))
        fig = figure4(cells, outcomes)
        data = recovery_frame(cells, outcomes)
    else:
        summary = tables.summarise(tables.load_eval(inputs), ddof=int(report["std_ddof"]))
        models = tables.figure_models(config)
        if name == "figure5a":
            data, result = core_vs_cisc(summary, models, fig5a_benchmarks(config))
            fig = figure5a(data, result, labels)
            sections = {k: config[k] for k in ("models", "benchmarks", "arms", "seeds", "report") if k in config}
            prov = provenance.record(step="figure5a", config=sections, inputs=inputs)
            written.append(io.write_json(stem.with_suffix(".json"), {**result, "provenance": prov}))
        else:
            benchmarks = report_benchmarks(config)
            single = [(m, b) for m in models for b in benchmarks]
            per_question = cell_question_deltas(inputs, *single[0]) if len(single) == 1 else None
            data, effects = factorial(summary, models, benchmarks, **report["bootstrap"],
                                      question_deltas=per_question or None)
            fig = figure5b(data, effects)
            data = data.assign(**{f"effect_{k}": v for k, v in effects.items()})
    written.append(io.write_text(stem.with_suffix(".csv"), data.to_csv(index=False, float_format="%.6f", lineterminator="\n")))
    written.extend(io.save_figure(fig, stem))
    return written


# ------------------------------------------------------------------ Figure 2: label accuracy vs N

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
