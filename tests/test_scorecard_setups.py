"""Every paper-scale SC-MoA setup is judged: synthetic result trees laid out exactly as
config/paper_scmoa.yaml and rules/scmoa/*.smk produce them.

The trees are written by the SC-MoA package's own table writers (``report.write_table`` with the
columns ``analysis`` computes) from synthetic per-question outcomes whose accuracies are the
printed ones; the cell directories are the rules' (``{benchmark key}`` for the main setup,
``{benchmark key}@{setup}`` otherwise) and the file list is what ``scmoa_targets()`` requests. Per
setup the test asserts which printed cells get a verdict (within or outside) and that the
accuracies reproduced exactly are "within".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from concord.papers.scmoa import analysis, report
from concord.scorecard import build, load_printed, scorecard_inputs
from concord.scorecard.readers import scmoa_cell

REPO = Path(__file__).resolve().parents[1]
MODEL = "gpt-oss-120b"
CONFIG = yaml.safe_load((REPO / "config/paper_scmoa.yaml").read_text())
PRINTED = load_printed("scmoa")


def _cells(setup: str) -> list[tuple[str, str]]:
    """(cell directory, benchmark key) of one setup, as rules/scmoa/common.smk's scmoa_cells()."""
    spec = CONFIG["scmoa"]["setups"][setup]
    return [(bench if setup == "main" else f"{bench}@{setup}", bench) for bench in spec["benchmarks"]]


def _settings(setup: str) -> dict:
    _, _, settings = scmoa_cell(CONFIG, f"x@{setup}")
    return settings


def _printed_accuracy(bench: str, method: str, settings: dict) -> float | None:
    """The printed accuracy of a method on a benchmark in this setup's N, k (baselines: any)."""
    for cell in PRINTED:
        if cell.measure == f"accuracy:{MODEL}:{bench}:{method}":
            n, k = cell.setting.get("N"), cell.setting.get("k")
            if n is None or (n == str(settings["n"]) and k == str(settings["k"])):
                return cell.value
    return None


def _printed_value(measure: str, default: float) -> float:
    return next((c.value for c in PRINTED if c.measure == measure), default)


def _vector(n: int, percent: float, offset: int = 0) -> np.ndarray:
    k = int(round(percent / 100 * n))
    out = np.zeros(n, dtype=bool)
    out[(np.arange(k) + offset) % n] = True
    return out


def _methods(settings: dict) -> list[str]:
    methods = []
    for m in settings.get("methods") or []:
        if m == "sc_temp":
            methods += [f"sc_t{t:g}" for t in settings.get("sc_temperatures") or []]
        else:
            methods.append(m)
    gated = [f"gated_{t:g}" for t in settings.get("gate_thresholds") or []]
    return ["scmoa", *methods, "vote_pre", "vote_post", *gated]


def _write_cell(analysis_dir: Path, bench_key: str, setup: str) -> None:
    bench, _, settings = scmoa_cell(CONFIG, bench_key if setup == "main" else f"{bench_key}@{setup}")
    n = int(CONFIG["scmoa"]["benchmarks"][bench_key]["expected_count"])
    methods = _methods(settings)
    correct = {}
    for i, m in enumerate(methods):
        value = _printed_accuracy(bench, m, settings)
        correct[m] = _vector(n, value if value is not None else 50.0 + i, offset=0)
    # The post-refinement vote: SC-MoA's outcomes with Table 31's flips (beneficial: SC-MoA right,
    # vote wrong; harmful: the reverse).
    b = int(_printed_value(f"post_flips:beneficial:{MODEL}:{bench}", 10))
    c = int(_printed_value(f"post_flips:harmful:{MODEL}:{bench}", 2))
    vote = correct["scmoa"].copy()
    right, wrong = np.flatnonzero(vote), np.flatnonzero(~vote)
    vote[right[:b]] = False
    vote[wrong[:c]] = True
    correct["vote_post"] = vote
    ks = [int(k) for k in settings.get("k_sweep") or []]
    records = []
    for q in range(n):
        rec = {"id": q, "methods": {m: {"correct": bool(correct[m][q]), "calls": 1.0} for m in methods}}
        if ks:
            rec["k_sweep"] = {}
            for j, k in enumerate(ks):
                value = _printed_value(f"k_sweep:{MODEL}:{bench}:{k}", 60.0 + j)
                rec["k_sweep"][str(k)] = {"correct": bool(_vector(n, value)[q]), "calls": float(k)}
        records.append(rec)
    out = analysis_dir
    acc = analysis.accuracy_table(records, methods)
    acc.insert(1, "label", [report.label(m) for m in acc["method"]])
    report.write_table(acc, out / "accuracy", "accuracy", percent=("accuracy", "ci_lo", "ci_hi"))
    baselines = [m for m in methods if m != "scmoa"]
    sig = analysis.significance_table(records, "scmoa", baselines, n_resamples=200, seed=0)
    report.write_table(sig, out / "significance", "significance", percent=("delta", "ci_lo", "ci_hi"))
    report.write_table(pd.DataFrame([analysis.flip_decomposition(vote, correct["scmoa"])]), out / "flips", "flips")
    report.write_table(analysis.k_sweep(records), out / "k_sweep", "k sweep", percent=("accuracy", "ci_lo", "ci_hi"))
    report.write_table(analysis.k_sweep_bootstrap(records, n_resamples=200, seed=0), out / report.KSWEEP_TABLE, "h1")
    fired = _vector(n, _printed_value(f"override_rate_pct:{MODEL}:{bench}", 0.0))
    report.write_table(pd.DataFrame([{"n": n, "override_fires": int(fired.sum()), "override_rate_pct": 100 * fired.mean()}]),
                       out / "table21_override", "override")
    rng = np.random.default_rng(0)
    errors = rng.random((n, int(settings["n"]))) < 0.3
    frame = pd.DataFrame([{"condition": "paraphrase-diverse proposals (SPUQ)", **analysis.error_correlation(errors, n_resamples=50)},
                          {"condition": "i.i.d. samples (one generic prompt)", **analysis.error_correlation(errors, n_resamples=50)}])
    report.write_table(frame, out / "error_correlation", "rho")
    div_table, div_test = analysis.diversity_by_outcome(list(rng.random(n)), [analysis.flip_outcome(v, s) for v, s in
                                                                              zip(vote, correct["scmoa"])])
    (out / "summary.json").write_text(json.dumps({"n_questions": n, "diversity_test": div_test}))
    extra = report.extra_tables(settings)
    if report.SECTION3_TABLE in extra:
        pre_b = int(_printed_value(f"pre_flips:beneficial:{MODEL}:{bench}", 3))
        pre_c = int(_printed_value(f"pre_flips:harmful:{MODEL}:{bench}", 1))
        vote_pre = correct["scmoa"].copy()
        vote_pre[np.flatnonzero(vote_pre)[:pre_b]] = False
        vote_pre[np.flatnonzero(~correct["scmoa"])[:pre_c]] = True
        table, _ = analysis.contingency(vote_pre, correct["scmoa"])
        report.write_table(table, out / report.SECTION3_TABLE, "section 3")
    if report.TABLE37 in extra:
        from concord.papers.scmoa.views import INFO_LADDER

        conditions = {v: _vector(n, _printed_value(f"ladder:{MODEL}:{bench}:{v}:accuracy", 70.0), offset=3 * i)
                      for i, (v, _, _) in enumerate(INFO_LADDER)}
        # Table 37's majority vote as printed (69.7%): a greedy reproduction must give its digits.
        mv = _vector(n, _printed_value(f"ladder:{MODEL}:{bench}:majority_vote:accuracy", 70.0), offset=1)
        ladder = analysis.flips_against(mv, conditions, {v: lab for v, lab, _ in INFO_LADDER})
        ladder.insert(1, "group", [""] + [g for _, _, g in INFO_LADDER])
        report.write_table(ladder, out / report.TABLE37, "ladder")


def _tree(tmp_path: Path, setup: str) -> tuple[Path, list[str]]:
    root = tmp_path / "results"
    targets = []
    for cell, bench_key in _cells(setup):
        out = root / "scmoa" / MODEL / cell / "analysis"
        out.mkdir(parents=True)
        _write_cell(out, bench_key, setup)
        # What scmoa_targets() requests for the cell: every table (csv/md/tex) and the summary.
        tables = [*report.TABLES, *report.extra_tables(_settings(setup))]
        targets += [f"{out}/{t}.{ext}" for t in tables for ext in ("csv", "md", "tex")] + [f"{out}/summary.json"]
    files = [f for f in scorecard_inputs(targets, root) if Path(f).is_file()]
    return root, files


def _verdicts(tmp_path: Path, setup: str) -> dict[str, str]:
    root, files = _tree(tmp_path, setup)
    out = tmp_path / "scorecard"
    build(files, root, {"run_name": setup, **CONFIG}, out)
    frame = pd.read_csv(out / "scmoa.csv", keep_default_na=False)
    return dict(zip(frame["id"], frame["verdict"]))


def _judged(verdicts: dict[str, str]) -> set[str]:
    return {k for k, v in verdicts.items() if v in ("within", "outside")}


TABLE1_MAIN = {"t1.bbh3.scmoa", "t1.bbh3.sc", "t1.bbh3.textgrad", "t1.bbh3.goa", "t1.gpqa.scmoa", "t1.gpqa.sc",
               "t1.gpqa.textgrad", "t1.gpqa.self_moa", "t1.gpqa.cot", "t1.gpqa.goa", "t1.gpqa.moa_para",
               "t1.aime.scmoa", "t1.aime.self_moa", "t1.aime.sc", "t1.lcb.scmoa", "t1.lcb.sc", "t1.lcb.textgrad",
               "t1.lcb.cot", "t1.lcb.moa_para", "t1.lcb.self_moa", "t1.mmlu.goa", "t1.mmlu.scmoa"}


def test_main_setup_judges_table1_table13_and_the_main_text(tmp_path):
    verdicts = _verdicts(tmp_path, "main")
    judged = _judged(verdicts)
    # Every Table 1 cell the paper prints, BBH-3 (config key bbh3) included.
    assert TABLE1_MAIN <= judged, TABLE1_MAIN - judged
    assert {verdicts[k] for k in TABLE1_MAIN} == {"within"}, {k: verdicts[k] for k in TABLE1_MAIN if verdicts[k] != "within"}
    # Table 13 over its 12 comparisons (BBH-3, GPQA, LCB-Hard x MoA(para), Self-MoA, SC, TextGrad).
    assert {"t13.n_significant", "t13.n_ci_positive", "t13.bbh3.textgrad", "t13.bbh3.moa", "t13.bbh3.self_moa",
            "t13.bbh3.sc"} <= judged
    # Table 31's N=5, k=2 rows; the SC at T=0.7 and the override rate of §5; Appendix Q's temperatures.
    assert {"t31.bbh.beneficial", "t31.bbh.harmful", "t31.aime.harmful", "t31.bbh.p", "t31.aime.p",
            "t31.qa.beneficial", "t31.qa.harmful"} <= judged
    assert {"s5.override_rate.lcb", "appQ.sc_t0.7", "appQ.sc_t0.3", "appQ.sc_t1"} <= judged
    assert verdicts["s5.override_rate.lcb"] == verdicts["appQ.sc_t0.7"] == "within"
    # Baselines of Tables 5 and 6 do not depend on SC-MoA's N, k: the main run judges them.
    assert {"t5.cot", "t5.sc", "t5.self_moa", "t5.textgrad", "t5.moa_para", "t6.cot.overall", "t6.sc.overall"} <= judged
    # SC-MoA's own Table 5/6 numbers (N=4, k=5) and the mechanistic Table 31 rows are another setting.
    assert verdicts["t5.scmoa"] == verdicts["t6.scmoa.overall"] == verdicts["t31.gpqa.harmful"] == "different setting"
    # D_t tests and F_s at N=5, k=2 (BBH, AIME), rho-bar.
    assert {"t32.bbh.t", "t32.bbh.p", "t32.aime.t", "appT.F_s.gpqa_diamond", "appT.F_s.bbh",
            "s2.rho_bar.gpqa_diamond.perturbation", "s2.rho_bar.lcb_hard.iid"} <= judged
    # What the main run cannot produce: Section 3, Table 37, Appendix H.1, per-platform LCB.
    assert verdicts["t29.beneficial"] == "not run" and verdicts["t37.full.accuracy"] == "not run"
    assert verdicts["fig9.gpqa.k5"] == "not run" and verdicts["t6.sc.atcoder"] == "not run"


def test_mechanistic_setup_judges_tables_5_6_31_and_figure_3(tmp_path):
    verdicts = _verdicts(tmp_path, "mechanistic")
    judged = _judged(verdicts)
    expected = {"t5.scmoa", "t5.scmoa_k1", "t5.cot", "t5.sc", "t5.textgrad", "t5.moa_para", "t5.self_moa",
                "t6.scmoa.overall", "t6.scmoa_gated.overall", "t6.cot.overall", "t6.textgrad.overall",
                "t6.moa_para.overall", "t6.sc.overall", "t6.self_moa.overall",
                "fig3.gpqa.scmoa_k1", "fig3.lcb.scmoa_k1", "fig3.gpqa.sc", "fig3.lcb.sc",
                "t31.gpqa.harmful", "t31.lcb.harmful", "t31.gpqa_diamond.p", "t31.lcb_hard.p",
                "t32.gpqa_diamond.t", "t32.lcb_hard.t"}
    assert expected <= judged, expected - judged
    for key in ("t5.scmoa", "t5.scmoa_k1", "t6.scmoa.overall", "t6.scmoa_gated.overall", "fig3.lcb.scmoa_k1"):
        assert verdicts[key] == "within", key
    # Table 1's SC-MoA cells are N=5, k=2: another setting here, named as such.
    assert verdicts["t1.gpqa.scmoa"] == "different setting" and verdicts["t13.n_significant"] == "different setting"


def test_paradox_setup_judges_tables_29_30_and_37(tmp_path):
    verdicts = _verdicts(tmp_path, "paradox")
    judged = _judged(verdicts)
    section3 = {f"{t}.{q}" for t in ("t29", "t30") for q in ("beneficial", "harmful", "chi2", "p", "advantage", "ratio")}
    assert section3 <= judged and {verdicts[k] for k in section3} == {"within"}, \
        {k: verdicts[k] for k in section3 if verdicts[k] != "within"}
    ladder = {k for k in verdicts if k.startswith("t37.")}
    assert len(ladder) == 1 + 8 * 5 and ladder <= judged, ladder - judged
    accuracies = {k for k in ladder if k.endswith(".accuracy")}
    assert {verdicts[k] for k in accuracies} == {"within"}


def test_h1_ksweep_setup_judges_figure_9(tmp_path):
    verdicts = _verdicts(tmp_path, "h1_ksweep")
    figure9 = {k for k in verdicts if k.startswith("fig9.")}
    assert len(figure9) == 9 and figure9 <= _judged(verdicts), figure9 - _judged(verdicts)
    assert {verdicts[k] for k in figure9 if ".k" in k} == {"within"}


def test_full_bbh_setup_is_produced_but_printed_nowhere(tmp_path):
    root, files = _tree(tmp_path, "full_bbh")
    out = tmp_path / "scorecard"
    build(files, root, {"run_name": "full_bbh", **CONFIG}, out)
    assert not _judged(dict(zip(*pd.read_csv(out / "scmoa.csv", keep_default_na=False)[["id", "verdict"]].T.values)))
    md = (out / "scmoa.md").read_text()
    assert f"accuracy:{MODEL}:bbh_full:scmoa" in md  # listed among the numbers the paper does not print


@pytest.mark.parametrize("setup", list(CONFIG["scmoa"]["setups"]))
def test_every_configured_setup_is_covered(setup):
    assert setup in {"main", "mechanistic", "paradox", "h1_ksweep", "full_bbh"}, \
        f"config/paper_scmoa.yaml has a new setup {setup!r}: add a test of the cells it should judge"


def test_pooled_counts_over_fewer_questions_are_another_setting_not_a_miss():
    """Table 13's and Table 31's pooled counts carry the questions they cover (the sum over their
    benchmarks): a run of one question per benchmark, as the rehearsal's, is named "different
    setting" beside them, while the paper's sizes are judged."""
    from concord.scorecard.compare import compare
    from concord.scorecard.readers import Reproduced
    from concord.scorecard.readers.scmoa import scmoa_aggregates

    def records(sizes: dict[str, int]) -> list[Reproduced]:
        out = []
        for bench, n in sizes.items():
            setting = {"n_questions": str(n), "temperature": "0", "N": "5", "k": "2"}
            for q, value in (("beneficial", 3.0), ("harmful", 0.0)):
                out.append(Reproduced("scmoa", f"post_flips:{q}:gpt-oss-120b:{bench}", value, f"{bench}.csv", "",
                                      dict(setting), group="main"))
            for base in ("moa_para", "self_moa", "sc", "textgrad"):
                out.append(Reproduced("scmoa", f"mcnemar_p:gpt-oss-120b:{bench}:{base}", 0.01, f"{bench}.csv", "",
                                      dict(setting), group="main"))
        return out

    cells = [c for c in load_printed("scmoa") if c.id in ("t31.qa.harmful", "t13.n_significant")]
    paper = {"aime": 90, "bbh": 296, "gpqa_diamond": 198, "lcb_hard": 171}
    for sizes, expected in ((paper, {"within", "outside"}), ({b: 1 for b in paper}, {"different setting"})):
        recs = records(sizes)
        rows, _ = compare(cells, recs + scmoa_aggregates(recs, {}))
        assert {row.verdict for row in rows} <= expected, [(r.cell.id, r.verdict, r.setting_differences) for r in rows]
        assert len(rows) == 2
