"""How a TTRL step's roll-outs are laid out, which of them train, and their gated advantages.

One training step (TTRL's step, one generation round) draws ``prompts_per_step`` questions and
samples ``n_vote`` roll-outs for each (TRL's ``num_generations``). The whole group of ``n_vote`` is
scored by the consensus rule; only ``n_train`` of them enter the policy loss (TTRL: vote over 64,
train on 32). The kept roll-outs are then consumed by ``updates_per_generation`` optimiser updates
(TTRL: ``ppo_mini_batch_size=1`` prompt of 8, so 8 updates per step), each made of
``gradient_accumulation_steps`` micro-batches per process. In TRL's terms that is
``steps_per_generation = updates_per_generation x gradient_accumulation_steps`` micro-batches per
generation batch, and TRL's ``global_step`` counts optimiser updates.

Which ``n_train`` roll-outs train does not matter statistically -- roll-outs are i.i.d. samples,
so any content-independent subset is a uniform one -- but it matters for distribution: TRL hands
each process a contiguous slice of the global batch, and a group may straddle two processes.
Keeping *evenly spaced* positions (0, 2, 4, ... for 64 -> 32) gives every process its share of
the kept roll-outs whatever the split, where "the first 32" would starve a process that holds a
group's second half. :func:`check_layout` verifies the split before any model is loaded.

Advantages are normalised within each group over its *kept* roll-outs (TTRL computes GRPO
advantages after selecting the training subset), with exactly TRL's formula, and then multiplied
by the group's cohesiveness gate w_q. Scaling the advantages by w_q >= 0 scales that question's
clipped-surrogate loss by w_q (the min of two terms linear in the advantage), which is the
paper's "gate scales the loss, not the reward": group normalisation would cancel a reward scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: TRL's epsilon in ``(r - mean) / (std + eps)`` (grpo_trainer.py); kept identical on purpose.
TRL_STD_EPS = 1e-4


def train_positions(n_vote: int, n_train: int) -> np.ndarray:
    """Positions (within a group of ``n_vote``) of the ``n_train`` roll-outs that train, evenly spaced."""
    if not 1 <= n_train <= n_vote:
        raise ValueError(f"n_train must be in [1, n_vote={n_vote}], got {n_train}")
    return np.floor(np.arange(n_train) * n_vote / n_train).astype(int)


def keep_mask(n_rows: int, n_vote: int, n_train: int) -> np.ndarray:
    """Boolean mask over a global batch of contiguous groups: True where the roll-out trains."""
    if n_rows % n_vote:
        raise ValueError(f"a batch of {n_rows} roll-outs is not a whole number of groups of {n_vote}")
    in_group = np.zeros(n_vote, dtype=bool)
    in_group[train_positions(n_vote, n_train)] = True
    return np.tile(in_group, n_rows // n_vote)


@dataclass(frozen=True)
class Layout:
    """The batch geometry of one training step, validated against the process count."""

    prompts_per_step: int
    n_vote: int
    n_train: int
    num_processes: int = 1
    gradient_accumulation_steps: int = 1
    updates_per_generation: int = 1

    @property
    def steps_per_generation(self) -> int:
        """TRL's ``steps_per_generation``: micro-batches per process drawn from one generation batch."""
        return self.updates_per_generation * self.gradient_accumulation_steps

    @property
    def generation_batch_size(self) -> int:
        """Roll-outs generated (and scored) per optimisation step, over all processes."""
        return self.prompts_per_step * self.n_vote

    @property
    def per_device_generation(self) -> int:
        return self.generation_batch_size // self.num_processes

    @property
    def per_device_train_batch_size(self) -> int:
        """TRL's ``per_device_train_batch_size``: generated roll-outs per process per micro-step."""
        return self.per_device_generation // self.steps_per_generation

    def kept_per_process(self) -> list[int]:
        mask = keep_mask(self.generation_batch_size, self.n_vote, self.n_train)
        size = self.per_device_generation
        return [int(mask[p * size:(p + 1) * size].sum()) for p in range(self.num_processes)]


def check_layout(layout: Layout) -> Layout:
    """Raise a ValueError naming the numbers when a step cannot be laid out over the processes."""
    p, v, t, w, ga, u = (layout.prompts_per_step, layout.n_vote, layout.n_train,
                         layout.num_processes, layout.gradient_accumulation_steps, layout.updates_per_generation)
    for name, value in [("prompts_per_step", p), ("n_vote", v), ("n_train", t), ("num_processes", w),
                        ("gradient_accumulation_steps", ga), ("updates_per_generation", u)]:
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if t < 2:
        raise ValueError(f"n_train must be >= 2: a group-normalised advantage needs two roll-outs (got {t})")
    if t > v:
        raise ValueError(f"n_train ({t}) cannot exceed n_vote ({v})")
    if (p * v) % w:
        raise ValueError(
            f"prompts_per_step x n_vote = {p} x {v} = {p * v} roll-outs cannot be split evenly over {w} processes"
        )
    spg = layout.steps_per_generation
    if layout.per_device_generation % spg:
        raise ValueError(
            f"each process generates {layout.per_device_generation} roll-outs per step, not divisible by "
            f"updates_per_generation x gradient_accumulation_steps = {u} x {ga} = {spg}"
        )
    kept = layout.kept_per_process()
    if len(set(kept)) != 1:
        raise ValueError(
            f"with {w} processes the {t}-of-{v} training subset lands unevenly ({kept} roll-outs per process); "
            f"choose prompts_per_step, n_vote and n_train so that every process keeps the same number"
        )
    if kept[0] % spg:
        raise ValueError(
            f"each process trains on {kept[0]} roll-outs per step, not divisible by "
            f"updates_per_generation x gradient_accumulation_steps = {u} x {ga} = {spg}"
        )
    return layout


def gated_advantages(
    rewards: np.ndarray,
    gates: np.ndarray,
    n_vote: int,
    n_train: int,
    scale_rewards: str = "group",
) -> np.ndarray:
    """GRPO advantages of a global batch: normalised over each group's kept roll-outs, times w_q.

    ``rewards`` and ``gates`` have one entry per roll-out (the gate repeated over its group).
    Dropped roll-outs get advantage 0 (they are removed from the loss anyway). NaN rewards
    (unscorable roll-outs) are left out of the statistics and get advantage 0, as in TRL.
    """
    import torch

    rewards = np.asarray(rewards, dtype=np.float32)
    gates = np.asarray(gates, dtype=np.float32)
    if rewards.shape != gates.shape or rewards.ndim != 1:
        raise ValueError(f"rewards {rewards.shape} and gates {gates.shape} must be 1-D and of equal length")
    if np.any(gates < 0) or np.any(~np.isfinite(gates)):
        raise ValueError("gates must be finite and >= 0 (a negative gate would reverse the update)")
    keep = keep_mask(len(rewards), n_vote, n_train)
    kept = torch.from_numpy(rewards[keep]).view(-1, n_train)
    mean = torch.nanmean(kept, dim=1, keepdim=True)
    if scale_rewards == "group":
        std = _nanstd(kept, dim=1)
    elif scale_rewards == "batch":
        std = _nanstd(kept.flatten(), dim=0).expand(kept.shape[0], 1)
    elif scale_rewards == "none":
        std = None
    else:
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    adv = kept - mean
    if std is not None:
        adv = adv / (std + TRL_STD_EPS)
    adv = torch.nan_to_num(adv, nan=0.0).flatten().numpy()
    out = np.zeros_like(rewards)
    out[keep] = adv * gates[keep]
    return out


def _nanstd(x, dim: int):
    """TRL's ``nanstd`` (Bessel-corrected, NaN-aware), keeping the reduced dimension."""
    import torch

    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(x), dim=dim, keepdim=True)
    corr = torch.where(count > 1, count / (count - 1), torch.full_like(count, float("nan"), dtype=x.dtype))
    std = torch.sqrt(var * corr)
    return std if std.ndim > 1 else std.view(1, 1)
