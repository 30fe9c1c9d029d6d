"""``train_agent --engine sb3``: the same run through SB3's DDPG with ``ParamExplorePolicy``.

:class:`SB3Agent` gives an SB3 model the small interface :mod:`agents.runs.training` drives
(``learn`` with run callbacks, ``predict``, ``save``, counters, losses, σ), so both engines
write the same run directory and eval CSV and can be overlaid in TensorBoard. Differences
that remain are SB3's own: its critic takes the action at the input layer, and it acts
uniformly at random for its first ``learning_starts`` steps.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import DDPG as SB3DDPG
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from ..engine.checkpoints import atomic_write
from ..engine.config import DDPGConfig
from ..engine.ddpg import Callback
from ..engine.envs import make_env
from ..engine.strategies import make_action_noise, strategy_optimizer
from ..errors import CheckpointError, NonFiniteDataError
from .policy import ParamExploreCallback, ParamExplorePolicy


class _RunBridge(BaseCallback):
    """Forwards SB3's per-step callback to the run's :class:`Callback`."""

    def __init__(self, agent: SB3Agent, callback: Callback) -> None:
        super().__init__()
        self.agent = agent
        self.run_callback = callback

    def _on_training_start(self) -> None:
        self.run_callback.on_training_start(self.agent)

    def _on_step(self) -> bool:
        # Called by SB3 after env.step and before the transition is stored.
        rewards, observations = self.locals["rewards"], self.locals["new_obs"]
        step = self.agent.num_timesteps
        if not np.isfinite(rewards).all():
            raise NonFiniteDataError(
                f"non-finite reward ({rewards.tolist()}) at step {step}; training stopped"
            )
        if not np.isfinite(observations).all():
            raise NonFiniteDataError(
                f"non-finite observation ({observations.tolist()}) at step {step}; training stopped"
            )
        dones, infos = self.locals["dones"], self.locals["infos"]
        self.agent.between_episodes = bool(dones[0])
        if dones[0] and "episode" in infos[0]:
            episode = infos[0]["episode"]
            self.run_callback.on_episode_end(self.agent, float(episode["r"]), int(episode["l"]))
        return self.run_callback.on_step(self.agent)

    def _on_training_end(self) -> None:
        self.run_callback.on_training_end(self.agent)


class SB3Agent:
    """An SB3 DDPG model with ``ParamExplorePolicy``, configured like the native agent."""

    checkpoint_name = "latest.zip"

    def __init__(
        self, env: str | gym.Env, config: DDPGConfig, seed: int, device: str = "auto"
    ) -> None:
        self.config = config
        env = make_env(env)
        policy_kwargs = dict(
            strategy=strategy_optimizer(config.strategy),
            actor_optimizer_kwargs=config.optimizer_kwargs,
            net_arch=list(config.hidden_sizes),
            resample=config.resample,
            init=config.init,
            layer_norm=config.layer_norm,
            # SB3's actor loss is a minibatch mean; the paper's sum is batch_size × it.
            actor_grad_scale=float(config.batch_size)
            if config.actor_grad_reduction == "sum"
            else 1.0,
        )
        self.model = SB3DDPG(
            ParamExplorePolicy,
            env,
            learning_rate=config.critic_lr,
            buffer_size=config.buffer_size,
            learning_starts=config.learning_starts,
            batch_size=config.batch_size,
            tau=config.tau,
            gamma=config.gamma,
            train_freq=1,
            gradient_steps=config.gradient_steps,
            policy_kwargs=policy_kwargs,
            action_noise=make_action_noise(
                config.strategy,
                env.action_space.shape[0],
                config.action_noise,
                torch.Generator().manual_seed(seed),
            ),
            seed=seed,
            device=device,
        )
        self.between_episodes = True

    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    def learn(self, total_steps: int, callback: Callback) -> SB3Agent:
        callbacks = CallbackList([ParamExploreCallback(), _RunBridge(self, callback)])
        self.model.learn(total_steps, callback=callbacks, reset_num_timesteps=False)
        return self

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        return self.model.predict(obs, deterministic=deterministic)[0]

    def pop_losses(self) -> dict[str, float]:
        """SB3's latest recorded losses (it keeps no running mean between dumps)."""
        values = self.model.logger.name_to_value
        names = {"critic": "train/critic_loss", "actor": "train/actor_loss"}
        return {k: float(values[v]) for k, v in names.items() if v in values}

    def bonus_statistics(self) -> dict[str, float]:
        """No curiosity bonus runs on this engine yet (the run's config refuses one)."""
        return {}

    def exploration_statistics(self) -> dict[str, float]:
        return self.model.policy.exploration_statistics()

    @property
    def num_updates(self) -> int:
        """Gradient steps SB3 took (its ``train/n_updates``); DDPG steps the actor in each."""
        return self.model._n_updates

    @property
    def skipped_updates(self) -> int:
        """Actor steps the strategy skipped for a non-finite gradient (SB3's own critic
        step has no such guard)."""
        return self.model.policy.actor.optimizer.skipped_steps

    def save(self, path: str | Path, include_buffer: bool = False) -> None:
        path = Path(path)
        with atomic_write(path) as tmp:
            self.model.save(tmp)
        if include_buffer:
            self.model.save_replay_buffer(path.with_name("replay_buffer.pkl"))

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue from an SB3 zip of this run (its env and strategy), with SB3's own
        loading; any other file raises :class:`CheckpointError` naming it."""
        path = Path(path)
        try:
            model = SB3DDPG.load(path, env=self.model.get_env(), device=self.model.device)
        except Exception as err:  # SB3 raises many kinds for a foreign or damaged file
            detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
            raise CheckpointError(
                f"{path} is not a checkpoint of the sb3 engine for this run "
                f"({type(err).__name__}: {detail})"
            ) from None
        saved = model.policy.strategy
        expected = self.model.policy.strategy
        if saved != expected:
            raise CheckpointError(f"checkpoint {path} trains strategy {saved}, this run {expected}")
        self.model = model
        buffer = path.with_name("replay_buffer.pkl")
        if buffer.exists():
            self.model.load_replay_buffer(buffer)
