"""Creating and checking the environments DDPG can train on."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from ..errors import ConfigError
from .mujoco_warnings import show_mujoco_warnings_once


def make_env(env: str | gym.Env) -> gym.Env:
    """A gymnasium env from an id (or the env itself), checked for continuous spaces.

    MuJoCo's warnings are shown once per process from the first env built on
    (:mod:`agents.engine.mujoco_warnings`); gymnasium shows its own deprecation of an old
    env version once per process already.
    """
    show_mujoco_warnings_once()
    if isinstance(env, str):
        try:
            env = gym.make(env)
        except gym.error.Error as err:
            raise ConfigError(f"unknown environment {env!r}: {err}") from None
    check_spaces(env)
    return env


def check_spaces(env: gym.Env) -> None:
    """DDPG needs a bounded Box action space and a flat Box observation space."""
    name = env.spec.id if env.spec is not None else type(env).__name__
    action_space = env.action_space
    if not isinstance(action_space, gym.spaces.Box):
        raise ConfigError(
            f"{name} has a {type(action_space).__name__} action space; DDPG needs a "
            "continuous (Box) action space"
        )
    if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
        raise ConfigError(f"{name} has an unbounded action space; DDPG needs finite bounds")
    obs_space = env.observation_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise ConfigError(
            f"{name} has observation space {obs_space}; a flat Box observation is needed"
        )


def env_id(env: gym.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__
