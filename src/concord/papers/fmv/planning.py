"""What the FMV rules ask of the config: the models, benchmarks and seeds that run, where each
artifact lives, which executions and training runs Tables 1-2 and the validation figure read,
and the final targets.

Pure functions of the workflow config (nothing is read from disk), so the planning is unit-tested
directly instead of only through dry runs. The rules (``rules/fmv/``) build one :class:`FmvPlan`
and keep inputs, outputs, params, log, resources, env and one command.

Paths (under ``{results}/fmv``): ``data/{bench}[.train|.holdout].jsonl``,
``{candidates|exec}/{model}/{bench}/{policy}/seed{seed}/{evalset}.parquet``, the training run
:data:`TRAIN_RUN`, ``gencluster/…``, ``analysis/…``, ``figures/…``, ``tables/…``. A *policy* is
``base`` or ``ttrl-{arm}-{half|full}-n{N}``.
"""

from __future__ import annotations

import shlex
from typing import Any, Iterable, Mapping, Sequence

from concord.papers.fmv.report import ttrl_label

#: One training run's directory (model, log, provenance, validation curve, groups), as a template
#: over the rule's wildcards; :meth:`FmvPlan.train_run` fills it.
TRAIN_RUN = "{fmv}/train/{cmodel}/{cbench}/{carm}-{split}-n{nvote}/seed{seed}"
#: What a training run writes beside its model directory.
TRAIN_RUN_FILES = ("log.jsonl", "provenance.json", "validation.csv", "groups.jsonl")
#: Table 1's training budget per arm when the config names none (the paper's Table 1 rows are its
#: Table 2 runs Joint N = 128 and Pointwise N = 32).
TABLE1_N_VOTE = {"fmv": 128, "fmv_pointwise": 32}
TABLE2_N_VOTE = [32, 128]
TTRL_ARMS = ("fmv", "fmv_pointwise")


def parse_policy(policy: str) -> tuple[str, str, str, int]:
    """``ttrl-{arm}-{half|full}-n{N}`` -> (kind, arm, split, N); an arm may hold "_" but never "-"."""
    kind, arm, split, n = policy.split("-")
    return kind, arm, split, int(n[1:])


def label_path_args(flag: str, pairs: Iterable[tuple[str, str]]) -> str:
    """``--flag 'LABEL=PATH'`` per pair, shell-quoted (the CLI's repeatable LABEL=PATH options)."""
    return " ".join(f"{flag} {shlex.quote(f'{k}={v}')}" for k, v in pairs)


class FmvPlan:
    """The FMV part of one workflow config.

    Args:
        config: the workflow config (validated by the schema).
        results: the results directory (``results_dir``).
        core_models: the CoRE models' keys, the FMV models when ``fmv.models`` is absent.
    """

    def __init__(self, config: Mapping[str, Any], results: str, core_models: Sequence[str] = ()):
        self.config = config
        self.fmv: Mapping[str, Any] = config.get("fmv") or {}
        self.results = results
        self.root = f"{results}/fmv"
        self.specs: dict[str, Any] = dict(self.fmv.get("models") or {m: config["models"][m] for m in core_models})
        self.models = list(self.specs)
        self.fmv_only_models = [m for m in self.models if m not in core_models]
        self.benchmarks = list((self.fmv.get("benchmarks") or {}).keys())
        # FMV runs when switched on and given models and benchmarks (a config for another paper alone has none).
        self.enabled = bool(self.fmv.get("enabled", True)) and bool(self.models) and bool(self.benchmarks)
        self.seeds = [int(s) for s in self.fmv.get("seeds", [0])]
        self.execution: Mapping[str, Any] = self.fmv.get("execution", {})
        self.ttrl: Mapping[str, Any] = self.fmv.get("ttrl", {})
        self.training: dict[str, Any] = {**(config.get("training") or {}), **(self.ttrl.get("training") or {})}
        self.tt_model = self.ttrl.get("model") or (self.models[0] if self.models else None)
        self.tt_bench = self.ttrl.get("benchmark") or (self.benchmarks[0] if self.benchmarks else None)
        self.tt_arms = list(self.ttrl.get("arms", list(TTRL_ARMS)))
        self.table1_n = {arm: int(n) for arm, n in (self.ttrl.get("table1_n_vote") or TABLE1_N_VOTE).items()}
        self.table2_n = list(self.ttrl.get("table2_n_vote", TABLE2_N_VOTE))

    # ------------------------------------------------------------------ labels
    def label(self, cmodel: str) -> str:
        """A model's display name: ``fmv.models.*.label``, else ``report.labels``, else its key."""
        return ((self.specs.get(cmodel) or {}).get("label")
                or (self.config.get("report") or {}).get("labels", {}).get(cmodel) or cmodel)

    def bench_label(self, cbench: str) -> str:
        return (self.config.get("report") or {}).get("labels", {}).get(cbench, cbench)

    def table1_labels(self) -> dict[str, str]:
        """Table 1's row label per arm (and the base model's)."""
        return {"base": f"Base ({self.label(self.tt_model)})" if self.tt_model else "Base",
                **{arm: ttrl_label(arm, self.table1_n.get(arm, 0)) for arm in self.tt_arms}}

    # ------------------------------------------------------------------ paths
    def model_dir(self, cmodel: str) -> str:
        return f"{self.results}/models/{cmodel}"

    def train_run(self, cmodel: str, cbench: str, carm: str, split: str, nvote, seed) -> str:
        return TRAIN_RUN.format(fmv=self.root, cmodel=cmodel, cbench=cbench, carm=carm, split=split, nvote=nvote,
                                seed=seed)

    def train_run_pattern(self) -> str:
        """:data:`TRAIN_RUN` over the rule's wildcards (what the training rule's outputs are named by)."""
        return self.train_run("{cmodel}", "{cbench}", "{carm}", "{split}", "{nvote}", "{seed}")

    def policy_model(self, cmodel: str, cbench: str, policy: str, seed) -> str:
        """The model directory a policy generates with: the base model or a trained TTRL model."""
        if policy == "base":
            return self.model_dir(cmodel)
        _, arm, split, n = parse_policy(policy)
        return f"{self.train_run(cmodel, cbench, arm, split, n, seed)}/model"

    def evalset_data(self, cbench: str, evalset: str) -> str:
        suffix = "" if evalset == "all" else f".{evalset}"
        return f"{self.root}/data/{cbench}{suffix}.jsonl"

    def train_data(self, cbench: str, split: str) -> str:
        return f"{self.root}/data/{cbench}{'.train' if split == 'half' else ''}.jsonl"

    def exec_path(self, policy: str, evalset: str, seed) -> str:
        return f"{self.root}/exec/{self.tt_model}/{self.tt_bench}/{policy}/seed{seed}/{evalset}.parquet"

    def analysis_inputs(self, cmodel: str, cbench: str, seed) -> dict[str, str]:
        base = f"{self.root}/{{kind}}/{cmodel}/{cbench}/base/seed{seed}/all.parquet"
        out = {"data": f"{self.root}/data/{cbench}.jsonl", "exec": base.format(kind="exec"),
               "candidates": base.format(kind="candidates")}
        if (self.fmv.get("gencluster") or {}).get("enabled", True):
            out["gencluster"] = f"{self.root}/gencluster/{cmodel}/{cbench}/seed{seed}.json"
        return out

    # ------------------------------------------------------------------ training
    def train_overrides(self, nvote) -> dict[str, Any]:
        """The ``training`` section overridden by ``fmv.ttrl.training``, with this run's budget: the FMV
        paper's budget N is the group size, trained on whole unless ``fmv.ttrl.training.n_train`` is smaller."""
        n = int(nvote)
        return {**self.training, "n_vote": n,
                "n_train": min(int((self.ttrl.get("training") or {}).get("n_train", n)), n)}

    def training_validates(self) -> bool:
        return int(self.training.get("eval_every", 0) or 0) > 0

    # ------------------------------------------------------------------ Tables 1-2, validation curves
    def table1_execs(self) -> list[tuple[str, str]]:
        """(ARM:SPLIT, path) per seed. Each policy samples once on the whole benchmark; the table splits
        its questions into the train and hold-out halves (the same draws as sampling each half)."""
        out = []
        for seed in self.seeds:
            out += [("base:train", self.exec_path("base", "all", seed)),
                    ("base:holdout", self.exec_path("base", "all", seed))]
            for arm in self.tt_arms:
                if arm not in self.table1_n:
                    raise ValueError(f"fmv.ttrl.table1_n_vote has no budget for arm {arm!r}; give one per arm in "
                                     "fmv.ttrl.arms")
                for evalset in ("train", "holdout"):
                    out.append((f"{arm}:{evalset}", self.exec_path(f"ttrl-{arm}-half-n{self.table1_n[arm]}", "all",
                                                                   seed)))
        return out

    def _table2_rows(self) -> list[tuple[str, str, int]]:
        """(label, arm, N) of Table 2's trained rows, in the paper's order."""
        return [(ttrl_label(arm, n), arm, n) for n in self.table2_n for arm in TTRL_ARMS if arm in self.tt_arms]

    def table2_execs(self) -> list[tuple[str, str]]:
        """(row label, path) per seed, rows in the paper's order."""
        if not self.enabled:
            return []
        rows = [(f"Base ({self.label(self.tt_model)})", "base")]
        rows += [(label, f"ttrl-{arm}-full-n{n}") for label, arm, n in self._table2_rows()]
        return [(label, self.exec_path(policy, "all", seed)) for label, policy in rows for seed in self.seeds]

    def _run_file(self, arm: str, split: str, n: int, seed, name: str) -> str:
        return f"{self.train_run(self.tt_model, self.tt_bench, arm, split, n, seed)}/{name}"

    def table1_provenance(self) -> list[tuple[str, str]]:
        """(arm, provenance.json) of Table 1's training runs, per seed: the table's selection column."""
        return [(arm, self._run_file(arm, "half", self.table1_n[arm], seed, "provenance.json"))
                for arm in self.tt_arms for seed in self.seeds]

    def table2_provenance(self) -> list[tuple[str, str]]:
        """(row label, provenance.json) of Table 2's training runs, per seed."""
        if not self.enabled:
            return []
        return [(label, self._run_file(arm, "full", n, seed, "provenance.json"))
                for label, arm, n in self._table2_rows() for seed in self.seeds]

    def validation_curves(self) -> list[tuple[str, str]]:
        """(label, validation.csv) of every TTRL run of Tables 1 and 2, per seed."""
        runs = [(f"{ttrl_label(arm, self.table1_n[arm])} on the train half", arm, "half", self.table1_n[arm])
                for arm in self.tt_arms]
        runs += [(f"{ttrl_label(arm, n)} on all questions", arm, "full", n) for n in self.table2_n
                 for arm in self.tt_arms]
        return [(label, self._run_file(arm, split, n, seed, "validation.csv")) for label, arm, split, n in runs
                for seed in self.seeds]

    # ------------------------------------------------------------------ targets
    def targets(self) -> list[str]:
        """The FMV experiments' final outputs: Figure 2 per benchmark, Tables 1 and 2 (and the
        validation curves when training validates)."""
        if not self.enabled:
            return []
        out = [f"{self.root}/figures/{b}/figure2_{side}.png" for b in self.benchmarks for side in ("left", "right")]
        if self.ttrl.get("enabled", True) and self.tt_arms:
            out += [f"{self.root}/tables/table1.csv", f"{self.root}/tables/table2.csv"]
            if self.training_validates():
                out.append(f"{self.root}/figures/ttrl_validation.png")
        return out
