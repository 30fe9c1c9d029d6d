"""Action-space noise, the exploration DDPG users run by default (the baselines).

Both processes subclass Stable-Baselines3's ``ActionNoise``, so one implementation
serves the native agent and SB3's DDPG (``action_noise=``). Noise is in *normalised*
action units — the action range mapped to [−1, 1], as SB3 adds it — and the caller
scales it to the bounds and clips. Random numbers come from a ``torch.Generator`` (the
native agent's own, saved in its checkpoints), not from NumPy's global state.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from stable_baselines3.common.noise import ActionNoise

from param_explore.validation import require_non_negative, require_positive


class GaussianActionNoise(ActionNoise):
    """Independent N(0, σ²) per action dimension and step (σ = 0.1, SB3's usual choice)."""

    def __init__(
        self, action_dim: int, sigma: float = 0.1, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.sigma = require_non_negative("sigma", sigma)
        self.generator = generator

    def __call__(self) -> np.ndarray:
        draw = torch.randn(self.action_dim, generator=self.generator, dtype=torch.float64)
        return (self.sigma * draw).numpy()

    def __repr__(self) -> str:
        return f"GaussianActionNoise(sigma={self.sigma})"


class OrnsteinUhlenbeckActionNoise(ActionNoise):
    """Temporally correlated noise of Lillicrap et al. (2015): θ = 0.15, σ = 0.2.

        x ← x + θ (0 − x) dt + σ √dt · N(0, I),   x = 0 at every episode start

    with dt = 1, the discretisation of Lillicrap et al.'s DDPG (one process step per
    environment step; SB3's own class defaults to dt = 0.01, a 10× smaller σ per step).
    """

    def __init__(
        self,
        action_dim: int,
        theta: float = 0.15,
        sigma: float = 0.2,
        dt: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.theta = require_non_negative("theta", theta)
        self.sigma = require_non_negative("sigma", sigma)
        self.dt = require_positive("dt", dt)
        self.generator = generator
        self.state = np.zeros(action_dim)

    def __call__(self) -> np.ndarray:
        draw = torch.randn(self.action_dim, generator=self.generator, dtype=torch.float64)
        self.state = (
            self.state
            - self.theta * self.state * self.dt
            + self.sigma * math.sqrt(self.dt) * draw.numpy()
        )
        return self.state.copy()

    def reset(self) -> None:
        self.state = np.zeros(self.action_dim)

    def __repr__(self) -> str:
        return f"OrnsteinUhlenbeckActionNoise(theta={self.theta}, sigma={self.sigma}, dt={self.dt})"
