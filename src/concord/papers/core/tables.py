"""Tables 1-3 of the paper: final pass@1 per (family, model, benchmark) and arm.

Input: the evaluation JSONs ``eval/{model}/{benchmark}/{arm}/seed{seed}.json`` (key
``pass_at_1`` in [0, 1], and ``per_question`` records). Output: one row per (family, model,
benchmark) with each arm's mean +/- std over seeds in percent, each arm minus Base (percentage
points) with a paired test beside it, the best improvement marked, and a final Mean-Delta row --
as CSV (numbers), Markdown and LaTeX.

Controls: every Delta carries a 95% paired bootstrap interval that resamples questions and
training seeds (each question's accuracy in each seed minus Base's on the same question,
:func:`concord.stats.bootstrap_questions_and_seeds`; the Mean-Delta row resamples each cell's
questions and seeds within the cell) and, in the CSV, a paired sign-flip permutation p-value
(:mod:`concord.stats`, scipy). The zero-update arm (the training path at learning rate 0,
``concord.rl.settings.ZERO_UPDATE_ARM``) is a column of its own, never "best"; the table says
whether it reproduces Base sample for sample. Two arms whose trained weights hash the same in
every seed are one model: the table names the later one as identical to the earlier.

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

ZERO_UPDATE = "zero_update"  # concord.rl.settings.ZERO_UPDATE_ARM (the shared layer's name)
ARMS: tuple[str, ...] = ("base", ZERO_UPDATE, "majority", "ec", "cisc", "core")
CONTROL_ARMS: tuple[str, ...] = (ZERO_UPDATE,)
ARM_LABELS: dict[str, str] = {"base": "Base", ZERO_UPDATE: "Zero-update", "majority": "Majority", "ec": "EC",
                              "cisc": "CISC", "core": "CoRE"}
# The column sub-headings of the paper's tables.
ARM_NOTES: dict[str, str] = {"base": "(no RL)", ZERO_UPDATE: "(lr 0)", "majority": "(TTRL)", "ec": "(graph)",
                             "cisc": "(conf.)", "core": "(ours)"}
CONFIDENCE_LEVEL = 0.95
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
    control_seeds: tuple[int, ...] = ()  # the zero-update control's seeds (empty: ``seeds``)

    def label(self, key: str) -> str:
        return self.labels.get(key, key)

    def seeds_of(self, arm: str) -> tuple[int, ...]:
        return self.control_seeds if arm == ZERO_UPDATE and self.control_seeds else self.seeds


def arm_seeds(config: Mapping, arm: str) -> list[int]:
    """The seeds ``arm`` trains and is evaluated with: ``control_seeds`` for the zero-update
    control where the config sets it (its check is exact equality with Base, sample for sample, so
    one seed per cell proves it as well as three), else ``seeds``."""
    control = config.get("control_seeds")
    if arm == ZERO_UPDATE and control:
        return [int(s) for s in control]
    return [int(s) for s in config["seeds"]]


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
        control_seeds=tuple(int(s) for s in config.get("control_seeds") or ()),
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
    return [path for arm in spec.arms
            for path in eval_paths(results_dir, spec.models, spec.benchmarks, [arm], spec.seeds_of(arm))]


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
    """One row per evaluation file: model, benchmark, arm, seed, pass_at_1 (fraction), the
    per-question accuracies (``{question id: n_correct / k}``) and answers, and the hash of the
    evaluated weights (``provenance.model_sha256``; None where not recorded)."""
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
        accuracy, answers = _per_question(payload, path, float(value))
        rows.append({**info, "pass_at_1": float(value), "path": str(path), "accuracy": accuracy, "answers": answers,
                     "model_sha256": (payload.get("provenance") or {}).get("model_sha256")})
    frame = pd.DataFrame(rows, columns=["model", "benchmark", "arm", "seed", "pass_at_1", "path", "accuracy", "answers",
                                        "model_sha256"])
    dupes = frame[frame.duplicated(["model", "benchmark", "arm", "seed"], keep=False)]
    if not dupes.empty:
        raise ValueError(f"the same (model, benchmark, arm, seed) appears twice: {sorted(set(dupes['path']))}")
    return frame


def _per_question(payload: Mapping, path, pass_at_1: float) -> tuple[dict[str, float], dict[str, list]]:
    """``{id: n_correct / k}`` and ``{id: answers}``, checked against the file's own pass@1;
    (None, None) for a file without per-question records (the figures need none; the tables'
    paired tests refuse it, :func:`compare_to_base`)."""
    records = payload.get("per_question")
    if not records:
        return None, None
    if not isinstance(records, list):
        raise ValueError(f"{path}: 'per_question' must be a list of records")
    accuracy, answers = {}, {}
    for r in records:
        try:
            qid, n_correct, k = str(r["id"]), r["n_correct"], r["k"]
        except (KeyError, TypeError):
            raise ValueError(f"{path}: a per_question record lacks id, n_correct or k: {r!r}") from None
        if qid in accuracy:
            raise ValueError(f"{path}: question {qid!r} appears twice in per_question")
        if not (isinstance(k, int) and k >= 1 and isinstance(n_correct, int) and 0 <= n_correct <= k):
            raise ValueError(f"{path}: question {qid!r} has n_correct={n_correct!r} of k={k!r}")
        accuracy[qid] = n_correct / k
        answers[qid] = list(r.get("answers") or [])
    mean = sum(accuracy.values()) / len(accuracy)
    if not math.isclose(mean, pass_at_1, rel_tol=0, abs_tol=1e-9):
        raise ValueError(f"{path}: pass_at_1 {pass_at_1!r} is not the mean of its per_question accuracies ({mean!r})")
    return accuracy, answers


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


# ------------------------------------------------------------------ controls


@dataclass(frozen=True)
class Comparisons:
    """Each arm against Base per (model, benchmark), question by question.

    ``cells[(model, benchmark, arm)]`` = (per-question differences in points, interval low,
    high, p-value); ``mean[arm]`` = (low, high) of the Mean-Delta row; ``identical[(model,
    benchmark, arm)]`` = the earlier arm whose weights hash the same in every seed;
    ``zero_equals_base[(model, benchmark)]`` = whether the zero-update arm gave Base's answers to
    every sample of every question in every seed.
    """

    cells: Mapping[tuple[str, str, str], tuple[np.ndarray, float, float, float]]
    mean: Mapping[str, tuple[float, float]]
    identical: Mapping[tuple[str, str, str], str]
    zero_equals_base: Mapping[tuple[str, str], bool]
    n_resamples: int
    confidence_level: float = CONFIDENCE_LEVEL


def _by_question(frame: pd.DataFrame, model: str, bench: str, arm: str) -> pd.DataFrame:
    """(questions x seeds) accuracies of one cell."""
    cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == arm)]
    bare = [r.path for r in cell.itertuples() if r.accuracy is None]
    if bare:
        raise ValueError(f"{bare[0]}: no 'per_question' records (the paired tests compare arms question by question)")
    acc = pd.DataFrame({int(r.seed): r.accuracy for r in cell.itertuples()}).sort_index(axis=1)
    if acc.empty or acc.isna().any().any():
        raise ValueError(f"{model}/{bench}/{arm}: its seeds were evaluated on different questions")
    return acc


def seed_differences(acc: pd.DataFrame, base: pd.DataFrame) -> np.ndarray:
    """(questions x arm seeds) differences in points: the arm's accuracy on each question in each
    seed minus Base's in the same seed where Base was evaluated with it, else Base's mean over its
    seeds (the rows of ``acc`` and ``base`` are the same questions, in the same order)."""
    base_mean = base.mean(axis=1)
    cols = [acc[s] - (base[s] if s in base.columns else base_mean) for s in acc.columns]
    return 100.0 * np.column_stack([c.to_numpy() for c in cols])


def compare_to_base(frame: pd.DataFrame, spec: TableSpec, n_resamples: int = 2000, seed: int = 0) -> Comparisons:
    """Paired intervals and p-values of every arm minus Base, identical models, the zero-update check."""
    from concord import stats

    cells: dict = {}
    identical: dict = {}
    zero_equals_base: dict = {}
    per_arm: dict[str, list[np.ndarray]] = {a: [] for a in spec.arms if a != "base"}  # (questions x seeds) each
    for model in spec.models:
        for bench in spec.benchmarks:
            base = _by_question(frame, model, bench, "base")
            for arm in per_arm:
                acc = _by_question(frame, model, bench, arm)
                if set(acc.index) != set(base.index):
                    raise ValueError(f"{spec.name}: {model}/{bench}/{arm} was evaluated on other questions than Base "
                                     f"({len(set(acc.index) ^ set(base.index))} differ): the paired test needs the same ones")
                by_seed = seed_differences(acc.loc[base.index], base)
                d = by_seed.mean(axis=1)
                _, lo, hi = stats.bootstrap_questions_and_seeds([by_seed], n_resamples, seed, CONFIDENCE_LEVEL)
                cells[(model, bench, arm)] = (d, lo, hi, stats.sign_flip_test(d, n_resamples, seed))
                per_arm[arm].append(by_seed)
            identical.update(_identical_models(frame, model, bench, [a for a in spec.arms if a not in ("base",)]))
            if ZERO_UPDATE in per_arm:
                zero_equals_base[(model, bench)] = _same_answers(frame, model, bench, ZERO_UPDATE, "base")
    mean = {arm: stats.bootstrap_questions_and_seeds(ds, n_resamples, seed, CONFIDENCE_LEVEL)[1:]
            for arm, ds in per_arm.items()}
    return Comparisons(cells, mean, identical, zero_equals_base, int(n_resamples))


def _identical_models(frame: pd.DataFrame, model: str, bench: str, arms: Sequence[str]) -> dict:
    """Arms whose evaluated weights hash the same as an earlier arm's in every seed."""
    hashes = {}
    for arm in arms:
        cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == arm)]
        by_seed = tuple(sorted(zip(cell["seed"], cell["model_sha256"])))
        if by_seed and all(h for _, h in by_seed):
            hashes[arm] = by_seed
    out = {}
    for i, arm in enumerate(arms):
        for earlier in arms[:i]:
            if arm in hashes and hashes.get(earlier) == hashes[arm]:
                out[(model, bench, arm)] = earlier
                break
    return out


def _same_answers(frame: pd.DataFrame, model: str, bench: str, arm: str, other: str) -> bool:
    def answers(a):
        cell = frame[(frame["model"] == model) & (frame["benchmark"] == bench) & (frame["arm"] == a)]
        return {int(r.seed): r.answers for r in cell.itertuples()}

    return answers(arm) == answers(other)


# ------------------------------------------------------------------ the table


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
