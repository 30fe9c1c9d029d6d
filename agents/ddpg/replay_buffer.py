"""A FIFO replay buffer in preallocated tensors (Lillicrap et al. 2015; App. K: 1e6).

Transitions are written into fixed tensors on the training device, so adding is a few
copies and sampling a minibatch is one index draw and five gathers — no Python lists,
no per-sample conversion. Only ``terminated`` is stored as the end-of-value flag:
time-limit truncation is bootstrapped through (``next_obs`` is the real next state).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..common.ring_buffer import RingBuffer


class Batch(NamedTuple):
    obs: Tensor
    actions: Tensor
    rewards: Tensor
    next_obs: Tensor
    terminated: Tensor


class ReplayBuffer(RingBuffer):
    """Circular buffer of (s, a, r, s', terminated) with uniform sampling."""

    fields = ("obs", "actions", "rewards", "next_obs", "terminated")

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str = "cpu",
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"buffer_size must be > 0, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        self.obs = torch.zeros((capacity, obs_dim), dtype=torch.float32, device=self.device)
        self.next_obs = torch.zeros_like(self.obs)
        self.actions = torch.zeros((capacity, action_dim), dtype=torch.float32, device=self.device)
        self.rewards = torch.zeros(capacity, dtype=torch.float32, device=self.device)
        self.terminated = torch.zeros(capacity, dtype=torch.float32, device=self.device)
        self.position = 0
        self.size = 0

    def add(
        self,
        obs: np.ndarray | Tensor,
        action: np.ndarray | Tensor,
        reward: float,
        next_obs: np.ndarray | Tensor,
        terminated: bool,
    ) -> None:
        i = self.position
        self.obs[i] = torch.as_tensor(obs)
        self.actions[i] = torch.as_tensor(action)
        self.rewards[i] = reward
        self.next_obs[i] = torch.as_tensor(next_obs)
        self.terminated[i] = float(terminated)
        self.position = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` transitions drawn uniformly with replacement."""
        index = torch.randint(self.size, (batch_size,), generator=generator, device=self.device)
        return Batch(
            self.obs[index],
            self.actions[index],
            self.rewards[index],
            self.next_obs[index],
            self.terminated[index],
        )
