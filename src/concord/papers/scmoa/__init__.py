"""SC-MoA: Self-Consistent Mixture of Agents (perturb, propose, anchor, always aggregate, override).

``run_scmoa(question, chat, *, n, k, task, tests=None, **options)`` runs Algorithm 1 on one
question with any chat object (:mod:`concord.chat`); baselines, analyses and benchmark loaders
live in the sibling modules.
"""

from concord.papers.scmoa.pipeline import SCMoAResult, run_scmoa

__all__ = ["SCMoAResult", "run_scmoa"]
