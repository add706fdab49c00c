"""FMV's produced files: Tables 1-2 and Figure 2's accuracy curves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import pandas as pd

from concord.scorecard.tolerance import (Uncertainty, proportion_uncertainty)
from concord.scorecard.readers.base import (Found, ReadContext, Reproduced, _finite, _require, _resolved,
                                             _section, fmt_setting, register_reader)


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


@register_reader("fmv_table", r"^fmv/tables/table(?P<table>[12])\.csv$")
def _read_fmv_tables(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    return [r for f in found for r in read_fmv_table(f.path, f.rel, ctx.config, int(f.fields.get("table") or 1))]


@register_reader("fmv_figure2", r"^fmv/figures/(?P<bench>[^/]+)/figure2_(left|right)\.csv$")
def _read_fmv_figure2s(found: list[Found], ctx: ReadContext) -> list[Reproduced]:
    return [r for f in found for r in read_fmv_figure2(f.path, f.rel, ctx.config, str(f.fields.get("bench")))]
