"""The figures of an SC-MoA run (PNG and PDF): one function per figure, drawn from numbers the
report has computed (:mod:`concord.papers.scmoa.report`) or from the records."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io
from concord.papers.scmoa import analysis
from concord.papers.scmoa.display import label, na


def panels(ncols: int = 1, width: float = 4.0, title: str = ""):
    """A figure of ``ncols`` panels, titled with the run (model / benchmark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 3.4), layout="constrained")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig, np.atleast_1d(axes)


def _save(fig, stem: Path) -> None:
    import matplotlib.pyplot as plt

    io.save_figure(fig, stem)
    plt.close(fig)


def calibration(rel: pd.DataFrame, sel: pd.DataFrame, ece: float, auroc: float, out: Path, title: str) -> None:
    """Reliability of the pre-refinement consensus and selective prediction by it."""
    fig, ax = panels(2, title=title)
    ax[0].plot([0, 100], [0, 100], ls="--", c="grey", lw=1)
    ax[0].plot(100 * rel["confidence"], 100 * rel["accuracy"], marker="o")
    ax[0].set(xlabel="consensus C (%)", ylabel="accuracy (%)", title=f"Reliability (ECE={na(ece)})", xlim=(0, 102),
              ylim=(0, 102))
    ax[1].plot(100 * sel["coverage"], 100 * sel["accuracy"], marker="o")
    ax[1].set(xlabel="coverage (%)", ylabel="accuracy (%)", title=f"Selective prediction (AUROC={na(auroc, '.2f')})",
              ylim=(0, 102))
    _save(fig, out / "calibration")


def transition(trans: pd.DataFrame, out: Path, title: str) -> None:
    """The consensus transition matrix (pre-refinement k_max rows, post-refinement columns)."""
    fig, ax = panels(1, title=title)
    im = ax[0].imshow(trans.to_numpy(), cmap="Blues", origin="lower")
    size = len(trans.columns)
    ax[0].set(xticks=range(size), xticklabels=trans.columns, yticks=range(size), yticklabels=trans.index,
              xlabel="post-refinement k_max", ylabel="pre-refinement k_max", title="Consensus transition")
    for (a, b), v in np.ndenumerate(trans.to_numpy()):
        # White on the dark half of the colour map, black on the light half: readable on every cell.
        dark = im.norm(v) > 0.5
        ax[0].text(b, a, str(v), ha="center", va="center", fontsize=8, color="white" if dark else "black")
    fig.colorbar(im, ax=ax[0])
    _save(fig, out / "transition")


def diversity(diversity: Sequence[float], outcomes: Sequence[str], decomp: Mapping[str, Any], out: Path, title: str) -> None:
    """Trace diversity by flip outcome, and the synthesis decomposition (recovery vs corruption)."""
    fig, ax = panels(2, title=title)
    groups = ["beneficial", "harmful", "no flip"]
    # The rows the diversity table counts (D_t defined and > 0), so table and plot agree.
    kept = analysis.diversity_rows(diversity, outcomes)
    data = [kept.loc[kept["outcome"] == g, "D_t"].tolist() for g in groups]
    for i, vals in enumerate(data):
        ax[0].scatter([i] * len(vals), vals, alpha=0.6)
        if vals:
            ax[0].hlines(np.mean(vals), i - 0.25, i + 0.25, colors="k")
    ax[0].set(xticks=range(3), xticklabels=groups, ylabel="D_t", title="Trace diversity by outcome")
    ax[1].bar(["recovery\nP_w R_s", "corruption\nP_c (1-F_s)"], [decomp["recovery"], decomp["corruption"]],
              color=["tab:green", "tab:red"])
    ax[1].set(ylabel="fraction of problems", title="Synthesis decomposition")
    _save(fig, out / "diversity")


def sweeps(gate: pd.DataFrame, ks: pd.DataFrame, out: Path, title: str) -> None:
    """The consensus-gating threshold sweep and the inner sampling budget (k) sweep."""
    fig, ax = panels(2, title=title)
    finite = gate[np.isfinite(gate["theta"])]
    ax[0].plot(finite["theta"], 100 * finite["accuracy"], marker="o", label="gated")
    ax[0].axhline(100 * float(gate.loc[~np.isfinite(gate["theta"]), "accuracy"].iloc[0]), ls="--", c="k",
                  label="always aggregate")
    ax[0].set(xlabel="gating threshold theta", ylabel="accuracy (%)", title="Gating sweep", ylim=(0, 102))
    ax[0].legend(fontsize=8)
    if not ks.empty:
        ax[1].errorbar(ks["k"], 100 * ks["accuracy"], yerr=[100 * (ks["accuracy"] - ks["ci_lo"]),
                                                            100 * (ks["ci_hi"] - ks["accuracy"])], marker="o", capsize=3)
        ax[1].set_xticks(sorted(int(k) for k in ks["k"]))  # k is an integer budget
    ax[1].set(xlabel="k (samples per perturbation)", ylabel="accuracy (%)", title="k sweep", ylim=(0, 102))
    _save(fig, out / "sweeps")


def pareto(records: Sequence[Mapping], table_methods: Sequence[str], out: Path, title: str) -> None:
    """Figure 3: the compute-accuracy frontier."""
    fig, ax = panels(1, width=5.0, title=title)
    pts = [(float(np.mean([r["methods"][m]["calls"] for r in records])), 100 * float(analysis.method_correct(records, m).mean()), m)
           for m in table_methods if m not in ("vote_post",)]
    for x, y, m in pts:
        ax[0].scatter(x, y, color="tab:red" if m == "scmoa" else "tab:blue")
        ax[0].annotate(label(m), (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    frontier, best = [], -1.0
    for x, y, _ in sorted(pts):
        if y > best:
            frontier.append((x, y))
            best = y
    if frontier:
        ax[0].plot(*zip(*frontier), ls="--", c="grey", lw=1)
    ax[0].set(xlabel="LLM calls per problem", ylabel="accuracy (%)", title="Compute-accuracy frontier (Figure 3)")
    _save(fig, out / "figure3_pareto")


def consensus_gain(records: Sequence[Mapping], out: Path, title: str) -> None:
    """Figure 4b: the mean consensus gain by pre-refinement stratum."""
    gain = analysis.consensus_gain_by_stratum(records)
    fig, ax = panels(1, title=title)
    ax[0].bar([f"{c:.2f}" for c in gain["C_pre"]], gain["mean_delta_C"])
    ax[0].set(xlabel="pre-refinement consensus C", ylabel="E[Delta C]", title="Consensus gain by stratum (Figure 4b)")
    _save(fig, out / "figure4b_consensus_gain")


def n_sweep(records: Sequence[Mapping], out: Path, title: str) -> None:
    """Figure 6c: SC-MoA at N perturbations vs self-consistency with N samples."""
    fig, ax = panels(1, title=title)
    ns = sorted({int(k) for r in records for k in (r.get("n_sweep") or {})})
    if ns:
        for key, name in (("scmoa_correct", "SC-MoA"), ("sc_correct", "SC")):
            ys = [100 * float(np.mean([r["n_sweep"][str(k)][key] for r in records if str(k) in r.get("n_sweep", {})])) for k in ns]
            ax[0].plot(ns, ys, marker="o", label=name)
        ax[0].legend(fontsize=8)
    else:
        ax[0].text(0.5, 0.5, "no N sweep in this run\n(setting n_sweep)", ha="center", va="center", transform=ax[0].transAxes)
    ax[0].set(xlabel="N (perturbations / SC samples)", ylabel="accuracy (%)", title="SC-MoA vs SC over N (Figure 6c)")
    ax[0].xaxis.get_major_locator().set_params(integer=True)  # N is a whole number
    _save(fig, out / "figure6c_n_sweep")


def gain_over_sc(table: pd.DataFrame, stem: Path) -> None:
    """Figure 6a: SC-MoA's gain over self-consistency per condition (model / benchmark)."""
    fig, ax = panels(1, width=max(4.0, 0.6 * len(table) + 2))
    gain = table["accuracy_pct"] - table["sc_accuracy_pct"]
    ax[0].bar(range(len(table)), gain.fillna(0.0), color=["tab:green" if g >= 0 else "tab:red" for g in gain.fillna(0.0)])
    ax[0].axhline(0, c="k", lw=0.8)
    ax[0].set_xticks(range(len(table)), table["condition"], rotation=45, ha="right", fontsize=7)
    ax[0].set(ylabel="SC-MoA - SC (pp)", title="Gain over self-consistency per model (Figure 6a)")
    _save(fig, stem)


def pipeline_heatmap(table: pd.DataFrame, stem: Path) -> None:
    """Figure 8: the pipeline metrics per condition, cells coloured by per-column rank (green = best)."""
    metrics = ["accuracy_pct", "C_pre", "pre_exit_rate_pct", "draft_stability_pct", "consensus_lift",
               "refinement_independence_pct", "override_rate_pct", "calls"]
    values = table[metrics].astype(float)
    # Rank per column: green = best. Higher is better except consensus lift and calls.
    better_low = {"consensus_lift", "calls"}
    ranks = pd.DataFrame({m: (values[m].rank(ascending=m in better_low, pct=True) if len(table) > 1
                              else pd.Series([1.0] * len(table))) for m in metrics}).fillna(0.5)
    fig, ax = panels(1, width=max(5.0, 0.9 * len(metrics)))
    ax[0].imshow(ranks.to_numpy(), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax[0].set_xticks(range(len(metrics)), metrics, rotation=45, ha="right", fontsize=7)
    ax[0].set_yticks(range(len(table)), table["condition"], fontsize=7)
    for (i, j), v in np.ndenumerate(values.to_numpy()):
        ax[0].text(j, i, "" if np.isnan(v) else f"{v:.2g}", ha="center", va="center", fontsize=6)
    ax[0].set_title("Pipeline metrics per condition (Figure 8)")
    _save(fig, stem)
