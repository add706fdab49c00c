"""One package per paper's experiment, above the shared layer (everything else in ``concord``).

* :mod:`concord.papers.core` -- *CoRE: Consensus Rewards via Equilibrium for Test-Time RL*:
  roll-outs, offline consensus analysis (Figure 2, Appendix H), evaluation, Figure 3,
  Tables 1-3, Figures 4-5. Its reward arms (majority, ec, cisc, core) are consensus operators of
  the shared layer (:mod:`concord.rl.rewards`).
* :mod:`concord.papers.fmv` -- *Majority Voting for Code Generation* (functional majority voting):
  candidates, sandboxed execution vectors, selection methods, FMV-TTRL arms, its figures and tables.
* :mod:`concord.papers.scmoa` -- *Beyond Consensus: Trace-Level Synthesis in Mixture of Agents*.

Importing this package registers every paper's named operators (reward arms, ...) into the
shared registries (:mod:`concord.registry`); the command line does so once at start-up.
"""

from concord.papers.fmv import rewards as _fmv_rewards  # noqa: F401  (registers fmv, fmv_pointwise)
from concord.papers.fmv import ttrl as _fmv_ttrl  # noqa: F401  (registers the code training task)
