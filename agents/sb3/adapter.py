"""What both SB3 agents share: the checked env, the per-step data checks, the end of an
episode reported to the run, NumPy's global generator as plain data, and the error of a
checkpoint that does not fit the model (:mod:`agents.sb3.ddpg_agent`,
:mod:`agents.sb3.trpo_agent`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from ..common.callbacks import Callback
from ..common.checkpoints import save_finite
from ..common.envs import env_id
from ..common.errors import EnvironmentFailure, NonFiniteDataError


class StopLearning(Exception):
    """Ends ``model.learn`` between two steps, where the run callback asked it to."""


class SB3RunAgent:
    """What both adapters share: ``learn`` with the run's callback, ``predict``, losses."""

    model: Any
    #: SB3's logger keys of the losses a run logs, by the name it logs them under.
    loss_names: tuple[tuple[str, str], ...] = ()
    #: The entries of :meth:`state_dict` whose tensors must be finite to be saved.
    checked_state: tuple[str, ...] = ()

    def state_dict(self, include_buffer: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def save(
        self,
        path: str | Path,
        include_buffer: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Write the agent (and ``metadata``: plain data) to ``path`` atomically; a state
        with a non-finite weight or optimizer tensor is not written (NonFiniteDataError)."""
        save_finite(self.state_dict(include_buffer), path, self.checked_state, metadata)

    def sb3_callbacks(self, callback: Callback) -> list[BaseCallback]:
        """The SB3 callbacks through which ``callback`` sees training."""
        raise NotImplementedError

    def learn(self, total_steps: int, callback: Callback) -> SB3RunAgent:
        callbacks = CallbackList(self.sb3_callbacks(callback))
        try:
            self.model.learn(total_steps, callback=callbacks, reset_num_timesteps=False)
        except StopLearning:
            pass
        finally:
            callback.on_training_end(self)
        return self

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        return self.model.predict(obs, deterministic=deterministic)[0]

    def pop_losses(self) -> dict[str, float]:
        """SB3's latest recorded losses (it keeps no running mean between dumps)."""
        values = self.model.logger.name_to_value
        return {k: float(values[v]) for k, v in self.loss_names if v in values}


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
        callback.on_episode_end(agent, float(episode["r"]), int(episode["l"]), agent.num_timesteps)
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
    keys = state["keys"].numpy(force=True).astype(np.uint32)
    np.random.set_state(
        (state["name"], keys, state["pos"], state["has_gauss"], state["cached_gaussian"])
    )


def generator_states(model: Any, env_rng: dict[str, Any] | None) -> dict[str, Any]:
    """The generators every SB3 run draws from, as plain data: torch's and NumPy's global
    ones, the action space's, and ``env_rng``, the env's state for the resumed run's first
    reset (None before the first reset: the resumed model then seeds as a new one)."""
    return {
        "torch": torch.get_rng_state(),
        "numpy": numpy_global_state(),
        "action_space": model.action_space.np_random.bit_generator.state,
        "env_before_reset": env_rng,
    }


def restore_generators(agent: Any, generators: dict[str, Any]) -> Any:
    """Restore :func:`generator_states` into ``agent``; return its model, rebuilt unseeded
    first when the env was reset before the checkpoint, so that its first reset continues
    the env's generator where the interrupted run left it instead of seeding it again."""
    if generators["env_before_reset"] is not None:
        agent.model = agent._build(seed=None)
        agent.env.unwrapped.np_random.bit_generator.state = generators["env_before_reset"]
    torch.set_rng_state(generators["torch"].cpu())  # a CPU byte tensor, wherever loaded
    set_numpy_global_state(generators["numpy"])
    agent.model.action_space.np_random.bit_generator.state = generators["action_space"]
    return agent.model
