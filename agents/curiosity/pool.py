"""The dynamics model's replay pool: a FIFO of (s, a, s′) in preallocated tensors.

VIME trains its dynamics model on minibatches drawn uniformly from a pool of every
transition seen so far (``SimpleReplayPool``, ``algos/batch_polopt_expl.py`` l.21-98). The
released pool stores observations and takes the next one as s′, which pairs the last state
of an episode with the first of the next; this pool stores s′ itself
(``docs/decisions.md#vime``). Adding a batch is two slice copies, not a loop.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..common.ring_buffer import RingBuffer


class TransitionPool(RingBuffer):
    """Circular buffer of (s, a, s′) rows with uniform sampling and moment statistics."""

    fields = ("obs", "actions", "next_obs")

    def __init__(
        self, capacity: int, obs_dim: int, action_dim: int, device: torch.device | str = "cpu"
    ) -> None:
        self.capacity = capacity
        self.obs = torch.zeros((capacity, obs_dim), device=device)
        self.actions = torch.zeros((capacity, action_dim), device=device)
        self.next_obs = torch.zeros_like(self.obs)
        self.position = 0
        self.size = 0

    def extend(self, obs: Tensor, actions: Tensor, next_obs: Tensor) -> None:
        """Append a batch of rows (the oldest are overwritten once full)."""
        rows = obs.shape[0]
        if rows > self.capacity:  # only the newest fit
            obs, actions, next_obs = (
                obs[-self.capacity :],
                actions[-self.capacity :],
                next_obs[-self.capacity :],
            )
            rows = self.capacity
        first = min(rows, self.capacity - self.position)
        for target, source in ((self.obs, obs), (self.actions, actions), (self.next_obs, next_obs)):
            target[self.position : self.position + first] = source[:first]
            target[: rows - first] = source[first:]
        self.position = (self.position + rows) % self.capacity
        self.size = min(self.size + rows, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """``batch_size`` rows drawn uniformly with replacement."""
        index = torch.randint(self.size, (batch_size,), generator=generator, device=self.obs.device)
        return self.obs[index], self.actions[index], self.next_obs[index]

    def moments(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Mean and standard deviation of the stored observations and actions, per
        dimension (VIME's ``mean_obs_act``, l.83-94: population std)."""
        obs, actions = self.obs[: self.size], self.actions[: self.size]
        return (
            obs.mean(0),
            obs.std(0, correction=0),
            actions.mean(0),
            actions.std(0, correction=0),
        )
