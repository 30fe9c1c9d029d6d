"""SparseMountainCar: gymnasium's continuous mountain car with VIME's sparse reward.

VIME (``openai/vime`` ``envs/mountain_car_env_x.py`` l.33-35) rewards 1 exactly when the
episode ends at the goal and 0 otherwise; the dynamics, start state and goal here are
gymnasium's ``MountainCarContinuous-v0`` (``docs/decisions.md#sparse-mountain-car``), the
horizon is Plappert et al.'s T = 500 (registered in :mod:`agents.tasks`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv

from .report import Coverage

#: gymnasium's ``goal_position``: the episode ends there (moving right, which reaching it means).
GOAL_POSITION = 0.45

#: The range of car positions a window of training steps covered; the goal is at 0.45.
COVERAGE = Coverage(("position",), ("position",), "position_max", GOAL_POSITION, ">=")


class SparseMountainCarEnv(Continuous_MountainCarEnv):
    """Reward 1 at the goal (where the episode ends), 0 everywhere else; no action cost."""

    def __init__(self, render_mode: str | None = None, goal_velocity: float = 0.0) -> None:
        if isinstance(goal_velocity, bool) or not isinstance(goal_velocity, (int, float)):
            raise ValueError(f"goal_velocity must be a number, got {goal_velocity!r}")
        super().__init__(render_mode=render_mode, goal_velocity=goal_velocity)
        self.report = COVERAGE.new_report()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.report.start_episode()
        return super().reset(seed=seed, options=options)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, _, terminated, truncated, info = super().step(action)
        # The only termination is the goal (position >= 0.45 moving right): VIME's reward.
        reward = 1.0 if terminated else 0.0
        info.update(self.report.record(terminated, position=obs[0]))
        return obs, reward, terminated, truncated, info

    def pop_coverage(self) -> dict[str, float]:
        return self.report.pop_coverage()


class MountainCarGoalReport(gym.Wrapper):
    """gymnasium's ``MountainCarContinuous-v0`` unchanged, reporting its success (the goal
    reached, its only termination) and the coverage SparseMountainCar reports."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.report = COVERAGE.new_report()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.report.start_episode()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = {**info, **self.report.record(terminated, position=obs[0])}
        return obs, reward, terminated, truncated, info

    def pop_coverage(self) -> dict[str, float]:
        return self.report.pop_coverage()
