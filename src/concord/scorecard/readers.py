"""Read the tables a run produced into measures the printed numbers can be matched against.

The scorecard imports no paper package: it reads the produced files by their documented paths
(relative to the results tree) and columns (docs/CONTRIBUTING.md, "Artifact contracts"). Columns
not listed as required are optional: a table written before a column existed still reads.

=============================================  ==========================================================
path                                           columns read
=============================================  ==========================================================
``tables/table{N}.csv``                        ``model, benchmark, {arm}_mean, {arm}_std, {arm}_n,
                                               delta_{arm}`` (percent; CoRE Tables 1-3; the Mean-Δ row,
                                               ``model == "Mean Δ vs. Base"``, is recomputed, not read);
                                               optional ``n_questions``
``figures/figure5a.json`` + ``figure5a.csv``   ``wins, n_cells, sign_test_p, wilcoxon_p``; the csv's
                                               ``model, benchmark`` (the cells compared)
``tables/figure3_steps_saved.csv``             ``model, benchmark, steps_saved_pct``; optional ``n_seeds``
``analysis/{model}/{bench}/recovery.json``     Appendix H: ``n_questions_total, majority_wrong,
                                               recovered_total, regressions, net, recovered_confidence_gap_nats,
                                               recovered_reward_gap, mean_gate_recovered, confidence_gap_nats,
                                               n_questions, tau``; its SEs from ``recovery_questions.csv`` beside it
``fmv/tables/table1.csv``                     ``method, train_mean, train_se, holdout_mean, holdout_se``
                                               (fractions; FMV Table 1)
``fmv/tables/table2.csv``                     ``method, mean, mean_se, fmv, fmv_se, best, best_se``
``fmv/figures/{bench}/figure2_{left,right}``  ``model`` (label), ``method, n, accuracy, se``; optional
``.csv``                                       ``n_questions, n_seeds``
``scmoa/{model}/{cell}/analysis/*.csv``        ``accuracy``: ``method, n, accuracy_pct``; ``significance``:
                                               ``method, baseline, wins, losses, mcnemar_p, ci_hi_pct``;
                                               ``flips``: ``beneficial, harmful, mcnemar_p, F_s, P_c``;
                                               ``tables29_30_synthesis_vs_vote``: the section-3 2x2 table;
                                               ``k_sweep``/``k_sweep_h1``: ``k, accuracy_pct,
                                               delta_prev_pp``; ``table21_override``: ``override_rate_pct,
                                               n``; ``error_correlation``: ``condition, rho_bar, ci_lo,
                                               ci_hi``; ``table37_information_ladder``: ``condition,
                                               accuracy_pct, beneficial, harmful, ratio, p_holm``;
                                               ``summary.json``: ``diversity_test.t, .p``
=============================================  ==========================================================

An SC-MoA *cell* directory is ``{benchmark key}`` (setup ``main``) or ``{benchmark key}@{setup}``
(rules/scmoa/common.smk). The benchmark key is mapped to the paper's benchmark by its config
entry (``format: bbh, subset: bbh3`` is the paper's BBH-3, whatever the key), and the setup's own
settings (``n``, ``k``, sampling, roles) override the section's, as the rules do.

FMV rows are told apart by an ``arm`` column when a table has one, else by their labels
("Base ...", "... Pointwise ...", "... N=32 ..."). The setting a number was produced in comes from
the workflow config (the same keys the rules read) and from the files themselves (question and
seed counts): every reproduced number records its scale (questions, seeds, training epochs, N, k),
so that a comparison is only judged where the run shares the paper's setting. Every reproduced
number also carries the run's own standard error (``Reproduced.uncertainty``, see
:mod:`concord.scorecard.tolerance`).
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
from concord.scorecard.printed import CORE_QUESTIONS
from concord.scorecard.tolerance import (SAMPLING, STATISTIC, Uncertainty, combine, count_uncertainty, proportion_uncertainty,
                                         seed_uncertainty)

MEAN_ROW_LABEL = "Mean Δ vs. Base"  # concord's CoRE tables name their Mean-Δ row so
CORE_ARMS: tuple[str, ...] = ("base", "majority", "ec", "cisc", "core")
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
    uncertainty: Uncertainty | None = None  # the run's own standard error of ``value``
    group: str = ""  # the run unit it came from (an SC-MoA setup), for cross-table aggregates


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
    except (KeyError, ValueError, TypeError):
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


def _int(value, default: int = 0) -> int:
    out = _finite(value)
    return default if out is None else int(out)


# ------------------------------------------------------------------ CoRE


def core_setting(config: Mapping) -> dict[str, str]:
    evaluation, training = _resolved(config, "evaluation"), _resolved(config, "training")
    return {
        "eval_k": fmt_setting(evaluation.get("k")),
        "temperature": fmt_setting(evaluation.get("temperature")),
        "top_p": fmt_setting(evaluation.get("top_p")),
        "n_vote": fmt_setting(training.get("n_vote")),
    }


def core_epochs(config: Mapping, benchmark: str) -> str:
    """The run's training length on a benchmark: its epochs, or ``max_steps=S`` when capped."""
    training = _section(config, "training")
    if training.get("max_steps"):
        return f"max_steps={int(training['max_steps'])}"
    by_bench = training.get("epochs_by_benchmark") or {}
    epochs = by_bench.get(benchmark, training.get("epochs", _resolved(config, "training").get("epochs")))
    return fmt_setting(epochs)


class CoreQuestions:
    """The question count of each benchmark a CoRE run evaluated on, read from its artifacts.

    In order: a table's ``n_questions`` column; an evaluation file's ``n_questions``
    (``eval/*/{bench}/*/seed*.json``); the line count of ``data/{bench}.jsonl``; the config's cap
    (``benchmarks.{bench}.n_questions``); a hub benchmark without a cap is the full benchmark
    (the paper's count, ``printed.CORE_QUESTIONS``). Where none applies the count is unknown.
    """

    def __init__(self, root: Path | None, config: Mapping):
        self.root, self.config, self.cache = root, config, {}

    def __call__(self, benchmark: str) -> tuple[str, str]:
        """(count, where it was read)."""
        if benchmark not in self.cache:
            self.cache[benchmark] = self._find(benchmark)
        return self.cache[benchmark]

    def _find(self, benchmark: str) -> tuple[str, str]:
        if self.root is not None:
            for path in sorted(self.root.glob(f"eval/*/{benchmark}/*/seed*.json"))[:1]:
                try:
                    n = json.loads(path.read_text(encoding="utf-8")).get("n_questions")
                except (OSError, ValueError, AttributeError):
                    n = None
                if _finite(n) is not None:
                    return str(int(n)), path.relative_to(self.root).as_posix()
            data = self.root / "data" / f"{benchmark}.jsonl"
            if data.is_file():
                with data.open(encoding="utf-8") as handle:
                    return str(sum(1 for line in handle if line.strip())), f"data/{benchmark}.jsonl"
        spec = _section(self.config, "benchmarks", benchmark)
        if spec.get("n_questions"):
            return str(int(spec["n_questions"])), f"config benchmarks.{benchmark}.n_questions"
        if spec.get("source") == "hub" and benchmark in CORE_QUESTIONS:
            return str(CORE_QUESTIONS[benchmark]), "config (the full hub benchmark, no cap)"
        return "unknown", "no artifact records it"


def config_seeds(config: Mapping) -> int:
    """The number of seeds the config runs (0 when it names none)."""
    seeds = config.get("seeds")
    return len(seeds) if isinstance(seeds, (list, tuple)) else 0


def _core_cell_setting(base: Mapping[str, str], config: Mapping, questions: CoreQuestions, benchmark: str,
                       seeds: int, row: Mapping, arm: str) -> dict[str, str]:
    count = _finite(row.get("n_questions"))
    n_questions = str(int(count)) if count is not None else questions(benchmark)[0]
    setting = {**base, "n_questions": n_questions, "seeds": str(seeds)}
    if arm != "base":
        setting["epochs"] = core_epochs(config, benchmark)
    return setting


def read_core_table(path: Path, rel: str, config: Mapping, questions: CoreQuestions | None = None) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "benchmark"), rel)
    arms = [a for a in CORE_ARMS if f"{a}_mean" in frame.columns]
    if "base" not in arms:
        raise ValueError(f"{rel}: no base_mean column (expected {{arm}}_mean for arms {', '.join(CORE_ARMS)})")
    questions = questions or CoreQuestions(None, config)
    base_setting = core_setting(config)
    ddof = int(_section(config, "report").get("std_ddof", 0) or 0)
    k = _int(_resolved(config, "evaluation").get("k"), 1) or 1
    out = []
    for row in frame[frame["model"] != MEAN_ROW_LABEL].itertuples(index=False):
        row = row._asdict()
        cell = f"{row['model']}:{row['benchmark']}"
        uncertainty: dict[str, Uncertainty | None] = {}
        for arm in arms:
            mean = _finite(row[f"{arm}_mean"])
            if mean is None:
                continue
            # A table without seed counts ran the config's seeds.
            n = _int(row.get(f"{arm}_n")) or config_seeds(config)
            std = _finite(row.get(f"{arm}_std"))
            setting = _core_cell_setting(base_setting, config, questions, str(row["benchmark"]), n, row, arm)
            se = seed_uncertainty(std, n, ddof)
            if se is None and setting["n_questions"] != "unknown":
                # One seed: the sampling noise of mean@k on the same questions is at most the
                # binomial SE over questions x samples.
                se = proportion_uncertainty(mean, int(setting["n_questions"]) * k)
            uncertainty[arm] = se
            spread = f"± {std:.1f} (std, {n} seed{'s' if n != 1 else ''})" if std is not None and n else ""
            out.append(Reproduced("core", f"pass_at_1:{cell}:{arm}", mean, rel, spread, setting, uncertainty=se))
            delta = _finite(row.get(f"delta_{arm}"))
            if arm != "base" and delta is not None:
                parts = [se, uncertainty.get("base")] if uncertainty.get("base") is not None else [se]
                out.append(Reproduced("core", f"delta:{cell}:{arm}", delta, rel, spread, dict(setting),
                                      uncertainty=combine(parts, [1.0, -1.0][: len(parts)])))
    return out


def core_aggregates(records: Sequence[Reproduced], families: Mapping[str, set[tuple[str, str]]],
                    config: Mapping) -> list[Reproduced]:
    """The paper's Mean-Δ rows and its text's averages, over the paper's cells this run produced.

    ``families`` maps ``table1``.. to the paper's (model, benchmark) cells of that table. An
    average over fewer cells than the paper's carries ``cells=<count>`` and is shown as a
    different setting; its seeds are the fewest of any cell averaged.
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
        for arm in CORE_ARMS[1:]:
            deltas = [by_measure.get(f"delta:{m}:{b}:{arm}") for m, b in present]
            if all(d is not None for d in deltas):
                mean = sum(d.value for d in deltas) / len(deltas)
                seeds = min(_int(d.setting.get("seeds")) for d in deltas)
                extra = {**setting, "cells": str(len(present)), "seeds": str(seeds)}
                measure = f"overall_mean_delta:{arm}" if name == "all" else f"family_mean_delta:{name}:{arm}"
                out.append(Reproduced("core", measure, mean, ", ".join(source), "", extra,
                                      uncertainty=combine([d.uncertainty for d in deltas], [1 / len(deltas)] * len(deltas))))
        pairs = [(by_measure.get(f"pass_at_1:{m}:{b}:core"), by_measure.get(f"pass_at_1:{m}:{b}:cisc"))
                 for m, b in present]
        if all(a is not None and b is not None for a, b in pairs):
            gap = sum(a.value - b.value for a, b in pairs) / len(pairs)
            seeds = min(min(_int(a.setting.get("seeds")), _int(b.setting.get("seeds"))) for a, b in pairs)
            parts = [u for a, b in pairs for u in (a.uncertainty, b.uncertainty)]
            weights = [w for _ in pairs for w in (1 / len(pairs), -1 / len(pairs))]
            out.append(Reproduced("core", f"core_minus_cisc:{name}", gap, ", ".join(source), "",
                                  {**setting, "cells": str(len(present)), "seeds": str(seeds)},
                                  uncertainty=combine(parts, weights)))
            # The text's CoRE-vs-Majority gaps (§5), per cell.
    for key, record in list(by_measure.items()):
        parts = key.split(":")
        if parts[0] == "pass_at_1" and parts[3] == "core":
            majority = by_measure.get(f"pass_at_1:{parts[1]}:{parts[2]}:majority")
            if majority is not None:
                out.append(Reproduced("core", f"core_minus_majority:{parts[1]}:{parts[2]}",
                                      record.value - majority.value, record.source, "",
                                      {**record.setting, "seeds": str(min(_int(record.setting.get("seeds")),
                                                                          _int(majority.setting.get("seeds"))))},
                                      uncertainty=combine([record.uncertainty, majority.uncertainty], [1.0, -1.0]),
                                      listed=False))
    return out


def read_core_figure5a(path: Path, rel: str, config: Mapping, records: Sequence[Reproduced] = ()) -> list[Reproduced]:
    result = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(result, Mapping):
        raise ValueError(f"{rel}: expected a JSON object with wins, n_cells, sign_test_p, wilcoxon_p")
    cells_path = path.with_suffix(".csv")
    if not cells_path.is_file():
        raise FileNotFoundError(f"{rel}: its cell table {cells_path.name} is missing beside it")
    cells = pd.read_csv(cells_path)
    _require(cells, ("model", "benchmark"), rel[: -len(".json")] + ".csv")
    by_measure = {r.measure: r for r in records}
    seeds = [_int(by_measure[m].setting.get("seeds")) for mdl, b in zip(cells["model"], cells["benchmark"])
             for m in (f"pass_at_1:{mdl}:{b}:core", f"pass_at_1:{mdl}:{b}:cisc") if m in by_measure]
    if not seeds and config_seeds(config):
        seeds = [config_seeds(config)]  # the cells' tables were not read: the seeds the config runs
    setting = {**core_setting(config), "cells": str(len(cells)),
               "benchmarks": "+".join(sorted(set(map(str, cells["benchmark"])))),
               "models": "+".join(sorted(set(map(str, cells["model"])))),
               "seeds": str(min(seeds)) if seeds else "unknown"}
    out = []
    n_cells = len(cells)
    for key in ("wins", "n_cells", "sign_test_p", "wilcoxon_p"):
        value = _finite(result.get(key))
        if value is None:
            raise ValueError(f"{rel}: {key!r} must be a finite number, got {result.get(key)!r}")
        se = {"wins": count_uncertainty(value, n_cells), "n_cells": Uncertainty(0.0)}.get(key)
        out.append(Reproduced("core", f"fig5a:{key}", value, rel, "", dict(setting), uncertainty=se))
    return out


def read_core_figure3(path: Path, rel: str, config: Mapping) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "benchmark", "steps_saved_pct"), rel)
    out = []
    for row in frame.itertuples(index=False):
        row = row._asdict()
        value = _finite(row["steps_saved_pct"])
        seeds = _int(row.get("n_seeds"), 0) or config_seeds(config)
        setting = {"n_vote": core_setting(config)["n_vote"], "seeds": str(seeds) if seeds else "unknown",
                   "epochs": core_epochs(config, str(row["benchmark"]))}
        notes = []
        # A spread of the saving, where the table carries one (std over seeds or an SE).
        se = seed_uncertainty(_finite(row.get("steps_saved_std")), seeds)
        if _finite(row.get("steps_saved_se")) is not None:
            se = Uncertainty(float(row["steps_saved_se"]), math.inf)
        if se is None:
            notes.append("the run records no spread of its steps saved: judged at the printed precision")
        if value is None:
            # concord leaves it undefined when CoRE never reaches Majority's plateau or Majority
            # plateaus at its first validation point: no saving to set beside the paper's.
            notes.append("steps saved undefined: CoRE never reached Majority's plateau, or Majority plateaued "
                         "at its first validation point")
            value = math.nan
        out.append(Reproduced("core", f"steps_saved_pct:{row['model']}:{row['benchmark']}", value, rel, "",
                              setting, notes, uncertainty=se))
    return out


def _mean_se(frame: pd.DataFrame, column: str) -> Uncertainty | None:
    if column not in frame.columns:
        return None
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    if len(values) < 2:
        return None
    return Uncertainty(float(values.std(ddof=1) / math.sqrt(len(values))), float(len(values) - 1), "questions")


def read_core_recovery(path: Path, rel: str, config: Mapping, model: str, bench: str) -> list[Reproduced]:
    """Appendix H (one model, benchmark): recoveries, regressions, gaps and the gate."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(summary, Mapping):
        raise ValueError(f"{rel}: expected the JSON object concord core-recovery writes")
    questions_path = path.with_name("recovery_questions.csv")
    recovered = pd.DataFrame()
    if questions_path.is_file():
        diag = pd.read_csv(questions_path)
        if {"majority_correct", "core_correct"} <= set(diag.columns):
            maj = diag["majority_correct"].astype(str).str.lower().isin(("true", "1", "1.0"))
            core = diag["core_correct"].astype(str).str.lower().isin(("true", "1", "1.0"))
            recovered = diag[~maj & core]
    rollouts = _resolved(config, "rollouts")
    n_total = _int(summary.get("n_questions_total"))
    setting = {"n_questions": str(n_total), "n_rollouts": fmt_setting(rollouts.get("n"))}
    wrong = _int(summary.get("majority_wrong"))
    values: dict[str, tuple[float | None, Uncertainty | None]] = {
        "n_questions_total": (_finite(summary.get("n_questions_total")), Uncertainty(0.0)),
        "recovered_total": (_finite(summary.get("recovered_total")),
                            count_uncertainty(_int(summary.get("recovered_total")), wrong)),
        "regressions": (_finite(summary.get("regressions")),
                        count_uncertainty(_int(summary.get("regressions")), n_total - wrong)),
        "recovered_confidence_gap_nats": (_finite(summary.get("recovered_confidence_gap_nats")),
                                          _mean_se(recovered, "confidence_gap")),
        "recovered_reward_gap": (_finite(summary.get("recovered_reward_gap")), _mean_se(recovered, "reward_gap")),
        "mean_gate_recovered": (_finite(summary.get("mean_gate_recovered")), _mean_se(recovered, "core_gate")),
    }
    rec, reg = values["recovered_total"], values["regressions"]
    if rec[0] is not None and reg[0] is not None:
        values["net"] = (_finite(summary.get("net")) if _finite(summary.get("net")) is not None else rec[0] - reg[0],
                         combine([rec[1], reg[1]], [1.0, -1.0]))
    if rec[0] is not None and wrong:
        values["recovered_pct"] = (100.0 * rec[0] / wrong, proportion_uncertainty(100.0 * rec[0] / wrong, wrong))
    out = []
    for key, (value, se) in values.items():
        if value is not None:
            out.append(Reproduced("core", f"recovery:{model}:{bench}:{key}", value, rel, "", dict(setting),
                                  uncertainty=se))
    gap, tau = _finite(summary.get("confidence_gap_nats")), _finite(summary.get("tau"))
    if gap is not None and tau:
        # Proposition 3: a confidence gap of delta nats scales the recovery bar by exp(-delta / tau).
        out.append(Reproduced("core", f"recovery_factor:{model}:{bench}", math.exp(-gap / tau), rel, "",
                              dict(setting), [f"exp(-δ/τ) at the contested questions' gap δ = {gap:.3f} nats"],
                              listed=False))
    return out


def recovery_aggregates(records: Sequence[Reproduced], config: Mapping) -> list[Reproduced]:
    """Figure 4's operative threshold over every measured cell (§6: ≈0.29 r).

    §3.3's ≈3.3 c_w is Proposition 2 evaluated at the paper's alpha, a number of the analysis rather
    than of a run (tests/test_propositions.py checks the proposition): the scorecard computes none.
    """
    factors = [r for r in records if r.measure.startswith("recovery_factor:")]
    if not factors:
        return []
    value = sum(r.value for r in factors) / len(factors)
    setting = {"cells": str(len(factors)), "n_rollouts": factors[0].setting.get("n_rollouts", "unknown")}
    return [Reproduced("core", "recovery_region:threshold_factor", value, ", ".join(r.source for r in factors), "",
                       setting, ["mean of exp(-δ/τ) over the cells with recovery analyses"])]


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


def _fmv_scale(row: Mapping, setting: Mapping[str, str]) -> dict[str, str]:
    """The run's scale where the FMV table records it (recorded; the paper prints none to match)."""
    out = dict(setting)
    for column, key in (("n_questions", "n_questions"), ("n_seeds", "seeds")):
        value = _finite(row.get(column))
        if value is not None:
            out[key] = str(int(value))
    return out


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
            se = _finite(row.get(q.replace("_mean", "_se") if table == 1 else f"{q}_se"))
            scale = _fmv_scale(row, fmv_setting(config))
            # The printed SE is over questions, which a reproduction shares; what varies between two
            # runs on the same questions is the sampling: bounded binomially over the n_questions x N
            # samples of a mean@N, over the questions' one verdict each for FMV and best@N.
            n_q, n_samples = _finite(row.get("n_questions")), _finite(scale.get("n"))
            outcomes = None if n_q is None else n_q * (n_samples or 1 if q.endswith("mean") else 1)
            out.append(Reproduced("fmv", f"table{table}:{q}:{model}:{bench}:{key}", 100 * value, rel, _pct_se(se),
                                  scale, uncertainty=None if outcomes is None else
                                  proportion_uncertainty(100 * value, outcomes)))
    return out


def read_fmv_figure2(path: Path, rel: str, config: Mapping, benchmark: str) -> list[Reproduced]:
    frame = pd.read_csv(path)
    _require(frame, ("model", "method", "n", "accuracy"), rel)
    by_label = {fmv_model_label(config, key): key for key in _fmv_models(config)}
    setting = fmv_setting(config)
    out = []
    for row in frame.itertuples(index=False):
        row = row._asdict()
        value = _finite(row["accuracy"])
        if value is None:
            continue
        model = by_label.get(str(row["model"]), str(row["model"]))
        n = int(row["n"])
        se = _finite(row.get("se"))
        out.append(Reproduced("fmv", f"figure2:accuracy:{model}:{benchmark}:{row['method']}:{n}", 100 * value, rel,
                              _pct_se(se), _fmv_scale(row, {**setting, "n": str(n)}),
                              uncertainty=None if se is None else Uncertainty(100 * se)))
    return out


# ------------------------------------------------------------------ SC-MoA


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


def _read_csv(path: Path) -> pd.DataFrame | None:
    """An optional table: None when absent or empty (a run without its data writes an empty file,
    e.g. k_sweep_h1 without a k sweep)."""
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None


def read_scmoa_dir(analysis: Path, rel_dir: str, model: str, cell: str, config: Mapping,
                   tables: set[str]) -> list[Reproduced]:
    """One ``scmoa/{model}/{cell}/analysis`` directory: every table the scorecard matches."""
    bench, setup, settings = scmoa_cell(config, cell)
    group = f"{model}@{setup}"
    acc_path = analysis / "accuracy.csv"
    if not acc_path.is_file():
        raise FileNotFoundError(f"{rel_dir}/accuracy.csv is missing (it gives the question count of the other tables)")
    acc = _from_percent(pd.read_csv(acc_path), ("accuracy", "ci_lo", "ci_hi"))
    _require(acc, ("method", "n", "accuracy"), f"{rel_dir}/accuracy.csv")
    n_questions = int(acc["n"].max()) if len(acc) else 0
    setting = scmoa_setting(config, n_questions, settings, setup, model)
    out: list[Reproduced] = []

    def add(measure: str, value, rel: str, se: Uncertainty | None = None, spread: str = "", listed: bool = True,
            extra: Mapping[str, str] | None = None, notes: Sequence[str] = ()) -> None:
        number = _finite(value)
        if number is not None:
            out.append(Reproduced("scmoa", measure, number, rel, spread, {**setting, **(extra or {})}, list(notes),
                                  listed, se, group))

    if "accuracy" in tables:
        for row in acc.itertuples(index=False):
            row = row._asdict()
            lo, hi = _finite(row.get("ci_lo")), _finite(row.get("ci_hi"))
            spread = f"95% CI [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
            n = _int(row.get("n"), n_questions)
            add(f"accuracy:{model}:{bench}:{row['method']}", 100 * float(row["accuracy"]), f"{rel_dir}/accuracy.csv",
                proportion_uncertainty(100 * float(row["accuracy"]), n), spread, extra={"n_questions": str(n)})
    sig = _read_csv(analysis / "significance.csv") if "significance" in tables else None
    if sig is not None:
        rel = f"{rel_dir}/significance.csv"
        sig = _from_percent(sig, ("delta", "ci_lo", "ci_hi"))
        _require(sig, ("method", "baseline", "mcnemar_p"), rel)
        for row in sig[sig["method"] == "scmoa"].itertuples(index=False):
            row = row._asdict()
            ci = ""
            if _finite(row.get("ci_lo")) is not None:
                ci = f"Δ 95% CI [{100 * row['ci_lo']:.1f}, {100 * row['ci_hi']:.1f}]"
            wins = f"{row.get('wins')} wins, {row.get('losses')} losses; " if "wins" in row else ""
            add(f"mcnemar_p:{model}:{bench}:{row['baseline']}", row["mcnemar_p"], rel, spread=(wins + ci).rstrip("; "))
            if _finite(row.get("ci_hi")) is not None:
                add(f"ci_hi:{model}:{bench}:{row['baseline']}", 100 * float(row["ci_hi"]), rel, listed=False)
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
                              {**setting, "n_questions": str(n)}, group)
    flips = _read_csv(analysis / "flips.csv") if "flips" in tables else None
    if flips is not None:
        rel = f"{rel_dir}/flips.csv"
        _require(flips, ("beneficial", "harmful", "mcnemar_p"), rel)
        for row in flips.itertuples(index=False):
            row = row._asdict()
            out += _flip_measures("post", model, bench, int(row["beneficial"]), int(row["harmful"]),
                                  float(row["mcnemar_p"]), n_questions, rel, setting, group)
            f_s, p_c = _finite(row.get("F_s")), _finite(row.get("P_c"))
            if f_s is not None:
                kept = round(p_c * n_questions) if p_c is not None else n_questions
                add(f"post_flips:F_s_pct:{model}:{bench}", 100 * f_s, rel, proportion_uncertainty(100 * f_s, kept))
    for stem in ("k_sweep", "k_sweep_h1"):
        frame = _read_csv(analysis / f"{stem}.csv") if stem in tables else None
        if frame is None or "k" not in frame.columns:
            continue
        rel = f"{rel_dir}/{stem}.csv"
        frame = _from_percent(frame, ("accuracy",))
        for row in frame.to_dict("records"):
            k, value = _int(row.get("k")), _finite(row.get("accuracy"))
            if value is None:
                continue
            n = _int(row.get("n"), n_questions)
            add(f"k_sweep:{model}:{bench}:{k}", 100 * value, rel, proportion_uncertainty(100 * value, n),
                extra={"k": str(k)})
            delta, lo, hi = (_finite(row.get(c)) for c in ("delta_prev_pp", "delta_ci_lo_pp", "delta_ci_hi_pp"))
            if delta is not None:
                se = Uncertainty((hi - lo) / 3.92) if lo is not None and hi is not None else None
                add(f"k_sweep_delta:{model}:{bench}:{k}", delta, rel, se, extra={"k": str(k)})
    frame = _read_csv(analysis / "table21_override.csv") if "table21_override" in tables else None
    if frame is not None:
        rel = f"{rel_dir}/table21_override.csv"
        if "override_rate_pct" in frame.columns and len(frame):
            row = frame.iloc[0].to_dict()
            n = _int(row.get("n"), n_questions)
            rate = _finite(row["override_rate_pct"])
            if rate is not None:
                add(f"override_rate_pct:{model}:{bench}", rate, rel, proportion_uncertainty(rate, n))
    frame = _read_csv(analysis / "error_correlation.csv") if "error_correlation" in tables else None
    if frame is not None:
        rel = f"{rel_dir}/error_correlation.csv"
        if {"condition", "rho_bar"} <= set(frame.columns):
            for row in frame.to_dict("records"):
                key = next((v for k, v in RHO_CONDITIONS.items() if k in str(row["condition"])), None)
                lo, hi = _finite(row.get("ci_lo")), _finite(row.get("ci_hi"))
                se = Uncertainty((hi - lo) / 3.92) if lo is not None and hi is not None else None
                if key:
                    add(f"rho_bar:{model}:{bench}:{key}", row["rho_bar"], rel, se)
    frame = _read_csv(analysis / "table37_information_ladder.csv") if "table37_information_ladder" in tables else None
    if frame is not None:
        rel = f"{rel_dir}/table37_information_ladder.csv"
        _require(frame, ("condition", "accuracy_pct"), rel)
        for i, row in enumerate(frame.to_dict("records")):
            view = "majority_vote" if i == 0 else LADDER_VIEWS.get(str(row["condition"]).replace("−", "-"))
            if view is None:
                continue
            accuracy = _finite(row["accuracy_pct"])
            add(f"ladder:{model}:{bench}:{view}:accuracy", accuracy, rel,
                None if accuracy is None else proportion_uncertainty(accuracy, n_questions))
            ben, harm = _finite(row.get("beneficial")), _finite(row.get("harmful"))
            if ben is not None and harm is not None:
                ses = _flip_uncertainties(int(ben), int(harm), n_questions)
                add(f"ladder:{model}:{bench}:{view}:beneficial", ben, rel, ses["beneficial"])
                add(f"ladder:{model}:{bench}:{view}:harmful", harm, rel, ses["harmful"])
                ratio = row.get("ratio") if harm else (math.inf if ben else math.nan)
                if ratio is not None and not (isinstance(ratio, float) and math.isnan(ratio)) and _finite(ratio) is None:
                    # No harmful flips: an infinite ratio, beyond any printed one.
                    out.append(Reproduced("scmoa", f"ladder:{model}:{bench}:{view}:ratio", math.inf, rel, "",
                                          dict(setting), ["no harmful flips: the ratio is infinite"], True, None, group))
                else:
                    add(f"ladder:{model}:{bench}:{view}:ratio", ratio, rel, ses.get("flip_ratio"))
                # Table 37 prints the uncorrected exact McNemar p although its caption says Holm
                # (printed/anomalies.csv), so the uncorrected p is the one compared.
                add(f"ladder:{model}:{bench}:{view}:p", row.get("p"), rel)
    if "summary" in tables and (analysis / "summary.json").is_file():
        rel = f"{rel_dir}/summary.json"
        summary = json.loads((analysis / "summary.json").read_text(encoding="utf-8"))
        test = summary.get("diversity_test") if isinstance(summary, Mapping) else None
        if isinstance(test, Mapping):
            add(f"dt_welch:{model}:{bench}:t", test.get("t"), rel, Uncertainty(1.0, math.inf, STATISTIC))
            add(f"dt_welch:{model}:{bench}:p", test.get("p"), rel)
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
                setting = {**{k: v for k, v in ps[0].setting.items() if k != "n_questions"},
                           "comparisons": str(len(comparisons))}
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
                           "N": first.setting.get("N", "unknown"), "k": first.setting.get("k", "unknown")}
                for q in ("beneficial", "harmful"):
                    parts = [by_measure[f"post_flips:{q}:{model}:{b}"] for b in present]
                    out.append(Reproduced("scmoa", f"post_flips:{q}:{model}:bbh+gpqa_diamond+aime",
                                          sum(p.value for p in parts), ", ".join(p.source for p in parts), "",
                                          dict(setting), uncertainty=combine([p.uncertainty for p in parts],
                                                                             [1.0] * len(parts)), group=group))
    return out


# ------------------------------------------------------------------ dispatch


@dataclass(frozen=True)
class Kind:
    name: str
    pattern: re.Pattern


SCMOA_STEMS = ("accuracy", "significance", "flips", SECTION3_TABLE, "k_sweep", "k_sweep_h1", "table21_override",
               "error_correlation", "table37_information_ladder")
KINDS: tuple[Kind, ...] = (
    Kind("core_table", re.compile(r"^tables/table\d+\.csv$")),
    Kind("core_figure5a", re.compile(r"^figures/figure5a\.(json|csv)$")),
    Kind("core_figure3", re.compile(r"^tables/figure3_steps_saved\.csv$")),
    Kind("core_recovery", re.compile(r"^analysis/(?P<model>[^/]+)/(?P<bench>[^/]+)/recovery\.json$")),
    Kind("fmv_table", re.compile(r"^fmv/tables/table(?P<table>[12])\.csv$")),
    Kind("fmv_figure2", re.compile(r"^fmv/figures/(?P<bench>[^/]+)/figure2_(left|right)\.csv$")),
    Kind("scmoa", re.compile(r"^scmoa/(?P<model>[^/]+)/(?P<bench>[^/]+)/analysis/"
                             r"(?P<table>" + "|".join(SCMOA_STEMS) + r")\.csv$")),
    Kind("scmoa", re.compile(r"^scmoa/(?P<model>(?!crossrun/)[^/]+)/(?P<bench>[^/]+)/analysis/(?P<table>summary)\.json$")),
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
    figure5a: tuple[Path, str] | None = None
    questions = CoreQuestions(root, config)
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
            "core_table": lambda: read_core_table(path, rel, config, questions),
            "core_figure3": lambda: read_core_figure3(path, rel, config),
            "core_recovery": lambda: read_core_recovery(path, rel, config, groups["model"], groups["bench"]),
            "fmv_table": lambda: read_fmv_table(path, rel, config, int(groups.get("table") or 1)),
            "fmv_figure2": lambda: read_fmv_figure2(path, rel, config, str(groups.get("bench"))),
        }
        if kind == "core_figure5a":
            figure5a = figure5a or (path.with_suffix(".json"), rel.rsplit(".", 1)[0] + ".json")
        elif kind == "scmoa":
            rel_dir = rel.rsplit("/", 1)[0]
            scmoa_dirs.setdefault((rel_dir, groups["model"], groups["bench"]), set()).add(groups["table"])
        else:
            records += readers[kind]()
    if figure5a is not None:
        # After the tables: Figure 5a's setting takes the seeds of the cells it compares.
        records += read_core_figure5a(figure5a[0], figure5a[1], config, records)
    for (rel_dir, model, cell), tables in sorted(scmoa_dirs.items()):
        records += read_scmoa_dir(root / rel_dir, rel_dir, model, cell, config, tables)
    records += core_aggregates(records, core_families or {}, config)
    records += recovery_aggregates(records, config)
    records += scmoa_aggregates(records, config)
    return records
