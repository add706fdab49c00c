"""What a table is: the arms and their labels, and :class:`TableSpec` (models, benchmarks, arms,
seeds, families, labels) resolved from the config's ``report`` section."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

ZERO_UPDATE = "zero_update"  # concord.rl.settings.ZERO_UPDATE_ARM (the shared layer's name)
ARMS: tuple[str, ...] = ("base", ZERO_UPDATE, "majority", "ec", "cisc", "core")
CONTROL_ARMS: tuple[str, ...] = (ZERO_UPDATE,)
ARM_LABELS: dict[str, str] = {"base": "Base", ZERO_UPDATE: "Zero-update", "majority": "Majority", "ec": "EC",
                              "cisc": "CISC", "core": "CoRE"}
# The column sub-headings of the paper's tables.
ARM_NOTES: dict[str, str] = {"base": "(no RL)", ZERO_UPDATE: "(lr 0)", "majority": "(TTRL)", "ec": "(graph)",
                             "cisc": "(conf.)", "core": "(ours)"}
CONFIDENCE_LEVEL = 0.95
MEAN_ROW_LABEL = "Mean Δ vs. Base"
DEFAULT_FIG5A_BENCHMARKS: tuple[str, ...] = ("math_l4", "math_l5")
_TABLE_NAME_RE = re.compile(r"^table[0-9]+$")


@dataclass(frozen=True)
class TableSpec:
    """Everything needed to lay out one table, resolved from the config."""

    name: str
    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    arms: tuple[str, ...]  # always starts with "base"
    seeds: tuple[int, ...]
    families: Mapping[str, str]
    labels: Mapping[str, str]
    control_seeds: tuple[int, ...] = ()  # the zero-update control's seeds (empty: ``seeds``)

    def label(self, key: str) -> str:
        return self.labels.get(key, key)

    def seeds_of(self, arm: str) -> tuple[int, ...]:
        return self.control_seeds if arm == ZERO_UPDATE and self.control_seeds else self.seeds


def arm_seeds(config: Mapping, arm: str) -> list[int]:
    """The seeds ``arm`` trains and is evaluated with: ``control_seeds`` for the zero-update
    control where the config sets it (its check is exact equality with Base, sample for sample, so
    one seed per cell proves it as well as three), else ``seeds``."""
    control = config.get("control_seeds")
    if arm == ZERO_UPDATE and control:
        return [int(s) for s in control]
    return [int(s) for s in config["seeds"]]


def report_section(config: Mapping) -> dict:
    """The ``report`` config section with its defaults filled in."""
    report = dict(config.get("report") or {})
    tables = report.get("tables") or {"table1": list(config["models"])}
    for name in tables:
        if not _TABLE_NAME_RE.match(name):
            raise ValueError(f"report.tables: table name {name!r} must look like 'table1', 'table2', ...")
    report["tables"] = {name: list(models) for name, models in tables.items()}
    report.setdefault("labels", {})
    report.setdefault("fig5a_benchmarks", list(DEFAULT_FIG5A_BENCHMARKS))
    report.setdefault("std_ddof", 0)
    report.setdefault("decimals", 1)
    report.setdefault("bootstrap", {})
    report["bootstrap"] = {"n_resamples": 2000, "seed": 0, **report["bootstrap"]}
    benchmarks = report.get("benchmarks") or list(config["benchmarks"])
    unknown = [b for b in benchmarks if b not in config["benchmarks"]]
    if unknown:
        raise ValueError(f"report.benchmarks lists benchmarks missing from config benchmarks: {unknown}")
    report["benchmarks"] = list(benchmarks)
    return report


def table_spec(config: Mapping, name: str) -> TableSpec:
    report = report_section(config)
    if name not in report["tables"]:
        raise KeyError(f"no table {name!r} in config report.tables (have: {', '.join(report['tables']) or 'none'})")
    models = report["tables"][name]
    unknown = [m for m in models if m not in config["models"]]
    if unknown:
        raise ValueError(f"report.tables.{name} lists models missing from config models: {unknown}")
    if not models:
        raise ValueError(f"report.tables.{name} lists no models")
    return TableSpec(
        name=name,
        models=tuple(models),
        benchmarks=tuple(report["benchmarks"]),
        arms=("base", *[a for a in ARMS[1:] if a in config["arms"]]),
        seeds=tuple(int(s) for s in config["seeds"]),
        control_seeds=tuple(int(s) for s in config.get("control_seeds") or ()),
        families={m: config["models"][m].get("family", "Other") for m in models},
        labels=dict(report["labels"]),
    )


def figure_models(config: Mapping) -> list[str]:
    """Models shown in the figures: every model of every table, in table order."""
    seen: dict[str, None] = {}
    for models in report_section(config)["tables"].values():
        seen.update(dict.fromkeys(models))
    return list(seen)
