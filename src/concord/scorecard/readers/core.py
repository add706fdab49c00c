"""CoRE's produced files: Tables 1-3, Figure 3's steps saved, Figure 5a, Appendix H's recovery;
the Mean-Δ rows and the text's averages across them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from concord.scorecard.printed import CORE_QUESTIONS
from concord.scorecard.tolerance import (Uncertainty, combine, count_uncertainty, proportion_uncertainty,
                                         seed_uncertainty)
from concord.scorecard.readers.base import (Found, ReadContext, Reproduced, _finite, _int, _require, _resolved,
                                             _section, fmt_setting, register_reader)

MEAN_ROW_LABEL = "Mean Δ vs. Base"  # concord's CoRE tables name their Mean-Δ row so
CORE_ARMS: tuple[str, ...] = ("base", "majority", "ec", "cisc", "core")


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


@register_reader("core_table", r"^tables/table\d+\.csv$")
def _read_core_tables(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    return [r for f in found for r in read_core_table(f.path, f.rel, ctx.config, ctx.questions)]


@register_reader("core_figure3", r"^tables/figure3_steps_saved\.csv$")
def _read_core_figure3s(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    return [r for f in found for r in read_core_figure3(f.path, f.rel, ctx.config)]


@register_reader("core_recovery", r"^analysis/(?P<model>[^/]+)/(?P<bench>[^/]+)/recovery\.json$")
def _read_core_recoveries(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    return [r for f in found
            for r in read_core_recovery(f.path, f.rel, ctx.config, f.fields["model"], f.fields["bench"])]


@register_reader("core_figure5a", r"^figures/figure5a\.(json|csv)$", stage=1)
def _read_core_figure5a(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    # The JSON and its cell table are one figure: read once, from the first file named.
    first = found[0]
    return read_core_figure5a(first.path.with_suffix(".json"), first.rel.rsplit(".", 1)[0] + ".json", ctx.config,
                              ctx.records)
