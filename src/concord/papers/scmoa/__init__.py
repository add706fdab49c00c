"""SC-MoA: Self-Consistent Mixture of Agents (perturb, propose, anchor, always aggregate, override).

``run_scmoa(question, chat, *, n, k, task, tests=None, **options)`` runs Algorithm 1 on one
question with any chat object (:mod:`concord.chat`); baselines, analyses and benchmark loaders
live in the sibling modules.
"""

from concord.papers.scmoa.pipeline import SCMoAResult, run_scmoa

#: The paper this package reproduces (the specification the project was built from).
PAPER = {
    "title": "Beyond Consensus: Trace-Level Synthesis in Mixture of Agents",
    "arxiv": "2605.29116",
    "spec": "shared/seeds/004_b0681c21c58f45f9.txt",
}

__all__ = ["PAPER", "SCMoAResult", "run_scmoa"]
