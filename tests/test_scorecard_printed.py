"""The transcribed numbers (concord/scorecard/printed/*.csv) against the papers' seed text.

Every table cell is looked up by its row and column in the seed's own tab-separated table;
every quoted number must stand in its quote and every quote in the seed; every derived number
must follow from its formula. The papers' anomalies listed in anomalies.csv are recomputed from
the transcribed numbers. Tests reading ../shared/seeds skip when it is absent (a user's clone);
``CONCORD_SHARED`` points elsewhere (a worktree's ../shared is not the project's).
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from pathlib import Path

import pytest

from concord.scorecard.printed import PAPERS, SEED_PREFIX, load_anomalies, load_printed, rounding_of

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CONCORD_SHARED", REPO.parent / "shared"))
SEEDS = SHARED / "seeds"


def _normalise(text: str) -> str:
    # The SC-MoA seed is Markdown with every punctuation mark backslash-escaped ("86\.5"); LaTeX
    # commands (a backslash before a letter, "\pm") stay.
    return re.sub(r"\\(?=[^A-Za-z])", "", text)


@pytest.fixture(scope="module")
def seed_text():
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is absent (set CONCORD_SHARED to the shared folder to run this)")

    def read(paper: str) -> str:
        (path,) = SEEDS.glob(f"{SEED_PREFIX[paper]}_*.txt")
        return path.read_text(encoding="utf-8")

    return {paper: read(paper) for paper in PAPERS}


def _seed_tables(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """Every tab-separated table of a seed: (table, row label) -> {column header: cell}.

    CoRE's tables name the model on its first row only ("Qwen2.5-Math-1.5B\tAMC", then
    "\tMATH-500"): rows are labelled "model / benchmark". Tables are numbered in order.
    """
    out: dict[tuple[str, str], dict[str, str]] = {}
    table, header, model = 0, None, None
    for line in text.splitlines():
        fields = line.split("\t")
        if line.startswith(("Model\tBench", "Method\t", "Training Method\t")):
            table += 1
            header = fields
            continue
        if header is None or len(fields) != len(header):
            continue  # prose and sub-headings ("Test-Time Reinforcement Learning") have other widths
        if header[0] == "Model":
            if fields[1] == "":
                if fields[0].startswith("Mean"):
                    out[(f"Table {table}", "Mean Δ vs. Base")] = dict(zip(header, fields))
                continue
            model = fields[0] or model
            out[(f"Table {table}", f"{model} / {fields[1]}")] = dict(zip(header, fields))
        else:
            out[(f"Table {table}", fields[0])] = dict(zip(header, fields))
    return out


# The transcription's column names -> the seed's table headers.
_CORE_HEADERS = {"Base (no RL)": "Base", "Majority (TTRL)": "Majority", "EC (graph)": "EC", "CISC (conf.)": "CISC",
                 "CoRE (ours)": "CoRE", "Δ Maj": "$\\Delta_{\\text{Maj}}$", "Δ EC": "$\\Delta_{\\text{EC}}$",
                 "Δ CISC": "$\\Delta_{\\text{CISC}}$", "Δ CoRE": "$\\Delta_{\\text{CoRE}}$"}


_WORDS = {"0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven",
          "8": "eight", "9": "nine", "10": "ten", "11": "eleven", "12": "twelve"}


def _number_in(number: str, text: str) -> bool:
    """``number`` stands in ``text`` as a whole number (``21.6`` not inside ``121.65``; "zero" is 0)."""
    bare = number.lstrip("+")
    if re.search(rf"(?<![\d.]){re.escape(bare)}(?![\d])", text):
        return True
    return bare in _WORDS and re.search(rf"\b{_WORDS[bare]}\b", text, re.IGNORECASE) is not None


def _evaluate(formula: str) -> Decimal:
    if not re.fullmatch(r"\d+(\.\d+)?([+-]\d+(\.\d+)?)*", formula):
        raise ValueError(f"formula {formula!r}: only sums and differences of decimals are allowed")
    total = Decimal(0)
    for sign, literal in re.findall(r"([+-]?)(\d+(?:\.\d+)?)", formula):
        total += -Decimal(literal) if sign == "-" else Decimal(literal)
    return total


@pytest.mark.parametrize("paper", list(PAPERS))
def test_every_printed_file_loads_and_is_consistent(paper):
    cells = load_printed(paper)
    assert cells, paper
    measures = [c.measure for c in cells]
    for cell in cells:
        assert re.fullmatch(r"[a-z0-9_]+(:[A-Za-z0-9_.+\-]+)*", cell.measure), cell.measure
        assert cell.quote, f"{cell.id}: every number carries the seed text it comes from"
        if cell.source == "derived":
            assert cell.formula, cell.id
    # A measure printed twice (a table cell and the text quoting it, Table 1's baselines in Tables 5-6)
    # is the same quantity: in the same setting it has the same value.
    seen: dict[tuple[str, tuple], str] = {}
    for cell in cells:
        key = (cell.measure, tuple(sorted(cell.setting.items())))
        # The text's "+25.0" against Table 1's own +21.6 is an anomaly of the paper (anomalies.csv).
        if cell.spread_kind not in ("lower_bound", "upper_bound") and cell.id != "s5.table1_mean_delta_core":
            assert seen.setdefault(key, cell.text.lstrip("+")) == cell.text.lstrip("+"), cell.id
    assert len(set(measures)) >= len(measures) // 2


@pytest.mark.needs_shared
@pytest.mark.parametrize("paper", list(PAPERS))
def test_every_value_is_in_the_seed_text(paper, seed_text):
    raw = seed_text[paper]
    text = _normalise(raw)
    tables = _seed_tables(raw)
    checked = 0
    for cell in load_printed(paper):
        if cell.source == "table":
            row = tables.get((cell.table, cell.row))
            assert row is not None, f"{cell.id}: no row {cell.row!r} in {cell.table} of the seed"
            header = _CORE_HEADERS.get(cell.column, cell.column)
            assert row.get(header) == cell.quote, f"{cell.id}: seed cell {row.get(header)!r} != {cell.quote!r}"
            numbers = re.findall(r"[+-]?\d+\.\d+", cell.quote)
            assert numbers[0].lstrip("+") == cell.text.lstrip("+"), f"{cell.id}: value {cell.text} vs {cell.quote}"
            if cell.spread_kind == "arm_std":
                # A Delta cell borrows the std its arm prints in the same row (Base prints none).
                arms = {"Δ Maj": "Majority", "Δ EC": "EC", "Δ CISC": "CISC", "Δ CoRE": "CoRE"}
                arm_cell = row[arms[cell.column]]
                arm_numbers = re.findall(r"\d+\.\d+", arm_cell)
                assert len(numbers) == 1 and float(arm_numbers[1]) == cell.spread, f"{cell.id}: {arm_cell}"
            elif cell.spread_kind in ("std", "se"):
                assert len(numbers) == 2 and float(numbers[1]) == cell.spread, f"{cell.id}: spread vs {cell.quote}"
            else:
                assert len(numbers) == 1, f"{cell.id}: {cell.quote} prints a spread the transcription lacks"
        elif cell.source == "table_text":
            # A run-together table row (SC-MoA's "Self-MoA64.17"): the quote is the row up to and
            # including the cell, so it must stand in the seed and end with the value.
            fragment = _normalise(cell.quote)
            assert fragment in text, f"{cell.id}: table row not in the seed: {fragment!r}"
            assert fragment.endswith(cell.text.lstrip("+")), f"{cell.id}: {fragment!r} does not end with {cell.text}"
        else:
            fragments = [_normalise(f.strip()) for f in cell.quote.split(" | ")]
            for fragment in fragments:
                assert fragment in text, f"{cell.id}: quote not in the seed: {fragment!r}"
            joined = " ".join(fragments)
            if cell.source == "text":
                assert _number_in(cell.text, joined), f"{cell.id}: {cell.text} not in {joined!r}"
            else:
                assert _evaluate(cell.formula) == Decimal(cell.text.lstrip("+")), f"{cell.id}: {cell.formula}"
                for literal in re.findall(r"\d+(?:\.\d+)?", cell.formula):
                    assert _number_in(literal, joined), f"{cell.id}: {literal} of {cell.formula} not quoted"
            if cell.spread_kind == "ci95":
                assert _number_in(f"{cell.ci_lo:g}", joined) and _number_in(f"{cell.ci_hi:g}", joined), cell.id
        checked += 1
    assert checked == len(load_printed(paper))


@pytest.mark.needs_shared
def test_seed_table_parser_sees_every_core_and_fmv_cell(seed_text):
    core = _seed_tables(seed_text["core"])
    assert len([k for k in core if k[1] != "Mean Δ vs. Base"]) == 42
    assert len([c for c in load_printed("core") if c.source == "table"]) == 42 * 9 + 3 * 4
    fmv = _seed_tables(seed_text["fmv"])
    assert len(fmv) == 3 + 5
    assert len([c for c in load_printed("fmv") if c.source == "table"]) == 3 * 2 + 5 * 3


def _core_frame():
    import pandas as pd

    rows = []
    for c in load_printed("core"):
        parts = c.measure.split(":")
        if parts[0] in ("pass_at_1", "delta"):
            rows.append({"table": c.table, "kind": parts[0], "model": parts[1], "benchmark": parts[2],
                         "arm": parts[3], "value": c.value, "spread": c.spread})
    return pd.DataFrame(rows)


def _printed(paper: str, cell_id: str):
    return next(c for c in load_printed(paper) if c.id == cell_id)


def test_core_anomalies_follow_from_the_printed_numbers():
    frame = _core_frame()
    deltas = frame[frame.kind == "delta"].pivot_table(index=["table", "model", "benchmark"], columns="arm",
                                                      values="value")
    means = frame[frame.kind == "pass_at_1"].pivot_table(index=["table", "model", "benchmark"], columns="arm",
                                                         values="value")
    # "+25.0" in the text, +21.6 in Table 1's own Mean-Delta row (which its 18 cells reproduce).
    assert _printed("core", "s5.table1_mean_delta_core").value == 25.0
    assert _printed("core", "t1.mean_delta.core").value == 21.6
    assert round(deltas.loc["Table 1"]["core"].mean(), 1) == 21.6
    for table in ("Table 1", "Table 2", "Table 3"):
        for arm in ("majority", "ec", "cisc", "core"):
            printed = _printed("core", f"t{table[-1]}.mean_delta.{arm}").value
            assert abs(deltas.loc[table][arm].mean() - printed) <= 0.05 + 1e-9, (table, arm)
    # The abstract's +21.7 / +20.4 are the means over all 42 cells.
    assert round(deltas["core"].mean(), 1) == 21.7 and round(deltas["majority"].mean(), 1) == 20.4
    # Identical std columns across models.
    stds = frame[(frame.kind == "pass_at_1") & (frame.arm != "base")].pivot_table(
        index=["model", "benchmark"], columns="arm", values="spread")
    for a, b, bench in (("qwen2.5-7b", "qwen3-8b", "math_l4"), ("qwen2.5-7b", "qwen3-8b", "math_l5"),
                        ("llama-3.1-8b-instruct", "mistral-nemo-instruct", "math500")):
        assert stds.loc[(a, bench)].tolist() == stds.loc[(b, bench)].tolist()
        assert means.xs(a, level="model").xs(bench, level="benchmark").iloc[0].tolist() != \
            means.xs(b, level="model").xs(bench, level="benchmark").iloc[0].tolist()
    # CISC, not CoRE, is the best arm on Qwen2.5-Math-7B by mean Delta.
    q7 = deltas.xs("qwen2.5-math-7b", level="model")
    assert q7["cisc"].mean() > q7["core"].mean()
    # CoRE trails Majority on more Table 1 cells than the text lists.
    trails = means.loc["Table 1"][means.loc["Table 1"]["core"] < means.loc["Table 1"]["majority"]]
    assert {("qwen2.5-math-1.5b", "aime2024"), ("qwen2.5-math-1.5b", "gpqa_diamond")} <= set(trails.index)
    # CoRE - CISC: +1.14 overall and +1.42 on Table 3 (text: +1.2 and +1.5).
    gap = means["core"] - means["cisc"]
    assert round(gap.mean(), 2) == 1.14 and round(gap.loc["Table 3"].mean(), 2) == 1.42
    # Delta cells computed from unrounded means: 21 of 168 differ by 0.1 from printed arm - Base.
    off = 0
    for arm in ("majority", "ec", "cisc", "core"):
        diff = ((means[arm] - means["base"]).round(1) - deltas[arm]).abs()
        assert (diff <= 0.1 + 1e-9).all()
        off += int((diff > 0.05).sum())
    assert off == 21


def test_core_figure5a_numbers_follow_from_the_printed_tables():
    from scipy.stats import binomtest, wilcoxon

    frame = _core_frame()
    means = frame[frame.kind == "pass_at_1"].pivot_table(index=["model", "benchmark"], columns="arm", values="value")
    cells = means[means.index.get_level_values("benchmark").isin(["math_l4", "math_l5"])]
    wins = int((cells["core"] > cells["cisc"]).sum())
    printed = (int(_printed("core", "fig5a.wins").value), int(_printed("core", "fig5a.n_cells").value))
    assert (wins, len(cells)) == printed
    assert round(binomtest(wins, len(cells)).pvalue, 3) == _printed("core", "fig5a.sign_test_p").value
    assert round(wilcoxon(cells["core"], cells["cisc"]).pvalue, 3) == _printed("core", "fig5a.wilcoxon_p").value


def test_fmv_anomalies_follow_from_the_printed_numbers():
    def pair(cell_id):
        cell = _printed("fmv", cell_id)
        return cell.value, cell.spread

    assert pair("t1.base.train_mean") == pair("t2.base.mean")
    assert pair("t1.fmv.train_mean") == pair("t2.fmv_n128.mean")
    assert pair("t1.fmv_pointwise.train_mean") == pair("t2.fmv_pointwise_n32.mean")
    rows = ("base", "fmv_n32", "fmv_pointwise_n32", "fmv_n128", "fmv_pointwise_n128")
    best = [pair(f"t2.{k}.best")[1] for k in rows]
    assert best == [1.0, 4.2, 4.2, 4.2, 4.2]


def test_scmoa_numbers_agree_with_their_own_statistics():
    from concord import stats

    # Clopper-Pearson intervals (Appendix G) of the accuracies on n problems.
    for cell_id, n in (("t1.bbh3.scmoa", 296), ("t1.gpqa.scmoa", 198), ("t1.lcb.scmoa", 171)):
        cell = _printed("scmoa", cell_id)
        k = round(cell.value / 100 * n)
        assert round(100 * k / n, 1) == cell.value
        lo, hi = stats.clopper_pearson(k, n)
        assert (round(100 * lo, 1), round(100 * hi, 1)) == (cell.ci_lo, cell.ci_hi)
    # Tables 29 and 30: uncorrected McNemar on the printed flip counts.
    for table, n in (("t29", 198), ("t30", 296)):
        b, c = (int(_printed("scmoa", f"{table}.{q}").value) for q in ("beneficial", "harmful"))
        assert round((b - c) ** 2 / (b + c), 2) == _printed("scmoa", f"{table}.chi2").value
        assert round(stats.mcnemar(b, c), 3) == _printed("scmoa", f"{table}.p").value
        assert round(100 * (b - c) / n, 1) == _printed("scmoa", f"{table}.advantage").value
        assert round(b / c, 1) == _printed("scmoa", f"{table}.ratio").value
    # Table 31: BBH's 46 vs 0 flips are far from the p = 0.30 of Figure 5b.
    assert stats.mcnemar(46, 0) < 1e-10


def test_anomalies_file_names_each_paper():
    anomalies = load_anomalies()
    assert {a["paper"] for a in anomalies} == set(PAPERS)
    assert all(a["where"] and a["anomaly"] for a in anomalies)


def test_rounding_is_half_a_printed_unit():
    assert rounding_of("21.6") == pytest.approx(0.05)
    assert rounding_of("+25.0") == pytest.approx(0.05)
    assert rounding_of("13") == pytest.approx(0.5)
    assert rounding_of("0.002") == pytest.approx(0.0005)
    assert math.isclose(rounding_of("0.090"), 0.0005)


def test_new_core_text_numbers_follow_from_the_printed_tables():
    """The §5 CoRE-vs-Majority gaps are differences of printed means (each rounded once); the
    'at most 0.3' cells trail by at most 0.3; Appendix H's net is recoveries minus regressions;
    the 'within the 0.2-0.6 std' claim is contradicted by the stds of one of its cells."""
    cells = {c.id: c for c in load_printed("core")}
    by_measure = {c.measure: c for c in load_printed("core")}
    gaps = [c for c in cells.values() if c.id.startswith("s5.core_minus_majority.")]
    assert len(gaps) == 11
    for gap in gaps:
        _, model, bench = gap.measure.split(":")
        core, majority = (by_measure[f"pass_at_1:{model}:{bench}:{arm}"] for arm in ("core", "majority"))
        assert abs(core.value - majority.value - gap.value) <= 0.1 + 1e-9, gap.id
    trails = [c for c in cells.values() if c.id.startswith("s5.core_trails_majority.")]
    assert len(trails) == 3
    for bound in trails:
        _, model, bench = bound.measure.split(":")
        core, majority = (by_measure[f"pass_at_1:{model}:{bench}:{arm}"] for arm in ("core", "majority"))
        assert -0.3 - 1e-9 <= core.value - majority.value < 0
    stds = [by_measure[f"pass_at_1:qwen2.5-math-1.5b:math_l5:{arm}"].spread for arm in ("majority", "core")]
    assert stds == [1.9, 2.1] and min(stds) > 0.6
    assert cells["appH.net"].value == cells["appH.recovered_total"].value - cells["appH.regressions"].value
    # 10 recoveries are 29% of the majority-wrong questions: 34 or 35 of the 128.
    assert {round(100 * 10 / w) for w in (34, 35)} == {29}
    assert cells["s33.threshold_8v24"].value == round((24 - 1 - 0.1) / (8 - 1 - 0.1), 1)


def test_scmoa_tables_5_6_37_agree_with_their_own_text_and_table1():
    cells = {c.id: c for c in load_printed("scmoa")}
    # Table 37: accuracy = majority vote + (beneficial - harmful) / 198, ratio = beneficial / harmful.
    mv = cells["t37.majority_vote.accuracy"].value
    views = {c.id.split(".")[1] for c in cells.values() if c.id.startswith("t37.") and c.id != "t37.majority_vote.accuracy"}
    assert len(views) == 8
    for view in views:
        b, h = cells[f"t37.{view}.beneficial"].value, cells[f"t37.{view}.harmful"].value
        assert abs(mv + 100 * (b - h) / 198 - cells[f"t37.{view}.accuracy"].value) <= 0.1, view
        assert abs(b / h - cells[f"t37.{view}.ratio"].value) <= 0.005 + 1e-9, view
    # The anomaly: Table 37's full condition vs Table 1's SC-MoA, the same N=5, k=2 setting.
    full, table1 = cells["t37.full.accuracy"], cells["t1.gpqa.scmoa"]
    assert (full.value, table1.value) == (72.2, 73.2)
    assert {k: full.setting[k] for k in ("N", "k")} == {k: table1.setting[k] for k in ("N", "k")}
    # Table 5's key observations: +2.0 over SC, +3.0 over TextGrad.
    assert round(cells["t5.scmoa"].value - cells["t5.sc"].value, 1) == 2.0
    assert round(cells["t5.scmoa"].value - cells["t5.textgrad"].value, 1) == 3.0
    # Tables 5-6 baselines are Table 1's (where Table 1 has them from the text).
    for t5, t1 in (("t5.cot", "t1.gpqa.cot"), ("t5.sc", "t1.gpqa.sc"), ("t5.textgrad", "t1.gpqa.textgrad"),
                   ("t5.self_moa", "t1.gpqa.self_moa"), ("t5.moa_para", "t1.gpqa.moa_para"),
                   ("t6.sc.overall", "t1.lcb.sc"), ("t6.textgrad.overall", "t1.lcb.textgrad"),
                   ("t6.cot.overall", "t1.lcb.cot"), ("t6.self_moa.overall", "t1.lcb.self_moa")):
        assert cells[t5].value == cells[t1].value and cells[t5].measure == cells[t1].measure, (t5, t1)
    # Table 6: overall accuracy = the platforms' weighted mean (129 AtCoder, 42 LeetCode).
    for method in ("cot", "textgrad", "moa_para", "sc", "self_moa", "scmoa"):
        a, l = cells[f"t6.{method}.atcoder"].value, cells[f"t6.{method}.leetcode"].value
        assert abs((129 * a + 42 * l) / 171 - cells[f"t6.{method}.overall"].value) <= 0.1, method
    # Figure 9: LCB-Hard climbs +3.5 from k=3 to its k=5 peak.
    assert round(cells["fig9.lcb.k5"].value - cells["fig9.lcb.k3"].value, 1) == 3.5


def test_anomalies_name_the_new_findings():
    text = " ".join(a["anomaly"] for a in load_anomalies())
    assert "0.2–0.6" in text and "1.9" in text and "2.1" in text
    assert "72.2%" in text and "73.2%" in text
    assert "No MMLU-ML cell and no MoA cell" not in text
    assert "MoA (para) GPQA 65.2" in text and "GoA_Mean 92.0" in text
