"""The table itself: the numbers (one row per family, model and benchmark, plus the Mean-Delta
row), its Markdown and LaTeX forms, its caption, and the three files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io
from concord.papers.core.tables.controls import Comparisons, compare_to_base
from concord.papers.core.tables.evals import load_eval, summarise, table_inputs
from concord.papers.core.tables.spec import (
    _TABLE_NAME_RE,
    ARM_LABELS,
    CONTROL_ARMS,
    MEAN_ROW_LABEL,
    ZERO_UPDATE,
    TableSpec,
    report_section,
    table_spec,
)

def build_table(summary: pd.DataFrame, spec: TableSpec, comparisons: Comparisons | None = None) -> pd.DataFrame:
    """Numeric table: one row per (family, model, benchmark) plus the Mean-Delta row.

    Columns: family, model, benchmark, ``{arm}_mean``, ``{arm}_std``, ``{arm}_n`` for every
    arm, ``delta_{arm}`` for every arm but Base (arm minus Base, points), and ``best`` (the RL
    arm(s) with the largest improvement, ties joined by ``|``; never a control). With
    ``comparisons``: ``delta_{arm}_lo``/``_hi`` (paired bootstrap interval), ``p_{arm}``
    (paired sign-flip test), ``same_model_{arm}`` (the earlier arm it is identical to, or empty)
    and, with the zero-update arm, ``zero_update_equals_base``.
    """
    missing = [
        f"{m}/{b}/{a}" for m in spec.models for b in spec.benchmarks for a in spec.arms
        if (m, b, a) not in summary.index
    ]
    if missing:
        raise ValueError(f"{spec.name}: no evaluation results for {len(missing)} cell(s): {', '.join(missing[:10])}")
    compared = [a for a in spec.arms if a != "base"]
    rl_arms = [a for a in compared if a not in CONTROL_ARMS]
    if not rl_arms:
        raise ValueError(f"{spec.name}: no RL arm configured besides base")
    rows = []
    for model in spec.models:
        for bench in spec.benchmarks:
            row: dict = {"family": spec.families[model], "model": model, "benchmark": bench}
            for arm in spec.arms:
                cell = summary.loc[(model, bench, arm)]
                row[f"{arm}_mean"] = float(cell["mean"])
                row[f"{arm}_std"] = float(cell["std"])
                row[f"{arm}_n"] = int(cell["n_seeds"])
            for arm in compared:
                row[f"delta_{arm}"] = row[f"{arm}_mean"] - row["base_mean"]
                if comparisons is not None:
                    _, lo, hi, p = comparisons.cells[(model, bench, arm)]
                    row[f"delta_{arm}_lo"], row[f"delta_{arm}_hi"], row[f"p_{arm}"] = lo, hi, p
                    row[f"same_model_{arm}"] = comparisons.identical.get((model, bench, arm), "")
            if comparisons is not None and ZERO_UPDATE in compared:
                row["zero_update_equals_base"] = bool(comparisons.zero_equals_base[(model, bench)])
            row["best"] = _best(row, rl_arms)
            rows.append(row)
    table = pd.DataFrame(rows)
    mean_row: dict = {"family": "", "model": MEAN_ROW_LABEL, "benchmark": ""}
    for arm in compared:
        mean_row[f"delta_{arm}"] = float(table[f"delta_{arm}"].mean())
        if comparisons is not None:
            mean_row[f"delta_{arm}_lo"], mean_row[f"delta_{arm}_hi"] = comparisons.mean[arm]
    mean_row["best"] = _best(mean_row, rl_arms)
    table = pd.concat([table, pd.DataFrame([mean_row])], ignore_index=True)
    # Seed counts stay integers although the Mean-Delta row has none.
    return table.astype({f"{arm}_n": "Int64" for arm in spec.arms})


def _best(row: Mapping, rl_arms: Sequence[str]) -> str:
    # Compare unrounded deltas (the paper bolds Majority's +27.6 over CoRE's +27.6 on
    # Qwen2.5-Math-7B AMC); exact ties are all marked, unless every arm ties: then no arm is
    # better than another and nothing is bold.
    deltas = np.array([row[f"delta_{a}"] for a in rl_arms])
    top = deltas.max()
    best = [a for a, d in zip(rl_arms, deltas) if math.isclose(d, top, rel_tol=0, abs_tol=1e-9)]
    return "" if len(best) == len(rl_arms) > 1 else "|".join(best)


def _display_frame(table: pd.DataFrame, spec: TableSpec, decimals: int, fmt: str) -> pd.DataFrame:
    """Strings for Markdown/LaTeX: mean +/- std, signed deltas with their paired interval, best
    in bold, identical models named, grouped rows."""
    compared = [a for a in spec.arms if a != "base"]
    pm = " $\\pm$ " if fmt == "latex" else " ± "
    text = (lambda s: _latex_escape(s)) if fmt == "latex" else (lambda s: s)

    def signed(value: float, best: bool) -> str:
        v = f"{value:+.{decimals}f}"
        if fmt == "latex":
            # \textbf does not reach into math mode; \mathbf does (the paper's $\mathbf{+22.3}$).
            return f"$\\mathbf{{{v}}}$" if best else f"${v}$"
        return f"**{v}**" if best else v

    def interval(row, arm: str) -> str:
        lo, hi = row.get(f"delta_{arm}_lo"), row.get(f"delta_{arm}_hi")
        if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
            return ""
        span = f"[{lo:+.{decimals}f}, {hi:+.{decimals}f}]"
        return f" {{\\scriptsize ${span}$}}" if fmt == "latex" else f" {span}"

    def same(row, arm: str) -> str:
        other = row.get(f"same_model_{arm}")
        if not isinstance(other, str) or not other:
            return ""
        return f" (≡ {ARM_LABELS[other]})" if fmt != "latex" else f" ($\\equiv$ {_latex_escape(ARM_LABELS[other])})"

    out = []
    previous = (None, None)
    for _, row in table.iterrows():
        best = set(str(row["best"]).split("|"))
        is_mean = row["model"] == MEAN_ROW_LABEL
        record: dict[str, str] = {}
        if is_mean:
            record["Family"], record["Model"], record["Benchmark"] = "", text(MEAN_ROW_LABEL), ""
        else:
            # Like the paper, name the family and model only on their first row.
            fam, model = row["family"], row["model"]
            record["Family"] = text(fam) if fam != previous[0] else ""
            record["Model"] = text(spec.label(model)) if (fam, model) != previous else ""
            record["Benchmark"] = text(spec.label(row["benchmark"]))
            previous = (fam, model)
        for arm in spec.arms:
            if is_mean:
                record[ARM_LABELS[arm]] = ""
                continue
            value = f"{row[f'{arm}_mean']:.{decimals}f}"
            if int(row[f"{arm}_n"]) > 1:
                value += f"{pm}{row[f'{arm}_std']:.{decimals}f}"
            record[ARM_LABELS[arm]] = value + ("" if is_mean else same(row, arm))
        for arm in compared:
            header = f"$\\Delta_{{\\text{{{ARM_LABELS[arm]}}}}}$" if fmt == "latex" else f"Δ {ARM_LABELS[arm]}"
            record[header] = signed(row[f"delta_{arm}"], arm in best) + interval(row, arm)
        out.append(record)
    return pd.DataFrame(out)


def to_markdown(table: pd.DataFrame, spec: TableSpec, decimals: int = 1) -> str:
    frame = _display_frame(table, spec, decimals, "markdown")
    return frame.to_markdown(index=False, disable_numparse=True) + "\n"


def to_latex(table: pd.DataFrame, spec: TableSpec, decimals: int = 1, caption: str | None = None) -> str:
    frame = _display_frame(table, spec, decimals, "latex")
    columns = "lll" + "r" * (frame.shape[1] - 3)
    body = frame.to_latex(index=False, escape=False, column_format=columns)
    # Rule off the Mean-Delta row from the body, as in the paper.
    lines = body.splitlines()
    mean_idx = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"& {_latex_escape(MEAN_ROW_LABEL)}"))
    lines.insert(mean_idx, "\\midrule")
    latex = "\n".join(lines) + "\n"
    if caption:
        latex = (
            "\\begin{table}[t]\n\\centering\n\\small\n" + latex
            + f"\\caption{{{_latex_escape(caption)}}}\n\\label{{tab:{spec.name}}}\n\\end{{table}}\n"
        )
    return latex


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "Δ": r"$\Delta$",
    "±": r"$\pm$", "≡": r"$\equiv$",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def display_name(name: str) -> str:
    """``table1`` -> ``Table 1``."""
    return f"Table {name[len('table'):]}" if _TABLE_NAME_RE.match(name) else name


def caption_for(spec: TableSpec, table: pd.DataFrame | None = None, comparisons: Comparisons | None = None) -> str:
    families = ", ".join(dict.fromkeys(spec.families[m] for m in spec.models))
    seeds = len(spec.seeds)
    # One seed has no spread to report: say so instead of a "± std" that is never shown.
    spread = "one seed" if seeds == 1 else f"mean ± std over {seeds} seeds"
    caption = (
        f"{families}. Final pass@1, {spread} (%). "
        "Δ columns are each arm minus the no-RL base (points); the largest per-row improvement is bold "
        "(none when every arm ties)."
    )
    if comparisons is not None:
        caption += (
            f" Brackets: {round(100 * comparisons.confidence_level)}% paired bootstrap interval of Δ resampling "
            f"questions and training seeds ({comparisons.n_resamples} resamples; each question's accuracy in each "
            "seed minus Base's on it; the Mean-Δ row resamples within each row); an interval that contains 0 is "
            "not a difference. The CSV adds a paired sign-flip permutation p-value over questions (p_{arm}, "
            "each question's Δ averaged over seeds)."
        )
    if table is not None and comparisons is not None:
        caption += _control_notes(table, spec, comparisons)
    return caption


def _control_notes(table: pd.DataFrame, spec: TableSpec, comparisons: Comparisons) -> str:
    """What the controls say: does the zero-update arm reproduce Base, which arms are one model."""
    notes = ""
    if ZERO_UPDATE in spec.arms:
        differs = [f"{spec.label(m)}/{spec.label(b)}" for (m, b), same in comparisons.zero_equals_base.items() if not same]
        notes += (" Zero-update (the training path at learning rate 0) reproduces Base exactly: the same answer to "
                  "every sample of every question." if not differs else
                  f" Zero-update DIFFERS from Base on {', '.join(differs)}: the training path itself changes the "
                  "model there, so no Δ of that row can be read as an effect of the reward.")
    pairs: dict[tuple[str, str], list[str]] = {}
    for (m, b, arm), other in comparisons.identical.items():
        pairs.setdefault((other, arm), []).append(f"{spec.label(m)}/{spec.label(b)}")
    for (other, arm), cells in pairs.items():
        notes += (f" {ARM_LABELS[arm]} (≡ {ARM_LABELS[other]}) trained the same weights as {ARM_LABELS[other]} in every "
                  f"seed on {', '.join(cells)} (identical weights hash): one model, not two results.")
    return notes


def write_table(table: pd.DataFrame, spec: TableSpec, stem: str | Path, decimals: int = 1,
                comparisons: Comparisons | None = None) -> list[Path]:
    """Write ``stem.csv`` (full precision), ``stem.md`` and ``stem.tex`` atomically."""
    stem = Path(stem)
    csv_path, md_path, tex_path = (stem.with_suffix(s) for s in (".csv", ".md", ".tex"))
    caption = caption_for(spec, table, comparisons)
    io.write_text(csv_path, table.to_csv(index=False, float_format="%.6f", lineterminator="\n"))
    io.write_text(md_path, f"**{display_name(spec.name)}.** {caption}\n\n" + to_markdown(table, spec, decimals))
    io.write_text(tex_path, to_latex(table, spec, decimals, caption=caption))
    return [csv_path, md_path, tex_path]


def make_table(config: Mapping, name: str, results_dir: str | Path, stem: str | Path) -> list[Path]:
    """Config + results tree -> the three table files (what ``python -m concord table`` runs)."""
    spec = table_spec(config, name)
    report = report_section(config)
    frame = load_eval(table_inputs(config, name, results_dir))
    boot = report["bootstrap"]
    comparisons = compare_to_base(frame, spec, n_resamples=int(boot["n_resamples"]), seed=int(boot["seed"]))
    table = build_table(summarise(frame, ddof=int(report["std_ddof"])), spec, comparisons)
    return write_table(table, spec, stem, decimals=int(report["decimals"]), comparisons=comparisons)
