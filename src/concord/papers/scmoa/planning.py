"""What the SC-MoA rules ask of the config: setups and cells, the endpoints each cell calls, the
arguments of data and run commands, and the final and named targets.

A *setup* is one operating point of the paper (the main N=5, k=2 run; the mechanistic N=4, k=5
configuration; the Appendix H.1 k-sweep; ...): the section's method settings overlaid with the
setup's own. A *cell* is one benchmark run under one setup: its name is the benchmark key for the
setup ``main`` and ``<benchmark>@<setup>`` for the others, and it names the output directory
``scmoa/{smodel}/{sbench}/`` (so the main setup keeps the plain benchmark directories).

Pure functions of the workflow config (nothing is read from disk): :class:`ScmoaPlan` is built
once by ``rules/scmoa/common.smk`` and unit-tested directly.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping, Sequence

from concord.papers.scmoa import report

# Keys that say where questions and models come from; the rest are the methods' settings.
PLACEMENT_KEYS = ("benchmarks", "models", "server", "endpoints", "setups")

#: Named targets of single tables and figures (``snakemake scmoa_table40``): target -> stems.
NAMED_TARGETS: dict[str, list[str]] = {
    "scmoa_table1": ["accuracy"],
    "scmoa_table13": ["table13_significance_all_pairs", "significance"],
    "scmoa_table15": ["table15_public_private"],
    "scmoa_table17": ["table17_error_correlation"],
    "scmoa_table21": ["table21_override"],
    "scmoa_table22": ["table22_override_decomposition"],
    "scmoa_table23": ["table23_oracle"],
    "scmoa_table26": ["table26_sampling_protocol"],
    "scmoa_table27": ["table27_diversity_source"],
    "scmoa_table28": ["table28_tokens"],
    "scmoa_table40": ["table40_selection"],
    "scmoa_section3": [report.SECTION3_TABLE],
    "scmoa_table36": [report.TABLE36],
    "scmoa_table37": [report.TABLE37],
    "scmoa_ksweep": [report.KSWEEP_TABLE, "k_sweep", "sweeps"],
    "scmoa_figure3": ["figure3_pareto"],
    "scmoa_figure4b": ["figure4b_consensus_gain", "transition"],
    "scmoa_figure6c": ["figure6c_n_sweep"],
}


def merge(base: Mapping, over: Mapping) -> dict:
    """``over`` laid on ``base``, nested mappings merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _as_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class ScmoaPlan:
    """The SC-MoA part of one workflow config.

    Args:
        config: the workflow config (validated by the schema).
        results: the results directory (``results_dir``).
        core_models: the CoRE models' keys, the proposers when ``scmoa.models`` is absent.

    Building one checks that every role and pool model is served or run in process, and that no
    setup's name clashes with a named target.
    """

    def __init__(self, config: Mapping[str, Any], results: str, core_models: Sequence[str] = ()):
        self.config = config
        self.results = results
        self.scmoa: Mapping[str, Any] = config.get("scmoa") or {}
        self.benchmarks: Mapping[str, Any] = self.scmoa.get("benchmarks") or {}
        self.models = self.scmoa.get("models") or list(core_models)
        self.root = f"{results}/scmoa"
        self.base = {k: v for k, v in self.scmoa.items() if k not in PLACEMENT_KEYS}
        self.setups: Mapping[str, Any] = self.scmoa.get("setups") or {"main": {}}
        self.server: Mapping[str, Any] = self.scmoa.get("server") or {}
        self.endpoints = self._endpoints()
        self.cell_of = {cell: (bench, setup) for cell, bench, setup in self.cells()}
        self._check_model_keys()
        self._check_named_targets()

    # ------------------------------------------------------------------ settings and cells
    def _endpoints(self) -> dict[str, dict]:
        """Model key -> OpenAI-compatible endpoint: ``scmoa.server`` (one URL for every model in its
        served_names, or in scmoa.models) overlaid with the per-model ``scmoa.endpoints``."""
        out: dict[str, dict] = {}
        if self.server.get("base_url"):
            names = self.server.get("served_names") or {}
            for key in dict.fromkeys(list(self.scmoa.get("models") or []) + list(names)):
                out[key] = {"base_url": self.server["base_url"], "model": names.get(key, key),
                            "concurrency": int(self.server.get("concurrency", 8)),
                            "timeout_s": float(self.server.get("timeout_s", 300))}
        for key, spec in (self.scmoa.get("endpoints") or {}).items():
            out[key] = {**out.get(key, {}), **spec}
        return out

    def settings(self, setup: str) -> dict:
        """The method settings of one setup (the section's, overlaid with the setup's)."""
        return merge(self.base, {k: v for k, v in self.setups[setup].items() if k != "benchmarks"})

    def cells(self, setup: str | None = None) -> list[tuple[str, str, str]]:
        """(cell, benchmark, setup) of every run: each setup on its benchmarks (default all)."""
        out = []
        for name, spec in self.setups.items():
            if setup is not None and name != setup:
                continue
            for bench in spec.get("benchmarks") or list(self.benchmarks):
                if bench not in self.benchmarks:
                    raise ValueError(f"scmoa.setups.{name}.benchmarks names {bench!r}, not a key of scmoa.benchmarks "
                                     f"({', '.join(self.benchmarks) or 'none'})")
                out.append((bench if name == "main" else f"{bench}@{name}", bench, name))
        return out

    def cell_settings(self, cell: str) -> dict:
        return self.settings(self.cell_of[cell][1])

    def _check_model_keys(self) -> None:
        """Role and pool models must be served (an endpoint) or be a proposer run in process."""
        for setup in self.setups:
            s = self.settings(setup)
            for what in ("moa_pool", "goa_pool"):
                for key in s.get(what) or []:
                    if key not in self.endpoints and key not in self.models:
                        raise ValueError(f"scmoa {what} (setup {setup}) names model {key!r}, which has no endpoint; add "
                                         f"scmoa.endpoints.{key} (base_url, model) or use one of {list(self.models)}")
            for role, key in (s.get("roles") or {}).items():
                if key and key not in self.endpoints and key not in self.models:
                    raise ValueError(f"scmoa roles.{role} (setup {setup}) names model {key!r}, which has no endpoint; "
                                     f"add scmoa.endpoints.{key} (base_url, model)")

    def _check_named_targets(self) -> None:
        clash = sorted(f"scmoa_{s}" for s in self.setups if f"scmoa_{s}" in NAMED_TARGETS or s in ("all", "crossrun"))
        if clash:
            raise ValueError(f"scmoa.setups: {', '.join(clash)} would clash with a named target; rename the setup(s)")

    # ------------------------------------------------------------------ data and run arguments
    def data_input(self, sdata: str) -> list[str]:
        spec = self.benchmarks[sdata]
        if spec.get("benchmark"):  # a benchmark of the main workflow, made by rule data
            return [f"{self.results}/data/{spec['benchmark']}.jsonl"]
        return [spec["path"]] if spec.get("path") else []

    def data_args(self, sdata: str, inputs: Sequence[str]) -> str:
        spec = self.benchmarks[sdata]
        args = ["--format", "questions" if spec.get("benchmark") else spec["format"]]
        if inputs:
            args += ["--input", str(inputs[0])]
        for key in ("limit", "public_asserts", "expected_count"):
            if spec.get(key) is not None:
                args += [f"--{key.replace('_', '-')}", str(int(spec[key]))]
        for key in ("start_date", "end_date", "subset"):
            if spec.get(key):
                args += [f"--{key.replace('_', '-')}", str(spec[key])]
        args += ["--seed", str(int(spec.get("seed", 0)))]
        return " ".join(shlex.quote(a) for a in args)

    def model_keys(self, smodel: str, cell: str) -> list[str]:
        """Every model key a cell calls: the proposer, the role models and the MoA/GoA pools."""
        s = self.cell_settings(cell)
        keys = [smodel] + [k for k in (s.get("roles") or {}).values() if k]
        return list(dict.fromkeys(keys + list(s.get("moa_pool") or []) + list(s.get("goa_pool") or [])))

    def on_server(self, smodel: str) -> bool:
        return smodel in self.endpoints

    def model_input(self, smodel: str) -> list[str]:
        # An endpoint's model lives behind its URL, not in results/models.
        return [] if self.on_server(smodel) else [f"{self.results}/models/{smodel}"]

    def backend_args(self, smodel: str, cell: str) -> str:
        needed = {k: self.endpoints[k] for k in self.model_keys(smodel, cell) if k in self.endpoints}
        args = ["--model", smodel]
        if needed:
            args += ["--endpoints", _as_json(needed)]
        if not self.on_server(smodel):
            engine = self.config.get("engine", {})
            args += ["--model-path", f"{self.results}/models/{smodel}", "--engine", engine.get("backend", "hf"),
                     "--batch-size", str(int(engine.get("batch_size", 16))), "--dtype", str(engine.get("dtype", "auto"))]
        return " ".join(shlex.quote(a) for a in args)

    # ------------------------------------------------------------------ targets
    def analysis_dir(self, model: str, cell: str) -> str:
        return f"{self.root}/{model}/{cell}/analysis"

    def targets(self, setup: str | None = None, stems: Sequence[str] | None = None) -> list[str]:
        """Final SC-MoA outputs: every table, figure and summary per (model, cell); ``setup`` keeps
        one setup's cells, ``stems`` a few tables/figures (the named targets)."""
        out = []
        for m in self.models:
            for cell, _, cell_setup in self.cells(setup):
                base = self.analysis_dir(m, cell)
                if stems is None:
                    out.append(f"{base}/summary.json")
                tables = [*report.TABLES, *report.extra_tables(self.settings(cell_setup))]
                out += [f"{base}/{t}.{ext}" for t in tables if stems is None or t in stems for ext in ("csv", "md", "tex")]
                out += [f"{base}/{f}.{ext}" for f in report.FIGURES if stems is None or f in stems for ext in ("png", "pdf")]
        if stems is None and setup is None and self.models and self.benchmarks:
            out += [f"{self.root}/crossrun/{f}.{ext}" for f in report.CROSSRUN_FIGURES for ext in ("png", "pdf")]
            out += [f"{self.root}/crossrun/{report.CROSSRUN_TABLE}.{ext}" for ext in ("csv", "md", "tex")]
        return out
