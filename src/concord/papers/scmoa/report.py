"""Tables (CSV, Markdown, LaTeX) and figures (PNG, PDF) of one SC-MoA benchmark run: which tables
and figures a run has, and what goes into each. How a table is written is
:mod:`concord.papers.scmoa.display`'s; how a figure is drawn, :mod:`concord.papers.scmoa.figures`'."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from concord.papers.scmoa import analysis, figures
from concord.papers.scmoa.display import LABELS, label, na, write_table
from concord.registry import Registry

__all__ = ["APPENDIX_FIGURES", "APPENDIX_TABLES", "CROSSRUN_FIGURES", "CROSSRUN_TABLE", "EXTRA_TABLES",
           "EXTRA_TABLE_BUILDERS", "FIGURES", "KSWEEP_TABLE", "LABELS", "SECTION3_TABLE", "TABLE36", "TABLE37",
           "TABLES", "build", "build_extra", "crossrun", "extra_tables", "label", "na", "pipeline_metrics",
           "write_table"]

#: Table stems written only when the records carry their data (rules declare them from settings).
SECTION3_TABLE = "tables29_30_synthesis_vs_vote"
TABLE36 = "table36_trace_ablation"
TABLE37 = "table37_information_ladder"
KSWEEP_TABLE = "k_sweep_h1"


def _trace_of_sample(proposal: Mapping) -> str:
    """Appendix U: the first reasoning trace of a perturbation (reasoning channel and reply)."""
    from concord.papers.scmoa.prompts import trace

    first = proposal["samples"][0]
    return trace(first["text"], first.get("reasoning"))


def _section3(records: Sequence[Mapping], out: Path, title: str) -> dict:
    rows = [r["section3"] for r in records]
    table, stats_ = analysis.contingency([x["vote_correct"] for x in rows], [x["synth_correct"] for x in rows])
    caption = (f"{title} Section 3 controlled setting: majority vote vs synthesis over the same pre-refinement "
               f"proposals (n={stats_['n']}); {stats_['beneficial']} beneficial vs {stats_['harmful']} harmful flips, "
               f"{stats_['delta_pp']:+.1f} pp, McNemar chi2={stats_['mcnemar_chi2']:.2f}, p={stats_['mcnemar_p']:.3f} "
               "(chi-square without continuity correction) "
               "(paper: Table 29 GPQA-Diamond 12 vs 5, chi2=2.88, p=0.090; Table 30 BBH-3 16 vs 5, chi2=5.76, p=0.016)")
    write_table(table, out / SECTION3_TABLE, caption)
    return stats_


def _views(records: Sequence[Mapping], out: Path, title: str) -> dict:
    from concord.papers.scmoa.views import INFO_LADDER, TRACE_ABLATION

    have = set.intersection(*(set(r.get("views") or {}) for r in records))
    mv = analysis.method_correct(records, "vote_post")
    result = {}
    if set(TRACE_ABLATION) <= have:
        conds = {v: [r["views"][v]["correct"] for r in records] for v in TRACE_ABLATION}
        frame = analysis.flips_against(mv, conds, {v: v.replace("_", " ") for v in TRACE_ABLATION})
        write_table(frame, out / TABLE36, f"{title} trace ablation (Table 36): accuracy (%), flips vs the post-refinement "
                    f"majority vote, McNemar p (exact binomial, uncorrected, as Table 37 prints it) and Holm-Bonferroni p "
                    f"({len(TRACE_ABLATION)} comparisons, as the caption says)")
        result["table36"] = frame.to_dict("records")
    if {v for v, _, _ in INFO_LADDER} <= have:
        conds = {v: [r["views"][v]["correct"] for r in records] for v, _, _ in INFO_LADDER}
        frame = analysis.flips_against(mv, conds, {v: label for v, label, _ in INFO_LADDER})
        frame.insert(1, "group", [""] + [g for _, _, g in INFO_LADDER])
        write_table(frame, out / TABLE37, f"{title} information ladder (Table 37): accuracy (%), flips vs the "
                    f"post-refinement majority vote, McNemar p (exact binomial, uncorrected: the printed p-values are these) "
                    f"and Holm-Bonferroni p ({len(INFO_LADDER)} comparisons, what the caption claims)")
        result["table37"] = frame.to_dict("records")
    return result


def build(records: Sequence[Mapping], out_dir: str | Path, *, n_resamples: int = 10_000, seed: int = 0,
          title: str = "") -> dict[str, Any]:
    """Every table and figure of a run into ``out_dir``; returns the summary numbers.

    Questions whose model calls failed (``error`` records) are left out and counted.
    """
    failed = [r["id"] for r in records if "error" in r]
    records = [r for r in records if "error" not in r]
    if not records:
        raise ValueError("no question records to analyse" + (f" ({len(failed)} failed)" if failed else ""))
    out = Path(out_dir)
    methods = list(records[0]["methods"])
    n = int(records[0]["record"]["n"])
    summary: dict[str, Any] = {"n_questions": len(records), "n_failed": len(failed), "failed": failed, "title": title}
    summary["reasoning_calls"] = int(sum((r["methods"]["scmoa"].get("usage") or {}).get("with_reasoning", 0) or 0
                                         for r in records))
    vote = analysis.method_correct(records, "vote_post")
    synth = analysis.method_correct(records, "scmoa")
    summary.update(_method_tables(records, out, title, methods, vote, synth, n_resamples=n_resamples, seed=seed))
    summary.update(_consensus_tables(records, out, title, n, vote, synth, summary["flips"]))
    _error_correlation(records, out, title, n, seed)
    summary.update(_appendix_tables(records, out, title, methods, n_resamples=n_resamples, seed=seed))
    summary.update(_confidence_tables(records, out, title, synth))
    _sweep_tables(records, out, title, n_resamples=n_resamples, seed=seed)
    return _finite(summary)


def _method_tables(records: Sequence[Mapping], out: Path, title: str, methods: Sequence[str], vote, synth, *,
                   n_resamples: int, seed: int) -> dict[str, Any]:
    """Accuracy of every method, SC-MoA against each baseline, and synthesis against the vote."""
    acc = analysis.accuracy_table(records, methods)
    acc.insert(1, "label", [label(m) for m in acc["method"]])
    write_table(acc, out / "accuracy", f"{title} accuracy (%) with Clopper-Pearson 95% intervals",
                percent=("accuracy", "ci_lo", "ci_hi"))
    baselines = [m for m in methods if m != "scmoa"]
    sig = analysis.significance_table(records, "scmoa", baselines, n_resamples=n_resamples, seed=seed)
    write_table(sig, out / "significance", f"{title} SC-MoA vs each baseline: McNemar (chi-square, no continuity "
                "correction; p_method) and paired bootstrap (accuracy difference in points)", percent=("delta", "ci_lo", "ci_hi"))
    decomp = analysis.flip_decomposition(vote, synth)
    write_table(pd.DataFrame([decomp]), out / "flips", f"{title} synthesis vs vote: flips and Proposition 1 terms")
    return {"accuracy": acc.set_index("method")["accuracy"].to_dict(), "flips": decomp,
            "override_rate": float(np.mean([r["record"]["override"] for r in records]))}


def _consensus_tables(records: Sequence[Mapping], out: Path, title: str, n: int, vote, synth,
                      decomp: Mapping[str, Any]) -> dict[str, Any]:
    """How consensus moves through refinement, and trace diversity by flip outcome (with their figures)."""
    pre = [r["record"]["clusters_pre"]["k_max"] for r in records]
    post = [r["record"]["clusters_post"]["k_max"] for r in records]
    trans = analysis.transition_matrix(pre, post, n)
    write_table(trans.reset_index().rename(columns=lambda c: f"post={c}" if c != "pre" else "pre k_max"),
                out / "transition", f"{title} consensus transition (pre-refinement k_max rows, post columns)")
    below = int(sum(trans.loc[a, b] for a in trans.index for b in trans.columns if b < a))

    diversity = [analysis.trace_diversity([_trace_of_sample(s) for s in r["record"]["proposals_pre"]])
                 for r in records]
    outcomes = [analysis.flip_outcome(v, s) for v, s in zip(vote, synth)]
    div_table, div_test = analysis.diversity_by_outcome(diversity, outcomes)
    write_table(div_table, out / "diversity", f"{title} trace diversity D_t by outcome (TF-IDF, 5000 features)")
    figures.transition(trans, out, title)
    figures.diversity(diversity, outcomes, decomp, out, title)
    return {"transition_below_diagonal": below, "diversity_test": div_test}


def _confidence_tables(records: Sequence[Mapping], out: Path, title: str, synth) -> dict[str, Any]:
    """The pre-refinement consensus as a confidence: reliability and selective prediction."""
    conf = [r["record"]["clusters_pre"]["consensus"] for r in records]
    rel, ece = analysis.reliability(conf, synth)
    sel, auroc = analysis.selective_prediction(conf, synth)
    write_table(rel, out / "reliability", f"{title} reliability of pre-refinement consensus, in % (ECE={na(ece)})",
                percent=("confidence", "accuracy"))
    # AUROC needs right and wrong answers; with one class it is undefined ("n/a").
    write_table(sel, out / "selective", f"{title} selective prediction by consensus, in % (AUROC={na(auroc)})",
                percent=("coverage", "accuracy"))
    figures.calibration(rel, sel, ece, auroc, out, title)
    return {"ece": ece, "auroc": auroc}


def _sweep_tables(records: Sequence[Mapping], out: Path, title: str, *, n_resamples: int, seed: int) -> None:
    """The consensus-gating threshold sweep and the inner sampling budget (k) sweep."""
    gate = analysis.gating_sweep(records, analysis.method_correct(records, "vote_pre"))
    write_table(gate, out / "gating_sweep", f"{title} consensus-gating threshold sweep, in % (theta=inf: always aggregate)",
                percent=("accuracy", "exit_rate"))
    ks = analysis.k_sweep(records)
    write_table(ks, out / "k_sweep", f"{title} inner sampling budget sweep: accuracy (%)", percent=("accuracy", "ci_lo", "ci_hi"))
    ksb = analysis.k_sweep_bootstrap(records, n_resamples=n_resamples, seed=seed)
    write_table(ksb, out / KSWEEP_TABLE, f"{title} inner sampling budget (Appendix H.1): accuracy (%) with percentile "
                "bootstrap 95% CIs and the paired-bootstrap change from the previous k")
    figures.sweeps(gate, ks, out, title)


#: Appendix tables and figures every report writes (a table whose data the run did not collect
#: says so in a single row, naming the setting that produces it).
APPENDIX_TABLES = ("table13_significance_all_pairs", "table15_public_private", "table17_error_correlation",
                   "table21_override", "table22_override_decomposition", "table23_oracle", "table26_sampling_protocol",
                   "table27_diversity_source", "table28_tokens", "table40_selection")
APPENDIX_FIGURES = ("figure3_pareto", "figure4b_consensus_gain", "figure6c_n_sweep")
#: Every table and figure a report writes (the rules declare exactly these).
TABLES = ("accuracy", "significance", "flips", "transition", "diversity", "error_correlation", "reliability",
          "selective", "gating_sweep", "k_sweep", KSWEEP_TABLE, *APPENDIX_TABLES)
#: Tables only a run with the matching settings has data for (rule scmoa_extra_table writes one).
EXTRA_TABLES = (SECTION3_TABLE, TABLE36, TABLE37)


def extra_tables(settings: Mapping[str, Any]) -> list[str]:
    """The extra table stems a run with these settings produces (Section 3; Tables 36, 37)."""
    from concord.papers.scmoa.views import INFO_LADDER, TRACE_ABLATION

    views = set(settings.get("views") or [])
    out = [SECTION3_TABLE] if settings.get("section3") else []
    out += [TABLE36] if set(TRACE_ABLATION) <= views else []
    out += [TABLE37] if {v for v, _, _ in INFO_LADDER} <= views else []
    return out


def _section3_table(records: Sequence[Mapping], out: Path, title: str) -> dict:
    if not records or not all("section3" in r for r in records):
        raise ValueError(f"{SECTION3_TABLE} needs records of a run with section3: true")
    return _section3(records, out, title)


def _views_table(stem: str, key: str):
    """An extra table drawn from the view measurements (Tables 36, 37)."""
    def build(records: Sequence[Mapping], out: Path, title: str) -> dict:
        result = _views(records, out, title) if records else {}
        if key not in result:
            raise ValueError(f"{stem} needs records of a run with the views of that table (scmoa.views)")
        return result

    return build


#: How each extra table is built: ``(records, out_dir, title) -> summary``.
EXTRA_TABLE_BUILDERS: Registry[Callable[[Sequence[Mapping], Path, str], dict]] = Registry("SC-MoA extra table")
EXTRA_TABLE_BUILDERS.register(SECTION3_TABLE, _section3_table)
EXTRA_TABLE_BUILDERS.register(TABLE36, _views_table(TABLE36, "table36"))
EXTRA_TABLE_BUILDERS.register(TABLE37, _views_table(TABLE37, "table37"))


def build_extra(records: Sequence[Mapping], out_dir: str | Path, stem: str, title: str = "") -> dict:
    """One extra table (see :data:`EXTRA_TABLES`); a run without its data is an error naming the setting."""
    if stem not in EXTRA_TABLES:
        raise ValueError(f"unknown extra table {stem!r}; expected one of {EXTRA_TABLES}")
    return EXTRA_TABLE_BUILDERS.get(stem)([r for r in records if "error" not in r], Path(out_dir), title)


FIGURES = ("calibration", "transition", "diversity", "sweeps", *APPENDIX_FIGURES)
#: Across every (model, cell) of a run: Figure 6a (gain over SC per model) and Figure 8 / Table 8
#: (pipeline metrics per condition).
CROSSRUN_FIGURES = ("figure6a_models", "figure8_pipeline_heatmap")
CROSSRUN_TABLE = "table8_pipeline_metrics"


def _not_run(stem: Path, caption: str, why: str) -> None:
    write_table(pd.DataFrame([{"not available": why}]), stem, caption)


def _error_correlation(records: Sequence[Mapping], out: Path, title: str, n: int, seed: int) -> None:
    """Table 17 (Appendix K.1): rho-bar of perturbation-diverse vs i.i.d. proposals (and persona
    proposals when the persona diversity source ran), with 95% bootstrap CIs."""
    rows = [{"condition": "paraphrase-diverse proposals (SPUQ)",
             **analysis.error_correlation(~np.array([r["agents_correct"] for r in records], dtype=bool), seed=seed)}]
    persona = [((r.get("diversity") or {}).get("persona@T=0") or {}).get("agents_correct") for r in records]
    if all(p is not None for p in persona):
        rows.insert(0, {"condition": "persona-diverse proposals (J.1/J.2)",
                        **analysis.error_correlation(~np.array(persona, dtype=bool), seed=seed)})
    sc = [r.get("sc_correct") or [] for r in records]
    if all(len(x) >= n for x in sc):
        rows.append({"condition": "i.i.d. samples (one generic prompt)",
                     **analysis.error_correlation(~np.array([x[:n] for x in sc], dtype=bool), seed=seed)})
    frame = pd.DataFrame(rows)
    caption = f"{title} Table 17: mean pairwise error correlation rho-bar with 95% bootstrap CIs"
    write_table(frame, out / "error_correlation", caption)
    write_table(frame, out / "table17_error_correlation", caption)


def _appendix_tables(records: Sequence[Mapping], out: Path, title: str, methods: Sequence[str], *,
                     n_resamples: int, seed: int) -> dict:
    """Tables 13, 15, 21-23, 26-28, 40 and Figures 3, 4b, 6c of one run."""
    summary: dict[str, Any] = {}
    table_methods = [m for m in methods if not m.startswith("gated_")]
    sig = analysis.pairwise_significance(records, table_methods, n_resamples=n_resamples, seed=seed)
    write_table(sig, out / "table13_significance_all_pairs", f"{title} Table 13: McNemar (chi-square, no continuity "
                "correction) and paired-bootstrap 95% CI of the accuracy difference for every pair of methods; "
                "p_holm = Holm-Bonferroni over all pairs")

    stem = out / "table15_public_private"
    caption = f"{title} Table 15: public-to-private test fidelity, P(priv | pub) = P(all tests pass | public tests pass)"
    fid = analysis.public_private_fidelity(records, table_methods)
    if fid.empty:
        _not_run(stem, caption, "a code benchmark only (public vs private tests)")
    else:
        write_table(fid, stem, caption)

    dec, over = analysis.override_decomposition(records)
    write_table(pd.DataFrame([over]), out / "table21_override", f"{title} Table 21: override fire rate and accuracy "
                "when it fires / does not (QA: never fires)")
    write_table(dec, out / "table22_override_decomposition", f"{title} Table 22: aggregation alone, full pipeline, "
                f"best-of-N; override fires on {over['override_fires']}/{over['n']} problems")
    summary["override"] = over
    oracle = analysis.oracle_ceiling(records)
    write_table(pd.DataFrame([oracle]), out / "table23_oracle", f"{title} Table 23: oracle ceiling (any of the N x k "
                "samples or refined proposals correct) vs SC-MoA; gap = oracle - actual")
    summary["oracle"] = oracle

    stem, caption = out / "table26_sampling_protocol", f"{title} Table 26: SC (k samples) under greedy + variant tag vs temperature sampling; McNemar (chi-square with continuity correction) vs greedy + tag"
    temps = sorted((m for m in methods if m.startswith("sc_t")), key=lambda m: float(m[4:]))
    if "sc" in methods and temps:
        write_table(analysis.compared_to(records, "sc", temps + ["scmoa"], {m: label(m) for m in methods}), stem, caption)
    else:
        _not_run(stem, caption, "methods sc and sc_temp (sc_temperatures)")

    stem, caption = out / "table27_diversity_source", f"{title} Table 27: source of proposal diversity with the same pipeline (Phases 2-5); McNemar (chi-square with continuity correction, as the paper's 11 vs 7 -> p = 0.480) vs SC-MoA"
    conds = sorted({c for r in records for c in (r.get("diversity") or {})})
    if conds and all(set(r.get("diversity") or {}) == set(conds) for r in records):
        shadow = [{**r, "methods": {**r["methods"], **{f"div:{c}": r["diversity"][c] for c in conds}}} for r in records]
        write_table(analysis.compared_to(shadow, "scmoa", [f"div:{c}" for c in conds],
                                         {"scmoa": "SC-MoA (this run's perturbation)", **{f"div:{c}": c for c in conds}}),
                    stem, caption)
    else:
        _not_run(stem, caption, "diversity_sources, e.g. [[persona, 0.0], [paraphrase, 0.7], [none, 0.7], [none, 1.0]]")

    tokens = analysis.token_accounting(records, [m for m in table_methods if m not in ("vote_pre", "vote_post")])
    tokens.insert(1, "label", [label(m) for m in tokens["method"]])
    write_table(tokens, out / "table28_tokens", f"{title} Table 28: mean tokens per problem (input + output) and "
                "accuracy per million tokens")

    stem, caption = out / "table40_selection", f"{title} Table 40: selection (over the Phase 1 proposals) vs synthesis; McNemar (chi-square, no continuity correction) vs SC-MoA"
    ds = analysis.dawid_skene_choice(records)
    write_table(analysis.selection_table(records, ds, n_resamples=n_resamples, seed=seed), stem, caption)

    figures.pareto(records, table_methods, out, title)
    figures.consensus_gain(records, out, title)
    figures.n_sweep(records, out, title)
    return summary


def _finite(obj: Any) -> Any:
    """NaN and infinities (an undefined AUROC, a flip ratio without harmful flips) as null,
    so that the summary is strict JSON."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


# ----------------------------------------------------------------------- across runs (Fig. 6a, 8)


def pipeline_metrics(records: Sequence[Mapping]) -> dict:
    """Appendix E, Table 8: the pipeline metrics of one run (model x setup x benchmark).

    Draft stability = 100 - % of minority drafts that adopted the majority; consensus lift = mean
    post - pre consensus; refinement independence = 100 (1 - lift / max lift), max lift = mean
    (1 - C_pre); pre-exit rate = % of problems whose pre-refinement consensus reaches 0.6 (the gate
    of the gated variant)."""
    records = [r for r in records if "error" not in r]
    pre = np.array([r["record"]["clusters_pre"]["consensus"] for r in records])
    post = np.array([r["record"]["clusters_post"]["consensus"] for r in records])
    actions = [row["action"] for r in records for row in r["record"].get("refinement", [])]
    lift, max_lift = float(np.mean(post - pre)), float(np.mean(1 - pre))
    return {
        "n": len(records), "accuracy_pct": 100 * float(analysis.method_correct(records, "scmoa").mean()),
        "sc_accuracy_pct": (100 * float(analysis.method_correct(records, "sc").mean())
                            if all("sc" in r["methods"] for r in records) else math.nan),
        "C_pre": float(pre.mean()), "pre_exit_rate_pct": 100 * float((pre >= 0.6).mean()),
        "draft_stability_pct": 100 - 100 * actions.count("ADOPTED") / len(actions) if actions else math.nan,
        "consensus_lift": lift, "refinement_independence_pct": 100 * (1 - lift / max_lift) if max_lift > 0 else math.nan,
        "override_rate_pct": 100 * float(np.mean([bool(r["record"].get("override")) for r in records])),
        "calls": float(np.mean([r["methods"]["scmoa"]["calls"] for r in records])),
    }


def crossrun(runs: Mapping[str, Sequence[Mapping]], out_dir: str | Path, title: str = "") -> pd.DataFrame:
    """Figure 6a (SC-MoA's gain over SC per model and benchmark), Figure 8 and Table 8 (pipeline
    metrics per condition, cells coloured by per-column rank) over runs named ``model / cell``."""
    out = Path(out_dir)
    rows = [{"condition": name, **pipeline_metrics(recs)} for name, recs in runs.items()]
    table = pd.DataFrame(rows)
    write_table(table, out / CROSSRUN_TABLE, f"{title} Table 8: pipeline metrics per condition (model / benchmark ".strip() + " "
                "[@setup]); higher is better except consensus lift")
    figures.gain_over_sc(table, out / CROSSRUN_FIGURES[0])
    figures.pipeline_heatmap(table, out / CROSSRUN_FIGURES[1])
    return table
