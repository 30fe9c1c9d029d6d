"""Action-space noise, the exploration DDPG users run by default (the baselines).

Both processes subclass Stable-Baselines3's ``ActionNoise``, so one implementation
serves the native agent and SB3's DDPG (``action_noise=``). Noise is in *normalised*
action units — the action range mapped to [−1, 1], as SB3 adds it — and the caller
scales it to the bounds and clips. Random numbers come from a ``torch.Generator`` (the
native agent's own, saved in its checkpoints), not from NumPy's global state.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from stable_baselines3.common.noise import ActionNoise

from param_explore.validation import (
    Checks,
    keyword_defaults,
    require_non_negative,
    require_positive,
)


class CheckedActionNoise(ActionNoise):
    """An action noise whose settings can be checked before it is built."""

    #: How each setting is checked: name → ``check(name, value)`` (as the optimizers').
    _setting_checks: ClassVar[Checks] = {}

    @classmethod
    def settings(cls) -> dict[str, Any]:
        """The noise's settings and their defaults (after ``action_dim``; not the generator)."""
        defaults = keyword_defaults(cls.__init__, skip=2)
        return {name: value for name, value in defaults.items() if name != "generator"}

    @classmethod
    def checked_settings(cls, **settings: Any) -> dict[str, Any]:
        """The settings as the noise keeps them, or a ValueError naming the bad one."""
        checked = {name: cls._setting_checks[name](name, value) for name, value in settings.items()}
        cls._check_together(checked)
        return checked

    @classmethod
    def _check_together(cls, settings: dict[str, Any]) -> None:
        """Checks of what several settings give together (none by default)."""


class GaussianActionNoise(CheckedActionNoise):
    """Independent N(0, σ²) per action dimension and step (σ = 0.1, SB3's usual choice)."""

    _setting_checks: ClassVar[Checks] = dict(sigma=require_non_negative)

    def __init__(
        self, action_dim: int, sigma: float = 0.1, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.sigma = self.checked_settings(sigma=sigma)["sigma"]
        self.generator = generator

    def __call__(self) -> np.ndarray:
        draw = torch.randn(self.action_dim, generator=self.generator, dtype=torch.float64)
        return self.of_draw(draw.numpy())

    def of_draw(self, draw: np.ndarray) -> np.ndarray:
        """The noise of a standard normal ``draw``."""
        return self.sigma * draw

    def __repr__(self) -> str:
        return f"GaussianActionNoise(sigma={self.sigma})"


class OrnsteinUhlenbeckActionNoise(CheckedActionNoise):
    """Temporally correlated noise of Lillicrap et al. (2015): θ = 0.15, σ = 0.2.

        x ← x + θ (0 − x) dt + σ √dt · N(0, I),   x = 0 at every episode start

    with dt = 1, the discretisation of Lillicrap et al.'s DDPG (one process step per
    environment step; SB3's own class defaults to dt = 0.01, a 10× smaller σ per step).

    The recursion is x ← (1 − θ·dt)·x + σ√dt·N(0, I): it reverts to 0 while |1 − θ·dt| ≤ 1,
    that is θ·dt ≤ :data:`MAX_THETA_DT` (above 1 it overshoots 0 and oscillates, still
    bounded); beyond, each step multiplies x by more than 1 in magnitude and the noise grows
    without bound — non-finite actions within steps at θ = 1e30, before any update. Such a
    θ·dt is refused with the settings, naming both.
    """

    #: The largest θ·dt for which the process stays bounded (|1 − θ·dt| ≤ 1).
    MAX_THETA_DT: ClassVar[float] = 2.0

    _setting_checks: ClassVar[Checks] = dict(
        theta=require_non_negative, sigma=require_non_negative, dt=require_positive
    )

    @classmethod
    def _check_together(cls, settings: dict[str, Any]) -> None:
        theta, dt = settings["theta"], settings["dt"]
        if theta * dt > cls.MAX_THETA_DT:
            raise ValueError(
                f"action_noise: theta * dt = {theta:g} * {dt:g} = {theta * dt:g} must be <= "
                f"{cls.MAX_THETA_DT:g}: the Ornstein-Uhlenbeck step x <- (1 - theta dt) x + ... "
                "otherwise grows x without bound (non-finite actions within steps); lower "
                "theta (Lillicrap et al.'s is 0.15) or dt"
            )

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
        checked = self.checked_settings(theta=theta, sigma=sigma, dt=dt)
        self.theta, self.sigma, self.dt = checked["theta"], checked["sigma"], checked["dt"]
        self.generator = generator
        self.state = np.zeros(action_dim)

    def __call__(self) -> np.ndarray:
        draw = torch.randn(self.action_dim, generator=self.generator, dtype=torch.float64)
        return self.of_draw(draw.numpy())

    def of_draw(self, draw: np.ndarray) -> np.ndarray:
        """The process's next value for a standard normal ``draw``."""
        self.state = (
            self.state - self.theta * self.state * self.dt + self.sigma * math.sqrt(self.dt) * draw
        )
        return self.state.copy()

    def reset(self) -> None:
        self.state = np.zeros(self.action_dim)

    def __repr__(self) -> str:
        return f"OrnsteinUhlenbeckActionNoise(theta={self.theta}, sigma={self.sigma}, dt={self.dt})"
