"""What the CoRE rules ask of the config: where each training run and evaluation lives, which
files Figure 3 reads, and the paper's final targets.

Pure functions of the workflow config (nothing is read from disk); ``rules/core/common.smk``
builds one :class:`CorePlan` and the rules call it. Tables 1-3 and Figures 4-5 are planned by
:mod:`concord.papers.core.tables` and :mod:`concord.papers.core.figures`.
"""

from __future__ import annotations

from typing import Any, Mapping

from concord.papers.core import figures, tables
from concord.papers.core.curves import parse_cells

#: The arms Figure 3 compares (its training curves).
CURVE_ARMS = ("majority", "core")


class CorePlan:
    """The CoRE part of one workflow config.

    Args:
        config: the workflow config (validated by the schema).
        results: the results directory (``results_dir``).
    """

    def __init__(self, config: Mapping[str, Any], results: str):
        self.config = config
        self.results = results
        self.models = list(config.get("models") or {})
        self.benchmarks = list(config.get("benchmarks") or {})
        self.arms = list(config.get("arms") or [])
        self.seeds = [int(s) for s in config.get("seeds") or [0]]
        self.enabled = bool(self.models and self.benchmarks and self.arms)
        self.training: Mapping[str, Any] = config.get("training", {})
        if self.enabled and self.ends_from_evaluation:
            check_ends_from_evaluation(self.training, config.get("evaluation", {}), config.get("engine", {}))

    @property
    def ends_from_evaluation(self) -> bool:
        """Figure 3's first and last points are Base's and the trained arm's evaluations."""
        return bool(self.training.get("ends_from_evaluation", False))

    def train_dir(self, model: str, benchmark: str, arm: str, seed) -> str:
        """One training run's directory: its model, log, groups, validation curve, provenance."""
        return f"{self.results}/train/{model}/{benchmark}/{arm}/seed{seed}"

    def eval_model_dir(self, model: str, benchmark: str, arm: str, seed) -> str:
        """What an evaluation reads: the base model, or the trained model of that arm and seed."""
        if arm == "base":
            return f"{self.results}/models/{model}"
        return f"{self.train_dir(model, benchmark, arm, seed)}/model"

    def figure3_cells(self) -> list[tuple[str, str]]:
        """(model, benchmark) panels of Figure 3: training.figure3_cells, else every pair."""
        return parse_cells(self.training.get("figure3_cells") or [], self.models, self.benchmarks)

    def figure3_inputs(self) -> list[str]:
        return [f"{self.train_dir(m, b, a, s)}/log.jsonl" for m, b in self.figure3_cells() for a in CURVE_ARMS
                for s in self.seeds]

    def figure3_base_inputs(self) -> list[str]:
        return [f"{self.results}/eval/{m}/{b}/base/seed{s}.json" for m, b in self.figure3_cells() for s in self.seeds]

    def figure3_arm_eval_inputs(self) -> list[str]:
        """The trained arms' evaluations: Figure 3's last points under training.ends_from_evaluation."""
        if not self.ends_from_evaluation:
            return []
        return [f"{self.results}/eval/{m}/{b}/{a}/seed{s}.json" for m, b in self.figure3_cells() for a in CURVE_ARMS
                for s in self.seeds]

    def train_targets(self) -> list[str]:
        return [f"{self.train_dir(m, b, a, s)}/log.jsonl" for m in self.models for b in self.benchmarks
                for a in self.arms for s in tables.arm_seeds(self.config, a)]

    def eval_targets(self) -> list[str]:
        return [f"{self.results}/eval/{m}/{b}/{a}/seed{s}.json" for m in self.models for b in self.benchmarks
                for a in ["base"] + self.arms for s in tables.arm_seeds(self.config, a)]

    def figure2_targets(self) -> list[str]:
        return [f"{self.results}/figures/figure2/{m}_{b}_seed{self.seeds[0]}.png" for m in self.models
                for b in self.benchmarks]

    def appendix_h_targets(self) -> list[str]:
        return [f"{self.results}/analysis/{m}/{b}/recovery.md" for m in self.models for b in self.benchmarks]

    def figure3_targets(self) -> list[str]:
        """Figure 3 and its table, when the config trains both arms it compares."""
        if not all(a in self.arms for a in CURVE_ARMS):
            return []
        return [f"{self.results}/figures/figure3.png", f"{self.results}/tables/figure3_steps_saved.csv"]

    def report_targets(self) -> list[str]:
        """Tables 1-3 and Figures 4-5 that the config supports."""
        return figures.report_targets(self.config, self.results) if self.enabled else []

    def targets(self) -> list[str]:
        """The CoRE paper's final outputs: Figure 2 and Appendix H per (model, benchmark), every
        evaluation, Figure 3, Tables 1-3 and Figures 4-5 (those the config supports)."""
        if not self.enabled:
            return []
        return (self.figure2_targets() + self.appendix_h_targets() + self.eval_targets() + self.figure3_targets()
                + self.report_targets())


def check_ends_from_evaluation(training: Mapping[str, Any], evaluation: Mapping[str, Any],
                               engine: Mapping[str, Any]) -> None:
    """An error naming the setting when training.ends_from_evaluation is on but validation and
    evaluation would not draw the same samples of the same policy: then the evaluations cannot
    stand in for the first and last validation points."""
    from concord.rl.settings import resolve_training

    cfg, ev = resolve_training(dict(training), dict(evaluation))
    same = {
        "training.val_k = evaluation.k": cfg["val_k"] == ev["k"],
        "training.val_questions = evaluation.max_questions": cfg["val_questions"] == ev["max_questions"],
        "training.val_max_new_tokens = evaluation.max_new_tokens": cfg["val_max_new_tokens"] == ev["max_new_tokens"],
        "training.val_batch_size = engine.batch_size": cfg["val_batch_size"] == engine.get("batch_size"),
        "training.dtype = engine.dtype": cfg["dtype"] == engine.get("dtype", "auto"),
        "engine.backend = hf (validation samples with the HF decode loop)": engine.get("backend", "hf") == "hf",
        "training.use_vllm false, or auto with training.gpus 0 (HF generation in training)":
            (cfg["use_vllm"] is False or (cfg["use_vllm"] == "auto" and int(cfg["gpus"]) == 0)) and not cfg["vllm_on_cpu"],
        "training.validation_fraction = null (validation on the evaluated questions)": cfg["validation_fraction"] is None,
    }
    broken = [name for name, holds in same.items() if not holds]
    if broken:
        raise ValueError("training.ends_from_evaluation: Base's and the arms' evaluations stand in for the first and "
                         "last validation points only under the same protocol; these differ: " + "; ".join(broken))
