"""SC-MoA's produced files: per cell directory, one reader per analysis table; Table 13's and Table
31's counts across them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from concord import stats
from concord.registry import Registry
from concord.scorecard.tolerance import (SAMPLING, STATISTIC, Uncertainty, combine, count_uncertainty, proportion_uncertainty)
from concord.scorecard.readers.base import (Found, ReadContext, Reproduced, _finite, _int, _read_csv, _require, _resolved,
                                             _section, fmt_setting, register_reader)

# SC-MoA's Table 13: SC-MoA against four baselines on three benchmarks (12 comparisons).
SCMOA_T13_BENCHMARKS: tuple[str, ...] = ("bbh", "gpqa_diamond", "lcb_hard")
SCMOA_T13_BASELINES: tuple[str, ...] = ("moa_para", "self_moa", "sc", "textgrad")
# Table 31's QA total (BBH, GPQA-Diamond, AIME).
SCMOA_QA_BENCHMARKS: tuple[str, ...] = ("aime", "bbh", "gpqa_diamond")
# Tables 29-30: majority vote vs synthesis over the same pre-refinement proposals (section 3).
SECTION3_TABLE = "tables29_30_synthesis_vs_vote"
# Table 37's row labels (concord.papers.scmoa.views.INFO_LADDER) -> view keys of the measures.
LADDER_VIEWS: dict[str, str] = {
    "Q-only (agg prompt)": "q_only_agg", "Q-only (CoT prompt)": "q_only_cot", "Answers bare": "answers_bare",
    "Answers + metadata": "answer_only", "Traces bare": "traces_bare", "Traces + partial meta": "no_metadata",
    "Traces - evolution": "no_evolution", "Full (all info)": "full",
}
# Table 17's conditions (concord.papers.scmoa.report._error_correlation) -> measure keys.
RHO_CONDITIONS: dict[str, str] = {"paraphrase": "perturbation", "persona": "persona", "i.i.d.": "iid"}
# The paper's benchmark a config entry is, by its format (and BBH subset).
SCMOA_FORMATS: dict[str, str] = {"gpqa_diamond": "gpqa_diamond", "aime": "aime", "livecodebench": "lcb_hard",
                                 "mmlu_ml": "mmlu_ml", "humaneval": "humaneval"}
SCMOA_BBH_SUBSETS: dict[str, str] = {"bbh3": "bbh", "bbh_full": "bbh_full"}
# The analysis tables of a cell the scorecard reads.
SCMOA_STEMS = ("accuracy", "significance", "flips", SECTION3_TABLE, "k_sweep", "k_sweep_h1", "table21_override",
               "error_correlation", "table37_information_ladder")



def _merge(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


def scmoa_cell(config: Mapping, cell: str) -> tuple[str, str, dict]:
    """A cell directory name -> (the paper's benchmark, the setup, the setup's settings).

    ``bbh3@mechanistic`` -> (``bbh``, ``mechanistic``, the section's settings overlaid with the
    setup's), as rules/scmoa/common.smk builds them.
    """
    key, _, setup = cell.partition("@")
    setup = setup or "main"
    scmoa = _section(config, "scmoa")
    setups = scmoa.get("setups") or {}
    base = {k: v for k, v in scmoa.items() if k not in ("benchmarks", "models", "server", "endpoints", "setups")}
    over = setups.get(setup) if isinstance(setups.get(setup), Mapping) else {}
    settings = _merge(base, {k: v for k, v in over.items() if k != "benchmarks"})
    return scmoa_paper_benchmark(config, key), setup, settings


def scmoa_paper_benchmark(config: Mapping, key: str) -> str:
    """The paper's name for a config benchmark key: by its ``format`` (and BBH ``subset``)."""
    spec = _section(config, "scmoa", "benchmarks", key)
    fmt = spec.get("format")
    if fmt == "bbh":
        return SCMOA_BBH_SUBSETS.get(str(spec.get("subset") or "bbh3"), key)
    if fmt in SCMOA_FORMATS:
        return SCMOA_FORMATS[fmt]
    return SCMOA_BBH_SUBSETS.get(key, key)


def scmoa_setting(config: Mapping, n_questions: int, settings: Mapping | None = None, setup: str = "main",
                  model: str = "") -> dict[str, str]:
    """The setting of one SC-MoA cell: questions, temperature, N, k, SC's k, aggregator, perturbation."""
    if settings is None:
        settings = _section(config, "scmoa")
    try:
        from concord.config import resolve

        sampling = resolve("scmoa.sampling", dict(settings.get("sampling") or {}))
    except (KeyError, ValueError, TypeError):
        sampling = dict(settings.get("sampling") or {})
    roles = settings.get("roles") or {}
    defaults = _resolved(config, "scmoa")
    get = lambda key: settings.get(key, defaults.get(key))  # noqa: E731 -- a local lookup with defaults
    return {"n_questions": str(n_questions), "temperature": fmt_setting(sampling.get("temperature")),
            "N": fmt_setting(get("n")), "k": fmt_setting(get("k")), "sc_k": fmt_setting(get("sc_k")),
            "aggregator": str(roles.get("aggregate") or model or "unknown"),
            "perturbation": fmt_setting(get("perturbation")), "setup": setup}


def _from_percent(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """SC-MoA tables write accuracies in percent (``{column}_pct``); read them back as fractions."""
    for col in columns:
        if col not in frame.columns and f"{col}_pct" in frame.columns:
            frame[col] = frame[f"{col}_pct"] / 100.0
    return frame


def _flip_uncertainties(beneficial: int, harmful: int, n: int) -> dict[str, Uncertainty | None]:
    """SEs of the flip statistics under multinomial sampling of the outcomes (delta method): upper
    bounds of their run-to-run noise on fixed questions, zero in a greedy setting (tolerance)."""
    total = beneficial + harmful
    out: dict[str, Uncertainty | None] = {"beneficial": count_uncertainty(beneficial, n),
                                          "harmful": count_uncertainty(harmful, n)}
    if total:
        z = (beneficial - harmful) / math.sqrt(total)
        # chi2 = z^2 with z of unit variance: Var(z^2) ~ 4 z^2 + 2 (a chi-square(1) at z = 0).
        out["chi2"] = Uncertainty(math.sqrt(4 * z * z + 2), math.inf, STATISTIC)
    if n:
        var = (total - (beneficial - harmful) ** 2 / n) / n ** 2
        out["advantage_pp"] = Uncertainty(100 * math.sqrt(max(var, 0.0) + 0.25 / n ** 2), math.inf, SAMPLING)
    if beneficial and harmful:
        out["flip_ratio"] = Uncertainty(beneficial / harmful * math.sqrt(1 / beneficial + 1 / harmful), math.inf,
                                        SAMPLING)
    return out


def _flip_measures(kind: str, model: str, bench: str, beneficial: int, harmful: int, p: float, n: int, rel: str,
                   setting: Mapping[str, str], group: str = "") -> list[Reproduced]:
    values = {"beneficial": beneficial, "harmful": harmful, "mcnemar_p": p}
    if beneficial + harmful:
        # McNemar's statistic without continuity correction, as the paper prints it.
        values["chi2"] = (beneficial - harmful) ** 2 / (beneficial + harmful)
    if n:
        values["advantage_pp"] = 100.0 * (beneficial - harmful) / n
    if harmful:
        values["flip_ratio"] = beneficial / harmful
    ses = _flip_uncertainties(beneficial, harmful, n)
    return [Reproduced("scmoa", f"{kind}_flips:{q}:{model}:{bench}", float(v), rel, "", dict(setting),
                       uncertainty=ses.get(q), group=group)
            for q, v in values.items()]


@dataclass
class ScmoaCellReading:
    """One ``scmoa/{model}/{cell}/analysis`` directory as its table readers see it: where it is,
    the cell's setting, its question count (from ``accuracy.csv``), and the records read so far."""

    analysis: Path
    rel_dir: str
    model: str
    bench: str
    setting: dict[str, str]
    n_questions: int
    group: str
    accuracy: pd.DataFrame
    out: list[Reproduced] = field(default_factory=list)

    def add(self, measure: str, value, rel: str, se: Uncertainty | None = None, spread: str = "", listed: bool = True,
            extra: Mapping[str, str] | None = None, notes: Sequence[str] = ()) -> None:
        """Record ``value`` under ``measure`` when it is a finite number (a missing cell is skipped)."""
        number = _finite(value)
        if number is not None:
            self.out.append(Reproduced("scmoa", measure, number, rel, spread,
                                       {**self.setting, **(extra or {})}, list(notes), listed, se, self.group))

    def table(self, stem: str) -> tuple[pd.DataFrame | None, str]:
        """An optional CSV of this directory and its path inside the results tree."""
        return _read_csv(self.analysis / f"{stem}.csv"), f"{self.rel_dir}/{stem}.csv"


#: One reader per analysis table of an SC-MoA cell, run in the order of ``SCMOA_READ_ORDER``.
SCMOA_TABLES: Registry[Callable[[ScmoaCellReading, str], None]] = Registry("SC-MoA analysis table")


@SCMOA_TABLES.register("accuracy")
def _accuracy(cell: ScmoaCellReading, stem: str) -> None:
    rel = f"{cell.rel_dir}/accuracy.csv"
    for row in cell.accuracy.itertuples(index=False):
        row = row._asdict()
        lo, hi = _finite(row.get("ci_lo")), _finite(row.get("ci_hi"))
        spread = f"95% CI [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
        n = _int(row.get("n"), cell.n_questions)
        cell.add(f"accuracy:{cell.model}:{cell.bench}:{row['method']}", 100 * float(row["accuracy"]), rel,
                 proportion_uncertainty(100 * float(row["accuracy"]), n), spread, extra={"n_questions": str(n)})


@SCMOA_TABLES.register("significance")
def _significance(cell: ScmoaCellReading, stem: str) -> None:
    sig, rel = cell.table(stem)
    if sig is None:
        return
    sig = _from_percent(sig, ("delta", "ci_lo", "ci_hi"))
    _require(sig, ("method", "baseline", "mcnemar_p"), rel)
    for row in sig[sig["method"] == "scmoa"].itertuples(index=False):
        row = row._asdict()
        ci = ""
        if _finite(row.get("ci_lo")) is not None:
            ci = f"Δ 95% CI [{100 * row['ci_lo']:.1f}, {100 * row['ci_hi']:.1f}]"
        wins = f"{row.get('wins')} wins, {row.get('losses')} losses; " if "wins" in row else ""
        cell.add(f"mcnemar_p:{cell.model}:{cell.bench}:{row['baseline']}", row["mcnemar_p"], rel,
                 spread=(wins + ci).rstrip("; "))
        if _finite(row.get("ci_hi")) is not None:
            cell.add(f"ci_hi:{cell.model}:{cell.bench}:{row['baseline']}", 100 * float(row["ci_hi"]), rel,
                     listed=False)


@SCMOA_TABLES.register(SECTION3_TABLE)
def _synthesis_vs_vote(cell: ScmoaCellReading, stem: str) -> None:
    rel = f"{cell.rel_dir}/{stem}.csv"
    table = pd.read_csv(cell.analysis / f"{stem}.csv", keep_default_na=False, index_col=0)
    try:
        beneficial = int(table.loc["Vote wrong", "Synthesis correct"])
        harmful = int(table.loc["Vote correct", "Synthesis wrong"])
        n = int(table.loc["Total", "Total"])
    except KeyError as exc:
        raise ValueError(f"{rel}: expected the 2x2 table with rows 'Vote correct', 'Vote wrong', 'Total' and "
                         f"columns 'Synthesis correct', 'Synthesis wrong', 'Total' ({exc} missing)") from None
    cell.out += _flip_measures("pre", cell.model, cell.bench, beneficial, harmful, stats.mcnemar(beneficial, harmful),
                               n, rel, {**cell.setting, "n_questions": str(n)}, cell.group)


@SCMOA_TABLES.register("flips")
def _flips(cell: ScmoaCellReading, stem: str) -> None:
    flips, rel = cell.table(stem)
    if flips is None:
        return
    _require(flips, ("beneficial", "harmful", "mcnemar_p"), rel)
    for row in flips.itertuples(index=False):
        row = row._asdict()
        cell.out += _flip_measures("post", cell.model, cell.bench, int(row["beneficial"]), int(row["harmful"]),
                                   float(row["mcnemar_p"]), cell.n_questions, rel, cell.setting, cell.group)
        f_s, p_c = _finite(row.get("F_s")), _finite(row.get("P_c"))
        if f_s is not None:
            kept = round(p_c * cell.n_questions) if p_c is not None else cell.n_questions
            cell.add(f"post_flips:F_s_pct:{cell.model}:{cell.bench}", 100 * f_s, rel,
                     proportion_uncertainty(100 * f_s, kept))


@SCMOA_TABLES.register("k_sweep")
@SCMOA_TABLES.register("k_sweep_h1")
def _k_sweep(cell: ScmoaCellReading, stem: str) -> None:
    frame, rel = cell.table(stem)
    if frame is None or "k" not in frame.columns:
        return
    frame = _from_percent(frame, ("accuracy",))
    for row in frame.to_dict("records"):
        k, value = _int(row.get("k")), _finite(row.get("accuracy"))
        if value is None:
            continue
        n = _int(row.get("n"), cell.n_questions)
        cell.add(f"k_sweep:{cell.model}:{cell.bench}:{k}", 100 * value, rel, proportion_uncertainty(100 * value, n),
                 extra={"k": str(k)})
        delta, lo, hi = (_finite(row.get(c)) for c in ("delta_prev_pp", "delta_ci_lo_pp", "delta_ci_hi_pp"))
        if delta is not None:
            se = Uncertainty((hi - lo) / 3.92) if lo is not None and hi is not None else None
            cell.add(f"k_sweep_delta:{cell.model}:{cell.bench}:{k}", delta, rel, se, extra={"k": str(k)})


@SCMOA_TABLES.register("table21_override")
def _override(cell: ScmoaCellReading, stem: str) -> None:
    frame, rel = cell.table(stem)
    if frame is None or "override_rate_pct" not in frame.columns or not len(frame):
        return
    row = frame.iloc[0].to_dict()
    n = _int(row.get("n"), cell.n_questions)
    rate = _finite(row["override_rate_pct"])
    if rate is not None:
        cell.add(f"override_rate_pct:{cell.model}:{cell.bench}", rate, rel, proportion_uncertainty(rate, n))


@SCMOA_TABLES.register("error_correlation")
def _error_correlation(cell: ScmoaCellReading, stem: str) -> None:
    frame, rel = cell.table(stem)
    if frame is None or not {"condition", "rho_bar"} <= set(frame.columns):
        return
    for row in frame.to_dict("records"):
        key = next((v for k, v in RHO_CONDITIONS.items() if k in str(row["condition"])), None)
        lo, hi = _finite(row.get("ci_lo")), _finite(row.get("ci_hi"))
        se = Uncertainty((hi - lo) / 3.92) if lo is not None and hi is not None else None
        if key:
            cell.add(f"rho_bar:{cell.model}:{cell.bench}:{key}", row["rho_bar"], rel, se)


@SCMOA_TABLES.register("table37_information_ladder")
def _information_ladder(cell: ScmoaCellReading, stem: str) -> None:
    frame, rel = cell.table(stem)
    if frame is None:
        return
    _require(frame, ("condition", "accuracy_pct"), rel)
    n_questions = cell.n_questions
    for i, row in enumerate(frame.to_dict("records")):
        view = "majority_vote" if i == 0 else LADDER_VIEWS.get(str(row["condition"]).replace("−", "-"))
        if view is None:
            continue
        measure = f"ladder:{cell.model}:{cell.bench}:{view}"
        accuracy = _finite(row["accuracy_pct"])
        cell.add(f"{measure}:accuracy", accuracy, rel,
                 None if accuracy is None else proportion_uncertainty(accuracy, n_questions))
        ben, harm = _finite(row.get("beneficial")), _finite(row.get("harmful"))
        if ben is None or harm is None:
            continue
        ses = _flip_uncertainties(int(ben), int(harm), n_questions)
        cell.add(f"{measure}:beneficial", ben, rel, ses["beneficial"])
        cell.add(f"{measure}:harmful", harm, rel, ses["harmful"])
        ratio = row.get("ratio") if harm else (math.inf if ben else math.nan)
        if ratio is not None and not (isinstance(ratio, float) and math.isnan(ratio)) and _finite(ratio) is None:
            # No harmful flips: an infinite ratio, beyond any printed one.
            cell.out.append(Reproduced("scmoa", f"{measure}:ratio", math.inf, rel, "", dict(cell.setting),
                                       ["no harmful flips: the ratio is infinite"], True, None, cell.group))
        else:
            cell.add(f"{measure}:ratio", ratio, rel, ses.get("flip_ratio"))
        # Table 37 prints the uncorrected exact McNemar p although its caption says Holm
        # (printed/anomalies.csv), so the uncorrected p is the one compared.
        cell.add(f"{measure}:p", row.get("p"), rel)


@SCMOA_TABLES.register("summary")
def _summary(cell: ScmoaCellReading, stem: str) -> None:
    path = cell.analysis / "summary.json"
    if not path.is_file():
        return
    rel = f"{cell.rel_dir}/summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    test = summary.get("diversity_test") if isinstance(summary, Mapping) else None
    if isinstance(test, Mapping):
        cell.add(f"dt_welch:{cell.model}:{cell.bench}:t", test.get("t"), rel, Uncertainty(1.0, math.inf, STATISTIC))
        cell.add(f"dt_welch:{cell.model}:{cell.bench}:p", test.get("p"), rel)


# The order the records of a cell come out in (the scorecard's pages list them so).
SCMOA_READ_ORDER = ("accuracy", "significance", SECTION3_TABLE, "flips", "k_sweep", "k_sweep_h1", "table21_override",
                    "error_correlation", "table37_information_ladder", "summary")


def read_scmoa_dir(analysis: Path, rel_dir: str, model: str, cell: str, config: Mapping,
                   tables: set[str]) -> list[Reproduced]:
    """One ``scmoa/{model}/{cell}/analysis`` directory: every table the scorecard matches."""
    bench, setup, settings = scmoa_cell(config, cell)
    acc_path = analysis / "accuracy.csv"
    if not acc_path.is_file():
        raise FileNotFoundError(f"{rel_dir}/accuracy.csv is missing (it gives the question count of the other tables)")
    acc = _from_percent(pd.read_csv(acc_path), ("accuracy", "ci_lo", "ci_hi"))
    _require(acc, ("method", "n", "accuracy"), f"{rel_dir}/accuracy.csv")
    n_questions = int(acc["n"].max()) if len(acc) else 0
    reading = ScmoaCellReading(analysis, rel_dir, model, bench, scmoa_setting(config, n_questions, settings, setup, model),
                               n_questions, f"{model}@{setup}", acc)
    for stem in SCMOA_READ_ORDER:
        if stem in tables:
            SCMOA_TABLES.get(stem)(reading, stem)
    return reading.out


@register_reader("scmoa",
                 r"^scmoa/(?P<model>[^/]+)/(?P<bench>[^/]+)/analysis/(?P<table>" + "|".join(SCMOA_STEMS) + r")\.csv$",
                 r"^scmoa/(?P<model>(?!crossrun/)[^/]+)/(?P<bench>[^/]+)/analysis/(?P<table>summary)\.json$",
                 stage=2)
def _read_scmoa_cells(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    """The tables of one cell directory are read together (its accuracy table gives their question count)."""
    dirs: dict[tuple[str, str, str], set[str]] = {}
    for f in found:
        rel_dir = f.rel.rsplit("/", 1)[0]
        dirs.setdefault((rel_dir, f.fields["model"], f.fields["bench"]), set()).add(f.fields["table"])
    out: list[Reproduced] = []
    for (rel_dir, model, cell), tables in sorted(dirs.items()):
        out += read_scmoa_dir(ctx.root / rel_dir, rel_dir, model, cell, ctx.config, tables)
    return out


def scmoa_aggregates(records: Sequence[Reproduced], config: Mapping) -> list[Reproduced]:
    """Table 13's counts over its 12 comparisons, Table 31's QA flip totals, per model and setup."""
    out = []
    scmoa = [r for r in records if r.paper == "scmoa"]
    for group in sorted({r.group for r in scmoa}):
        mine = [r for r in scmoa if r.group == group]
        by_measure: dict[str, Reproduced] = {}
        for r in mine:
            by_measure.setdefault(r.measure, r)
        models = sorted({r.measure.split(":")[1] for r in mine if r.measure.startswith("mcnemar_p:")}
                        | {r.measure.split(":")[2] for r in mine if r.measure.startswith("post_flips:")})
        for model in models:
            comparisons = [(b, base) for b in SCMOA_T13_BENCHMARKS for base in SCMOA_T13_BASELINES
                           if f"mcnemar_p:{model}:{b}:{base}" in by_measure]
            if comparisons:
                ps = [by_measure[f"mcnemar_p:{model}:{b}:{base}"] for b, base in comparisons]
                his = [by_measure.get(f"ci_hi:{model}:{b}:{base}") for b, base in comparisons]
                setting = {**ps[0].setting, "n_questions": _pooled_questions(by_measure, model, "mcnemar_p", dict(
                    (b, f"{b}:{base}") for b, base in comparisons)), "comparisons": str(len(comparisons))}
                sources = ", ".join(sorted({p.source for p in ps}))
                significant = float(sum(p.value < 0.05 for p in ps))
                out.append(Reproduced("scmoa", f"n_significant:{model}", significant, sources, "", dict(setting),
                                      uncertainty=count_uncertainty(significant, len(ps)), group=group))
                if all(h is not None for h in his):
                    positive = float(sum(h.value > 0 for h in his))
                    out.append(Reproduced("scmoa", f"n_ci_upper_positive:{model}", positive, sources, "",
                                          dict(setting), uncertainty=count_uncertainty(positive, len(his)),
                                          group=group))
            present = [b for b in SCMOA_QA_BENCHMARKS if f"post_flips:beneficial:{model}:{b}" in by_measure]
            if present:
                first = by_measure[f"post_flips:beneficial:{model}:{present[0]}"]
                setting = {"temperature": first.setting["temperature"], "benchmarks": "+".join(present),
                           "N": first.setting.get("N", "unknown"), "k": first.setting.get("k", "unknown"),
                           "n_questions": _pooled_questions(by_measure, model, "post_flips:beneficial",
                                                            {b: b for b in present})}
                for q in ("beneficial", "harmful"):
                    parts = [by_measure[f"post_flips:{q}:{model}:{b}"] for b in present]
                    out.append(Reproduced("scmoa", f"post_flips:{q}:{model}:bbh+gpqa_diamond+aime",
                                          sum(p.value for p in parts), ", ".join(p.source for p in parts), "",
                                          dict(setting), uncertainty=combine([p.uncertainty for p in parts],
                                                                             [1.0] * len(parts)), group=group))
    return out


def _pooled_questions(by_measure: Mapping[str, Reproduced], model: str, prefix: str, keys: Mapping[str, str]) -> str:
    """The questions a pooled count covers: the sum of its benchmarks' question counts, one per
    benchmark ("unknown" when any is), so a pooled count is judged only beside a run of the
    paper's size (a count over 1 question per benchmark is another setting, not a miss)."""
    total = 0
    for key in keys.values():
        n = by_measure[f"{prefix}:{model}:{key}"].setting.get("n_questions")
        if n is None or _finite(n) is None:
            return "unknown"
        total += int(float(n))
    return str(total)
