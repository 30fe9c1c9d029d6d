"""Evaluation as in the paper: test episodes with the mean μ and no exploration (App. K)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import gymnasium as gym
import numpy as np


class Policy(Protocol):
    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray: ...


def evaluate(
    policy: Policy, env: gym.Env, episodes: int, seed: int | None = None
) -> tuple[float, float]:
    """Mean and standard deviation of the return over ``episodes`` deterministic episodes,
    one after the other on ``env``.

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


def evaluate_together(
    policy: Policy, envs: Sequence[gym.Env], seed: int | None = None
) -> tuple[float, float]:
    """:func:`evaluate` with one episode per env, all stepped in lockstep.

    Episode i runs on ``envs[i]`` from ``reset(seed=seed + i)``, as in :func:`evaluate`;
    each step makes one forward pass for every episode still running instead of one per
    episode, which is most of an evaluation's cost for small networks. The returns equal
    the sequential ones up to the float rounding of a batched matrix product.
    """
    observations = [
        env.reset(seed=None if seed is None else seed + i)[0] for i, env in enumerate(envs)
    ]
    returns = [0.0] * len(envs)
    running = list(range(len(envs)))
    while running:
        actions = policy.predict(np.stack([observations[i] for i in running]), True)
        still_running = []
        for action, i in zip(actions, running):
            observations[i], reward, terminated, truncated, _ = envs[i].step(action)
            returns[i] += float(reward)
            if not (terminated or truncated):
                still_running.append(i)
        running = still_running
    return float(np.mean(returns)), float(np.std(returns))
