"""Tables 1-3 of the paper: final pass@1 per (family, model, benchmark) and arm.

Input: the evaluation JSONs ``eval/{model}/{benchmark}/{arm}/seed{seed}.json`` (key
``pass_at_1`` in [0, 1]). Output: one row per (family, model, benchmark) with each arm's
mean +/- std over seeds in percent, each RL arm minus Base (percentage points), the best
improvement marked, and a final Mean-Delta row -- as CSV (numbers), Markdown and LaTeX.

Which models go into which table is ``config["report"]["tables"]`` (table name -> model keys);
a model's family is ``config["models"][key]["family"]``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from concord import io

ARMS: tuple[str, ...] = ("base", "majority", "ec", "cisc", "core")
ARM_LABELS: dict[str, str] = {"base": "Base", "majority": "Majority", "ec": "EC", "cisc": "CISC", "core": "CoRE"}
# The column sub-headings of the paper's tables.
ARM_NOTES: dict[str, str] = {"base": "(no RL)", "majority": "(TTRL)", "ec": "(graph)", "cisc": "(conf.)", "core": "(ours)"}
MEAN_ROW_LABEL = "Mean Δ vs. Base"
DEFAULT_FIG5A_BENCHMARKS: tuple[str, ...] = ("math_l4", "math_l5")

_EVAL_RE = re.compile(
    r"(?:^|/)eval/(?P<model>[^/]+)/(?P<benchmark>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>[0-9]+)\.json$"
)
_TABLE_NAME_RE = re.compile(r"^table[0-9]+$")


# ------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class TableSpec:
    """Everything needed to lay out one table, resolved from the config."""

    name: str
    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    arms: tuple[str, ...]  # always starts with "base"
    seeds: tuple[int, ...]
    families: Mapping[str, str]
    labels: Mapping[str, str]

    def label(self, key: str) -> str:
        return self.labels.get(key, key)


def report_section(config: Mapping) -> dict:
    """The ``report`` config section with its defaults filled in."""
    report = dict(config.get("report") or {})
    tables = report.get("tables") or {"table1": list(config["models"])}
    for name in tables:
        if not _TABLE_NAME_RE.match(name):
            raise ValueError(f"report.tables: table name {name!r} must look like 'table1', 'table2', ...")
    report["tables"] = {name: list(models) for name, models in tables.items()}
    report.setdefault("labels", {})
    report.setdefault("fig5a_benchmarks", list(DEFAULT_FIG5A_BENCHMARKS))
    report.setdefault("std_ddof", 0)
    report.setdefault("decimals", 1)
    report.setdefault("bootstrap", {})
    report["bootstrap"] = {"n_resamples": 2000, "seed": 0, **report["bootstrap"]}
    benchmarks = report.get("benchmarks") or list(config["benchmarks"])
    unknown = [b for b in benchmarks if b not in config["benchmarks"]]
    if unknown:
        raise ValueError(f"report.benchmarks lists benchmarks missing from config benchmarks: {unknown}")
    report["benchmarks"] = list(benchmarks)
    return report


def table_spec(config: Mapping, name: str) -> TableSpec:
    report = report_section(config)
    if name not in report["tables"]:
        raise KeyError(f"no table {name!r} in config report.tables (have: {', '.join(report['tables']) or 'none'})")
    models = report["tables"][name]
    unknown = [m for m in models if m not in config["models"]]
    if unknown:
        raise ValueError(f"report.tables.{name} lists models missing from config models: {unknown}")
    if not models:
        raise ValueError(f"report.tables.{name} lists no models")
    return TableSpec(
        name=name,
        models=tuple(models),
        benchmarks=tuple(report["benchmarks"]),
        arms=("base", *[a for a in ARMS[1:] if a in config["arms"]]),
        seeds=tuple(int(s) for s in config["seeds"]),
        families={m: config["models"][m].get("family", "Other") for m in models},
        labels=dict(report["labels"]),
    )


def figure_models(config: Mapping) -> list[str]:
    """Models shown in the figures: every model of every table, in table order."""
    seen: dict[str, None] = {}
    for models in report_section(config)["tables"].values():
        seen.update(dict.fromkeys(models))
    return list(seen)


# ------------------------------------------------------------------ evaluation files


def eval_path(results_dir: str | Path, model: str, benchmark: str, arm: str, seed: int) -> Path:
    return Path(results_dir) / "eval" / model / benchmark / arm / f"seed{seed}.json"


def eval_paths(
    results_dir: str | Path,
    models: Iterable[str],
    benchmarks: Iterable[str],
    arms: Iterable[str],
    seeds: Iterable[int],
) -> list[Path]:
    """The evaluation JSONs of a grid, in a fixed order (Snakemake input functions use this)."""
    benchmarks, arms, seeds = list(benchmarks), list(arms), list(seeds)
    return [
        eval_path(results_dir, m, b, a, s) for m in models for b in benchmarks for a in arms for s in seeds
    ]


def table_inputs(config: Mapping, name: str, results_dir: str | Path = "results") -> list[Path]:
    """Exactly the evaluation files one table reads."""
    spec = table_spec(config, name)
    return eval_paths(results_dir, spec.models, spec.benchmarks, spec.arms, spec.seeds)


def table_outputs(name: str, results_dir: str | Path = "results") -> dict[str, Path]:
    stem = Path(results_dir) / "tables" / name
    return {ext: stem.with_suffix(f".{ext}") for ext in ("csv", "md", "tex")}


def parse_eval_path(path: str | Path) -> dict:
    match = _EVAL_RE.search(Path(path).as_posix())
    if not match:
        raise ValueError(f"{path}: not an evaluation file eval/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.json")
    info = match.groupdict()
    if info["arm"] not in ARMS:
        raise ValueError(f"{path}: unknown arm {info['arm']!r} (expected one of {', '.join(ARMS)})")
    info["seed"] = int(info["seed"])
    return info


def load_eval(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per evaluation file: model, benchmark, arm, seed, pass_at_1 (fraction)."""
    rows = []
    for path in paths:
        info = parse_eval_path(path)
        try:
            payload = io.read_json(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"evaluation file missing: {path}") from None
        value = payload.get("pass_at_1") if isinstance(payload, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{path}: 'pass_at_1' must be a number, got {value!r}")
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{path}: 'pass_at_1' must lie in [0, 1], got {value!r}")
        rows.append({**info, "pass_at_1": float(value), "path": str(path)})
    frame = pd.DataFrame(rows, columns=["model", "benchmark", "arm", "seed", "pass_at_1", "path"])
    dupes = frame[frame.duplicated(["model", "benchmark", "arm", "seed"], keep=False)]
    if not dupes.empty:
        raise ValueError(f"the same (model, benchmark, arm, seed) appears twice: {sorted(set(dupes['path']))}")
    return frame


def summarise(frame: pd.DataFrame, ddof: int = 0) -> pd.DataFrame:
    """Mean and std over seeds in percent, indexed by (model, benchmark, arm).

    ``ddof=0`` (population std over seeds) matches the paper's tables, e.g. AIME seeds
    (0, 3.3, 3.3) are reported as 2.2 +/- 1.6.
    """
    if frame.empty:
        raise ValueError("no evaluation results to summarise")
    pct = frame.assign(pct=frame["pass_at_1"] * 100.0)
    grouped = pct.groupby(["model", "benchmark", "arm"], sort=False)["pct"]
    out = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=ddof), "n_seeds": grouped.size()})
    # A single seed has no spread; report 0 rather than NaN so tables stay numeric.
    out["std"] = out["std"].fillna(0.0)
    return out


# ------------------------------------------------------------------ the table


def build_table(summary: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    """Numeric table: one row per (family, model, benchmark) plus the Mean-Delta row.

    Columns: family, model, benchmark, ``{arm}_mean``, ``{arm}_std``, ``{arm}_n`` for every
    arm, ``delta_{arm}`` for every RL arm (arm minus Base, points), and ``best`` (the RL arm(s)
    with the largest improvement, ties joined by ``|``).
    """
    missing = [
        f"{m}/{b}/{a}" for m in spec.models for b in spec.benchmarks for a in spec.arms
        if (m, b, a) not in summary.index
    ]
    if missing:
        raise ValueError(f"{spec.name}: no evaluation results for {len(missing)} cell(s): {', '.join(missing[:10])}")
    rl_arms = [a for a in spec.arms if a != "base"]
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
            for arm in rl_arms:
                row[f"delta_{arm}"] = row[f"{arm}_mean"] - row["base_mean"]
            row["best"] = _best(row, rl_arms)
            rows.append(row)
    table = pd.DataFrame(rows)
    mean_row: dict = {"family": "", "model": MEAN_ROW_LABEL, "benchmark": ""}
    for arm in rl_arms:
        mean_row[f"delta_{arm}"] = float(table[f"delta_{arm}"].mean())
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
    """Strings for Markdown/LaTeX: mean +/- std, signed deltas, best in bold, grouped rows."""
    rl_arms = [a for a in spec.arms if a != "base"]
    pm = " $\\pm$ " if fmt == "latex" else " ± "
    text = (lambda s: _latex_escape(s)) if fmt == "latex" else (lambda s: s)

    def signed(value: float, best: bool) -> str:
        v = f"{value:+.{decimals}f}"
        if fmt == "latex":
            # \textbf does not reach into math mode; \mathbf does (the paper's $\mathbf{+22.3}$).
            return f"$\\mathbf{{{v}}}$" if best else f"${v}$"
        return f"**{v}**" if best else v

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
            record[ARM_LABELS[arm]] = value
        for arm in rl_arms:
            header = f"$\\Delta_{{\\text{{{ARM_LABELS[arm]}}}}}$" if fmt == "latex" else f"Δ {ARM_LABELS[arm]}"
            record[header] = signed(row[f"delta_{arm}"], arm in best)
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
    "±": r"$\pm$",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def display_name(name: str) -> str:
    """``table1`` -> ``Table 1``."""
    return f"Table {name[len('table'):]}" if _TABLE_NAME_RE.match(name) else name


def caption_for(spec: TableSpec) -> str:
    families = ", ".join(dict.fromkeys(spec.families[m] for m in spec.models))
    seeds = len(spec.seeds)
    # One seed has no spread to report: say so instead of a "± std" that is never shown.
    spread = "one seed" if seeds == 1 else f"mean ± std over {seeds} seeds"
    return (
        f"{families}. Final pass@1, {spread} (%). "
        "Δ columns are each arm minus the no-RL base (points); the largest per-row improvement is bold "
        "(none when every arm ties)."
    )


def write_table(table: pd.DataFrame, spec: TableSpec, stem: str | Path, decimals: int = 1) -> list[Path]:
    """Write ``stem.csv`` (full precision), ``stem.md`` and ``stem.tex`` atomically."""
    stem = Path(stem)
    csv_path, md_path, tex_path = (stem.with_suffix(s) for s in (".csv", ".md", ".tex"))
    io.write_text(csv_path, table.to_csv(index=False, float_format="%.6f", lineterminator="\n"))
    io.write_text(md_path, f"**{display_name(spec.name)}.** {caption_for(spec)}\n\n" + to_markdown(table, spec, decimals))
    io.write_text(tex_path, to_latex(table, spec, decimals, caption=caption_for(spec)))
    return [csv_path, md_path, tex_path]


def make_table(config: Mapping, name: str, results_dir: str | Path, stem: str | Path) -> list[Path]:
    """Config + results tree -> the three table files (what ``python -m concord table`` runs)."""
    spec = table_spec(config, name)
    report = report_section(config)
    frame = load_eval(table_inputs(config, name, results_dir))
    table = build_table(summarise(frame, ddof=int(report["std_ddof"])), spec)
    return write_table(table, spec, stem, decimals=int(report["decimals"]))
