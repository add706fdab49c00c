"""The CoRE paper's experiment (*CoRE: Consensus Rewards via Equilibrium for Test-Time RL*).

Modules: :mod:`~concord.papers.core.rollouts` (N roll-outs per question with confidences),
:mod:`~concord.papers.core.analysis` (Figure 2, Appendix H), :mod:`~concord.papers.core.evaluation`
(pass@1 as mean@k), :mod:`~concord.papers.core.curves` (Figure 3), :mod:`~concord.papers.core.tables`
(Tables 1-3), :mod:`~concord.papers.core.figures` (Figures 2, 4, 5a, 5b). The consensus operators and
the test-time GRPO trainer it uses live in the shared layer (:mod:`concord.consensus`, :mod:`concord.rl`).
"""

#: The paper this package reproduces (the specification the project was built from).
PAPER = {
    "title": "CoRE: Consensus Rewards via Equilibrium for Test-Time Reinforcement Learning",
    "spec": "shared/seeds/000_27c153f1e59a38b5.txt",
}
