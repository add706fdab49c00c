"""Read the tables a run produced into measures the printed numbers can be matched against.

The scorecard imports no paper package: it reads the produced files by their documented paths
(relative to the results tree) and columns (docs/CONTRIBUTING.md, "Artifact contracts"):

=============================================  ==========================================================
path                                           columns read
=============================================  ==========================================================
``tables/table{N}.csv``                        ``model, benchmark, {arm}_mean, {arm}_std, {arm}_n,
                                               delta_{arm}`` (percent; CoRE Tables 1-3; the Mean-Δ row,
                                               ``model == "Mean Δ vs. Base"``, is recomputed, not read)
``figures/figure5a.json`` + ``figure5a.csv``   ``wins, n_cells, sign_test_p, wilcoxon_p``; the csv's
                                               ``model, benchmark`` (the cells compared)
``tables/figure3_steps_saved.csv``             ``model, benchmark, steps_saved_pct, n_seeds``
``fmv/tables/table1.csv``                     ``method, train_mean, train_se, holdout_mean, holdout_se``
                                               (fractions; FMV Table 1)
``fmv/tables/table2.csv``                     ``method, mean, mean_se, fmv, fmv_se, best, best_se``
``fmv/figures/{bench}/figure2_{left,right}``  ``model`` (label), ``method, n, accuracy, se``
``.csv``
``scmoa/{model}/{bench}/analysis/``            ``accuracy.csv``: ``method, n, accuracy_pct, ci_lo_pct, ci_hi_pct``;
``{accuracy,significance,flips,``              ``significance.csv``: ``method, baseline, wins, losses,
``tables29_30_synthesis_vs_vote}.csv``         mcnemar_p, delta_pct, ci_lo_pct, ci_hi_pct``; ``flips.csv``:
                                               ``beneficial, harmful, mcnemar_p``; the section-3 2x2 table:
                                               rows ``Vote correct/wrong, Total`` x columns ``Synthesis
                                               correct/wrong, Total``
=============================================  ==========================================================

FMV rows are told apart by an ``arm`` column when a table has one, else by their labels
("Base ...", "... Pointwise ...", "... N=32 ..."). The setting a number was produced in comes from
the workflow config (the same keys the rules read) and from the files themselves (question and
seed counts), so that a comparison is only judged where the run shares the paper's setting.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd

from concord import stats

MEAN_ROW_LABEL = "Mean Δ vs. Base"  # concord's CoRE tables name their Mean-Δ row so
CORE_ARMS: tuple[str, ...] = ("base", "majority", "ec", "cisc", "core")
CORE_PAPER_SEEDS = 3
# SC-MoA's Table 13: SC-MoA against four baselines on three benchmarks (12 comparisons).
SCMOA_T13_BENCHMARKS: tuple[str, ...] = ("bbh", "gpqa_diamond", "lcb_hard")
SCMOA_T13_BASELINES: tuple[str, ...] = ("moa_para", "self_moa", "sc", "textgrad")
# Table 31's QA total (BBH, GPQA-Diamond, AIME).
SCMOA_QA_BENCHMARKS: tuple[str, ...] = ("aime", "bbh", "gpqa_diamond")
# Tables 29-30: majority vote vs synthesis over the same pre-refinement proposals (section 3).
SECTION3_TABLE = "tables29_30_synthesis_vs_vote"


@dataclass
class Reproduced:
    """One number a run produced, keyed like the printed numbers (see ``printed.py``)."""

    paper: str
    measure: str
    value: float
    source: str  # the produced file, relative to the results tree
    spread: str = ""  # the run's own spread, for display ("± 1.2 (std, 3 seeds)")
    setting: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # remarks that do not change the verdict
    listed: bool = True  # False: an intermediate number, not shown among the unprinted ones


def fmt_setting(value) -> str:
    """Config values as the printed settings spell them: 16, 0.6, 0 (not 0.0), unknown."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{value:g}"
    return str(value)


def _section(config: Mapping, *path: str) -> Mapping:
    node: object = config
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _resolved(config: Mapping, path: str) -> Mapping:
    """A config section with the schema's defaults filled in (what the workflow runs with), as
    concord.config resolves it; the section as given where the schema cannot resolve it."""
    from concord.config import resolve

    values = _section(config, *path.split("."))
    try:
        return resolve(path, values)
    except (KeyError, ValueError):
        return values


def _require(frame: pd.DataFrame, columns: Iterable[str], path: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; found {list(frame.columns)}")


def _finite(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# ------------------------------------------------------------------ CoRE


def core_setting(config: Mapping) -> dict[str, str]:
    evaluation, training = _resolved(config, "evaluation"), _resolved(config, "training")
    return {
        "eval_k": fmt_setting(evaluation.get("k")),
        "temperature": fmt_setting(evaluation.get("temperature")),
        "top_p": fmt_setting(evaluation.get("top_p")),
        "n_vote": fmt_setting(training.get("n_vote")),
    }


def _seed_note(n_seeds: int) -> list[str]:
    return [] if n_seeds == CORE_PAPER_SEEDS else [f"{n_seeds} seed(s); the paper averages {CORE_PAPER_SEEDS}"]


def read_core_table(path: Path, rel: str, config: Mapping) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "benchmark"), rel)
    arms = [a for a in CORE_ARMS if f"{a}_mean" in frame.columns]
    if "base" not in arms:
        raise ValueError(f"{rel}: no base_mean column (expected {{arm}}_mean for arms {', '.join(CORE_ARMS)})")
    setting = core_setting(config)
    out = []
    for row in frame[frame["model"] != MEAN_ROW_LABEL].itertuples(index=False):
        row = row._asdict()
        cell = f"{row['model']}:{row['benchmark']}"
        for arm in arms:
            mean = _finite(row[f"{arm}_mean"])
            if mean is None:
                continue
            n = int(row.get(f"{arm}_n") or 0) if _finite(row.get(f"{arm}_n")) is not None else 0
            std = _finite(row.get(f"{arm}_std"))
            spread = f"± {std:.1f} (std, {n} seed{'s' if n != 1 else ''})" if std is not None and n else ""
            out.append(Reproduced("core", f"pass_at_1:{cell}:{arm}", mean, rel, spread, dict(setting), _seed_note(n)))
            delta = _finite(row.get(f"delta_{arm}"))
            if arm != "base" and delta is not None:
                out.append(Reproduced("core", f"delta:{cell}:{arm}", delta, rel, spread, dict(setting), _seed_note(n)))
    return out


def core_aggregates(records: Sequence[Reproduced], families: Mapping[str, set[tuple[str, str]]],
                    config: Mapping) -> list[Reproduced]:
    """The paper's Mean-Δ rows and its text's averages, over the paper's cells this run produced.

    ``families`` maps ``table1``.. to the paper's (model, benchmark) cells of that table. An
    average over fewer cells than the paper's carries ``cells=<count>`` and is shown as a
    different setting.
    """
    by_measure = {r.measure: r for r in records if r.paper == "core"}
    paper_cells = set().union(*families.values()) if families else set()
    groups = {**{name: cells for name, cells in families.items()}, "all": paper_cells}
    out = []
    setting = core_setting(config)
    for name, cells in groups.items():
        present = sorted(c for c in cells if f"pass_at_1:{c[0]}:{c[1]}:base" in by_measure)
        if not present:
            continue
        source = sorted({by_measure[f"pass_at_1:{m}:{b}:base"].source for m, b in present})
        extra = {**setting, "cells": str(len(present))}
        for arm in CORE_ARMS[1:]:
            deltas = [by_measure.get(f"delta:{m}:{b}:{arm}") for m, b in present]
            if all(d is not None for d in deltas):
                mean = sum(d.value for d in deltas) / len(deltas)
                measure = f"overall_mean_delta:{arm}" if name == "all" else f"family_mean_delta:{name}:{arm}"
                out.append(Reproduced("core", measure, mean, ", ".join(source), "", dict(extra)))
        pairs = [(by_measure.get(f"pass_at_1:{m}:{b}:core"), by_measure.get(f"pass_at_1:{m}:{b}:cisc"))
                 for m, b in present]
        if all(a is not None and b is not None for a, b in pairs):
            gap = sum(a.value - b.value for a, b in pairs) / len(pairs)
            out.append(Reproduced("core", f"core_minus_cisc:{name}", gap, ", ".join(source), "", dict(extra)))
    return out


def read_core_figure5a(path: Path, rel: str, config: Mapping) -> list[Reproduced]:
    result = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(result, Mapping):
        raise ValueError(f"{rel}: expected a JSON object with wins, n_cells, sign_test_p, wilcoxon_p")
    cells_path = path.with_suffix(".csv")
    if not cells_path.is_file():
        raise FileNotFoundError(f"{rel}: its cell table {cells_path.name} is missing beside it")
    cells = pd.read_csv(cells_path)
    _require(cells, ("model", "benchmark"), rel[: -len(".json")] + ".csv")
    setting = {**core_setting(config), "cells": str(len(cells)),
               "benchmarks": "+".join(sorted(set(map(str, cells["benchmark"])))),
               "models": "+".join(sorted(set(map(str, cells["model"]))))}
    out = []
    for key in ("wins", "n_cells", "sign_test_p", "wilcoxon_p"):
        value = _finite(result.get(key))
        if value is None:
            raise ValueError(f"{rel}: {key!r} must be a finite number, got {result.get(key)!r}")
        out.append(Reproduced("core", f"fig5a:{key}", value, rel, "", dict(setting)))
    return out


def read_core_figure3(path: Path, rel: str, config: Mapping) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "benchmark", "steps_saved_pct"), rel)
    setting = {"n_vote": core_setting(config)["n_vote"]}
    out = []
    for row in frame.itertuples(index=False):
        value = _finite(row.steps_saved_pct)
        notes = _seed_note(int(getattr(row, "n_seeds", CORE_PAPER_SEEDS) or 0))
        if value is None:
            # concord leaves it undefined when CoRE never reaches Majority's plateau or Majority
            # plateaus at its first validation point: no saving to set beside the paper's.
            notes.append("steps saved undefined: CoRE never reached Majority's plateau, or Majority plateaued "
                         "at its first validation point")
            value = math.nan
        out.append(Reproduced("core", f"steps_saved_pct:{row.model}:{row.benchmark}", value, rel, "",
                              dict(setting), notes))
    return out


# ------------------------------------------------------------------ FMV


def _fmv_models(config: Mapping) -> dict[str, Mapping]:
    fmv = _section(config, "fmv")
    models = fmv.get("models") or config.get("models") or {}
    return dict(models) if isinstance(models, Mapping) else {}


def fmv_model_label(config: Mapping, key: str) -> str:
    """The label FMV figures print for a model (fmv.models.*.label, report.labels, the key)."""
    spec = _fmv_models(config).get(key) or {}
    labels = _section(config, "report").get("labels") or {}
    return (spec.get("label") if isinstance(spec, Mapping) else None) or labels.get(key) or key


def fmv_ttrl_cell(config: Mapping) -> tuple[str, str]:
    """The (model, benchmark) of FMV Tables 1-2: fmv.ttrl.model/benchmark, else the first ones."""
    fmv = _section(config, "fmv")
    ttrl = _section(config, "fmv", "ttrl")
    benchmarks = list((fmv.get("benchmarks") or {}).keys())
    model = ttrl.get("model") or next(iter(_fmv_models(config)), "unknown")
    return str(model), str(ttrl.get("benchmark") or (benchmarks[0] if benchmarks else "unknown"))


def fmv_setting(config: Mapping) -> dict[str, str]:
    sampling = _resolved(config, "fmv.sampling")
    return {"n": fmt_setting(sampling.get("n")), "temperature": fmt_setting(sampling.get("temperature")),
            "top_p": fmt_setting(sampling.get("top_p"))}


def fmv_row_key(label: str) -> str:
    """``"Base (Qwen3-4B-Instruct)"`` -> base, ``"with Pointwise (N=32)"`` -> fmv_pointwise_n32."""
    text = str(label).strip().lower()
    if text.startswith("base"):
        return "base"
    arm = "fmv_pointwise" if "pointwise" in text else "fmv"
    budget = re.search(r"n\s*=\s*(\d+)", text)
    return f"{arm}_n{budget.group(1)}" if budget else arm


def _fmv_rows(frame: pd.DataFrame, rel: str) -> list[tuple[str, dict]]:
    if "arm" in frame.columns:
        keys = [str(a) for a in frame["arm"]]
    else:
        _require(frame, ("method",), rel)
        keys = [fmv_row_key(m) for m in frame["method"]]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{rel}: rows {keys} do not tell the arms apart (add an 'arm' column)")
    return list(zip(keys, (r._asdict() for r in frame.itertuples(index=False))))


def _pct_se(se) -> str:
    value = _finite(se)
    return "" if value is None else f"± {100 * value:.1f} (bootstrap SE)"


def read_fmv_table(path: Path, rel: str, config: Mapping, table: int) -> list[Reproduced]:
    frame = pd.read_csv(path)
    quantities = ("train_mean", "holdout_mean") if table == 1 else ("mean", "fmv", "best")
    _require(frame, quantities, rel)
    model, bench = fmv_ttrl_cell(config)
    out = []
    for key, row in _fmv_rows(frame, rel):
        for q in quantities:
            value = _finite(row[q])
            if value is None:
                continue
            se = row.get(q.replace("_mean", "_se") if table == 1 else f"{q}_se")
            out.append(Reproduced("fmv", f"table{table}:{q}:{model}:{bench}:{key}", 100 * value, rel, _pct_se(se),
                                  fmv_setting(config)))
    return out


def read_fmv_figure2(path: Path, rel: str, config: Mapping, benchmark: str) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "method", "n", "accuracy"), rel)
    by_label = {fmv_model_label(config, key): key for key in _fmv_models(config)}
    setting = fmv_setting(config)
    out = []
    for row in frame.itertuples(index=False):
        value = _finite(row.accuracy)
        if value is None:
            continue
        model = by_label.get(str(row.model), str(row.model))
        n = int(row.n)
        out.append(Reproduced("fmv", f"figure2:accuracy:{model}:{benchmark}:{row.method}:{n}", 100 * value, rel,
                              _pct_se(getattr(row, "se", None)), {**setting, "n": str(n)}))
    return out


# ------------------------------------------------------------------ SC-MoA


def scmoa_setting(config: Mapping, n_questions: int) -> dict[str, str]:
    scmoa = _resolved(config, "scmoa")
    sampling = _resolved(config, "scmoa.sampling")
    return {"n_questions": str(n_questions), "temperature": fmt_setting(sampling.get("temperature")),
            "N": fmt_setting(scmoa.get("n")), "k": fmt_setting(scmoa.get("k")), "sc_k": fmt_setting(scmoa.get("sc_k"))}


def _from_percent(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """SC-MoA tables write accuracies in percent (``{column}_pct``); read them back as fractions."""
    for col in columns:
        if col not in frame.columns and f"{col}_pct" in frame.columns:
            frame[col] = frame[f"{col}_pct"] / 100.0
    return frame


def read_scmoa_dir(analysis: Path, rel_dir: str, model: str, bench: str, config: Mapping,
                   tables: set[str]) -> list[Reproduced]:
    """One ``scmoa/{model}/{bench}/analysis`` directory: accuracy, significance, flips."""
    acc_path = analysis / "accuracy.csv"
    if not acc_path.is_file():
        raise FileNotFoundError(f"{rel_dir}/accuracy.csv is missing (it gives the question count of the other tables)")
    acc = _from_percent(pd.read_csv(acc_path), ("accuracy", "ci_lo", "ci_hi"))
    _require(acc, ("method", "n", "accuracy"), f"{rel_dir}/accuracy.csv")
    n_questions = int(acc["n"].max()) if len(acc) else 0
    setting = scmoa_setting(config, n_questions)
    out = []
    if "accuracy" in tables:
        for row in acc.itertuples(index=False):
            lo, hi = _finite(getattr(row, "ci_lo", None)), _finite(getattr(row, "ci_hi", None))
            spread = f"95% CI [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
            out.append(Reproduced("scmoa", f"accuracy:{model}:{bench}:{row.method}", 100 * float(row.accuracy),
                                  f"{rel_dir}/accuracy.csv", spread, dict(setting)))
    if "significance" in tables:
        rel = f"{rel_dir}/significance.csv"
        sig = _from_percent(pd.read_csv(analysis / "significance.csv"), ("delta", "ci_lo", "ci_hi"))
        _require(sig, ("method", "baseline", "wins", "losses", "mcnemar_p"), rel)
        for row in sig[sig["method"] == "scmoa"].itertuples(index=False):
            ci = ""
            if _finite(getattr(row, "ci_lo", None)) is not None:
                ci = f"Δ 95% CI [{100 * row.ci_lo:.1f}, {100 * row.ci_hi:.1f}]"
            out.append(Reproduced("scmoa", f"mcnemar_p:{model}:{bench}:{row.baseline}", float(row.mcnemar_p), rel,
                                  f"{row.wins} wins, {row.losses} losses; {ci}".rstrip("; "), dict(setting)))
            if _finite(getattr(row, "ci_hi", None)) is not None:
                out.append(Reproduced("scmoa", f"ci_hi:{model}:{bench}:{row.baseline}", 100 * float(row.ci_hi), rel,
                                      "", dict(setting), listed=False))
    if SECTION3_TABLE in tables:
        rel = f"{rel_dir}/{SECTION3_TABLE}.csv"
        table = pd.read_csv(analysis / f"{SECTION3_TABLE}.csv", keep_default_na=False, index_col=0)
        try:
            beneficial = int(table.loc["Vote wrong", "Synthesis correct"])
            harmful = int(table.loc["Vote correct", "Synthesis wrong"])
            n = int(table.loc["Total", "Total"])
        except KeyError as exc:
            raise ValueError(f"{rel}: expected the 2x2 table with rows 'Vote correct', 'Vote wrong', 'Total' and "
                             f"columns 'Synthesis correct', 'Synthesis wrong', 'Total' ({exc} missing)") from None
        out += _flip_measures("pre", model, bench, beneficial, harmful, stats.mcnemar(beneficial, harmful), n, rel,
                              {**setting, "n_questions": str(n)})
    if "flips" in tables:
        rel = f"{rel_dir}/flips.csv"
        flips = pd.read_csv(analysis / "flips.csv")
        _require(flips, ("beneficial", "harmful", "mcnemar_p"), rel)
        for row in flips.itertuples(index=False):
            out += _flip_measures("post", model, bench, int(row.beneficial), int(row.harmful), float(row.mcnemar_p),
                                  n_questions, rel, setting)
    return out


def _flip_measures(kind: str, model: str, bench: str, beneficial: int, harmful: int, p: float, n: int, rel: str,
                   setting: Mapping[str, str]) -> list[Reproduced]:
    values = {"beneficial": beneficial, "harmful": harmful, "mcnemar_p": p}
    if beneficial + harmful:
        # McNemar's statistic without continuity correction, as the paper prints it.
        values["chi2"] = (beneficial - harmful) ** 2 / (beneficial + harmful)
    if n:
        values["advantage_pp"] = 100.0 * (beneficial - harmful) / n
    if harmful:
        values["flip_ratio"] = beneficial / harmful
    return [Reproduced("scmoa", f"{kind}_flips:{q}:{model}:{bench}", float(v), rel, "", dict(setting))
            for q, v in values.items()]


def scmoa_aggregates(records: Sequence[Reproduced], config: Mapping) -> list[Reproduced]:
    """Table 13's counts over its 12 comparisons, Table 31's QA flip totals (per model)."""
    out = []
    by_measure = {r.measure: r for r in records if r.paper == "scmoa"}
    models = sorted({r.measure.split(":")[1] for r in records if r.measure.startswith("mcnemar_p:")}
                    | {r.measure.split(":")[2] for r in records if r.measure.startswith("post_flips:")})
    for model in models:
        comparisons = [(b, base) for b in SCMOA_T13_BENCHMARKS for base in SCMOA_T13_BASELINES
                       if f"mcnemar_p:{model}:{b}:{base}" in by_measure]
        if comparisons:
            ps = [by_measure[f"mcnemar_p:{model}:{b}:{base}"] for b, base in comparisons]
            his = [by_measure.get(f"ci_hi:{model}:{b}:{base}") for b, base in comparisons]
            setting = {**{k: v for k, v in ps[0].setting.items() if k != "n_questions"},
                       "comparisons": str(len(comparisons))}
            sources = ", ".join(sorted({p.source for p in ps}))
            out.append(Reproduced("scmoa", f"n_significant:{model}", float(sum(p.value < 0.05 for p in ps)), sources,
                                  "", dict(setting)))
            if all(h is not None for h in his):
                out.append(Reproduced("scmoa", f"n_ci_upper_positive:{model}", float(sum(h.value > 0 for h in his)),
                                      sources, "", dict(setting)))
        present = [b for b in SCMOA_QA_BENCHMARKS if f"post_flips:beneficial:{model}:{b}" in by_measure]
        if present:
            setting = {"temperature": by_measure[f"post_flips:beneficial:{model}:{present[0]}"].setting["temperature"],
                       "benchmarks": "+".join(present)}
            for q in ("beneficial", "harmful"):
                parts = [by_measure[f"post_flips:{q}:{model}:{b}"] for b in present]
                out.append(Reproduced("scmoa", f"post_flips:{q}:{model}:bbh+gpqa_diamond+aime",
                                      sum(p.value for p in parts), ", ".join(p.source for p in parts), "",
                                      dict(setting)))
    return out


# ------------------------------------------------------------------ dispatch


@dataclass(frozen=True)
class Kind:
    name: str
    pattern: re.Pattern


KINDS: tuple[Kind, ...] = (
    Kind("core_table", re.compile(r"^tables/table\d+\.csv$")),
    Kind("core_figure5a", re.compile(r"^figures/figure5a\.(json|csv)$")),
    Kind("core_figure3", re.compile(r"^tables/figure3_steps_saved\.csv$")),
    Kind("fmv_table", re.compile(r"^fmv/tables/table(?P<table>[12])\.csv$")),
    Kind("fmv_figure2", re.compile(r"^fmv/figures/(?P<bench>[^/]+)/figure2_(left|right)\.csv$")),
    Kind("scmoa", re.compile(r"^scmoa/(?P<model>[^/]+)/(?P<bench>[^/]+)/analysis/"
                             r"(?P<table>accuracy|significance|flips|tables29_30_synthesis_vs_vote)\.csv$")),
)


def classify(rel: str) -> tuple[str, dict] | None:
    """The kind of a produced file (by its path inside the results tree), or None."""
    for kind in KINDS:
        match = kind.pattern.match(rel)
        if match:
            return kind.name, match.groupdict()
    return None


def scorecard_inputs(targets: Iterable[str], results_dir: str | Path = "results") -> list[str]:
    """The produced files the scorecard reads, picked from a workflow's final targets.

    Rules list figures by their PNG (FMV Figure 2) or their CSV; the scorecard needs the CSV (and
    Figure 5a's JSON) beside them. Snakemake uses this as the scorecard rule's input function, so
    the scorecard follows whatever subset of the grid the config asks for.
    """
    root = Path(results_dir)
    picked: dict[str, None] = {}
    for target in targets:
        path = Path(str(target))
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        candidates = [rel]
        if rel.endswith(".png") or rel.endswith(".md") or rel.endswith(".tex") or rel.endswith(".pdf"):
            candidates = [rel.rsplit(".", 1)[0] + ".csv", rel.rsplit(".", 1)[0] + ".json"]
        for cand in candidates:
            if classify(cand):
                picked[(root / cand).as_posix()] = None
    return list(picked)


def read_produced(files: Iterable[str | Path], results_dir: str | Path, config: Mapping,
                  core_families: Mapping[str, set[tuple[str, str]]] | None = None) -> list[Reproduced]:
    """Every measure in ``files`` (paths inside ``results_dir``), plus the cross-table ones."""
    root = Path(results_dir).resolve()
    records: list[Reproduced] = []
    scmoa_dirs: dict[tuple[str, str, str], set[str]] = {}
    figure5a_done = False
    for file in files:
        path = Path(file)
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"{file}: not inside the results tree {results_dir}") from None
        found = classify(rel)
        if found is None:
            expected = ", ".join(k.pattern.pattern for k in KINDS)
            raise ValueError(f"{rel}: not a table the scorecard reads (expected one of: {expected})")
        if not path.is_file():
            raise FileNotFoundError(f"{file}: produced table missing (run the rule that makes it first)")
        kind, groups = found
        readers: dict[str, Callable[[], list[Reproduced]]] = {
            "core_table": lambda: read_core_table(path, rel, config),
            "core_figure3": lambda: read_core_figure3(path, rel, config),
            "fmv_table": lambda: read_fmv_table(path, rel, config, int(groups.get("table") or 1)),
            "fmv_figure2": lambda: read_fmv_figure2(path, rel, config, str(groups.get("bench"))),
        }
        if kind == "core_figure5a":
            if not figure5a_done:
                json_path = path.with_suffix(".json")
                records += read_core_figure5a(json_path, rel.rsplit(".", 1)[0] + ".json", config)
                figure5a_done = True
        elif kind == "scmoa":
            rel_dir = rel.rsplit("/", 1)[0]
            scmoa_dirs.setdefault((rel_dir, groups["model"], groups["bench"]), set()).add(groups["table"])
        else:
            records += readers[kind]()
    for (rel_dir, model, bench), tables in sorted(scmoa_dirs.items()):
        records += read_scmoa_dir(root / rel_dir, rel_dir, model, bench, config, tables)
    records += core_aggregates(records, core_families or {}, config)
    records += scmoa_aggregates(records, config)
    return records
