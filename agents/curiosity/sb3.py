"""VIME's bonus inside Stable-Baselines3, one class each way, the algorithms unmodified.

* **On-policy** algorithms (PPO, A2C, sb3-contrib's TRPO — VIME's and Zhang et al.'s
  learner): ``model.learn(n, callback=VimeCallback({"posterior": "noisy-kfac"}))``. As
  VIME after each batch of paths (``algos/batch_polopt_expl.py`` l.298-360): at the end of
  every rollout the callback scores all its transitions with the model as it was, adds
  η · normalised information gain to the rollout buffer's rewards and recomputes returns
  and advantages, then puts the transitions in the pool and fits the model. The model
  gets the policy's raw action sample (SB3's ``actions``, what the rollout buffer stores),
  not the action clipped to the bounds for the environment: rllab stores the raw sample
  (``sampler/utils.py`` l.19-23) and clips inside ``NormalizedEnv.step`` (l.78-83).
* **Off-policy** algorithms (DDPG, TD3, SAC): ``replay_buffer_class=VimeReplayBuffer``
  (settings in ``replay_buffer_kwargs=dict(vime={...})``). Every stored transition enters
  the pool, the model is fitted every ``fit_every`` steps, and every sampled minibatch is
  scored anew with the current model — stored rewards stay the task's own. Add
  ``VimeCallback()`` as well to log the bonus.

The episode returns SB3 logs (``rollout/ep_rew_mean``, from its ``Monitor``) stay the
task's own, without the bonus. The callback logs ``bonus/*`` and ``dynamics/*``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from ..common.errors import ConfigError
from ..common.reward_bonus import RewardBonus, fitted, scored
from .vime import Settings, make_vime_bonus


class VimeReplayBuffer(ReplayBuffer):
    """SB3's replay buffer whose sampled rewards carry VIME's bonus (module docstring).

    ``vime``: the bonus settings (``kind`` optional), ``seed``: the bonus's generator.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: torch.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        vime: Settings = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            buffer_size, observation_space, action_space, device, n_envs,
            optimize_memory_usage, handle_timeout_termination,
        )  # fmt: skip
        self.bonus = make_vime_bonus(vime, observation_space, action_space, seed)

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        super().add(obs, next_obs, action, reward, done, infos)
        self.bonus.add(obs, action.reshape(self.n_envs, -1), next_obs)
        if self.bonus.due():
            self.bonus.fit()

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """A minibatch whose rewards include η · the normalised information gain of its
        transitions under the current model (observations un-normalised for the model)."""
        samples = super().sample(batch_size, env)
        if not self.bonus.ready:
            return samples
        obs, next_obs = samples.observations, samples.next_observations
        if env is not None:
            obs, next_obs = (
                torch.as_tensor(env.unnormalize_obs(x.cpu().numpy())) for x in (obs, next_obs)
            )
        bonus = self.bonus.intrinsic_rewards(obs.cpu(), samples.actions.cpu(), next_obs.cpu())
        return samples._replace(rewards=samples.rewards + bonus.to(samples.rewards).reshape(-1, 1))


class VimeCallback(BaseCallback):
    """VIME's bonus for an on-policy SB3 algorithm; its logging for an off-policy one.

    ``settings``: the bonus settings (``kind`` optional); ignored for an off-policy
    algorithm, whose :class:`VimeReplayBuffer` holds them. ``seed``: the bonus's generator.
    ``bonus``: an on-policy algorithm's bonus to use instead of a new one (a run's, which
    it checkpoints and restores; any :class:`RewardBonus`, VIME's or another registered
    one); it then lives across ``learn`` calls.
    """

    def __init__(
        self,
        settings: Settings = None,
        seed: int | None = None,
        verbose: int = 0,
        bonus: RewardBonus | None = None,
    ) -> None:
        super().__init__(verbose)
        self.settings = settings
        self.seed = seed
        self.given_bonus = bonus
        self.bonus: RewardBonus | None = bonus
        #: The statistics of the latest rollout (or episode end), as logged.
        self.statistics: dict[str, float] = {}
        self._on_policy = False
        self._transitions: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _init_callback(self) -> None:
        self._on_policy = isinstance(self.model, OnPolicyAlgorithm)
        if self._on_policy:
            self.bonus = self.given_bonus or make_vime_bonus(
                self.settings, self.model.observation_space, self.model.action_space, self.seed
            )
            return
        buffer = getattr(self.model, "replay_buffer", None)
        if not isinstance(buffer, VimeReplayBuffer):
            raise ConfigError(
                f"VIME with the off-policy {type(self.model).__name__} needs "
                "replay_buffer_class=VimeReplayBuffer (its settings in "
                "replay_buffer_kwargs=dict(vime={...})); VimeCallback then only logs"
            )
        self.bonus = buffer.bonus

    def _on_rollout_start(self) -> None:
        self._transitions = []

    def _on_step(self) -> bool:
        if self._on_policy:
            next_obs = np.array(self.locals["new_obs"], dtype=np.float32, copy=True)
            for i, done in enumerate(self.locals["dones"]):
                terminal = self.locals["infos"][i].get("terminal_observation")
                if done and terminal is not None:
                    next_obs[i] = terminal  # the VecEnv has reset: the real s′
            obs = np.array(self.model._last_obs, dtype=np.float32, copy=True)
            actions = np.array(self.locals["actions"], dtype=np.float32, copy=True)  # raw
            self._transitions.append((obs, actions.reshape(len(obs), -1), next_obs))
        elif any(self.locals["dones"]):
            self._record()  # off-policy: SB3 writes its logs after episode ends
        return True

    def _on_rollout_end(self) -> None:
        if self._on_policy:
            if self._transitions:
                self._score_rollout()
            self._record()

    def _record(self) -> None:
        self.statistics = self.bonus.pop_statistics()
        for key, value in self.statistics.items():
            self.logger.record(key, value)

    def _score_rollout(self) -> None:
        """Bonus into the rollout's rewards (model before this rollout), returns and
        advantages recomputed; then the rollout into the pool and a fit."""
        obs, actions, next_obs = (np.concatenate(x) for x in zip(*self._transitions))
        buffer = self.model.rollout_buffer
        if self.bonus.ready:
            last = self.model.num_timesteps
            where = f"in the rollout of steps {last - len(obs) + 1}-{last}"
            bonus = scored(self.bonus, obs, actions, next_obs, where).cpu().numpy()
            buffer.rewards += bonus.reshape(buffer.rewards.shape)
            buffer.compute_returns_and_advantage(
                last_values=self.locals["values"], dones=self.locals["dones"]
            )
        self.bonus.add(obs, actions, next_obs)
        last = self.model.num_timesteps
        fitted(self.bonus, f"in its fit after the rollout of steps {last - len(obs) + 1}-{last}")
        self._transitions = []
