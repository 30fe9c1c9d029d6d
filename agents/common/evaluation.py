"""Evaluation as in the paper: test episodes with the mean μ and no exploration (App. K).

Test episodes are checked like training data: a non-finite action (the policy's fault) or
a non-finite reward or observation (the environment's) raises :class:`NonFiniteDataError`
naming which, so no ``nan`` ever reaches ``eval.csv``; an exception the environment raises
becomes :class:`EnvironmentFailure`. An episode ends at the env's time limit, which
``train_agent`` requires (``max_episode_steps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from .envs import env_id
from .errors import EnvironmentFailure, NonFiniteDataError
from .tensor_envs import TensorEnvs


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
        obs = _reset(env, None if seed is None else seed + i, i)
        total, done = 0.0, False
        while not done:
            action = _finite_actions(policy.predict(obs, True), [i])
            obs, reward, terminated, truncated, _ = _step(env, action, i)
            total += reward
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
        _reset(env, None if seed is None else seed + i, i) for i, env in enumerate(envs)
    ]
    returns = [0.0] * len(envs)
    last_infos: list[dict[str, Any]] = [{}] * len(envs)
    running = list(range(len(envs)))
    while running:
        actions = policy.predict(np.stack([observations[i] for i in running]), True)
        _finite_actions(actions, running)
        still_running = []
        for action, i in zip(actions, running):
            observations[i], reward, terminated, truncated, info = _step(envs[i], action, i)
            returns[i] += reward
            if not (terminated or truncated):
                still_running.append(i)
            else:
                last_infos[i] = info
        running = still_running
    if final_infos is not None:
        final_infos.extend(last_infos)
    return float(np.mean(returns)), float(np.std(returns))


def test_episodes_together(
    act: Callable[[Tensor], Tensor],
    envs: TensorEnvs,
    seeds: Sequence[int],
    episodes: int,
    name: str,
) -> list[tuple[float, float, list[dict[str, Any]]] | Exception]:
    """:func:`evaluate_together` for several policies at once — a population's members —
    on one vector env of policies × ``episodes`` copies (row ``g·episodes + i`` is policy
    g's episode i, from ``reset(seed=seeds[g] + i)``; SAME_STEP autoreset,
    :mod:`agents.common.vector_envs`), stepped as tensors on the policies' device
    (:mod:`agents.common.tensor_envs`: on a GPU, MuJoCo Warp's envs never leave it; the
    host gets one packed copy a step, the rewards and the flags). ``act`` maps observations
    (policies, episodes, …) to their actions. Episodes of different lengths are masked: an
    ended one's row steps on but counts no more. Returns each policy's (mean, std, final
    infos), or its own error: a non-finite action of its policy, or a non-finite reward or
    observation in its episodes, stops that policy alone; an exception of the envs is every
    policy's."""
    groups = len(seeds)
    try:
        obs = envs.reset([seed + i for seed in seeds for i in range(episodes)])
    except Exception as err:
        failure = EnvironmentFailure(
            f"{name} raised {type(err).__name__}: {err} in reset of the evaluation episodes"
        )
        return [failure] * groups
    errors: dict[int, Exception] = {}
    running = np.ones(groups * episodes, dtype=bool)
    returns = np.zeros(groups * episodes)
    successes: list[dict[str, Any]] = [{} for _ in range(groups * episodes)]

    def fail(rows: np.ndarray, what: str) -> None:
        """The policies of ``rows`` stop, each with its first row's error."""
        for row in rows:
            group = int(row) // episodes
            if group not in errors:
                errors[group] = NonFiniteDataError(f"{what} in evaluation episode {row % episodes}")
            running[group * episodes : (group + 1) * episodes] = False

    finite = torch.isfinite(obs).flatten(1).all(1).cpu().numpy()
    fail(np.flatnonzero(running & ~finite), f"non-finite observation from {name}")
    while running.any():
        actions = act(obs.reshape(groups, episodes, -1)).reshape(groups * episodes, -1)
        try:
            step, host = envs.step(actions, running)
        except Exception as err:
            failure = EnvironmentFailure(
                f"{name} raised {type(err).__name__}: {err} in a step of the evaluation episodes"
            )
            return [errors.get(g, failure) for g in range(groups)]
        obs = step.obs
        fail(np.flatnonzero(running & ~host.finite_actions),
             "non-finite action from the policy (its mean weights)")  # fmt: skip
        fail(np.flatnonzero(running & ~np.isfinite(host.rewards)),
             f"non-finite reward from {name}")  # fmt: skip
        fail(np.flatnonzero(running & ~host.finite), f"non-finite observation from {name}")
        returns[running] += host.rewards[running]
        ended = running & (host.terminated | host.truncated)
        final = step.infos.get("final_info", {})
        for row in np.flatnonzero(ended):
            if final.get("_is_success", np.zeros(len(ended), bool))[row]:
                successes[row] = {"is_success": bool(final["is_success"][row])}
        running &= ~ended
    results: list[tuple[float, float, list[dict[str, Any]]] | Exception] = []
    for g in range(groups):
        if g in errors:
            results.append(errors[g])
            continue
        rows = slice(g * episodes, (g + 1) * episodes)
        results.append(
            (float(np.mean(returns[rows])), float(np.std(returns[rows])), successes[rows])
        )
    return results


def success_rate(final_infos: Sequence[dict[str, Any]]) -> float | None:
    """The fraction of episodes that succeeded, by ``info["is_success"]`` at their last
    step (the convention of SB3's ``EvalCallback``); None for a task that defines no
    success (an episode without the key)."""
    if not final_infos or any("is_success" not in info for info in final_infos):
        return None
    return float(np.mean([bool(info["is_success"]) for info in final_infos]))


def _finite_actions(actions: np.ndarray, episodes: list[int]) -> np.ndarray:
    """The policy's actions (one row per running episode), or the episode of a bad one."""
    if not np.isfinite(actions).all():
        rows = np.reshape(actions, (len(episodes), -1))
        bad = next(i for i, row in zip(episodes, rows) if not np.isfinite(row).all())
        raise NonFiniteDataError(
            f"non-finite action from the policy (its mean weights) in evaluation episode {bad}"
        )
    return actions


def _reset(env: gym.Env, seed: int | None, episode: int) -> np.ndarray:
    try:
        obs, _ = env.reset(seed=seed)
    except Exception as err:
        raise EnvironmentFailure(
            f"{env_id(env)} raised {type(err).__name__}: {err} in reset of evaluation "
            f"episode {episode}"
        ) from err
    _finite_observation(env, obs, episode)
    return obs


def _step(
    env: gym.Env, action: np.ndarray, episode: int
) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    try:
        obs, reward, terminated, truncated, info = env.step(action)
    except Exception as err:
        raise EnvironmentFailure(
            f"{env_id(env)} raised {type(err).__name__}: {err} in a step of evaluation "
            f"episode {episode}"
        ) from err
    reward = float(reward)
    if not math.isfinite(reward):
        raise NonFiniteDataError(
            f"non-finite reward ({reward}) from {env_id(env)} in evaluation episode {episode}"
        )
    _finite_observation(env, obs, episode)
    return obs, reward, terminated, truncated, info


def _finite_observation(env: gym.Env, obs: np.ndarray, episode: int) -> None:
    if not np.isfinite(obs).all():
        raise NonFiniteDataError(
            f"non-finite observation ({np.asarray(obs).tolist()}) from {env_id(env)} in "
            f"evaluation episode {episode}"
        )
