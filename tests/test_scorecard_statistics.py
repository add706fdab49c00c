"""The papers' statistics recomputed from their own printed inputs (concord.scorecard.statistics).

Every row must reproduce the printed digits or name the paper's own inconsistency; the quotes must
stand in the seed text; the methods must be the ones that reproduce the printed numbers (the
exact McNemar of Table 37 is not the chi-square of Tables 29-30, nor Table 27's continuity-corrected
one).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from concord import stats
from concord.scorecard import build, output_names
from concord.scorecard.statistics import (METHODS, Statistic, all_statistics, core_rows, evaluate, load_statistics,
                                          parse_inputs, statistics_frame, statistics_markdown)

REPO = Path(__file__).resolve().parents[1]
SEEDS = Path(os.environ.get("CONCORD_SHARED", REPO.parent / "shared")) / "seeds"


@pytest.fixture(scope="module")
def rows():
    return all_statistics()


def test_every_row_reproduces_or_names_the_papers_anomaly(rows):
    assert len(rows) >= 250
    failing = [r for r in rows if r.verdict != "reproduces" and not r.anomaly]
    assert not failing, [(r.id, r.printed, r.recomputed) for r in failing]
    assert sum(r.verdict == "reproduces" for r in rows) >= 280


def test_the_quotes_stand_in_the_seeds():
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is absent (set CONCORD_SHARED to the shared folder to run this)")
    (path,) = SEEDS.glob("004_*.txt")
    # The SC-MoA seed escapes punctuation and LaTeX with backslashes; quotes are the text without them.
    seed = path.read_text(encoding="utf-8").replace("\\", "")
    missing = [r.id for r in load_statistics() if r.quote not in seed]
    assert not missing


def test_table_37_is_the_uncorrected_exact_mcnemar_not_the_holm_its_caption_names(rows):
    by_id = {r.id: r for r in rows}
    cot = by_id["t37.q_only_cot.p"]
    assert cot.verdict == "reproduces" and round(cot.recomputed, 3) == 0.035
    # The caption's Holm correction does not give the printed number; the row says so.
    assert cot.stated_value is not None and cot.stated_value > 0.1 and "Holm" in cot.anomaly
    # Chi-square (the Tables 29-30 method) would not reproduce Table 37.
    assert round(stats.mcnemar(10, 23, method="chi2"), 3) != 0.035
    evolution = by_id["t37.traces_no_evolution.p"]
    assert evolution.verdict == "does not reproduce" and "double rounding" in evolution.anomaly


def test_each_table_uses_its_own_mcnemar():
    assert round(stats.mcnemar(12, 5, method="chi2"), 3) == 0.090  # Table 29
    assert round(stats.mcnemar_statistic(16, 5), 2) == 5.76  # Table 30
    assert round(stats.mcnemar(11, 7, method="chi2_cc"), 3) == 0.480  # Table 27
    assert round(stats.mcnemar(11, 7, method="exact"), 3) == 0.481
    assert round(stats.mcnemar(11, 7, method="chi2"), 3) == 0.346
    assert stats.mcnemar(4, 3, method="chi2_cc") == 1.0 and round(stats.mcnemar(4, 3), 3) == 0.705  # Table 34
    with pytest.raises(ValueError, match="unknown McNemar method"):
        stats.mcnemar(1, 2, method="midp")


def test_core_rows_follow_the_printed_cells(rows):
    core = [r for r in rows if r.paper == "core"]
    assert sum(r.method == "difference" for r in core) >= 168 + 10
    by_id = {r.id: r for r in core}
    assert by_id["core.fig5a.sign_test_p"].inputs == "wins=13;losses=1"
    assert by_id["core.fig5a.wilcoxon_p"].verdict == "reproduces"
    # The text's +25.0 against Table 1's own mean of its Δ CoRE cells (+21.6).
    assert by_id["core.s5.table1_mean_delta_core"].verdict == "does not reproduce"
    assert len(core_rows()) == len(core)


def test_a_wrong_printed_value_does_not_reproduce():
    ok = evaluate(Statistic("x", "scmoa", "T", "r", "p", "mcnemar_exact", "b=10;c=23", "0.035"))
    bad = evaluate(Statistic("x", "scmoa", "T", "r", "p", "mcnemar_exact", "b=10;c=23", "0.036"))
    assert ok.verdict == "reproduces" and bad.verdict == "does not reproduce"
    # Rounded inputs widen the tolerance by what their rounding can move the result, no more.
    diff = evaluate(Statistic("x", "scmoa", "T", "r", "d", "difference", "a=72.2;b=55.6", "+16.7"))
    assert diff.verdict == "reproduces" and diff.tolerance == pytest.approx(0.05 + math.sqrt(2) * 0.05)
    far = evaluate(Statistic("x", "scmoa", "T", "r", "d", "difference", "a=72.2;b=55.6", "+16.8"))
    assert far.verdict == "does not reproduce"
    bound = evaluate(Statistic("x", "scmoa", "T", "r", "p", "mcnemar_exact", "b=10;c=38", "<0.001"))
    assert bound.verdict == "reproduces"


def test_bad_rows_get_a_clear_error():
    with pytest.raises(ValueError, match="unknown method"):
        evaluate(Statistic("x", "scmoa", "T", "r", "p", "guess", "b=1;c=2", "0.5"))
    with pytest.raises(ValueError, match="needs input"):
        evaluate(Statistic("x", "scmoa", "T", "r", "p", "mcnemar_exact", "b=1", "0.5"))
    with pytest.raises(ValueError, match="key=value"):
        parse_inputs("b=1;c")
    with pytest.raises(ValueError, match="not a number"):
        evaluate(Statistic("x", "scmoa", "T", "r", "p", "mcnemar_exact", "b=1;c=2", "n/a"))


def test_every_method_is_named(rows):
    frame = statistics_frame(rows)
    assert set(frame["method"]) <= {m.label for m in METHODS.values()}
    assert list(frame.columns[:9]) == ["paper", "table", "row", "statistic", "inputs", "method", "printed",
                                       "recomputed", "tolerance"]
    text = statistics_markdown(rows)
    assert "## Anomalies" in text and "Table 37" in text


def test_the_scorecard_writes_the_statistics(tmp_path):
    written = build([], tmp_path, {}, tmp_path / "out")
    assert {"statistics.csv", "statistics.md"} <= {p.name for p in written}
    assert output_names()[-2:] == ["statistics.csv", "statistics.md"]
    csv_text = (tmp_path / "out" / "statistics.csv").read_text()
    assert "Table 37" in csv_text and "McNemar, exact binomial (two-sided)" in csv_text
