# Variables and input/param functions of the SC-MoA rules (rules/scmoa/scmoa.smk).
#
# A *setup* is one operating point of the paper (the main N=5, k=2 run; the mechanistic N=4, k=5
# configuration; the Appendix H.1 k-sweep; ...): the section's method settings overlaid with the
# setup's own. A *cell* is one benchmark run under one setup: its name is the benchmark key for the
# setup `main` and `<benchmark>@<setup>` for the others, and it names the output directory
# scmoa/{smodel}/{sbench}/ (so the main setup keeps the plain benchmark directories).

import shlex as _scmoa_shlex

from concord.papers.scmoa import report as _scmoa_report

SCMOA = config.get("scmoa") or {}
SCMOA_BENCHMARKS = SCMOA.get("benchmarks") or {}
SCMOA_MODELS = SCMOA.get("models") or MODELS
SCMOA_R = f"{RESULTS}/scmoa"
SCMOA_TABLES = _scmoa_report.TABLES
SCMOA_FIGURES = _scmoa_report.FIGURES
# Keys that say where questions and models come from; the rest are the methods' settings.
_SCMOA_PLACEMENT = ("benchmarks", "models", "server", "endpoints", "setups")
_SCMOA_BASE = {k: v for k, v in SCMOA.items() if k not in _SCMOA_PLACEMENT}
SCMOA_SETUPS = SCMOA.get("setups") or {"main": {}}
SCMOA_SERVER = SCMOA.get("server") or {}


def _scmoa_endpoints():
    """Model key -> OpenAI-compatible endpoint: `scmoa.server` (one URL for every model in its
    served_names, or in scmoa.models) overlaid with the per-model `scmoa.endpoints`."""
    out = {}
    if SCMOA_SERVER.get("base_url"):
        names = SCMOA_SERVER.get("served_names") or {}
        for key in dict.fromkeys(list(SCMOA.get("models") or []) + list(names)):
            out[key] = {"base_url": SCMOA_SERVER["base_url"], "model": names.get(key, key),
                        "concurrency": int(SCMOA_SERVER.get("concurrency", 8)),
                        "timeout_s": float(SCMOA_SERVER.get("timeout_s", 300))}
    for key, spec in (SCMOA.get("endpoints") or {}).items():
        out[key] = {**out.get(key, {}), **spec}
    return out


SCMOA_ENDPOINTS = _scmoa_endpoints()


def _merge(base, over):
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def scmoa_settings(setup):
    """The method settings of one setup (the section's, overlaid with the setup's)."""
    return _merge(_SCMOA_BASE, {k: v for k, v in SCMOA_SETUPS[setup].items() if k != "benchmarks"})


def scmoa_cells(setup=None):
    """(cell, benchmark, setup) of every run: each setup on its benchmarks (default all)."""
    out = []
    for name, spec in SCMOA_SETUPS.items():
        if setup is not None and name != setup:
            continue
        for bench in spec.get("benchmarks") or list(SCMOA_BENCHMARKS):
            if bench not in SCMOA_BENCHMARKS:
                raise ValueError(f"scmoa.setups.{name}.benchmarks names {bench!r}, not a key of scmoa.benchmarks "
                                 f"({', '.join(SCMOA_BENCHMARKS) or 'none'})")
            out.append((bench if name == "main" else f"{bench}@{name}", bench, name))
    return out


_SCMOA_CELL = {cell: (bench, setup) for cell, bench, setup in scmoa_cells()}


def _check_model_keys():
    """Role and pool models must be served (an endpoint) or be a proposer run in process."""
    for setup in SCMOA_SETUPS:
        s = scmoa_settings(setup)
        for what in ("moa_pool", "goa_pool"):
            for key in s.get(what) or []:
                if key not in SCMOA_ENDPOINTS and key not in SCMOA_MODELS:
                    raise ValueError(f"scmoa {what} (setup {setup}) names model {key!r}, which has no endpoint; add "
                                     f"scmoa.endpoints.{key} (base_url, model) or use one of {list(SCMOA_MODELS)}")
        for role, key in (s.get("roles") or {}).items():
            if key and key not in SCMOA_ENDPOINTS and key not in SCMOA_MODELS:
                raise ValueError(f"scmoa roles.{role} (setup {setup}) names model {key!r}, which has no endpoint; "
                                 f"add scmoa.endpoints.{key} (base_url, model)")


_check_model_keys()


def _cell_settings(wildcards):
    return scmoa_settings(_SCMOA_CELL[wildcards.sbench][1])


def _scmoa_data_input(wildcards):
    spec = SCMOA_BENCHMARKS[wildcards.sdata]
    if spec.get("benchmark"):  # a benchmark of the main workflow, made by rule data
        return [f"{RESULTS}/data/{spec['benchmark']}.jsonl"]
    return [spec["path"]] if spec.get("path") else []


def _scmoa_data_args(wildcards, input):
    spec = SCMOA_BENCHMARKS[wildcards.sdata]
    fmt = "questions" if spec.get("benchmark") else spec["format"]
    args = ["--format", fmt]
    if input:
        args += ["--input", str(input[0])]
    for key in ("limit", "public_asserts", "expected_count"):
        if spec.get(key) is not None:
            args += [f"--{key.replace('_', '-')}", str(int(spec[key]))]
    for key in ("start_date", "end_date", "subset"):
        if spec.get(key):
            args += [f"--{key.replace('_', '-')}", str(spec[key])]
    args += ["--seed", str(int(spec.get("seed", 0)))]
    return " ".join(_scmoa_shlex.quote(a) for a in args)


def _scmoa_keys(wildcards):
    """Every model key a cell calls: the proposer, the role models and the MoA/GoA pools."""
    s = _cell_settings(wildcards)
    keys = [wildcards.smodel] + [k for k in (s.get("roles") or {}).values() if k]
    return list(dict.fromkeys(keys + list(s.get("moa_pool") or []) + list(s.get("goa_pool") or [])))


def _scmoa_on_server(wildcards):
    return wildcards.smodel in SCMOA_ENDPOINTS


def _scmoa_model_input(wildcards):
    # An endpoint's model lives behind its URL, not in results/models.
    return [] if _scmoa_on_server(wildcards) else [f"{RESULTS}/models/{wildcards.smodel}"]


def _scmoa_backend_args(wildcards, input):
    needed = {k: SCMOA_ENDPOINTS[k] for k in _scmoa_keys(wildcards) if k in SCMOA_ENDPOINTS}
    args = ["--model", wildcards.smodel]
    if needed:
        args += ["--endpoints", as_json(needed)]
    if not _scmoa_on_server(wildcards):
        engine = config.get("engine", {})
        args += ["--model-path", f"{RESULTS}/models/{wildcards.smodel}", "--engine", engine.get("backend", "hf"),
                 "--batch-size", str(int(engine.get("batch_size", 16))), "--dtype", str(engine.get("dtype", "auto"))]
    return " ".join(_scmoa_shlex.quote(a) for a in args)


def _scmoa_dir(model, cell):
    return f"{SCMOA_R}/{model}/{cell}/analysis"


def scmoa_targets(setup=None, stems=None):
    """Final SC-MoA outputs: every table, figure and summary per (model, cell); ``setup`` keeps
    one setup's cells, ``stems`` a few tables/figures (the named targets)."""
    out = []
    for m in SCMOA_MODELS:
        for cell, _, cell_setup in scmoa_cells(setup):
            base = _scmoa_dir(m, cell)
            if stems is None:
                out.append(f"{base}/summary.json")
            tables = [*SCMOA_TABLES, *_scmoa_report.extra_tables(scmoa_settings(cell_setup))]
            out += [f"{base}/{t}.{ext}" for t in tables if stems is None or t in stems for ext in ("csv", "md", "tex")]
            out += [f"{base}/{f}.{ext}" for f in SCMOA_FIGURES if stems is None or f in stems for ext in ("png", "pdf")]
    if stems is None and setup is None and SCMOA_MODELS and SCMOA_BENCHMARKS:
        out += [f"{SCMOA_R}/crossrun/{f}.{ext}" for f in _scmoa_report.CROSSRUN_FIGURES for ext in ("png", "pdf")]
        out += [f"{SCMOA_R}/crossrun/{_scmoa_report.CROSSRUN_TABLE}.{ext}" for ext in ("csv", "md", "tex")]
    return out


#: Named targets of single tables and figures (`snakemake scmoa_table40`): target -> stems.
SCMOA_NAMED = {
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
    "scmoa_section3": [_scmoa_report.SECTION3_TABLE],
    "scmoa_table36": [_scmoa_report.TABLE36],
    "scmoa_table37": [_scmoa_report.TABLE37],
    "scmoa_ksweep": [_scmoa_report.KSWEEP_TABLE, "k_sweep", "sweeps"],
    "scmoa_figure3": ["figure3_pareto"],
    "scmoa_figure4b": ["figure4b_consensus_gain", "transition"],
    "scmoa_figure6c": ["figure6c_n_sweep"],
}


_clash = sorted(f"scmoa_{s}" for s in SCMOA_SETUPS if f"scmoa_{s}" in SCMOA_NAMED or s in ("all", "crossrun"))
if _clash:
    raise ValueError(f"scmoa.setups: {', '.join(_clash)} would clash with a named target; rename the setup(s)")


def scmoa_report_item(path, stem, ext, figure=False):
    """Tables (CSV) and figures (PNG) of SC-MoA in the HTML report, one caption per stem."""
    if ext not in ("csv", "png"):
        return path
    caption = report_caption("scmoa", f"fig_{stem}", "figure") if figure else report_caption("scmoa", stem)
    return in_report(path, caption, "SC-MoA paper", "{smodel} / {sbench}", item=stem, kind="figure" if figure else "table")
