"""Tables 1-3 and Figures 4, 5a, 5b: one named target each (`snakemake table1`, `snakemake figure4`).

Each rule's input is exactly the evaluation or analysis files its command reads (the same
concord.tables / concord.plots functions compute both), so a target rebuilds only what it needs.
Outputs are marked for the HTML report (`snakemake --report results/report.html`), captions in
report/*.rst. The config sections tables and figures read travel as a JSON param, so editing one of
them reruns the affected targets. Every table and figure joins ALL_TARGETS (rules/common.smk).
"""

import json as _report_json
import os.path as _report_path

from concord import plots as _plots
from concord import tables as _tables

report: "../report/workflow.rst"


_REPORT_RESULTS = config.get("results_dir", "results")
_REPORT_CONFIG_JSON = _report_json.dumps(
    {k: config[k] for k in ("models", "benchmarks", "arms", "seeds", "report") if k in config},
    sort_keys=True,
)
report_targets = lambda: _plots.report_targets(config, _REPORT_RESULTS)
ALL_TARGETS.extend(report_targets())


for _table in _tables.report_section(config)["tables"]:

    rule:
        name:
            _table
        localrule: True
        input:
            _tables.table_inputs(config, _table, _REPORT_RESULTS),
        output:
            csv=report(
                str(_tables.table_outputs(_table, _REPORT_RESULTS)["csv"]),
                caption="../report/table.rst",
                category="Tables",
                labels={"table": _tables.display_name(_table), "format": "CSV"},
            ),
            md=str(_tables.table_outputs(_table, _REPORT_RESULTS)["md"]),
            tex=str(_tables.table_outputs(_table, _REPORT_RESULTS)["tex"]),
        params:
            table=_table,
            config_json=_REPORT_CONFIG_JSON,
            results=lambda wildcards, output: _report_path.dirname(_report_path.dirname(output.csv)),
        log:
            f"{_REPORT_RESULTS}/logs/report/{_table}.log",
        conda:
            "../envs/analysis.yaml"
        shell:
            "python -m concord table --table {params.table} --results {params.results:q}"
            " --config-json {params.config_json:q} --rule {params.table} --conda-env envs/analysis.yaml"
            " > {log:q} 2>&1"


# Figures: input functions, so a figure the config cannot support (e.g. figure5b without all four
# arms) fails with its reason only when that figure is requested.


rule figure4:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure4", _REPORT_RESULTS),
    output:
        png=report(
            f"{_REPORT_RESULTS}/figures/figure4.png",
            caption="../report/figure4.rst",
            category="Figures",
            labels={"figure": "Figure 4", "format": "PNG"},
        ),
        pdf=f"{_REPORT_RESULTS}/figures/figure4.pdf",
        csv=f"{_REPORT_RESULTS}/figures/figure4.csv",
    params:
        figure="figure4",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: _report_path.dirname(_report_path.dirname(output.png)),
    log:
        f"{_REPORT_RESULTS}/logs/report/figure4.log",
    conda:
        "../envs/analysis.yaml"
    shell:
        "python -m concord figure --figure {params.figure} --results {params.results:q}"
        " --config-json {params.config_json:q} --rule {params.figure} --conda-env envs/analysis.yaml"
        " > {log:q} 2>&1"


rule figure5a:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure5a", _REPORT_RESULTS),
    output:
        png=report(
            f"{_REPORT_RESULTS}/figures/figure5a.png",
            caption="../report/figure5a.rst",
            category="Figures",
            labels={"figure": "Figure 5a", "format": "PNG"},
        ),
        pdf=f"{_REPORT_RESULTS}/figures/figure5a.pdf",
        csv=f"{_REPORT_RESULTS}/figures/figure5a.csv",
        json=f"{_REPORT_RESULTS}/figures/figure5a.json",
    params:
        figure="figure5a",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: _report_path.dirname(_report_path.dirname(output.png)),
    log:
        f"{_REPORT_RESULTS}/logs/report/figure5a.log",
    conda:
        "../envs/analysis.yaml"
    shell:
        "python -m concord figure --figure {params.figure} --results {params.results:q}"
        " --config-json {params.config_json:q} --rule {params.figure} --conda-env envs/analysis.yaml"
        " > {log:q} 2>&1"


rule figure5b:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure5b", _REPORT_RESULTS),
    output:
        png=report(
            f"{_REPORT_RESULTS}/figures/figure5b.png",
            caption="../report/figure5b.rst",
            category="Figures",
            labels={"figure": "Figure 5b", "format": "PNG"},
        ),
        pdf=f"{_REPORT_RESULTS}/figures/figure5b.pdf",
        csv=f"{_REPORT_RESULTS}/figures/figure5b.csv",
    params:
        figure="figure5b",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: _report_path.dirname(_report_path.dirname(output.png)),
    log:
        f"{_REPORT_RESULTS}/logs/report/figure5b.log",
    conda:
        "../envs/analysis.yaml"
    shell:
        "python -m concord figure --figure {params.figure} --results {params.results:q}"
        " --config-json {params.config_json:q} --rule {params.figure} --conda-env envs/analysis.yaml"
        " > {log:q} 2>&1"
