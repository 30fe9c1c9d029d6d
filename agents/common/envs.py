"""Creating and checking the environments DDPG can train on."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from .errors import ConfigError
from .warnings_once import each_warning_once, making_envs, show_mujoco_warnings_once


def make_env(
    env: str | gym.Env,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
) -> gym.Env:
    """A gymnasium env from an id (or the env itself), checked for continuous spaces.

    ``env_kwargs`` go to ``gym.make`` (the env's own settings); one the env does not take,
    or a value it refuses, is a :class:`ConfigError`. ``max_episode_steps`` replaces the
    registered time limit of an id. MuJoCo's warnings, and gymnasium's (the deprecation of
    an old env version), are shown once per process, MuJoCo's about gymnasium's own model
    files not at all (:mod:`agents.common.warnings_once`).
    """
    show_mujoco_warnings_once()
    if isinstance(env, str):
        env_kwargs = env_kwargs or {}
        limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        try:
            with each_warning_once(), making_envs():
                env = gym.make(env, **env_kwargs, **limit)
        except gym.error.Error as err:
            if env_kwargs and env in gym.registry:
                raise ConfigError(f"{env} refuses env_kwargs {env_kwargs}: {err}") from None
            raise ConfigError(f"unknown environment {env!r}: {err}") from None
        except ImportError as err:  # "module:EnvId" whose module is not importable
            raise ConfigError(f"cannot import the module of environment {env!r}: {err}") from None
        except Exception as err:  # the env's own constructor failed
            if env_kwargs and isinstance(err, (TypeError, ValueError)):  # a setting it refuses
                raise ConfigError(f"{env} refuses env_kwargs {env_kwargs}: {err}") from None
            raise ConfigError(
                f"environment {env!r} could not be created: {type(err).__name__}: {err}"
            ) from None
    check_spaces(env)
    return env


def coverage_statistics(env: gym.Env) -> dict[str, float]:
    """The coverage of its state space ``env`` reports, {} if it reports none.

    A task reports it through ``pop_coverage() -> dict[str, float]`` on the env or one of
    its wrappers: named quantities (e.g. the furthest position reached) over the steps
    since the last call (``agents.tasks``), which the agent logs as ``explore/<name>``.
    """
    try:
        pop_coverage = env.get_wrapper_attr("pop_coverage")
    except AttributeError:
        return {}
    return dict(pop_coverage())


def episode_limit(env: gym.Env) -> int | None:
    """The env's time limit in steps (gymnasium's ``TimeLimit``), or None if it has none."""
    if env.spec is not None and env.spec.max_episode_steps is not None:
        return env.spec.max_episode_steps
    while isinstance(env, gym.Wrapper):  # a TimeLimit around an env made without gym.make
        if isinstance(env, gym.wrappers.TimeLimit):
            return env._max_episode_steps
        env = env.env
    return None


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


class NormalizedActions(gym.ActionWrapper):
    """The env's Box action space presented as [−1, 1] per dimension, as rllab's
    ``NormalizedEnv`` presents it (``rllab/envs/normalized_env.py`` l.69-75, rll/rllab at
    ba78e4c), in which VIME runs every task (``experiments/run_trpo_expl.py`` l.20-21).

    Why: a Gaussian policy's initial σ is a number in the policy's units, so on raw ranges
    it explores 1 N of the cart-pole's ±10 N; in [−1, 1] units σ = 1 spans the whole range.
    An action a becomes low + (a + 1)·(high − low)/2, then is clipped to [low, high]
    (l.78-83): a sample outside [−1, 1] reaches the env as the bound, and the learner keeps
    its own (unclipped) sample."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        self.action_space = gym.spaces.Box(-1.0, 1.0, space.shape, dtype=space.dtype)

    def action(self, action: np.ndarray) -> np.ndarray:
        return from_unit_range(action, self.env.action_space)


def from_unit_range(action: np.ndarray, space: gym.spaces.Box) -> np.ndarray:
    """Actions in [−1, 1] (one, or a batch of rows) as :class:`NormalizedActions` maps them
    into ``space``'s bounds: low + (a + 1)·(high − low)/2 in float64, clipped, in the
    space's dtype."""
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    scaled = low + (np.asarray(action, dtype=np.float64) + 1.0) * 0.5 * (high - low)
    return np.clip(scaled, low, high).astype(space.dtype)


def with_action_range(env: gym.Env, normalize_actions: bool) -> gym.Env:
    """``env`` whose actions the learner gives in [−1, 1] (:class:`NormalizedActions`), or
    ``env`` itself. The space is checked first: only a bounded Box can be rescaled."""
    if not normalize_actions:
        return env
    check_spaces(env)
    return NormalizedActions(env)


def env_id(env: gym.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__
