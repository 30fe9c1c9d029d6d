"""What both SB3 agents share: the checked env, the per-step data checks, the end of an
episode reported to the run, NumPy's global generator as plain data, and the error of a
checkpoint that does not fit the model (:mod:`agents.sb3.agent`,
:mod:`agents.sb3.trpo_agent`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ..engine.ddpg import Callback
from ..engine.envs import env_id
from ..errors import CheckpointError, EnvironmentFailure, NonFiniteDataError


class StopLearning(Exception):
    """Ends ``model.learn`` between two steps, where the run callback asked it to."""


class CheckedEnv(gym.Wrapper):
    """The env as SB3 sees it: its exceptions become :class:`EnvironmentFailure`, and the
    state of its random generator before each reset is kept, for a resumed run to start
    the episode an uninterrupted one would (SB3 resets at an episode's end, before the
    step's checkpoint)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.rng_before_reset: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.rng_before_reset = self.env.unwrapped.np_random.bit_generator.state
        try:
            return self.env.reset(**kwargs)
        except Exception as err:
            raise EnvironmentFailure(
                f"{env_id(self)} raised {type(err).__name__}: {err} in reset"
            ) from err

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        try:
            return self.env.step(action)
        except Exception as err:
            raise EnvironmentFailure(
                f"{env_id(self)} raised {type(err).__name__}: {err} in step"
            ) from err


def check_step(step_locals: dict[str, Any], step: int) -> None:
    """NonFiniteDataError when the step SB3 has just taken (its ``collect_rollouts``
    locals) has a non-finite action, reward or observation: nothing non-finite is stored."""
    rewards, observations = step_locals["rewards"], step_locals["new_obs"]
    actions = step_locals["actions"]
    if not np.isfinite(actions).all():  # the policy's fault, not the env's
        raise NonFiniteDataError(
            f"non-finite action ({actions.tolist()}) from the actor at step {step}: its "
            "weights are no longer finite (an update diverged: a learning rate too large?); "
            "training stopped"
        )
    if not np.isfinite(rewards).all():
        raise NonFiniteDataError(
            f"non-finite reward ({rewards.tolist()}) at step {step}; training stopped"
        )
    if not np.isfinite(observations).all():
        raise NonFiniteDataError(
            f"non-finite observation ({observations.tolist()}) at step {step}; training stopped"
        )


def report_episode_end(step_locals: dict[str, Any], agent: Any, callback: Callback) -> bool:
    """Tell the run about an episode that ended at this step (SB3's ``Monitor`` info);
    return whether one ended."""
    dones, infos = step_locals["dones"], step_locals["infos"]
    if dones[0] and "episode" in infos[0]:
        episode = infos[0]["episode"]
        callback.on_episode_end(agent, float(episode["r"]), int(episode["l"]))
    return bool(dones[0])


def numpy_global_state() -> dict[str, Any]:
    """NumPy's global generator (SB3 samples minibatches from it) as plain data."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "name": name,
        "keys": torch.from_numpy(keys.astype(np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }


def set_numpy_global_state(state: dict[str, Any]) -> None:
    keys = state["keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (state["name"], keys, state["pos"], state["has_gauss"], state["cached_gaussian"])
    )


def mismatch(path: str | Path, err: Exception) -> CheckpointError:
    """The error of a checkpoint whose tensors do not fit this run's model."""
    detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
    return CheckpointError(
        f"checkpoint {path} does not match this run's networks or optimizer: "
        f"{type(err).__name__}: {detail}"
    )


#: What loading a state dict of another shape raises.
LOAD_ERRORS = (RuntimeError, KeyError, ValueError, TypeError, IndexError)
