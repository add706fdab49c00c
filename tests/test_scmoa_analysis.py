"""Analyses: Proposition 1 decomposition, transitions, D_t, error correlation, calibration, sweeps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from concord.papers.scmoa import analysis


def test_flip_decomposition_satisfies_proposition_1():
    vote = [1, 1, 1, 1, 0, 0, 0, 1, 0, 1]
    synth = [1, 1, 0, 1, 1, 1, 0, 1, 0, 1]
    d = analysis.flip_decomposition(vote, synth)
    assert (d["beneficial"], d["harmful"]) == (2, 1)
    assert d["P_c"] == pytest.approx(0.6) and d["F_s"] == pytest.approx(5 / 6) and d["R_s"] == pytest.approx(0.5)
    assert d["advantage"] == pytest.approx(d["P_w"] * d["R_s"] - d["P_c"] * (1 - d["F_s"]))
    assert d["recovery"] == pytest.approx(d["P_w"] * d["R_s"])
    assert d["corruption"] == pytest.approx(d["P_c"] * (1 - d["F_s"]))
    assert d["flip_ratio"] == 2.0 and 0 < d["mcnemar_p"] <= 1


def test_transition_matrix_counts_and_validates():
    t = analysis.transition_matrix([3, 3, 5, 2], [4, 3, 5, 5], n=5)
    assert t.loc[3, 4] == 1 and t.loc[3, 3] == 1 and t.loc[5, 5] == 1 and t.loc[2, 5] == 1
    assert int(t.to_numpy().sum()) == 4
    with pytest.raises(ValueError, match="0..5"):
        analysis.transition_matrix([6], [1], n=5)


def test_trace_diversity_tfidf():
    same = analysis.trace_diversity(["add the rows then count apples"] * 3)
    diff = analysis.trace_diversity(["add the rows then count apples", "multiply columns by height",
                                     "enumerate every apple individually"])
    assert same == pytest.approx(0.0, abs=1e-9) and 0.5 < diff <= 1.0
    assert analysis.trace_diversity(["Answer: 42", "Answer: 42"]) == pytest.approx(0.0, abs=1e-9)
    assert math.isnan(analysis.trace_diversity(["only one"]))
    assert math.isnan(analysis.trace_diversity(["the", "and then"]))  # no content word at all


def test_diversity_by_outcome_welch():
    div = [0.8, 0.7, 0.9, 0.2, 0.3, 0.25, float("nan"), 0.0]
    out = ["beneficial"] * 3 + ["no flip"] * 3 + ["harmful", "no flip"]
    table, test = analysis.diversity_by_outcome(div, out)
    assert table.set_index("outcome").loc["beneficial", "count"] == 3
    assert table.set_index("outcome").loc["harmful", "count"] == 0
    assert test["t"] > 0 and test["p"] < 0.01


def test_error_correlation():
    rng = np.random.default_rng(0)
    base = rng.random(200) < 0.4
    errors = np.stack([base, base, base ^ (rng.random(200) < 0.05)], axis=1)
    res = analysis.error_correlation(errors, n_resamples=200, seed=1)
    assert 0.8 < res["rho_bar"] <= 1 and res["ci_lo"] <= res["rho_bar"] <= res["ci_hi"]
    assert res == analysis.error_correlation(errors, n_resamples=200, seed=1)
    indep = np.stack([rng.random(400) < 0.5 for _ in range(3)], axis=1)
    assert abs(analysis.mean_error_correlation(indep)) < 0.15


def test_reliability_ece_and_selective_auroc():
    conf = [1.0, 1.0, 1.0, 1.0, 0.6, 0.6, 0.6, 0.6, 0.6]
    correct = [1, 1, 1, 1, 1, 1, 1, 0, 0]
    table, ece = analysis.reliability(conf, correct)
    assert list(table["n"]) == [5, 4]
    assert ece == pytest.approx(0.0)  # each consensus level matches its accuracy exactly
    sel, auroc = analysis.selective_prediction(conf, correct)
    assert sel.iloc[0]["coverage"] == pytest.approx(4 / 9) and sel.iloc[0]["accuracy"] == 1.0
    assert auroc == pytest.approx(0.7857, abs=1e-3)
    _, nan_auroc = analysis.selective_prediction([0.5, 1.0], [1, 1])
    assert math.isnan(nan_auroc)


def _records():
    rows = []
    for i, (c, v, s) in enumerate([(1.0, 1, 1), (0.4, 0, 1), (0.6, 1, 0), (0.8, 0, 0)]):
        rows.append({"id": str(i), "record": {"clusters_pre": {"consensus": c}},
                     "methods": {"scmoa": {"correct": bool(s), "calls": 11}, "vote_pre": {"correct": bool(v), "calls": 6},
                                 "sc": {"correct": bool(v), "calls": 10}},
                     "k_sweep": {"1": {"correct": bool(v)}, "2": {"correct": bool(s)}}})
    return rows


def test_accuracy_significance_gating_and_k_sweeps():
    recs = _records()
    acc = analysis.accuracy_table(recs, ["scmoa", "sc"]).set_index("method")
    assert acc.loc["scmoa", "accuracy"] == 0.5 and acc.loc["scmoa", "calls"] == 11
    assert acc.loc["scmoa", "ci_lo"] < 0.5 < acc.loc["scmoa", "ci_hi"]
    sig = analysis.significance_table(recs, "scmoa", ["sc"], n_resamples=500).iloc[0]
    assert (sig["wins"], sig["losses"]) == (1, 1) and sig["delta"] == 0.0 and sig["mcnemar_p"] == 1.0
    gate = analysis.gating_sweep(recs, analysis.method_correct(recs, "vote_pre"), thresholds=[0.5, math.inf])
    # theta=0.5: problems with C>=0.5 exit with the vote (1, 1, 0); the 0.4 one aggregates (1).
    assert list(gate["accuracy"]) == [0.75, 0.5] and list(gate["exit_rate"]) == [0.75, 0.0]
    ks = analysis.k_sweep(recs)
    assert list(ks["k"]) == [1, 2] and list(ks["accuracy"]) == [0.5, 0.5]
    with pytest.raises(KeyError, match="moa"):
        analysis.accuracy_table(recs, ["moa"])


def test_flip_ratio_is_undefined_without_flips_and_infinite_without_harmful_ones():
    assert math.isnan(analysis.flip_decomposition([1, 0, 1], [1, 0, 1])["flip_ratio"])
    assert analysis.flip_decomposition([0, 0, 1], [1, 0, 1])["flip_ratio"] == math.inf


def test_report_tables_show_percent_na_and_integer_calls(tmp_path):
    import pandas as pd

    from concord.papers.scmoa import report

    frame = pd.DataFrame({"method": ["scmoa", "cot"], "accuracy": [0.5, 0.25], "calls": [11.0, 1.0],
                          "flip_ratio": [math.nan, math.inf]})
    csv, md, tex = report.write_table(frame, tmp_path / "t", "caption", percent=("accuracy",))
    written = pd.read_csv(csv)
    assert list(written["accuracy_pct"]) == [50.0, 25.0] and "accuracy" not in written.columns
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.read_text().splitlines()[4:6]]
    assert rows == [["scmoa", "50.0", "11", "n/a"], ["cot", "25.0", "1", "inf"]]
    assert "nan" not in tex.read_text()
    assert report.na(math.nan) == "n/a" and report.na(0.51234) == "0.512"


def test_diversity_table_and_plot_rows_agree():
    outcomes = ["beneficial", "no flip", "no flip", "harmful"]
    rows = analysis.diversity_rows([0.2, 0.0, math.nan, 0.4], outcomes)
    table, _ = analysis.diversity_by_outcome([0.2, 0.0, math.nan, 0.4], outcomes)
    assert list(rows["D_t"]) == [0.2, 0.4]
    assert dict(zip(table["outcome"], table["count"])) == {"beneficial": 1, "harmful": 1, "no flip": 0}


def test_section3_contingency_reproduces_the_papers_mcnemar_statistics():
    """Tables 29-30: 12 vs 5 flips give chi2 = 2.88, p = 0.090; 16 vs 5 give 5.76, p = 0.016."""
    import numpy as np

    for ben, harm, chi2, p in ((12, 5, 2.88, 0.090), (16, 5, 5.76, 0.016)):
        vote = np.array([False] * ben + [True] * harm + [True] * 100 + [False] * 20)
        synth = np.array([True] * ben + [False] * harm + [True] * 100 + [False] * 20)
        table, s = analysis.contingency(vote, synth)
        assert (s["beneficial"], s["harmful"]) == (ben, harm)
        assert s["mcnemar_chi2"] == pytest.approx(chi2, abs=0.005) and s["mcnemar_p"] == pytest.approx(p, abs=0.0015)
        assert table.iloc[1, 1] == ben and table.iloc[0, 2] == harm and table.iloc[2, 3] == vote.size


def test_flips_against_majority_vote_applies_holm_over_the_conditions():
    import numpy as np

    mv = np.array([True, False, False, True, False, True, False, False])
    conds = {"a": [True, True, True, True, True, True, True, True], "b": list(mv), "c": [False] * 8}
    frame = analysis.flips_against(mv, conds, {"a": "A"})
    assert list(frame["condition"]) == ["Majority vote", "A", "b", "c"]
    assert frame.loc[1, "beneficial"] == 5 and frame.loc[1, "harmful"] == 0 and frame.loc[2, "p"] == 1.0
    raw = frame.loc[1:, "p"].to_numpy()
    order = np.argsort(raw)
    holm = frame.loc[1:, "p_holm"].to_numpy()
    assert holm[order[0]] == pytest.approx(min(1.0, 3 * raw[order[0]]))  # the smallest p times m = 3
    assert all(h >= r for h, r in zip(holm, raw))


def test_each_table_takes_the_mcnemar_its_printed_numbers_show():
    import numpy as np

    # Table 37's 10 vs 23 flips: exact binomial 0.035 (chi-square would give 0.024).
    mv = np.array([True] * 23 + [False] * 10 + [True] * 5)
    cond = np.array([False] * 23 + [True] * 10 + [True] * 5)
    frame = analysis.flips_against(mv, {"cot": cond})
    assert round(frame.loc[1, "p"], 3) == 0.035 and frame.loc[1, "p_method"].startswith("McNemar, exact")
    # Table 27's 11 vs 7 flips: continuity-corrected chi-square 0.480.
    records = [{"methods": {"a": {"correct": a}, "b": {"correct": b}}}
               for a, b in [(True, False)] * 11 + [(False, True)] * 7 + [(True, True)] * 3]
    table = analysis.compared_to(records, "b", ["a"])
    assert round(table.loc[1, "mcnemar_p"], 3) == 0.480 and "continuity correction" in table.loc[1, "p_method"]
    assert analysis.TABLE_P_METHOD["table29"] == "chi2" and analysis.mcnemar_chi2(12, 5)[0] == pytest.approx(2.882, abs=1e-3)
