"""The reproduction scorecard (`snakemake scorecard`): every number the three papers print beside
the number this run produced, with the difference and a verdict (concord.scorecard).

Its input is exactly the produced tables the config asks for (picked from paper_outputs() by
concord.scorecard.scorecard_inputs), so it works on any subset of the grid: what the config does
not produce shows as "not run".
"""

import os.path as _scorecard_path
import shlex as _scorecard_shlex

from concord import scorecard as _scorecard

_SCORECARD_DIR = f"{RESULTS}/scorecard"
_SCORECARD_TABLES = _scorecard.scorecard_inputs(paper_outputs(), RESULTS)
# docs/fidelity.md links scorecard rows to the choices where concord differs from a paper.
_SCORECARD_FIDELITY = [
    p for p in [_scorecard_path.join(workflow.basedir, "docs/fidelity.md")] if _scorecard_path.isfile(p)
]
_SCORECARD_CONFIG = as_json(
    {
        k: config[k]
        for k in ("run_name", "evaluation", "training", "fmv", "scmoa", "report", "models", "benchmarks", "consensus",
                  "rollouts", "seeds")
        if k in config
    }
)
_SCORECARD_PAGES = {"summary": "Summary", "core": "CoRE", "fmv": "FMV", "scmoa": "SC-MoA"}


rule scorecard:
    localrule: True
    input:
        tables=_SCORECARD_TABLES,
        fidelity=_SCORECARD_FIDELITY,
    output:
        # The HTML pages go into Snakemake's report (`snakemake --report`), one entry per page.
        [
            report(
                f"{_SCORECARD_DIR}/{name}",
                caption="../report/scorecard.rst",
                category="Scorecard",
                labels={"page": _SCORECARD_PAGES[name.split(".")[0]]},
            )
            if name.endswith(".html")
            else f"{_SCORECARD_DIR}/{name}"
            for name in _scorecard.output_names()
        ],
    params:
        config_json=_SCORECARD_CONFIG,
        fidelity=lambda wildcards, input: (
            f"--fidelity {_scorecard_shlex.quote(input.fidelity[0])}" if input.fidelity else ""
        ),
        results=lambda wildcards, output: os.path.dirname(os.path.dirname(output[0])),
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    log:
        f"{LOGS}/scorecard.log",
    conda:
        "../envs/analysis.yaml"
    shell:
        audited(
            "python -m concord scorecard {input.tables:q} --results {params.results:q} --out-dir {params.out_dir:q}"
            " --config-json {params.config_json:q} {params.fidelity} > {log:q} 2>&1"
        )

