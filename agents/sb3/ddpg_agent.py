"""``train_agent --engine sb3``: the same run through SB3's DDPG with ``ParamExplorePolicy``.

:class:`SB3Agent` gives an SB3 model the small interface :mod:`agents.runs` drives
(``learn`` with run callbacks, ``predict``, ``save``, counters, losses, σ), so both engines
write the same run directory and eval CSV and can be overlaid in TensorBoard. Differences
that remain are SB3's own: its critic takes the action at the input layer, and it acts
uniformly at random for its first ``learning_starts`` steps.

Checkpoints are data, as the native engine's: SB3's own ``save`` writes cloudpickled
objects into its zip and ``load`` unpickles them, so a crafted file would run code on
``--resume``. A checkpoint here is a ``torch.save`` of tensors and plain values only —
the policy's and both optimizers' state dicts, the counters, every random generator the
run draws from, the replay buffer's arrays when the run keeps it — read back with
``torch.load(weights_only=True)`` into a model rebuilt from the run's config.

A step's run callback (evaluation, scalars, checkpoint) is called once that step's update
is done, at the start of SB3's next rollout, as the native agent calls it after its update:
a checkpoint then holds the step's transition and update, and a resumed run continues
where the interrupted one was. SB3's ``on_step`` comes earlier (after ``env.step``, before
the transition is stored): it checks the data there, so nothing non-finite is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3 import DDPG as SB3DDPG
from stable_baselines3.common.callbacks import BaseCallback

from ..common.callbacks import Callback
from ..common.checkpoints import FINITE_KEYS, load_checked
from ..common.checks import check_seed
from ..common.devices import resolve_device
from ..common.envs import env_id, make_env
from ..settings.learners import DDPGSettings
from ..settings.memory import check_learners
from .adapter import (
    CheckedEnv,
    SB3RunAgent,
    StopLearning,
    check_step,
    generator_states,
    report_episode_end,
    restore_generators,
)
from .policy import ParamExploreCallback, ParamExplorePolicy

#: The replay buffer's arrays a checkpoint keeps (the stored part only).
_BUFFER_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


class _RunBridge(BaseCallback):
    """Calls the run's :class:`Callback` at the points the module docstring names."""

    def __init__(self, agent: SB3Agent, callback: Callback) -> None:
        super().__init__()
        self.agent = agent
        self.run_callback = callback

    def _on_training_start(self) -> None:
        self.agent.steps_done = self.model.num_timesteps
        self.run_callback.on_training_start(self.agent)

    def _on_step(self) -> bool:
        # After env.step and before the transition is stored.
        check_step(self.locals, self.model.num_timesteps)
        self.agent.episode_ended = report_episode_end(self.locals, self.agent, self.run_callback)
        return True

    def _on_rollout_start(self) -> None:
        # The previous step's transition is stored and its update done.
        self._finish_step()

    def _finish_step(self) -> None:
        if self.model.num_timesteps > self.agent.steps_done:
            self.agent.steps_done = self.model.num_timesteps
            self.agent.between_episodes = self.agent.episode_ended
            if not self.run_callback.on_step(self.agent):
                raise StopLearning

    def _on_training_end(self) -> None:
        self._finish_step()  # the last step, whose update SB3 has just made


class SB3Agent(SB3RunAgent):
    """An SB3 DDPG model with ``ParamExplorePolicy``, configured like the native agent."""

    checkpoint_name = "latest.pt"
    loss_names = (("critic", "train/critic_loss"), ("actor", "train/actor_loss"))
    checked_state = FINITE_KEYS["sb3"]

    def __init__(
        self, env: str | gym.Env, config: DDPGSettings, seed: int, device: str = "auto"
    ) -> None:
        check_seed(seed)
        self.config = config
        self.seed = seed
        self.env = CheckedEnv(make_env(env))
        self.env_id = env_id(self.env)
        self.device = resolve_device(device)
        obs_dim, action_dim = self.env.observation_space.shape[0], self.env.action_space.shape[0]
        check_learners([config], obs_dim, action_dim, self.device)
        self.model = self._build(seed)
        #: Steps whose transition and update are done (SB3 counts a step at ``env.step``).
        self.steps_done = 0
        self.between_episodes = True
        self.episode_ended = True

    def _build(self, seed: int | None) -> SB3DDPG:
        """The model the config describes; ``seed`` None seeds nothing (a checkpoint's
        generators are restored instead)."""
        config, strategy = self.config, self.config.strategy
        policy_kwargs = dict(
            strategy=strategy.optimizer,
            actor_optimizer_kwargs=dict(strategy.optimizer_kwargs),
            net_arch=list(config.hidden_sizes),
            resample=strategy.resample,
            init=config.init,
            layer_norm=strategy.layer_norm,
            # SB3's actor loss is a minibatch mean; the paper's sum is batch_size × it.
            actor_grad_scale=float(config.batch_size)
            if config.actor_grad_reduction == "sum"
            else 1.0,
        )
        self._noise_generator = torch.Generator().manual_seed(self.seed)
        return SB3DDPG(
            ParamExplorePolicy,
            self.env,
            learning_rate=config.critic_lr,
            buffer_size=config.buffer_size,
            learning_starts=config.learning_starts,
            batch_size=config.batch_size,
            tau=config.tau,
            gamma=config.gamma,
            train_freq=1,
            gradient_steps=config.gradient_steps,
            policy_kwargs=policy_kwargs,
            action_noise=None
            if strategy.noise is None
            else strategy.noise(
                self.env.action_space.shape[0],
                generator=self._noise_generator,
                **strategy.action_noise,
            ),
            seed=seed,
            device=self.device,
        )

    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    def sb3_callbacks(self, callback: Callback) -> list[BaseCallback]:
        return [ParamExploreCallback(), _RunBridge(self, callback)]

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

    # ----------------------------------------------------------------- persistence
    def state_dict(self, include_buffer: bool = False) -> dict[str, Any]:
        """Everything needed to continue training, as tensors and plain values."""
        model = self.model
        state = {
            "engine": "sb3",
            "config": self.config.values(),
            "env_id": self.env_id,
            "seed": self.seed,
            "policy": model.policy.state_dict(),
            "actor_optimizer": model.actor.optimizer.state_dict(),
            "critic_optimizer": model.critic.optimizer.state_dict(),
            "counters": {
                "num_timesteps": self.steps_done,
                "skipped_updates": self.skipped_updates,
            },
            "generators": {
                **generator_states(model, self.env.rng_before_reset),
                "action_noise": self._noise_generator.get_state(),
            },
            "at_episode_boundary": self.between_episodes,
        }
        if include_buffer:
            buffer = model.replay_buffer
            size = buffer.size()
            state["buffer"] = {
                "size": size,
                "pos": buffer.pos,
                "full": buffer.full,
                **{
                    name: torch.from_numpy(getattr(buffer, name)[:size].copy())
                    for name in _BUFFER_ARRAYS
                },
            }
        return state

    def load_checkpoint(
        self, path: str | Path, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Continue from a file written by :meth:`save` for this run (its env and
        strategy); return the ``metadata`` saved with it, which ``check`` sees before
        anything is loaded. Anything else raises :class:`CheckpointError` naming the file."""
        return load_checked(
            path, self.device, self.env_id, self.config.strategy.name, self._load_state, check,
            engine="sb3",
        )  # fmt: skip

    def _load_state(self, state: dict[str, Any]) -> None:
        generators = state["generators"]
        # Generators first: the model may be rebuilt (unseeded) before the weights load.
        model = restore_generators(self, generators)
        model.policy.load_state_dict(state["policy"])
        model.actor.optimizer.load_state_dict(state["actor_optimizer"])
        model.critic.optimizer.load_state_dict(state["critic_optimizer"])
        counters = state["counters"]
        model.num_timesteps = self.steps_done = counters["num_timesteps"]
        model.actor.optimizer.skipped_steps = counters["skipped_updates"]
        self._noise_generator.set_state(generators["action_noise"].cpu())
        self.between_episodes = self.episode_ended = bool(state["at_episode_boundary"])
        if "buffer" in state:
            buffer, saved = model.replay_buffer, state["buffer"]
            size = saved["size"]
            if size > buffer.buffer_size:
                raise ValueError(f"saved buffer holds {size}, this one {buffer.buffer_size}")
            for name in _BUFFER_ARRAYS:
                getattr(buffer, name)[:size] = saved[name].numpy(force=True)
            buffer.pos, buffer.full = saved["pos"], saved["full"]
