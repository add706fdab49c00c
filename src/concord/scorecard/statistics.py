"""The papers' statistics recomputed from their own printed inputs (no GPU, no run needed).

Where a paper prints a statistic together with the numbers it was computed from (McNemar flip
counts beside a p-value, k and n beside a percentage or a Clopper-Pearson interval, per-cell means
beside their mean, wins and losses beside a sign test), concord recomputes the statistic with its own
functions (:mod:`concord.stats`, scipy, statsmodels) and judges it to the printed digits.

Sources of rows:

``printed/statistics.csv``
    statistics transcribed by hand from the seeds, one row each (columns below);
the printed CoRE tables (``printed/core.csv``)
    every Δ cell (arm − Base), every Mean Δ row and the text's means of cell differences, the
    Figure 5a wins, sign test and Wilcoxon test, derived from the printed cells in code
    (:func:`core_rows`), so the inputs are exactly the transcribed (and seed-checked) cells.

Columns of ``statistics.csv``: ``id``, ``paper``, ``table``, ``row``, ``statistic``, ``method`` (a key of
:data:`METHODS`), ``inputs`` (``key=value`` pairs separated by ``;``; lists space-separated; a whole number printed as a
rounded percentage is written ``94%``, other whole numbers are exact counts),
``printed`` (the value as printed; ``<0.001`` for a printed bound), ``quote`` (the seed text that
holds it), ``stated_method`` (the method the paper's caption or text names, when it is not the one
that reproduces the printed digits) and ``anomaly`` (the paper's own inconsistency, when there is
one).

Verdict ``reproduces``: ``|recomputed - printed| <= r + e``, ``r`` half a unit of the printed last
digit and ``e`` the largest change the printed inputs' own rounding can make (half a unit of each
input written with decimals, propagated through the method's partial derivatives; counts are
exact, so a p-value from flip counts must round to the printed digits; several rounded inputs
combine as a root sum of squares). A printed bound
(``<0.001``) reproduces when the recomputed value satisfies it. Otherwise ``does not reproduce``;
``tests/test_scorecard_statistics.py`` requires each such row to name the paper's anomaly.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from concord import stats
from concord.scorecard.printed import PrintedCell, load_printed, rounding_of

COLUMNS = ("id", "paper", "table", "row", "statistic", "method", "inputs", "printed", "quote", "stated_method",
           "anomaly")
VERDICTS = ("reproduces", "does not reproduce")


def _flips(text: str) -> list[tuple[int, int]]:
    """``"10/38 10/23"`` -> ``[(10, 38), (10, 23)]``."""
    out = []
    for pair in text.split():
        b, sep, c = pair.partition("/")
        if not sep:
            raise ValueError(f"expected beneficial/harmful pairs such as 10/23, got {pair!r}")
        out.append((int(b), int(c)))
    return out


def _holm_of(method: str) -> Callable[[Mapping], float]:
    def compute(a: Mapping) -> float:
        family = _flips(a["family"])
        index = int(a["index"])
        if not 0 <= index < len(family):
            raise ValueError(f"index {index} outside the family of {len(family)} comparisons")
        return stats.holm([stats.mcnemar(b, c, method=method) for b, c in family])[index]
    return compute


@dataclass(frozen=True)
class Method:
    """A named computation: its label (shown beside the number), the inputs it needs, the function."""

    label: str
    needs: tuple[str, ...]
    compute: Callable[[Mapping], float]
    smooth: bool = True  # rounding of decimal inputs propagates through derivatives


def _mean(a: Mapping) -> float:
    return float(np.mean(a["values"]))


METHODS: dict[str, Method] = {
    "mcnemar_exact": Method(stats.MCNEMAR_METHODS["exact"], ("b", "c"),
                            lambda a: stats.mcnemar(a["b"], a["c"], method="exact"), smooth=False),
    "mcnemar_chi2": Method(stats.MCNEMAR_METHODS["chi2"], ("b", "c"),
                           lambda a: stats.mcnemar(a["b"], a["c"], method="chi2"), smooth=False),
    "mcnemar_chi2_cc": Method(stats.MCNEMAR_METHODS["chi2_cc"], ("b", "c"),
                              lambda a: stats.mcnemar(a["b"], a["c"], method="chi2_cc"), smooth=False),
    "mcnemar_chi2_statistic": Method("McNemar chi-square statistic, no continuity correction", ("b", "c"),
                                     lambda a: stats.mcnemar_statistic(a["b"], a["c"]), smooth=False),
    "mcnemar_exact_holm": Method("McNemar exact, Holm-Bonferroni over the family", ("family", "index"),
                                 _holm_of("exact"), smooth=False),
    "mcnemar_chi2_holm": Method("McNemar chi-square, Holm-Bonferroni over the family", ("family", "index"),
                                _holm_of("chi2"), smooth=False),
    "sign_test": Method("exact two-sided sign test (binomial, ties dropped)", ("wins", "losses"),
                        lambda a: stats.sign_test(a["wins"], a["losses"]), smooth=False),
    "wilcoxon": Method("Wilcoxon signed-rank, two-sided (scipy: exact without ties, else normal)", ("a", "b"),
                       lambda a: stats.wilcoxon(a["a"], a["b"]), smooth=False),
    "wins": Method("count of pairs with a > b", ("a", "b"),
                   lambda a: float(np.sum(np.asarray(a["a"]) > np.asarray(a["b"]))), smooth=False),
    "clopper_pearson_lo": Method("Clopper-Pearson 95% interval, lower bound (%)", ("k", "n"),
                                 lambda a: 100 * stats.clopper_pearson(a["k"], a["n"])[0], smooth=False),
    "clopper_pearson_hi": Method("Clopper-Pearson 95% interval, upper bound (%)", ("k", "n"),
                                 lambda a: 100 * stats.clopper_pearson(a["k"], a["n"])[1], smooth=False),
    "percent": Method("100 k / n", ("k", "n"), lambda a: 100.0 * a["k"] / a["n"]),
    "ratio": Method("a / b", ("a", "b"), lambda a: a["a"] / a["b"]),
    "difference": Method("a - b", ("a", "b"), lambda a: a["a"] - a["b"]),
    "sum": Method("sum of the parts", ("values",), lambda a: float(np.sum(a["values"]))),
    "mean": Method("mean of the printed cells", ("values",), _mean),
    "mean_difference": Method("mean of the cells' differences a - b", ("a", "b"),
                              lambda a: float(np.mean(np.asarray(a["a"]) - np.asarray(a["b"])))),
    "max_difference": Method("largest of the cells' differences a - b", ("a", "b"),
                             lambda a: float(np.max(np.asarray(a["a"]) - np.asarray(a["b"])))),
    "weighted_mean": Method("mean weighted by n", ("values", "weights"),
                            lambda a: float(np.average(a["values"], weights=a["weights"]))),
    "flip_gain": Method("100 (b - c) / n (accuracy change from flips, pp)", ("b", "c", "n"),
                        lambda a: 100.0 * (a["b"] - a["c"]) / a["n"]),
    "accuracy_after_flips": Method("reference accuracy + 100 (b - c) / n (%)", ("reference", "b", "c", "n"),
                                   lambda a: a["reference"] + 100.0 * (a["b"] - a["c"]) / a["n"]),
}
_TEXT_INPUTS = frozenset({"family"})


@dataclass
class Statistic:
    """One printed statistic with its recomputation."""

    id: str
    paper: str
    table: str
    row: str
    statistic: str
    method: str
    inputs: str
    printed: str
    quote: str = ""
    stated_method: str = ""
    anomaly: str = ""
    recomputed: float = math.nan
    stated_value: float | None = None
    tolerance: float = 0.0
    verdict: str = ""
    values: dict = field(default_factory=dict)

    @property
    def bound(self) -> str:
        return self.printed[0] if self.printed[:1] in ("<", ">") else ""

    @property
    def printed_number(self) -> float:
        return float(self.printed.lstrip("<>+"))


def parse_inputs(text: str) -> tuple[dict, dict]:
    """``"b=10;c=23"`` -> the values, and the texts they were written as (for their rounding)."""
    values, texts = {}, {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"inputs {text!r}: expected key=value pairs separated by ';', got {part!r}")
        texts[key] = value
        if key in _TEXT_INPUTS:
            values[key] = value
        elif key in ("values", "weights") or (key in ("a", "b") and " " in value):
            values[key] = [float(v.rstrip("%")) for v in value.split()]
        else:
            values[key] = float(value.rstrip("%"))
    return values, texts


def _rounding_bound(method: Method, values: dict, texts: dict) -> float:
    """How far the inputs' printed rounding can move the result: each decimal input's half unit
    times the method's partial derivative, combined as a root sum of squares (the worst case for
    one input; for the mean of many rounded cells their errors partly cancel, and the worst case of
    42 cells would accept a mean that is off in its printed digit)."""
    if not method.smooth:
        return 0.0
    total = 0.0
    for key, text in texts.items():
        if key in _TEXT_INPUTS or key in ("n", "weights"):
            continue
        items = text.split()
        for i, item in enumerate(items):
            if "." not in item and not item.endswith("%"):
                continue  # a count: exact (a rounded whole percentage is written "94%")
            half = rounding_of(item.rstrip("%"))
            step = half / 10.0

            def at(delta: float) -> float:
                moved = dict(values)
                if isinstance(values[key], list):
                    moved[key] = list(values[key])
                    moved[key][i] += delta
                else:
                    moved[key] = values[key] + delta
                return method.compute(moved)

            total += ((at(step) - at(-step)) / (2 * step) * half) ** 2
    return math.sqrt(total)


def evaluate(stat: Statistic) -> Statistic:
    """Recompute ``stat`` and judge it (see the module doc); errors name the row."""
    if stat.method not in METHODS:
        raise ValueError(f"statistic {stat.id!r}: unknown method {stat.method!r}; known: {', '.join(METHODS)}")
    method = METHODS[stat.method]
    values, texts = parse_inputs(stat.inputs)
    missing = [k for k in method.needs if k not in values]
    if missing:
        raise ValueError(f"statistic {stat.id!r}: method {stat.method} needs input(s) {missing}")
    if not re.fullmatch(r"[<>]?[+-]?\d+(\.\d+)?", stat.printed):
        raise ValueError(f"statistic {stat.id!r}: printed value {stat.printed!r} is not a number or a bound")
    stat.values = values
    stat.recomputed = float(method.compute(values))
    if stat.stated_method:
        if stat.stated_method not in METHODS:
            raise ValueError(f"statistic {stat.id!r}: unknown stated method {stat.stated_method!r}")
        stat.stated_value = float(METHODS[stat.stated_method].compute(values))
    printed = stat.printed_number
    if stat.bound == "<":
        ok = stat.recomputed < printed
    elif stat.bound == ">":
        ok = stat.recomputed > printed
    else:
        stat.tolerance = rounding_of(stat.printed.lstrip("+")) + _rounding_bound(method, values, texts)
        ok = abs(stat.recomputed - printed) <= stat.tolerance + 1e-9
    stat.verdict = VERDICTS[0] if ok else VERDICTS[1]
    return stat


def load_statistics() -> list[Statistic]:
    """The hand-transcribed rows of ``printed/statistics.csv``."""
    text = resources.files("concord.scorecard").joinpath("printed", "statistics.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise ValueError(f"printed/statistics.csv: expected columns {COLUMNS}, got {reader.fieldnames}")
    rows, seen = [], set()
    for row in reader:
        if row["id"] in seen:
            raise ValueError(f"printed/statistics.csv: duplicate id {row['id']!r}")
        seen.add(row["id"])
        rows.append(Statistic(**{k: row[k] for k in COLUMNS}))
    return rows


# ----------------------------------------------------------------------------- CoRE, from its tables


def _anomaly_of(cell: PrintedCell) -> str:
    note = cell.note.strip()
    return note[len("anomaly:"):].strip() if note.lower().startswith("anomaly") else ""


def core_rows(cells: Sequence[PrintedCell] | None = None) -> list[Statistic]:
    """CoRE statistics whose inputs are its printed cells: each Δ = arm − Base, each table's Mean Δ
    (mean of its printed Δ cells), the §5/§6 means of cell differences, the Figure 5a wins, sign
    test and Wilcoxon signed-rank test over the 14 MATH L4/L5 cells."""
    core = _CoreCells(list(load_printed("core") if cells is None else cells))
    core.delta_rows()
    core.derived_rows()
    core.margin_row()
    core.fig5a_rows()
    return core.out


class _CoreCells:
    """CoRE's printed cells indexed by measure, and the statistics drawn from them so far (``out``)."""

    def __init__(self, cells: list[PrintedCell]) -> None:
        self.cells = cells
        self.by_measure: dict[str, PrintedCell] = {}
        for cell in cells:
            self.by_measure.setdefault(cell.measure, cell)
        self.pass_at_1 = {tuple(c.measure.split(":")[1:]): c for c in cells if c.measure.startswith("pass_at_1:")}
        self.table_of = {(m, b): c.table.split()[-1] for (m, b, _a), c in self.pass_at_1.items()
                         if c.table.startswith("Table")}
        self.deltas: dict[tuple[str, str, str], PrintedCell] = {}
        self.out: list[Statistic] = []

    def add(self, cell: PrintedCell, method: str, inputs: str, statistic: str) -> None:
        printed = cell.text if cell.spread_kind not in ("lower_bound", "upper_bound") else (
            (">" if cell.spread_kind == "lower_bound" else "<") + cell.text.lstrip("+"))
        self.out.append(Statistic(id=f"core.{cell.id}", paper="core", table=cell.table, row=cell.row,
                                  statistic=statistic, method=method, inputs=inputs, printed=printed,
                                  quote=cell.quote, anomaly=_anomaly_of(cell)))

    def differences(self, first: str, second: str, table: str | None) -> tuple[list[str], list[str]]:
        """The printed pass@1 of arm ``first`` and arm ``second`` in every cell that has both (of one table)."""
        a, b = [], []
        for (model, bench, arm), c in self.pass_at_1.items():
            if arm != first or (table is not None and self.table_of.get((model, bench)) != table):
                continue
            other = self.pass_at_1.get((model, bench, second))
            if other is not None:
                a.append(c.text)
                b.append(other.text)
        return a, b

    def delta_rows(self) -> None:
        """Each printed Δ = arm − Base, from the two printed pass@1 cells."""
        for cell in self.cells:
            parts = cell.measure.split(":")
            if parts[0] == "delta":
                model, bench, arm = parts[1:]
                self.deltas[(model, bench, arm)] = cell
                arm_cell, base = self.pass_at_1.get((model, bench, arm)), self.pass_at_1.get((model, bench, "base"))
                if arm_cell is not None and base is not None:
                    self.add(cell, "difference", f"a={arm_cell.text};b={base.text}", f"Δ {arm} − Base")

    def derived_rows(self) -> None:
        """Means of Δ cells, means of cell differences, single differences and recovery nets."""
        for cell in self.cells:
            parts = cell.measure.split(":")
            if parts[0] == "family_mean_delta":
                table, arm = parts[1][len("table"):], parts[2]
                values = [d.text for (m, b, a), d in self.deltas.items() if a == arm and self.table_of.get((m, b)) == table]
                self.add(cell, "mean", f"values={' '.join(values)}", f"mean of Table {table}'s {len(values)} Δ {arm} cells")
            elif parts[0] == "overall_mean_delta":
                arm = parts[1]
                values = [d.text for (m, b, a), d in self.deltas.items() if a == arm]
                self.add(cell, "mean", f"values={' '.join(values)}", f"mean of all {len(values)} Δ {arm} cells")
            elif parts[0] == "core_minus_cisc":
                a, b = self.differences("core", "cisc", None if parts[1] == "all" else parts[1][len("table"):])
                self.add(cell, "mean_difference", f"a={' '.join(a)};b={' '.join(b)}", f"mean of {len(a)} cells' CoRE − CISC")
            elif parts[0] == "core_minus_majority":
                model, bench = parts[1:]
                core, maj = self.pass_at_1.get((model, bench, "core")), self.pass_at_1.get((model, bench, "majority"))
                if core is not None and maj is not None:
                    self.add(cell, "difference", f"a={core.text};b={maj.text}", "CoRE − Majority")
            elif parts[0] == "recovery" and parts[-1] == "net":
                rec = self.by_measure.get(":".join(parts[:-1] + ["recovered_total"]))
                reg = self.by_measure.get(":".join(parts[:-1] + ["regressions"]))
                if rec is not None and reg is not None:
                    self.add(cell, "difference", f"a={rec.text};b={reg.text}", "recoveries − regressions")

    def margin_row(self) -> None:
        """The abstract's largest CoRE − Majority margin over every cell."""
        a, b = self.differences("core", "majority", None)
        if a:
            self.out.append(Statistic(
                id="core.abstract.max_margin_over_majority", paper="core", table="Abstract",
                row="all model–benchmark cells", statistic="largest CoRE − Majority", method="max_difference",
                inputs=f"a={' '.join(a)};b={' '.join(b)}", printed="+7.5",
                quote="margins over the vote of up to $+7.5$ points"))

    def fig5a_rows(self) -> None:
        """Figure 5a: wins, sign test and Wilcoxon signed-rank test of CoRE vs CISC over MATH L4/L5."""
        fig5a = {c.measure.split(":")[1]: c for c in self.cells if c.measure.startswith("fig5a:")}
        if not fig5a:
            return
        a, b = [], []
        for (model, bench, arm), c in sorted(self.pass_at_1.items()):
            if arm == "core" and bench in ("math_l4", "math_l5") and (model, bench, "cisc") in self.pass_at_1:
                a.append(c.text)
                b.append(self.pass_at_1[(model, bench, "cisc")].text)
        wins = sum(float(x) > float(y) for x, y in zip(a, b))
        losses = sum(float(x) < float(y) for x, y in zip(a, b))
        pairs = f"a={' '.join(a)};b={' '.join(b)}"
        if "wins" in fig5a:
            self.add(fig5a["wins"], "wins", pairs, f"MATH L4/L5 cells with CoRE > CISC (of {len(a)})")
        if "sign_test_p" in fig5a:
            self.add(fig5a["sign_test_p"], "sign_test", f"wins={wins};losses={losses}", "sign test p, CoRE vs CISC")
        if "wilcoxon_p" in fig5a:
            self.add(fig5a["wilcoxon_p"], "wilcoxon", pairs, "Wilcoxon signed-rank p, CoRE vs CISC")


def all_statistics() -> list[Statistic]:
    """Every printed statistic concord recomputes, evaluated, in paper order."""
    rows = core_rows() + load_statistics()
    order = {"core": 0, "fmv": 1, "scmoa": 2}
    unknown = {r.paper for r in rows} - set(order)
    if unknown:
        raise ValueError(f"statistics for unknown paper(s) {sorted(unknown)}")
    return sorted((evaluate(r) for r in rows), key=lambda r: order[r.paper])


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.6g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.3e}"


def statistics_frame(rows: Sequence[Statistic]) -> pd.DataFrame:
    """One row per statistic: where, inputs, method, printed, recomputed, verdict, anomaly."""
    return pd.DataFrame(
        [{"paper": r.paper, "table": r.table, "row": r.row, "statistic": r.statistic, "inputs": r.inputs,
          "method": METHODS[r.method].label, "printed": r.printed, "recomputed": _number(r.recomputed),
          "tolerance": _number(r.tolerance) if not r.bound else "bound",
          "verdict": r.verdict,
          "stated_method": METHODS[r.stated_method].label if r.stated_method else "",
          "stated_method_gives": _number(r.stated_value), "anomaly": r.anomaly, "id": r.id} for r in rows],
        columns=["paper", "table", "row", "statistic", "inputs", "method", "printed", "recomputed", "tolerance",
                 "verdict", "stated_method", "stated_method_gives", "anomaly", "id"])


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def statistics_markdown(rows: Sequence[Statistic]) -> str:
    """The Markdown page: counts, the anomalies, then one table row per statistic."""
    frame = statistics_frame(rows)
    n_ok = int((frame["verdict"] == VERDICTS[0]).sum())
    lines = ["# The papers' statistics, recomputed from their printed inputs", "",
             "Every statistic a paper prints together with the numbers it was computed from, recomputed by "
             "concord's own functions (concord.stats: scipy, statsmodels) and judged to the printed digits: "
             "`reproduces` when |recomputed − printed| is at most half a unit of the printed last digit plus what "
             "the printed inputs' own rounding can move it (counts are exact). No GPU and no run is needed.", "",
             f"**{n_ok} of {len(frame)} reproduce to the printed digits**; "
             f"{len(frame) - n_ok} do not, each a listed anomaly of the paper.", ""]
    for paper in ("core", "fmv", "scmoa"):
        mine = frame[frame["paper"] == paper]
        if len(mine):
            ok = int((mine["verdict"] == VERDICTS[0]).sum())
            lines.append(f"- {paper}: {ok} of {len(mine)} reproduce")
    anomalies = frame[frame["anomaly"] != ""]
    lines += ["", "## Anomalies (the paper's own inconsistencies)", ""]
    if len(anomalies):
        for _, r in anomalies.iterrows():
            stated = (f" The stated method ({r['stated_method']}) gives {r['stated_method_gives']}."
                      if r["stated_method"] else "")
            lines.append(f"- {r['paper']} {r['table']}, {r['row']} ({r['statistic']}): printed {r['printed']}, "
                         f"recomputed {r['recomputed']} ({r['verdict']}). {_md(r['anomaly'])}{stated}")
    else:
        lines.append("None.")
    header = ["paper", "table", "row", "statistic", "inputs", "method", "printed", "recomputed", "verdict",
              "stated method gives", "anomaly"]
    lines += ["", "## Every statistic", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for _, r in frame.iterrows():
        cells = [r["paper"], r["table"], r["row"], r["statistic"], r["inputs"], r["method"], r["printed"],
                 r["recomputed"], r["verdict"],
                 f"{r['stated_method_gives']} ({r['stated_method']})" if r["stated_method"] else "",
                 "yes" if r["anomaly"] else ""]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"

