"""Evaluation as in the paper: test episodes with the mean μ and no exploration (App. K)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

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
    policy: Policy,
    envs: Sequence[gym.Env],
    seed: int | None = None,
    final_infos: list[dict[str, Any]] | None = None,
) -> tuple[float, float]:
    """:func:`evaluate` with one episode per env, all stepped in lockstep.

    Episode i runs on ``envs[i]`` from ``reset(seed=seed + i)``, as in :func:`evaluate`;
    each step makes one forward pass for every episode still running instead of one per
    episode, which is most of an evaluation's cost for small networks. The returns equal
    the sequential ones up to the float rounding of a batched matrix product. A
    ``final_infos`` list receives the ``info`` of every episode's last step, in episode
    order (:func:`success_rate` reads it).
    """
    observations = [
        env.reset(seed=None if seed is None else seed + i)[0] for i, env in enumerate(envs)
    ]
    returns = [0.0] * len(envs)
    last_infos: list[dict[str, Any]] = [{}] * len(envs)
    running = list(range(len(envs)))
    while running:
        actions = policy.predict(np.stack([observations[i] for i in running]), True)
        still_running = []
        for action, i in zip(actions, running):
            observations[i], reward, terminated, truncated, info = envs[i].step(action)
            returns[i] += float(reward)
            if not (terminated or truncated):
                still_running.append(i)
            else:
                last_infos[i] = info
        running = still_running
    if final_infos is not None:
        final_infos.extend(last_infos)
    return float(np.mean(returns)), float(np.std(returns))


def success_rate(final_infos: Sequence[dict[str, Any]]) -> float | None:
    """The fraction of episodes that succeeded, by ``info["is_success"]`` at their last
    step (the convention of SB3's ``EvalCallback``); None for a task that defines no
    success (an episode without the key)."""
    if not final_infos or any("is_success" not in info for info in final_infos):
        return None
    return float(np.mean([bool(info["is_success"]) for info in final_infos]))
