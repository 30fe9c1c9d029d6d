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

from ..common.forwarded import Forwarded
from ..common.ring_buffer import RingBuffer


class Batch(NamedTuple):
    obs: Tensor
    actions: Tensor
    rewards: Tensor
    next_obs: Tensor
    terminated: Tensor


class Fill:
    """Where a buffer writes next and how many rows it holds: one for a population's
    buffers, whose members write their rows together (one update a step, not one a member)."""

    __slots__ = ("position", "size")

    def __init__(self) -> None:
        self.position = 0
        self.size = 0


class ReplayBuffer(RingBuffer):
    """Circular buffer of (s, a, r, s', terminated) with uniform sampling."""

    fields = ("obs", "actions", "rewards", "next_obs", "terminated")
    #: where it writes next, and the rows it holds: its :class:`Fill`'s
    position = Forwarded("fill", "position")
    size = Forwarded("fill", "size")

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
        #: Its position and size (a population's members share their stack's).
        self.fill = Fill()

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
    ) -> StackedReplayBuffer:
        """A population's buffer: ``members`` buffers stacked along a leading member
        dimension, allocated once (:class:`StackedReplayBuffer`)."""
        storage = {
            name: torch.zeros((members, *shape), dtype=torch.float32, device=device)
            for name, shape in cls.shapes(capacity, obs_dim, action_dim).items()
        }
        return StackedReplayBuffer(storage, capacity, obs_dim, action_dim, device)

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


class StackedReplayBuffer:
    """The replay buffers of a population's members as one: each field one tensor of
    (members, capacity, …), written for every member at once (the members step together, so
    their rows share one position) and sampled for every member at once — one index draw
    of (members, batch), one gather per field.

    :attr:`members` are the members' own :class:`ReplayBuffer`\\s, views of the storage
    (what a member's checkpoint saves and loads, its ``len``). Once its members train
    together (:meth:`join`) they share one :class:`Fill`, which a step moves once.
    """

    def __init__(
        self,
        storage: dict[str, Tensor],
        capacity: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.storage = storage
        self.capacity = capacity
        self.device = torch.device(device)
        count = storage["obs"].shape[0]
        self.members = [
            ReplayBuffer(
                capacity, obs_dim, action_dim, device, {k: v[i] for k, v in storage.items()}
            )
            for i in range(count)
        ]
        self._offsets = torch.arange(0, count * capacity, capacity, device=self.device)
        #: Each field's rows of every member as one (members × capacity, …) view, gathered
        #: from by one ``index_select``.
        self._flat = {name: field.flatten(0, 1) for name, field in storage.items()}

    @classmethod
    def of(cls, buffers: list[ReplayBuffer]) -> StackedReplayBuffer:
        """Buffers at one position stacked into new storage (a copy); the buffers become
        views of it, as :meth:`ReplayBuffer.stacked`'s are."""
        first = buffers[0]
        storage = {
            name: torch.stack([getattr(b, name) for b in buffers]) for name in ReplayBuffer.fields
        }
        stacked = cls(storage, first.capacity, first.obs.shape[1], first.actions.shape[1],
                      first.device)  # fmt: skip
        for mine, theirs in zip(stacked.members, buffers, strict=True):
            for name in ReplayBuffer.fields:
                setattr(theirs, name, getattr(mine, name))
        stacked.members = list(buffers)
        return stacked

    def join(self) -> None:
        """The members, at one position and size (each loaded its own checkpoint), share
        one :class:`Fill` from now on: they step together."""
        fill = self.members[0].fill
        if any((b.position, b.size) != (fill.position, fill.size) for b in self.members):
            raise ValueError("the members of a stacked buffer stand at different positions")
        for buffer in self.members:
            buffer.fill = fill

    @property
    def fill(self) -> Fill:
        """The stack's position and size: its first member's (every member's, joined)."""
        return self.members[0].fill

    @property
    def position(self) -> int:
        return self.fill.position

    def __len__(self) -> int:
        return self.fill.size

    def add(
        self, obs: np.ndarray | Tensor, actions: np.ndarray | Tensor, rewards: np.ndarray | Tensor,
        next_obs: np.ndarray | Tensor, terminated: np.ndarray | Tensor,
    ) -> None:  # fmt: skip
        """One transition of every member (each argument one row per member; tensors on
        the buffer's device are written without a copy to the host)."""
        members = self.members
        fill = members[0].fill  # (self.fill: a step reads it once)
        i = fill.position
        values = (obs, actions, rewards, next_obs, terminated)
        for name, value in zip(ReplayBuffer.fields, values, strict=True):
            if not isinstance(value, Tensor):
                value = torch.from_numpy(np.asarray(value))
            self.storage[name][:, i] = value  # cast to float32 by the copy
        if fill is not members[-1].fill:  # written apart: every member's moves
            self.join()
        fill.position = (i + 1) % self.capacity
        fill.size = min(fill.size + 1, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Batch:
        """``batch_size`` transitions of each member, drawn uniformly with replacement: one
        draw of (members, ``batch_size``) indices; fields of (members, ``batch_size``, …)."""
        count = len(self.members)
        index = torch.randint(len(self), (count, batch_size), generator=generator,
                              device=self.device)  # fmt: skip
        flat = (index + self._offsets[:, None]).view(-1)
        return Batch(*(
            self._flat[name].index_select(0, flat).view(*index.shape, *self._flat[name].shape[1:])
            for name in ReplayBuffer.fields
        ))  # fmt: skip
