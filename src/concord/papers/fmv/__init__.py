"""The FMV paper's experiment (*Majority Voting for Code Generation*: functional majority voting).

Modules: :mod:`~concord.papers.fmv.data` (HumanEval, LiveCodeBench records),
:mod:`~concord.papers.fmv.prompts`, :mod:`~concord.papers.fmv.extract` (code from completions),
:mod:`~concord.papers.fmv.grading` (benchmark verdicts), :mod:`~concord.papers.fmv.baselines`
(semantic voting, GenCluster), :mod:`~concord.papers.fmv.experiments` (selection methods, Figure 2,
Tables 1-2 data), :mod:`~concord.papers.fmv.rewards` (the ``fmv``/``fmv_pointwise`` TTRL arms),
:mod:`~concord.papers.fmv.ttrl`, :mod:`~concord.papers.fmv.report`, :mod:`~concord.papers.fmv.steps`
(what each ``fmv-*`` command does), :mod:`~concord.papers.fmv.planning` (what the rules ask: paths,
Tables 1-2 rows, targets). The FMV operators themselves
(execution vectors, Eq. 1 score, Pointwise target) are shared consensus operators
(:mod:`concord.consensus.fmv`); sandboxed execution is :mod:`concord.execution`.
"""

#: The paper this package reproduces (the specification the project was built from).
PAPER = {
    "title": "Majority Voting for Code Generation",
    "spec": "shared/seeds/003_8c07f649c8f260e5.txt",
}
