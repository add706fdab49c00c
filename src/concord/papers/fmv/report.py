"""Figure 2 (left: accuracy per method at N; right: accuracy versus N) and Tables 1-2 of the
FMV paper, from the analysis JSONs and execution tables. Tables are written as CSV (numbers),
Markdown and LaTeX; figures as PNG and PDF."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io
from concord.papers.fmv.experiments import METHOD_LABELS

LEFT_METHODS = ("mean", "semantic", "gencluster", "fmv", "best")
RIGHT_METHODS = ("mean", "semantic", "fmv", "best")
COLORS = {"mean": "#7f7f7f", "semantic": "#1f77b4", "gencluster": "#9467bd", "fmv": "#d62728", "best": "#2ca02c"}


def _pct(x: float) -> float:
    return 100.0 * x


def _pm(value: float, se: float) -> str:
    if se != se:  # NaN: a single question has no bootstrap error
        return f"{_pct(value):.1f}"
    return f"{_pct(value):.1f} ± {_pct(se):.1f}"


# ------------------------------------------------------------------ Figure 2


def _seeds(analyses) -> list[dict]:
    """One model's analyses, one per seed (a single analysis is one seed)."""
    return [analyses] if isinstance(analyses, Mapping) else list(analyses)


def _pooled(per_seed: Sequence[Sequence[float]], n_resamples: int, seed: int) -> tuple[float, float]:
    from concord.stats import bootstrap_se_seeds_questions

    m = np.asarray(per_seed, dtype=float)
    se = bootstrap_se_seeds_questions(m, n_resamples, seed) if m.shape[1] >= 2 else float("nan")
    return float(m.mean()), se


def figure2_left_frame(analyses: Mapping[str, dict | Sequence[dict]], n_resamples: int = 2000,
                       seed: int = 0) -> pd.DataFrame:
    """Per model and method: accuracy at the full N, mean over seeds and questions ± bootstrap SE
    over both. ``analyses``: model label -> its analysis per seed (``code-analyze`` outputs)."""
    rows = []
    for label, runs in analyses.items():
        runs = _seeds(runs)
        ids = [q["question_id"] for q in runs[0]["per_question"]]
        for m in LEFT_METHODS:
            if m not in runs[0]["methods"]:
                continue
            per_seed = []
            for a in runs:
                by_id = {q["question_id"]: q[m] for q in a["per_question"]}
                per_seed.append([by_id[q] for q in ids])
            acc, se = _pooled(per_seed, n_resamples, seed)
            rows.append({"model": label, "method": m, "n": runs[0]["n"], "accuracy": acc, "se": se,
                         "n_questions": runs[0]["n_questions"], "n_seeds": len(runs)})
    return pd.DataFrame(rows, columns=["model", "method", "n", "accuracy", "se", "n_questions", "n_seeds"])


def figure2_left(frame: pd.DataFrame, title: str = ""):
    from concord.plotting import new_figure

    models = list(dict.fromkeys(frame["model"]))
    methods = [m for m in LEFT_METHODS if m in set(frame["method"])]
    fig, ax = new_figure(width=max(3.5, 1.4 * len(models) + 1.5), height=3.0)
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        sub = frame[frame["method"] == m].set_index("model").reindex(models)
        x = np.arange(len(models)) + (j - (len(methods) - 1) / 2) * width
        ax.bar(x, 100 * sub["accuracy"], width, yerr=100 * sub["se"].fillna(0), capsize=2,
               color=COLORS[m], label=METHOD_LABELS[m])
    ax.set_xticks(np.arange(len(models)), models)
    n = int(frame["n"].iloc[0]) if len(frame) else 0
    ax.set_ylabel(f"accuracy at N = {n} (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize="small", frameon=False, ncols=2)
    if title:  # the models and the benchmark
        ax.set_title(title, fontsize="medium")
    return fig


def figure2_right_frame(analyses: dict | Sequence[dict], label: str, n_resamples: int = 2000,
                        seed: int = 0) -> pd.DataFrame:
    """Accuracy versus N for one model, mean over seeds and questions ± bootstrap SE over both."""
    runs = _seeds(analyses)
    rows = []
    for entry in runs[0]["scaling_per_question"]:
        per_seed = [next(e["values"] for e in a["scaling_per_question"]
                         if e["method"] == entry["method"] and e["n"] == entry["n"]) for a in runs]
        acc, se = _pooled(per_seed, n_resamples, seed)
        rows.append({"model": label, "method": entry["method"], "n": entry["n"], "accuracy": acc, "se": se,
                     "n_seeds": len(runs)})
    return pd.DataFrame(rows, columns=["model", "method", "n", "accuracy", "se", "n_seeds"])


def figure2_right(frame: pd.DataFrame, title: str = ""):
    from concord.plotting import new_figure

    fig, ax = new_figure(width=3.6, height=3.0)
    for m in RIGHT_METHODS:
        sub = frame[frame["method"] == m].sort_values("n")
        if sub.empty:
            continue
        acc, se = 100 * sub["accuracy"].to_numpy(), 100 * sub["se"].fillna(0).to_numpy()
        ax.plot(sub["n"], acc, marker="o", ms=3, color=COLORS[m], label=METHOD_LABELS[m])
        ax.fill_between(sub["n"], acc - se, acc + se, color=COLORS[m], alpha=0.2, linewidth=0)
    ax.set_xscale("log", base=2)
    ns = sorted(set(int(n) for n in frame["n"]))
    ax.set_xticks(ns, [str(n) for n in ns])  # plain budgets, not powers of two in exponent form
    ax.minorticks_off()
    top = float(100 * (frame["accuracy"] + frame["se"].fillna(0)).max()) if len(frame) else 100.0
    ax.set_ylim(0, min(100.0, max(10.0, top * 1.15)))
    ax.set_xlabel("roll-out budget N")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize="small", frameon=False)
    if title or not frame.empty:  # the model and the benchmark
        ax.set_title(title or str(frame["model"].iloc[0]), fontsize="medium")
    return fig


# ------------------------------------------------------------------ Tables 1 and 2
#
# The FMV paper reports "bootstrapped standard errors of the mean" (Tables 1-2 captions) of a
# mean@N over the benchmark's questions: the bootstrap resamples questions. With several seeds each
# question's value is first averaged over the seeds, so the SE stays one over questions (what the
# paper states) and seeds only make each question's value less noisy; resampling the seeds as well
# would add a run-to-run term the paper's single run does not have.


def _matrix(frames: Sequence[pd.DataFrame], column: str) -> np.ndarray:
    """(seeds x questions) values of ``column``, questions aligned by id across seeds."""
    ids = list(frames[0]["question_id"])
    rows = []
    for frame in frames:
        by_id = dict(zip(frame["question_id"], frame[column]))
        if set(by_id) != set(ids):
            raise ValueError(f"seeds disagree on the questions of column {column!r}")
        rows.append([by_id[q] for q in ids])
    return np.asarray(rows, dtype=float)


def mean_and_se(frames: Sequence[pd.DataFrame], column: str, n_resamples: int, seed: int) -> tuple[float, float]:
    """Grand mean of ``column`` over seeds and questions, and the bootstrap SE of the mean over
    questions (each question averaged over the seeds first; NaN for one question)."""
    from concord.stats import bootstrap_se

    m = _matrix(frames, column)
    per_question = m.mean(axis=0)
    se = bootstrap_se(per_question, n_resamples, seed) if per_question.size >= 2 else float("nan")
    return float(m.mean()), se


#: The selection column of an untrained row (Base).
NOT_TRAINED = "not trained"


def training_selection(provenances: Sequence[Mapping]) -> dict:
    """How a trained row's checkpoint was chosen, from its runs' ``provenance.json`` (one per
    seed): ``selection`` in words, the GRPO ``steps`` each run took, and how many questions it
    trained on (``trained_questions``). An FMV-TTRL run trains a fixed step budget and selects by
    no label (:func:`concord.papers.fmv.ttrl.check_stopping_rule`); a run that early-stopped on a
    validation split is named as label-based, so a table can never pass one off as label-free."""
    if not provenances:
        raise ValueError("a trained row needs its training runs' provenance")
    steps = sorted({int(p["steps"]) for p in provenances})
    budgets = sorted({int(p["max_steps"]) for p in provenances})
    trained = sorted({int(p["train_questions"]) for p in provenances})
    stopping = [p.get("early_stopping") or {} for p in provenances]
    if any(e.get("patience") is not None for e in stopping):
        held = max(int(p.get("validation_questions") or 0) for p in provenances)
        selection = f"early stopping on hidden tests of {held} validation question(s) (label-based)"
    else:
        selection = f"fixed budget of {'/'.join(map(str, budgets))} step(s), no labels"
    if len(trained) != 1:
        raise ValueError(f"the seeds of one row trained on different numbers of questions: {trained}")
    return {"selection": selection, "steps": "/".join(map(str, steps)), "trained_questions": trained[0]}


def _selection_columns(provenances: Sequence[Mapping] | None) -> dict:
    if not provenances:
        return {"selection": NOT_TRAINED, "steps": "0", "trained_questions": 0}
    return training_selection(provenances)


def table1(metrics: Mapping[str, Mapping[str, Sequence[pd.DataFrame]]], labels: Mapping[str, str], n: int,
           n_resamples: int, seed: int, provenances: Mapping[str, Sequence[Mapping]] | None = None) -> pd.DataFrame:
    """Rows: arms (base first); columns: mean@N on the train and hold-out halves, ± bootstrap SE,
    the questions each column covers (``train_questions``, ``holdout_questions``) and how each
    trained row's checkpoint was chosen (``selection``, ``steps``, ``trained_questions``; see
    :func:`training_selection`). ``metrics``: arm -> split -> one per-question frame per seed;
    ``provenances``: arm -> its training runs' provenance (one per seed; none for Base). A
    trained row whose runs trained on other than the train half's questions is an error: the
    train column would then hold questions the run never saw."""
    provenances = provenances or {}
    rows = []
    for arm, splits in metrics.items():
        row = {"arm": arm, "method": labels.get(arm, arm), "n_seeds": len(splits["train"])}
        for split in ("train", "holdout"):
            row[f"{split}_mean"], row[f"{split}_se"] = mean_and_se(splits[split], "mean", n_resamples, seed)
            row[f"{split}_questions"] = len(splits[split][0])
        row.update(_selection_columns(provenances.get(arm)))
        if row["selection"] != NOT_TRAINED and row["trained_questions"] != row["train_questions"]:
            raise ValueError(f"arm {arm!r} trained on {row['trained_questions']} questions, but the train column "
                             f"holds {row['train_questions']}")
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["n"] = n
    return frame


def table_note(frame: pd.DataFrame, table: int) -> str:
    """The caption's sentence on model selection and on which questions each column covers."""
    trained = frame[frame["selection"] != NOT_TRAINED]
    rules = "; ".join(dict.fromkeys(trained["selection"])) if len(trained) else "no trained row"
    if table == 1:
        cover = (f"Train: the {int(frame['train_questions'].iloc[0])} questions every trained row trained on; "
                 f"Hold-Out: the {int(frame['holdout_questions'].iloc[0])} questions no run saw")
    else:
        cover = f"every row on all {int(frame['questions'].iloc[0])} questions, which the trained rows trained on"
    return f"Checkpoint selection: {rules}. Questions: {cover}."


def table1_display(frame: pd.DataFrame) -> pd.DataFrame:
    n = frame.attrs.get("n", "N")
    return pd.DataFrame({
        "Method": frame["method"],
        f"Train (mean@{n})": [_pm(m, s) for m, s in zip(frame["train_mean"], frame["train_se"])],
        f"Hold-Out (mean@{n})": [_pm(m, s) for m, s in zip(frame["holdout_mean"], frame["holdout_se"])],
        "Steps": frame["steps"],
    })


def table2(entries: Sequence[tuple[str, Sequence[pd.DataFrame]]], n: int, n_resamples: int, seed: int,
           provenances: Mapping[str, Sequence[Mapping]] | None = None) -> pd.DataFrame:
    """Rows: (label, one per-question frame per seed); columns mean@N, FMV and best@N, ± bootstrap
    SE, the questions scored (``questions``) and each trained row's selection (as :func:`table1`;
    ``provenances``: row label -> its runs' provenance). A trained row must have trained on every
    question it is scored on ("TTRL on the full benchmark")."""
    provenances = provenances or {}
    rows = []
    for label, frames in entries:
        row = {"method": label, "n_seeds": len(frames)}
        for m in ("mean", "fmv", "best"):
            row[m], row[f"{m}_se"] = mean_and_se(frames, m, n_resamples, seed)
        row["questions"] = len(frames[0])
        row.update(_selection_columns(provenances.get(label)))
        if row["selection"] != NOT_TRAINED and row["trained_questions"] != row["questions"]:
            raise ValueError(f"row {label!r} trained on {row['trained_questions']} questions but is scored on "
                             f"{row['questions']}")
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["n"] = n
    return out


def table2_display(frame: pd.DataFrame) -> pd.DataFrame:
    n = frame.attrs.get("n", "N")
    return pd.DataFrame({
        "Training Method": frame["method"],
        f"mean@{n} (%)": [_pm(v, s) for v, s in zip(frame["mean"], frame["mean_se"])],
        "FMV (%)": [_pm(v, s) for v, s in zip(frame["fmv"], frame["fmv_se"])],
        f"best@{n} (%)": [_pm(v, s) for v, s in zip(frame["best"], frame["best_se"])],
        "Steps": frame["steps"],
    })


def ttrl_label(target: str, train_n: int) -> str:
    """A trained policy's row label, naming its training budget apart from the evaluation's N."""
    name = {"fmv": "Joint", "fmv_pointwise": "Pointwise"}[target]
    return f"+ {name} (trained with N = {train_n} roll-outs)"


# ------------------------------------------------------------------ TTRL validation curves


def validation_frame(curves: Mapping[str, Sequence[pd.DataFrame]]) -> pd.DataFrame:
    """Validation pass@1 per training step, mean over seeds, for each run label. ``curves``:
    label -> one ``validation.csv`` (step, val_pass_at_1, ...) per seed."""
    rows = []
    for label, frames in curves.items():
        pooled = pd.concat([f[["step", "val_pass_at_1"]].assign(seed=i) for i, f in enumerate(frames)])
        for step, g in pooled.groupby("step", sort=True):
            rows.append({"run": label, "step": int(step), "val_pass_at_1": float(g["val_pass_at_1"].mean()),
                         "min": float(g["val_pass_at_1"].min()), "max": float(g["val_pass_at_1"].max()),
                         "n_seeds": int(g["seed"].nunique())})
    return pd.DataFrame(rows, columns=["run", "step", "val_pass_at_1", "min", "max", "n_seeds"])


def validation_figure(frame: pd.DataFrame, title: str = ""):
    """Validation pass@1 (%) versus training step: a monitor of where training saturates (FMV-TTRL
    stops at its fixed step budget; the curve selects nothing)."""
    from concord.plotting import new_figure

    fig, ax = new_figure(width=4.2, height=3.0)
    for label, g in frame.groupby("run", sort=False):
        g = g.sort_values("step")
        line, = ax.plot(g["step"], 100 * g["val_pass_at_1"], marker="o", ms=3, label=label)
        if (g["n_seeds"] > 1).any():  # the seeds' range
            ax.fill_between(g["step"], 100 * g["min"], 100 * g["max"], color=line.get_color(), alpha=0.15, linewidth=0)
        last = g.iloc[-1]
        ax.plot([last["step"]], [100 * last["val_pass_at_1"]], marker="x", ms=6, color=line.get_color())
    ax.set_xlabel("training step (x: last validation)")
    ax.set_ylabel("validation pass@1 (%)")
    ax.xaxis.get_major_locator().set_params(integer=True)  # steps are whole numbers
    ax.legend(fontsize="small", frameon=False)
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def figure_display(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "Model": frame["model"],
        "Method": [METHOD_LABELS.get(m, m) for m in frame["method"]],
        "N": frame["n"],
        "Accuracy (%)": [_pm(a, s) for a, s in zip(frame["accuracy"], frame["se"])],
    })


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
          "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "±": r"$\pm$"}


def _tex(text) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in str(text))


def write_table(numbers: pd.DataFrame, display: pd.DataFrame, stem: str | Path, caption: str) -> list[Path]:
    """``stem.csv`` (full-precision numbers), ``stem.md`` and ``stem.tex`` (the display table)."""
    stem = Path(stem)
    csv_path, md_path, tex_path = (stem.with_suffix(s) for s in (".csv", ".md", ".tex"))
    io.write_text(csv_path, numbers.to_csv(index=False, float_format="%.6f", lineterminator="\n"))
    io.write_text(md_path, f"{caption}\n\n" + display.to_markdown(index=False, disable_numparse=True) + "\n")
    header = " & ".join(_tex(c) for c in display.columns) + r" \\"
    body = "\n".join(" & ".join(_tex(v) for v in row) + r" \\" for row in display.itertuples(index=False))
    latex = (
        "\\begin{table}[t]\n\\centering\n\\small\n"
        f"\\begin{{tabular}}{{l{'r' * (display.shape[1] - 1)}}}\n\\toprule\n{header}\n\\midrule\n{body}\n"
        f"\\bottomrule\n\\end{{tabular}}\n\\caption{{{_tex(caption)}}}\n\\end{{table}}\n"
    )
    io.write_text(tex_path, latex)
    return [csv_path, md_path, tex_path]
