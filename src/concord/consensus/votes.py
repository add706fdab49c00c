"""Vote-based consensus arms (seed 000, section 4): ``majority`` (TTRL) and ``cisc``.

Both read a label from (weighted) class counts and give a binary reward with gate 1; they differ
only in the weight of a vote: 1 for majority, the CoRE node weight w_i = exp((c_i - max c)/tau)
for CISC (confidence-informed self-consistency).
"""

from __future__ import annotations

import numpy as np

from concord.consensus.graph import argmax_first, class_mass


def weighted_vote(classes: np.ndarray, weights: np.ndarray, n_classes: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Label class (ties -> first seen), binary rewards and normalised per-roll-out vote mass.

    ``weights`` are per roll-out; roll-outs without an answer (class -1) neither vote nor win.
    """
    classes = np.asarray(classes)
    answered = classes >= 0
    w = np.where(answered, np.asarray(weights, dtype=float), 0.0)
    label = argmax_first(class_mass(w, classes, n_classes))
    rewards = (classes == label).astype(float)
    return label, rewards, w / w.sum()


def majority_vote(classes: np.ndarray, n_classes: int) -> tuple[int, np.ndarray, np.ndarray]:
    """TTRL: plurality label, ties to the first seen answer, reward 1[answer = label]."""
    return weighted_vote(classes, np.ones(len(classes)), n_classes)


def cisc_vote(classes: np.ndarray, node_w: np.ndarray, n_classes: int) -> tuple[int, np.ndarray, np.ndarray]:
    """CISC: each vote weighted by its confidence weight w_i."""
    return weighted_vote(classes, node_w, n_classes)
