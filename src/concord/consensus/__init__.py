"""Consensus: N roll-outs of one question -> pseudo-label, per-roll-out rewards, gate.

This package face only hands names on:

- :mod:`concord.consensus.operators`: the CoRE paper's four operators (``majority``, ``ec``,
  ``cisc``, ``core``) behind :func:`score_group` / :func:`score_groups`;
- :mod:`concord.consensus.graph`: the roll-out graph, calibration and replicator dynamics;
- :mod:`concord.consensus.votes`: plurality and confidence-weighted votes;
- :mod:`concord.consensus.fmv`: functional majority voting over programs' execution vectors.
"""

from __future__ import annotations

from concord.consensus.fmv import fmv_select, pointwise_target  # noqa: F401  (FMV for code)
from concord.consensus.operators import (
    CONSENSUS_METHODS,
    DEFAULTS,
    GRAPH_METHODS,
    METHODS,
    ConsensusMethod,
    ConsensusResult,
    score_group,
    score_groups,
)

__all__ = [
    "CONSENSUS_METHODS", "DEFAULTS", "GRAPH_METHODS", "METHODS", "ConsensusMethod", "ConsensusResult", "score_group",
    "score_groups",
]
