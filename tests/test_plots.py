"""Figures 4, 5a, 5b: the recovery.json schema, the numbers plotted, the files written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from concord import io, stats
from concord.papers.core import figures as plots
from concord.papers.core import tables

CONFIG = {
    "models": {"m1": {"family": "Math"}, "m2": {"family": "Math"}, "m3": {"family": "Instruct"}},
    "benchmarks": {"amc": {}, "math_l4": {}, "math_l5": {}},
    "arms": ["majority", "ec", "cisc", "core"],
    "seeds": [0, 1],
    "report": {"tables": {"table1": ["m1", "m2"], "table3": ["m3"]}, "labels": {"math_l4": "MATH-L4"}},
}

GOOD = {
    "outnumbering_ratio": 3.0,
    "coherence_advantage": 1.2,
    "confidence_gap_nats": 0.3,
    "tau": 0.25,
    "recovered": 7,
    "n_questions": 10,
    "provenance": {"step": "analysis"},
}


# ------------------------------------------------------------------ recovery.json schema


def test_recovery_cell_reads_the_documented_schema():
    cell = plots.RecoveryCell.from_dict(GOOD, "m1", "amc")
    assert cell.recovered_fraction == 0.7
    assert cell.confidence_factor == pytest.approx(math.exp(-1.2))
    assert cell.vote_bar == 3.0
    assert cell.confidence_bar == pytest.approx(3.0 * math.exp(-1.2))
    assert plots.RecoveryCell.from_dict({**GOOD, "recovered": True}, "m1", "amc").recovered_fraction == 1.0


def test_paper_numbers_for_the_bars():
    # Section 3.3: the 8-vs-24 bar (m-1)/(n*-1) is ~3.3 c_w; section 6: confidence lowers it to ~0.29 r.
    assert (24 - 1) / (8 - 1) == pytest.approx(3.29, abs=0.01)
    cell = plots.RecoveryCell.from_dict({**GOOD, "outnumbering_ratio": 3.0, "confidence_gap_nats": 0.31}, "m", "b")
    assert cell.confidence_factor == pytest.approx(0.29, abs=0.005)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tau": None}, "'tau' must be a finite number"),
        ({"tau": 0.0}, "'tau' must be > 0"),
        ({"outnumbering_ratio": -1.0}, "'outnumbering_ratio' must be > 0"),
        ({"coherence_advantage": float("nan")}, "finite"),
        ({"outnumbering_ratio": None}, "null although n_questions = 10"),
        ({"recovered": 11}, r"outside \[0, n_questions=10\]"),
        ({"recovered": 0.5}, "bool or an integer"),
        ({"n_questions": -1}, "integer >= 0"),
        ({"n_questions": True}, "integer >= 0"),
    ],
)
def test_recovery_cell_rejects_bad_values(change, message):
    with pytest.raises(ValueError, match=message):
        plots.RecoveryCell.from_dict({**GOOD, **change}, "m1", "amc", source="x/recovery.json")


def test_recovery_cell_missing_keys_and_empty_cells(tmp_path):
    with pytest.raises(ValueError, match=r"missing required key\(s\) \['tau'\]"):
        plots.RecoveryCell.from_dict({k: v for k, v in GOOD.items() if k != "tau"}, "m", "b")
    empty = {**GOOD, "n_questions": 0, "recovered": 0, "outnumbering_ratio": None,
             "coherence_advantage": None, "confidence_gap_nats": None}
    cell = plots.RecoveryCell.from_dict(empty, "m", "b")
    assert not cell.measured and math.isnan(cell.recovered_fraction)
    path = plots.recovery_path(tmp_path / "results", "m2", "math_l5")
    io.write_json(path, GOOD)
    loaded = plots.load_recovery(path)
    assert (loaded.model, loaded.benchmark) == ("m2", "math_l5")
    with pytest.raises(FileNotFoundError, match="recovery statistics missing"):
        plots.load_recovery(plots.recovery_path(tmp_path / "results", "m9", "amc"))


# ------------------------------------------------------------------ Figure 4


def _cells():
    rows = [(1.5, 2.0, 0.3, 9, 10), (3.0, 1.2, 0.3, 6, 10), (4.0, 0.5, 0.1, 0, 30), (2.0, None, None, 0, 0)]
    out = []
    for i, (r, adv, gap, rec, n) in enumerate(rows):
        out.append(plots.RecoveryCell(model=f"m{i}", benchmark="amc", outnumbering_ratio=r if n else None,
                                      coherence_advantage=adv, confidence_gap_nats=gap, tau=0.25,
                                      recovered=rec, n_questions=n))
    return out


def test_pooled_confidence_factor_is_question_weighted_geometric_mean():
    expected = math.exp((10 * -1.2 + 10 * -1.2 + 30 * -0.4) / 50)
    assert plots.pooled_confidence_factor(_cells()) == pytest.approx(expected)
    with pytest.raises(ValueError, match="nothing to show"):
        plots.pooled_confidence_factor(_cells()[3:])


def test_figure4_draws_both_bars_and_every_measured_cell_marked_win_or_loss():
    cells = _cells()
    outcomes = {("m0", "amc"): 2.5, ("m1", "amc"): -0.4, ("m2", "amc"): 0.0}
    fig = plots.figure4(cells, outcomes)
    ax = fig.axes[0]
    vote, conf = ax.lines[0], ax.lines[1]
    x = np.asarray(vote.get_xdata())
    assert np.allclose(vote.get_ydata(), x)
    assert vote.get_color().lower() == plots.VOTE_BAR_COLOR.lower()
    assert np.allclose(conf.get_ydata(), plots.pooled_confidence_factor(cells) * x)
    assert conf.get_color().lower() == plots.CONFIDENCE_BAR_COLOR.lower()
    # One point per measured cell at its measured (r, c*/c_w), one marker set per outcome.
    by_label = {c.get_label(): np.asarray(c.get_offsets()) for c in ax.collections}
    assert np.allclose(by_label["win: CoRE > Majority"], [[1.5, 2.0]])
    assert np.allclose(by_label["loss: CoRE < Majority"], [[3.0, 1.2]])
    assert np.allclose(by_label["tie"], [[4.0, 0.5]])
    # Each cell's own confidence bar: a tick from r (vote bar) down to r e^(-delta/tau).
    ticks = [ln for ln in ax.lines[2:] if len(ln.get_xdata()) == 2]
    assert [tuple(np.round(t.get_ydata(), 6)) for t in ticks][0] == (1.5, round(cells[0].confidence_bar, 6))
    assert "1 without contested questions" in ax.get_title()
    frame = plots.recovery_frame(cells, outcomes)
    assert list(frame["outcome"]) == ["win", "loss", "tie", "not evaluated"]
    assert list(frame["above_confidence_bar"]) == [True, True, False, False]
    assert list(frame["above_vote_bar"]) == [True, False, False, False]
    assert frame["core_minus_majority"].tolist()[:3] == [2.5, -0.4, 0.0]


def test_core_minus_majority_reads_the_table_means():
    rows = [("m", "amc", "majority", s, v) for s, v in ((0, 0.40), (1, 0.50))]
    rows += [("m", "amc", "core", s, v) for s, v in ((0, 0.50), (1, 0.52))]
    rows += [("m", "aime", "majority", 0, 0.1)]  # no CoRE evaluation: no outcome
    frame = pd.DataFrame(rows, columns=["model", "benchmark", "arm", "seed", "pass_at_1"])
    out = plots.core_minus_majority(tables.summarise(frame))
    assert out == {("m", "amc"): pytest.approx(6.0)}


def test_figure4_without_contested_questions_says_so():
    fig = plots.figure4(_cells()[3:])
    ax = fig.axes[0]
    assert len(ax.lines) == 1 and not ax.collections  # only the vote bar, no points
    assert "no cell has contested questions" in ax.texts[0].get_text()
    assert "1 without contested questions" in ax.get_title()


# ------------------------------------------------------------------ Figure 5a


def _summary(core_minus_cisc: list[float]) -> tuple[pd.DataFrame, list[str], list[str]]:
    models = [f"m{i}" for i in range(len(core_minus_cisc) // 2)]
    benches = ["math_l4", "math_l5"]
    rows = []
    for (m, b), d in zip([(m, b) for m in models for b in benches], core_minus_cisc):
        base = 20.0
        for arm, v in {"base": base, "majority": 40.0, "ec": 41.0, "cisc": 42.0, "core": 42.0 + d}.items():
            rows.append({"model": m, "benchmark": b, "arm": arm, "mean": v, "std": 0.0, "n_seeds": 3})
    return pd.DataFrame(rows).set_index(["model", "benchmark", "arm"]), models, benches


def test_core_vs_cisc_reproduces_the_papers_13_of_14():
    diffs = [float(i) for i in range(1, 15)]
    diffs[2] = -3.0  # one loss, the third-smallest magnitude
    summary, models, benches = _summary(diffs)
    cells, result = plots.core_vs_cisc(summary, models, benches)
    assert (result["wins"], result["losses"], result["ties"], result["n_cells"]) == (13, 1, 0, 14)
    assert result["sign_test_p"] == pytest.approx(stats.sign_test(13, 1))
    assert round(result["sign_test_p"], 3) == 0.002 and round(result["wilcoxon_p"], 3) == 0.001
    assert list(cells["delta"]) == pytest.approx(diffs)
    fig = plots.figure5a(cells, result)
    assert "13/14" in fig.axes[0].get_title()
    assert len(fig.axes[0].patches) == 14


def test_core_vs_cisc_errors():
    summary, models, _ = _summary([1.0, 2.0])
    with pytest.raises(ValueError, match="none of the configured"):
        plots.core_vs_cisc(summary, models, [])
    with pytest.raises(ValueError, match="m0/amc"):
        plots.core_vs_cisc(summary, models, ["amc"])


# ------------------------------------------------------------------ Figure 5b


def test_factorial_means_and_interaction():
    summary, models, benches = _summary([1.0, 3.0, 5.0, 7.0])
    frame, effects = plots.factorial(summary, models, benches, n_resamples=500, seed=0)
    got = frame.set_index("arm")["mean_delta"]
    assert got["majority"] == pytest.approx(20.0) and got["ec"] == pytest.approx(21.0)
    assert got["cisc"] == pytest.approx(22.0) and got["core"] == pytest.approx(22.0 + 4.0)
    assert effects["interaction"] == pytest.approx((26.0 - 22.0) - (21.0 - 20.0))
    assert effects["confidence_given_graph"] == pytest.approx(5.0)
    se = frame.set_index("arm")["se"]
    assert se["majority"] == 0.0 and se["core"] > 0
    assert se["core"] == plots.factorial(summary, models, benches, n_resamples=500, seed=0)[0]["se"].iloc[3]
    fig = plots.figure5b(frame, effects)
    assert "+3.0" in fig.axes[0].get_title()
    assert [t.get_text().split("\n")[0] for t in fig.axes[0].texts] == ["Majority", "CISC", "EC", "CoRE"]


# ------------------------------------------------------------------ config-driven files


def _write_results(root: Path) -> None:
    rng = np.random.default_rng(3)
    for m in CONFIG["models"]:
        for b in CONFIG["benchmarks"]:
            io.write_json(plots.recovery_path(root, m, b), {**GOOD, "outnumbering_ratio": float(1 + 3 * rng.random())})
            for arm in tables.ARMS:
                for s in CONFIG["seeds"]:
                    io.write_json(tables.eval_path(root, m, b, arm, s), {"pass_at_1": float(rng.random())})


def test_figure_inputs_are_exactly_what_each_figure_reads(tmp_path):
    r = tmp_path / "results"
    f5a = plots.figure_inputs(CONFIG, "figure5a", r)
    assert len(f5a) == 3 * 2 * 2 * 2
    assert {tables.parse_eval_path(p)["arm"] for p in f5a} == {"cisc", "core"}
    assert {tables.parse_eval_path(p)["benchmark"] for p in f5a} == {"math_l4", "math_l5"}
    assert len(plots.figure_inputs(CONFIG, "figure5b", r)) == 3 * 3 * 5 * 2
    f4 = plots.figure_inputs(CONFIG, "figure4", r)
    assert sum(p.name == "recovery.json" for p in f4) == 3 * 3  # every (model, benchmark) cell
    assert {tables.parse_eval_path(p)["arm"] for p in f4 if p.name != "recovery.json"} == {"majority", "core"}
    assert len(f4) == 3 * 3 + 3 * 3 * 2 * 2
    few_arms = {**CONFIG, "arms": ["majority", "core"]}
    assert plots.available_figures(few_arms) == ["figure4"]
    with pytest.raises(ValueError, match="add majority and core"):
        plots.figure_inputs({**CONFIG, "arms": ["cisc", "core"]}, "figure4", r)
    with pytest.raises(ValueError, match="add both to config arms"):
        plots.figure_inputs(few_arms, "figure5a", r)
    with pytest.raises(ValueError, match=r"lack \['cisc', 'ec'\]"):
        plots.figure_inputs(few_arms, "figure5b", r)
    no_l45 = {**CONFIG, "benchmarks": {"amc": {}}}
    assert "figure5a" not in plots.available_figures(no_l45)


@pytest.mark.parametrize("name", plots.FIGURES)
def test_make_figure_writes_reproducible_png_pdf_csv(tmp_path, name):
    root = tmp_path / "results"
    _write_results(root)
    first = plots.make_figure(CONFIG, name, root, tmp_path / "a" / name)
    second = plots.make_figure(CONFIG, name, root, tmp_path / "b" / name)
    suffixes = sorted(p.suffix for p in first)
    assert suffixes == sorted([".png", ".pdf", ".csv"] + ([".json"] if name == "figure5a" else []))
    for a, b in zip(first, second):
        if a.suffix != ".json":  # the JSON carries provenance, identical too but checked below
            assert a.read_bytes() == b.read_bytes(), a.name
    png = next(p for p in first if p.suffix == ".png").read_bytes()
    pdf = next(p for p in first if p.suffix == ".pdf").read_bytes()
    assert png.startswith(b"\x89PNG") and pdf.startswith(b"%PDF")
    csv = pd.read_csv(next(p for p in first if p.suffix == ".csv"))
    assert len(csv) == {"figure4": 9, "figure5a": 6, "figure5b": 4}[name]
    if name == "figure5a":
        saved = io.read_json(next(p for p in first if p.suffix == ".json"))
        assert saved["n_cells"] == 6 and saved["provenance"]["step"] == "figure5a"
        assert len(saved["provenance"]["inputs"]) == 24


def test_report_targets_list_tables_and_supported_figures():
    targets = plots.report_targets(CONFIG, "res")
    assert "res/tables/table1.tex" in targets and "res/tables/table3.csv" in targets
    assert "res/figures/figure5a.json" in targets and "res/figures/figure5b.pdf" in targets
    assert not any("table2" in t for t in targets)


def test_figure2_axis_is_0_to_100_with_integer_n_ticks_and_coinciding_curves_visible():
    ns = [1, 2, 4, 8, 16]
    rows = [{"method": m, "n": n, "mean": 0.4 + 0.02 * i, "std": 0.0, "lo": 0.35, "hi": 0.5, "subsamples": 5}
            for m in ("majority", "ec", "cisc", "core") for i, n in enumerate(ns)]
    fig = plots.label_accuracy_figure(pd.DataFrame(rows), title="SmolLM2-135M-Instruct / Synthetic")
    ax = fig.axes[0]
    assert ax.get_ylim() == (0.0, 100.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in ns]
    assert ax.xaxis.get_minor_ticks() == []
    lines = ax.get_lines()
    # Identical values: every operator keeps its own marker and line style and its own x positions.
    assert len({line.get_marker() for line in lines}) == 4
    assert len({line.get_linestyle() for line in lines}) == 4
    assert len({tuple(np.round(line.get_xdata(), 6)) for line in lines}) == 4
    assert all(np.allclose(line.get_ydata(), lines[0].get_ydata()) for line in lines)
    assert ax.get_title() == "SmolLM2-135M-Instruct / Synthetic"


def test_figure5b_of_one_cell_draws_a_bootstrap_se_over_questions(tmp_path):
    """One (model, benchmark) cell has no spread over cells: the SE resamples its questions."""
    rng = np.random.default_rng(0)
    config = {**CONFIG, "models": {"m1": {"family": "Math"}}, "benchmarks": {"amc": {}}, "seeds": [0],
              "report": {"tables": {"table1": ["m1"]}}}
    for i, arm in enumerate(tables.ARMS):
        correct = rng.integers(0, 5, size=12)
        per_question = [{"id": f"q{j}", "n_correct": int(c), "k": 4} for j, c in enumerate(np.minimum(correct + i % 2, 4))]
        io.write_json(tables.eval_path(tmp_path, "m1", "amc", arm, 0),
                      {"pass_at_1": float(np.mean([q["n_correct"] / 4 for q in per_question])), "per_question": per_question})
    written = plots.make_figure(config, "figure5b", tmp_path, tmp_path / "figures" / "figure5b")
    frame = pd.read_csv([p for p in written if p.suffix == ".csv"][0])
    assert (frame["se"] > 0).all() and set(frame["se_over"]) == {"questions x seeds"}
    deltas = plots.cell_question_deltas(plots.figure_inputs(config, "figure5b", tmp_path), "m1", "amc")
    assert deltas["core"].shape == (1, 12)
    assert frame.set_index("arm").loc["core", "mean_delta"] == pytest.approx(deltas["core"].mean())


@pytest.mark.parametrize("given", ["qwen2.5-math-1.5b_gpqa_diamond_seed0.png", "qwen2.5-math-1.5b_gpqa_diamond_seed0"])
def test_save_figure_keeps_a_dotted_model_key_in_the_file_name(tmp_path, given):
    """Paper model keys hold dots (qwen2.5-math-1.5b): the files are the rule's declared outputs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    written = io.save_figure(fig, tmp_path / given)
    plt.close(fig)
    want = [tmp_path / "qwen2.5-math-1.5b_gpqa_diamond_seed0.png", tmp_path / "qwen2.5-math-1.5b_gpqa_diamond_seed0.pdf"]
    assert written == want and all(p.stat().st_size > 0 for p in want)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in want)
