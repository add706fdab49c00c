"""Tables 1-3 and Figures 4, 5a, 5b: one named target each (`snakemake table1`, `snakemake figure4`).

Each rule's input is exactly the evaluation or analysis files its command reads (the same
concord.papers.core.tables / concord.papers.core.figures functions compute both), so a target rebuilds only what it needs.
Outputs are marked for the HTML report (`snakemake --report results/report.html`), captions in
report/core/*.rst. The config sections tables and figures read travel as a JSON param, so editing one of
them reruns the affected targets. Every table and figure is a final output (core_targets(), rules/core/common.smk).
"""

for _table in _tables.report_section(config)["tables"] if CORE_ENABLED else []:

    rule:
        name:
            _table
        localrule: True
        input:
            _tables.table_inputs(config, _table, RESULTS),
        output:
            csv=in_report(
                str(_tables.table_outputs(_table, RESULTS)["csv"]),
                "core/table.rst",
                "CoRE paper",
                _tables.display_name(_table),
            ),
            md=str(_tables.table_outputs(_table, RESULTS)["md"]),
            tex=str(_tables.table_outputs(_table, RESULTS)["tex"]),
        params:
            table=_table,
            config_json=_REPORT_CONFIG_JSON,
            results=lambda wildcards, output: os.path.dirname(os.path.dirname(output.csv)),
        log:
            f"{RESULTS}/logs/report/{_table}.log",
        conda:
            "../../envs/analysis.yaml"
        shell:
            audited(
                "python -m concord core-table --table {params.table} --results {params.results:q}"
                " --config-json {params.config_json:q} > {log:q} 2>&1"
            )


# Figures: input functions, so a figure the config cannot support (e.g. figure5b without all four
# arms) fails with its reason only when that figure is requested.


rule figure4:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure4", RESULTS),
    output:
        png=in_report(f"{RESULTS}/figures/figure4.png", "core/figure4.rst", "CoRE paper", "Figure 4"),
        pdf=f"{RESULTS}/figures/figure4.pdf",
        csv=f"{RESULTS}/figures/figure4.csv",
    params:
        figure="figure4",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: os.path.dirname(os.path.dirname(output.png)),
    log:
        f"{RESULTS}/logs/report/figure4.log",
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-figure --figure {params.figure} --results {params.results:q}"
            " --config-json {params.config_json:q} > {log:q} 2>&1"
        )


rule figure5a:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure5a", RESULTS),
    output:
        png=in_report(f"{RESULTS}/figures/figure5a.png", "core/figure5a.rst", "CoRE paper", "Figure 5a"),
        pdf=f"{RESULTS}/figures/figure5a.pdf",
        csv=f"{RESULTS}/figures/figure5a.csv",
        json=f"{RESULTS}/figures/figure5a.json",
    params:
        figure="figure5a",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: os.path.dirname(os.path.dirname(output.png)),
    log:
        f"{RESULTS}/logs/report/figure5a.log",
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-figure --figure {params.figure} --results {params.results:q}"
            " --config-json {params.config_json:q} > {log:q} 2>&1"
        )


rule figure5b:
    localrule: True
    input:
        lambda wildcards: _plots.figure_inputs(config, "figure5b", RESULTS),
    output:
        png=in_report(f"{RESULTS}/figures/figure5b.png", "core/figure5b.rst", "CoRE paper", "Figure 5b"),
        pdf=f"{RESULTS}/figures/figure5b.pdf",
        csv=f"{RESULTS}/figures/figure5b.csv",
    params:
        figure="figure5b",
        config_json=_REPORT_CONFIG_JSON,
        results=lambda wildcards, output: os.path.dirname(os.path.dirname(output.png)),
    log:
        f"{RESULTS}/logs/report/figure5b.log",
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-figure --figure {params.figure} --results {params.results:q}"
            " --config-json {params.config_json:q} > {log:q} 2>&1"
        )
