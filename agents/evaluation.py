"""Evaluation as in the paper: test episodes with the mean μ and no exploration (App. K)."""

from __future__ import annotations

from typing import Protocol

import gymnasium as gym
import numpy as np


class Policy(Protocol):
    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray: ...


def evaluate(
    policy: Policy, env: gym.Env, episodes: int, seed: int | None = None
) -> tuple[float, float]:
    """Mean and standard deviation of the return over ``episodes`` deterministic episodes.

    With ``seed``, episode i starts from ``reset(seed=seed + i)``: every evaluation of a
    run, and every strategy with the same seed, faces the same start states, so curves
    differ by the policy alone (common random numbers).
    """
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.predict(obs, True))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns)), float(np.std(returns))
