"""Every member's action noise as rows of tensors on the engine's device: the processes of
:mod:`agents.common.action_noise` for N members at once.

Why: a population adds its members' action noise to their actions every step. Each member's
own process (SB3's ``ActionNoise``, numpy) would send the actions and the step's draws to the
host and the noisy actions back — two copies and a synchronisation a step on a GPU — and loop
over the members in Python. Here the processes' settings and states are (N, 1) and
(N, action) float64 tensors, and one step of all of them is a few tensor operations on the
device.

Each row computes what its member's process computes (``of_draw``) from the same standard
normal draw, in the same float64 operations in the same order, and adds it as
:meth:`agents.ddpg.agent.DDPG.with_action_noise` does — noise · (high − low)/2, clipped to the
bounds, the action's dtype —: the same numbers to the bit
(``tests/test_action_noise_rows.py``). The members' own processes stay what a member's
``with_action_noise`` uses outside the engine; the engine takes their states when it is
built and gives them back after each ``learn`` (:meth:`ActionNoiseRows.give_back`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from ..common.action_noise import (
    CheckedActionNoise,
    GaussianActionNoise,
    OrnsteinUhlenbeckActionNoise,
)
from ..common.errors import ConfigError


class ActionNoiseRows:
    """The action noise of members whose processes are ``noises`` (one kind, each with its
    own settings), in the action space ``space``, on ``device``."""

    def __init__(
        self, noises: Sequence[CheckedActionNoise], space: gym.spaces.Box, device: torch.device
    ) -> None:
        kinds = {type(noise) for noise in noises}
        (kind,) = kinds if len(kinds) == 1 else (None,)
        if kind not in (GaussianActionNoise, OrnsteinUhlenbeckActionNoise):
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ConfigError(f"a population's members add one known kind of noise, not {names}")
        self.noises = list(noises)
        #: host↔device crossings so far (:meth:`reset`'s masks)
        self.crossings = 0
        self.ornstein_uhlenbeck = kind is OrnsteinUhlenbeckActionNoise
        f64 = {"dtype": torch.float64, "device": device}

        def column(values: list[float]) -> Tensor:
            return torch.tensor(values, **f64)[:, None]

        if not self.ornstein_uhlenbeck:
            self.sigma = column([noise.sigma for noise in noises])
        else:
            self.theta = column([noise.theta for noise in noises])
            self.dt = column([noise.dt for noise in noises])
            # σ·√dt, a Python float as the process computes it
            self.draw_scale = column([noise.sigma * math.sqrt(noise.dt) for noise in noises])
            self.state = torch.tensor(np.stack([noise.state for noise in noises]), **f64)
        self.low = torch.as_tensor(space.low, **f64)
        self.high = torch.as_tensor(space.high, **f64)
        #: (high − low)/2 in the space's dtype, as the agent computes it
        self.scale = torch.as_tensor((space.high - space.low) / 2, **f64)

    def reset(self, rows: np.ndarray | Tensor) -> None:
        """The processes of ``rows`` (an (N,) bool mask) from their start: an episode
        starts. A stateful process's mask, if the host's, crosses to the device (counted in
        :attr:`crossings`): once a step where an episode starts; a mask on the device (the
        rows a population keeps there, :mod:`agents.ddpg.device_rows`) does not."""
        if self.ornstein_uhlenbeck:
            if not isinstance(rows, Tensor):
                self.crossings += 1
            mask = torch.as_tensor(rows, device=self.state.device)
            self.state.masked_fill_(mask[:, None], 0.0)

    def add(self, actions: Tensor, draws: Tensor) -> Tensor:
        """``actions`` (N, action) plus each row's next noise of the standard normal
        ``draws`` (N, action, float64), clipped to the bounds, in the actions' dtype."""
        if self.ornstein_uhlenbeck:
            state = self.state
            self.state = state - self.theta * state * self.dt + self.draw_scale * draws
            noise = self.state
        else:
            noise = self.sigma * draws
        noisy = actions.to(torch.float64) + noise * self.scale
        return torch.minimum(torch.maximum(noisy, self.low), self.high).to(actions.dtype)

    def give_back(self) -> None:
        """Each member's process takes its row's state (one copy to the host): a member
        that acts outside the engine goes on from where its row is."""
        if self.ornstein_uhlenbeck:
            for noise, state in zip(self.noises, self.state.cpu().numpy(), strict=True):
                noise.state = state.copy()
