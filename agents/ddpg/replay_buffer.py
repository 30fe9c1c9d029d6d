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
        storage: dict[str, Tensor] | None = None,
    ) -> None:
        """Preallocated tensors of ``capacity`` rows; or, with ``storage``, these tensors
        (one member's rows of a population's stacked buffer, :meth:`stacked`)."""
        if capacity <= 0:
            raise ValueError(f"buffer_size must be > 0, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        if storage is None:
            storage = {
                name: torch.zeros(shape, dtype=torch.float32, device=self.device)
                for name, shape in self.shapes(capacity, obs_dim, action_dim).items()
            }
        for name in self.fields:
            setattr(self, name, storage[name])
        self.position = 0
        self.size = 0

    @staticmethod
    def shapes(capacity: int, obs_dim: int, action_dim: int) -> dict[str, tuple[int, ...]]:
        return {
            "obs": (capacity, obs_dim),
            "actions": (capacity, action_dim),
            "rewards": (capacity,),
            "next_obs": (capacity, obs_dim),
            "terminated": (capacity,),
        }

    @classmethod
    def stacked(
        cls,
        members: int,
        capacity: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str = "cpu",
    ) -> tuple[dict[str, Tensor], list[ReplayBuffer]]:
        """One buffer per member whose tensors are views of ``members``-stacked storage
        (allocated once, never copied): the storage and the members' buffers."""
        storage = {
            name: torch.zeros((members, *shape), dtype=torch.float32, device=device)
            for name, shape in cls.shapes(capacity, obs_dim, action_dim).items()
        }
        buffers = [
            cls(capacity, obs_dim, action_dim, device, {k: v[i] for k, v in storage.items()})
            for i in range(members)
        ]
        return storage, buffers

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
