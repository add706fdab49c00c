"""A reward arm for optimiser tests: every group's roll-outs get evenly spread rewards.

Tests of the optimiser path (does one update reach the weights?) need a loss with a gradient on
every step, whatever the policy samples; a consensus arm gives none when a group agrees (all
advantages 0). This arm is registered by the tests that need it (and, for the multi-process
tests, by ``tests/support/fsdp_on_cpu/sitecustomize.py`` when ``CONCORD_TEST_SPREAD_REWARD=1``).
"""

from __future__ import annotations

import numpy as np

ARM = "test_spread"


def spread(group):
    from concord.rl.rewards import GroupScore

    n = len(group.texts)
    return GroupScore(rewards=np.linspace(0.0, 1.0, n), gate=1.0, label=None, answers=[None] * n)


def register() -> str:
    from concord.rl.rewards import register_scorer

    register_scorer(ARM, spread)
    return ARM
