"""Figure 3: validation pass@1 versus training step, CoRE against Majority, and the steps saved.

Input: the per-step training logs ``train/{model}/{benchmark}/{arm}/seed{seed}/log.jsonl``
(rows with ``val_pass_at_1``, written every ``training.eval_every`` steps, step 0 = untrained).
For each (model, benchmark) the curves are averaged over seeds at the steps every seed logged.
Under ``training.ends_from_evaluation`` the first and last points come from the evaluations of
Base and of the trained arm (:func:`with_evaluation_ends`), which training then does not repeat.

Each panel says what its points are: the curves' protocol (mean@``val_k`` on ``val_questions``
questions in the training dtype, from the logs and the runs' provenance) and, where the base
model's evaluations are given, Base under the evaluation protocol (mean@k on the evaluated
questions in the engine's dtype: the number Tables 1-3 print) as a star at step 0. The curves'
own step 0 is the untrained policy under the validation protocol, labelled as such.

Steps saved (paper: "CoRE reaches TTRL's plateau accuracy in 54-70% fewer steps"):

* Majority's plateau = mean of its last ``plateau_window`` validation points (its final accuracy
  for a window of 1);
* each arm's steps-to-plateau = the first logged step whose mean validation pass@1 reaches it;
* saved = 100 x (1 - steps_CoRE / steps_Majority). Undefined (empty) when CoRE never reaches the
  plateau or Majority's plateau is already met at step 0 (training did not improve on the base).
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

LOG_PATH = re.compile(
    r"(?:^|/)train/(?P<model>[^/]+)/(?P<benchmark>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>[0-9]+)/log\.jsonl$"
)
CURVE_ARMS = ("majority", "core")
ARM_LABELS = {"majority": "Majority (TTRL)", "core": "CoRE"}


def parse_log_path(path: str | Path) -> dict:
    m = LOG_PATH.search(Path(path).as_posix())
    if not m:
        raise ValueError(f"{path}: not a training log train/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}/log.jsonl")
    info = m.groupdict()
    info["seed"] = int(info["seed"])
    return info


def parse_cells(cells: Sequence[str], models: Sequence[str], benchmarks: Sequence[str]) -> list[tuple[str, str]]:
    """Figure 3 panels from ``model/benchmark`` strings; empty means every model x benchmark."""
    out = []
    for cell in cells:
        model, _, bench = cell.partition("/")
        if model not in models or bench not in benchmarks:
            raise ValueError(f"training.figure3_cells: {cell!r} is not a configured model/benchmark pair")
        out.append((model, bench))
    return out or [(m, b) for m in models for b in benchmarks]


CURVE_COLUMNS = ["model", "benchmark", "arm", "seed", "step", "val_pass_at_1", "val_k", "val_questions", "dtype"]


def _log_file(path: str | Path) -> Path:
    path = Path(path)
    return path / "log.jsonl" if path.is_dir() else path  # a training output directory: its log


def load_curves(paths: Iterable[str | Path], *, allow_empty: bool = False) -> pd.DataFrame:
    """One row per validation point: model, benchmark, arm, seed, step, val_pass_at_1.
    ``allow_empty``: a log without validation points is no error (its ends come from evaluations)."""
    from concord.io import read_jsonl

    rows = []
    for path in paths:
        path = _log_file(path)
        info = parse_log_path(path)
        points = [r for r in read_jsonl(path) if r.get("val_pass_at_1") is not None]
        if not points and not allow_empty:
            raise ValueError(f"{path}: no validation points (is training.eval_every 0?)")
        dtype = _training_dtype(path.parent / "provenance.json")
        for r in points:
            rows.append({**info, "step": int(r["step"]), "val_pass_at_1": float(r["val_pass_at_1"]),
                         "val_k": r.get("val_k"), "val_questions": r.get("val_questions"), "dtype": dtype})
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def _evaluation_point(path: str | Path, step: int, arm: str) -> dict:
    """A curve point from an evaluation JSON: its pass@1 under the evaluation's protocol."""
    from concord.io import read_json
    from concord.papers.core.tables import parse_eval_path

    info = parse_eval_path(path)
    payload = read_json(path)
    numeric = (payload.get("provenance") or {}).get("numeric") or {}
    return {"model": info["model"], "benchmark": info["benchmark"], "arm": arm, "seed": int(info["seed"]),
            "step": int(step), "val_pass_at_1": float(payload["pass_at_1"]), "val_k": payload.get("k"),
            "val_questions": payload.get("n_questions"), "dtype": numeric.get("dtype")}


def with_evaluation_ends(points: pd.DataFrame, log_paths: Iterable[str | Path], base_evals: Sequence[str | Path],
                         arm_evals: Sequence[str | Path]) -> pd.DataFrame:
    """The curves with their first and last points from the evaluations (training.ends_from_evaluation):
    step 0 of every run is Base's evaluation for its seed, the run's last logged step is its own
    arm's evaluation. Under the evaluation's protocol these are the validations training would have
    computed, sample for sample (tests/test_rl_train.py checks the identity), so they were not
    computed twice. A step the log already validated keeps the log's point."""
    from concord.io import read_jsonl
    from concord.papers.core.tables import parse_eval_path

    def key(path):
        info = parse_eval_path(path)
        return info["model"], info["benchmark"], info["arm"], int(info["seed"])

    evals = {key(p): p for p in [*base_evals, *arm_evals]}
    rows = []
    for path in log_paths:
        path = _log_file(path)
        info = parse_log_path(path)
        steps = [int(r["step"]) for r in read_jsonl(path) if "step" in r]
        if not steps:
            raise ValueError(f"{path}: no training step logged")
        run = points[(points["model"] == info["model"]) & (points["benchmark"] == info["benchmark"])
                     & (points["arm"] == info["arm"]) & (points["seed"] == info["seed"])]
        for step, arm in ((0, "base"), (max(steps), info["arm"])):
            if step in set(run["step"]):
                continue
            source = evals.get((info["model"], info["benchmark"], arm, info["seed"]))
            if source is None:
                raise ValueError(f"{path}: step {step} is neither validated in the log nor given as the evaluation "
                                 f"eval/{info['model']}/{info['benchmark']}/{arm}/seed{info['seed']}.json")
            rows.append(_evaluation_point(source, step, info["arm"]))
    merged = pd.concat([points, pd.DataFrame(rows, columns=CURVE_COLUMNS)], ignore_index=True) if rows else points
    return merged.sort_values(["model", "benchmark", "arm", "seed", "step"], kind="stable").reset_index(drop=True)


def _training_dtype(provenance_path: Path) -> str | None:
    from concord.io import read_json

    try:
        return read_json(provenance_path).get("dtype")
    except FileNotFoundError:
        return None


def base_points(eval_paths: Iterable[str | Path]) -> pd.DataFrame:
    """Base under the evaluation protocol per (model, benchmark): pass@1 mean over seeds, k,
    questions and the engine's dtype, from ``eval/{model}/{benchmark}/base/seed{seed}.json``."""
    from concord.io import read_json
    from concord.papers.core.tables import parse_eval_path

    rows = []
    for path in eval_paths:
        info = parse_eval_path(path)
        if info["arm"] != "base":
            raise ValueError(f"{path}: Figure 3's step-0 reference is the base model's evaluation")
        payload = read_json(path)
        numeric = (payload.get("provenance") or {}).get("numeric") or {}
        rows.append({"model": info["model"], "benchmark": info["benchmark"], "seed": info["seed"],
                     "pass_at_1": float(payload["pass_at_1"]), "k": payload.get("k"),
                     "n_questions": payload.get("n_questions"), "dtype": numeric.get("dtype")})
    frame = pd.DataFrame(rows, columns=["model", "benchmark", "seed", "pass_at_1", "k", "n_questions", "dtype"])
    return (frame.groupby(["model", "benchmark"], sort=True)
            .agg(pass_at_1=("pass_at_1", "mean"), k=("k", "first"), n_questions=("n_questions", "first"),
                 dtype=("dtype", "first"), n_seeds=("seed", "nunique")).reset_index())


def protocol_label(k, n_questions, dtype) -> str:
    """``mean@k on n q, dtype``: what a pass@1 point was measured with."""
    parts = [f"mean@{int(k)}" if k is not None and not pd.isna(k) else "mean@?",
             f"on {int(n_questions)} q" if n_questions is not None and not pd.isna(n_questions) else ""]
    text = " ".join(p for p in parts if p)
    return text + (f", {_short_dtype(dtype)}" if isinstance(dtype, str) else "")


def _short_dtype(dtype: str) -> str:
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)


def mean_curves(points: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (model, benchmark, arm, step), at the steps every seed logged."""
    out = []
    for key, sub in points.groupby(["model", "benchmark", "arm"], sort=True):
        n_seeds = sub["seed"].nunique()
        counts = sub.groupby("step")["seed"].nunique()
        common = counts[counts == n_seeds].index
        if len(common) < len(counts):
            log.warning("%s: %d step(s) not logged by every seed are left out", "/".join(key), len(counts) - len(common))
        agg = (sub[sub["step"].isin(common)].groupby("step")["val_pass_at_1"]
               .agg(["mean", "std", "count"]).reset_index())
        for _, r in agg.iterrows():
            out.append({"model": key[0], "benchmark": key[1], "arm": key[2], "step": int(r["step"]),
                        "mean": float(r["mean"]), "std": float(r["std"]) if r["count"] > 1 else 0.0,
                        "n_seeds": int(r["count"])})
    return pd.DataFrame(out, columns=["model", "benchmark", "arm", "step", "mean", "std", "n_seeds"])


def first_step_reaching(steps: Sequence[int], values: Sequence[float], target: float) -> int | None:
    """First step whose value reaches ``target`` (a 1e-9 tolerance absorbs float noise)."""
    for s, v in sorted(zip(steps, values)):
        if v >= target - 1e-9:
            return int(s)
    return None


def steps_saved(majority: pd.DataFrame, core: pd.DataFrame, plateau_window: int = 1) -> dict:
    """Majority's plateau, both arms' steps to reach it, and CoRE's percentage of steps saved."""
    if plateau_window < 1:
        raise ValueError(f"plateau_window must be >= 1, got {plateau_window}")
    maj = majority.sort_values("step")
    cor = core.sort_values("step")
    plateau = float(maj["mean"].tail(plateau_window).mean())
    s_maj = first_step_reaching(maj["step"], maj["mean"], plateau)
    s_core = first_step_reaching(cor["step"], cor["mean"], plateau)
    saved = math.nan
    if s_maj and s_core is not None:
        saved = 100.0 * (1.0 - s_core / s_maj)
    return {
        "majority_plateau": plateau,
        "majority_steps": s_maj,
        "core_steps": s_core,
        "steps_saved_pct": saved,
        "majority_final": float(maj["mean"].iloc[-1]),
        "core_final": float(cor["mean"].iloc[-1]),
    }


def steps_saved_table(curves: pd.DataFrame, plateau_window: int = 1) -> pd.DataFrame:
    rows = []
    for (model, bench), sub in curves.groupby(["model", "benchmark"], sort=True):
        arms = set(sub["arm"])
        missing = [a for a in CURVE_ARMS if a not in arms]
        if missing:
            raise ValueError(f"{model}/{bench}: Figure 3 needs the training logs of arm(s) {missing}")
        res = steps_saved(sub[sub["arm"] == "majority"], sub[sub["arm"] == "core"], plateau_window)
        n_seeds = int(sub["n_seeds"].min())
        rows.append({"model": model, "benchmark": bench, **res, "n_seeds": n_seeds})
    return pd.DataFrame(rows)


CURVE_MARKERS = {"majority": "o", "core": "D"}
CURVE_LINESTYLES = {"majority": "-", "core": "--"}
STEP_DODGE = 0.04  # steps (scaled with the run's length) between the two arms' points


def plot_figure3(curves: pd.DataFrame, table: pd.DataFrame, labels: Mapping[str, str] | None = None,
                 protocols: Mapping[tuple[str, str], str] | None = None, base: pd.DataFrame | None = None):
    """One panel per (model, benchmark): mean validation pass@1 (%) vs step, +-1 std band; the
    validation protocol in each panel's title, and Base's evaluation (a star at step 0) when given."""
    from concord.papers.core.figures import ARM_COLORS, new_figure

    labels = dict(labels or {})
    cells = list(table[["model", "benchmark"]].itertuples(index=False, name=None))
    ncols = min(3, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = new_figure(3.4 * ncols, 2.8 * nrows, ncols=ncols, nrows=nrows, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(cells):]:
        ax.set_visible(False)
    for ax, (model, bench) in zip(flat, cells):
        sub = curves[(curves["model"] == model) & (curves["benchmark"] == bench)]
        for k, arm in enumerate(CURVE_ARMS):
            c = sub[sub["arm"] == arm].sort_values("step")
            color = ARM_COLORS.get(arm)
            # Own marker, line style and a small step offset: coinciding curves both stay visible.
            x = c["step"] + STEP_DODGE * (k - (len(CURVE_ARMS) - 1) / 2) * max(1.0, float(c["step"].max() or 1) / 10)
            ax.plot(x, 100 * c["mean"], marker=CURVE_MARKERS.get(arm, "o"), ms=4, mfc="none", color=color,
                    linestyle=CURVE_LINESTYLES.get(arm, "-"), label=ARM_LABELS[arm])
            ax.fill_between(x, 100 * (c["mean"] - c["std"]), 100 * (c["mean"] + c["std"]), color=color,
                            alpha=0.15, linewidth=0)
        if base is not None:
            b = base[(base["model"] == model) & (base["benchmark"] == bench)]
            if not b.empty:
                b = b.iloc[0]
                ax.plot([0], [100 * b["pass_at_1"]], marker="*", ms=10, color="black", linestyle="none",
                        label=f"Base, evaluation ({protocol_label(b['k'], b['n_questions'], b['dtype'])})")
        row = table[(table["model"] == model) & (table["benchmark"] == bench)].iloc[0]
        ax.axhline(100 * row["majority_plateau"], color=ARM_COLORS.get("majority"), linestyle=":", linewidth=1)
        saved = row["steps_saved_pct"]
        note = f"{saved:.0f}% fewer steps" if np.isfinite(saved) else "steps saved: n/a"
        protocol = (protocols or {}).get((model, bench))
        note += f"; validation {protocol}" if protocol else ""
        ax.set_title(f"{labels.get(model, model)} / {labels.get(bench, bench)}\n{note}", fontsize="small")
        ax.set_xlabel("training step")
        ax.set_ylabel("validation pass@1 (%)")
        ax.set_ylim(0, 100)
        ax.xaxis.get_major_locator().set_params(integer=True)  # steps are whole numbers
    flat[0].legend(loc="lower right", fontsize="x-small")
    return fig


def validation_protocols(points: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(model, benchmark) -> the validation protocol of its curves, e.g. ``mean@2 on 8 q, fp32``."""
    out = {}
    for (model, bench), sub in points.groupby(["model", "benchmark"], sort=True):
        first = sub.iloc[0]
        out[(model, bench)] = protocol_label(first["val_k"], first["val_questions"], first["dtype"])
    return out


def figure3(log_paths: Sequence[str | Path], *, figure: str | Path, table: str | Path, plateau_window: int = 1,
            labels: Mapping[str, str] | None = None, base_evals: Sequence[str | Path] = (),
            arm_evals: Sequence[str | Path] = ()) -> list[Path]:
    """Read the logs (and Base's evaluations), write Figure 3 (PNG + PDF) and the steps-saved
    table (CSV, Markdown, LaTeX). With ``arm_evals`` (training.ends_from_evaluation) the curves'
    first and last points are Base's and the trained arms' evaluations."""
    import matplotlib

    matplotlib.use("Agg")
    from concord.io import save_figure
    from concord.reporting import write_table

    from concord.plotting import style

    arm_evals = [p for p in arm_evals if str(p)]
    if arm_evals and not base_evals:
        raise ValueError("Figure 3: --arm-evals give the curves' last points; their first points need --base-evals")
    log_paths = [p for p in log_paths if parse_log_path(_log_file(p))["arm"] in CURVE_ARMS]
    points = load_curves(log_paths, allow_empty=bool(arm_evals))
    if arm_evals:
        points = with_evaluation_ends(points, log_paths, base_evals, arm_evals)
    curves = mean_curves(points)
    summary = steps_saved_table(curves, plateau_window)
    protocols = validation_protocols(points)
    base = base_points(base_evals) if base_evals else None
    with style():  # the shared figure style must be active while text is drawn and saved
        fig = plot_figure3(curves, summary, labels, protocols, base)
        written = save_figure(fig, figure)
    caption = (f"Figure 3: steps for CoRE to reach Majority's plateau (mean of its last {plateau_window} "
               f"validation point(s), mean over seeds); saved = 1 - CoRE steps / Majority steps. "
               "Validation points (step 0 = the untrained policy"
               + ("; the first and last points are the evaluations of Base and of the trained arm, the same samples "
                  "validation would draw" if arm_evals else "") + "): "
               + "; ".join(f"{labels.get(m, m) if labels else m}/{labels.get(b, b) if labels else b} {p}"
                           for (m, b), p in protocols.items())
               + (". Base under the evaluation protocol (the star at step 0, Tables 1-3): "
                  + "; ".join(f"{r.model}/{r.benchmark} {100 * r.pass_at_1:.1f}% "
                              f"({protocol_label(r.k, r.n_questions, r.dtype)})" for r in base.itertuples())
                  if base is not None else "") + ".")
    # Accuracies in percent, as in every concord table.
    shown = summary.assign(majority_plateau=100 * summary["majority_plateau"]).rename(
        columns={"majority_plateau": "majority_plateau_pct"})
    written += write_table(shown, table, caption=caption, float_format="{:.1f}")
    curves_csv = Path(table).with_name(Path(table).stem + "_curves.csv")
    from concord.reporting import write_csv

    written.append(write_csv(curves, curves_csv))
    for _, r in summary.iterrows():
        log.info("%s/%s: majority plateau %.3f at step %s, CoRE reaches it at step %s (saved %s%%)", r["model"],
                 r["benchmark"], r["majority_plateau"], r["majority_steps"], r["core_steps"],
                 "n/a" if not np.isfinite(r["steps_saved_pct"]) else f"{r['steps_saved_pct']:.0f}")
    return written
