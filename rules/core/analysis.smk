# Offline consensus analysis on stored roll-outs (no training): Figure 2 and Appendix H.


rule label_accuracy:
    input:
        f"{RESULTS}/rollouts/{{model}}/{{benchmark}}/seed{{seed}}.parquet",
    output:
        table=f"{RESULTS}/analysis/{{model}}/{{benchmark}}/seed{{seed}}/label_accuracy.csv",
        markdown=f"{RESULTS}/analysis/{{model}}/{{benchmark}}/seed{{seed}}/label_accuracy.md",
        latex=f"{RESULTS}/analysis/{{model}}/{{benchmark}}/seed{{seed}}/label_accuracy.tex",
        png=in_report(
            f"{RESULTS}/figures/figure2/{{model}}_{{benchmark}}_seed{{seed}}.png",
            "core/figure2.rst",
            "CoRE paper",
            "Figure 2",
            model="{model}",
            benchmark="{benchmark}",
            seed="{seed}",
        ),
        pdf=f"{RESULTS}/figures/figure2/{{model}}_{{benchmark}}_seed{{seed}}.pdf",
    params:
        consensus=as_json(section("consensus")),
        analysis=as_json(section("analysis")),
        # Display names (report.labels) so the figure says which model and benchmark it shows.
        title=lambda wc: " / ".join(
            section("report").get("labels", {}).get(key, key) for key in (wc.model, wc.benchmark)
        ),
    log:
        f"{LOGS}/analysis/{{model}}/{{benchmark}}/seed{{seed}}/label_accuracy.log",
    benchmark:
        f"{BENCH}/analysis/{{model}}/{{benchmark}}/seed{{seed}}/label_accuracy.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-label-accuracy --rollouts {input:q} --consensus {params.consensus:q}"
            " --analysis {params.analysis:q} --seed {wildcards.seed} --title {params.title:q}"
            " --table {output.table:q} --figure {output.png:q} > {log:q} 2>&1"
        )


rule recovery:
    input:
        lambda wc: f"{RESULTS}/rollouts/{wc.model}/{wc.benchmark}/seed{first_seed()}.parquet",
    output:
        questions=f"{RESULTS}/analysis/{{model}}/{{benchmark}}/recovery_questions.csv",
        summary=f"{RESULTS}/analysis/{{model}}/{{benchmark}}/recovery.json",
        markdown=in_report(
            f"{RESULTS}/analysis/{{model}}/{{benchmark}}/recovery.md",
            "core/recovery.rst",
            "CoRE paper",
            "Appendix H",
            model="{model}",
            benchmark="{benchmark}",
        ),
    params:
        consensus=as_json(section("consensus")),
    log:
        f"{LOGS}/analysis/{{model}}/{{benchmark}}/recovery.log",
    benchmark:
        f"{BENCH}/analysis/{{model}}/{{benchmark}}/recovery.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord core-recovery --rollouts {input:q} --consensus {params.consensus:q}"
            " --questions-out {output.questions:q} --summary-out {output.summary:q}"
            " --markdown-out {output.markdown:q} > {log:q} 2>&1"
        )


FIGURE2_TARGETS = CORE_PLAN.figure2_targets()
APPENDIX_H_TARGETS = CORE_PLAN.appendix_h_targets()


rule figure2:
    input:
        FIGURE2_TARGETS,


rule appendix_h:
    input:
        APPENDIX_H_TARGETS,

