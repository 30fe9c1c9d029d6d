"""``train_agent --engine sb3 --algo trpo [--bonus vime]``: sb3-contrib's TRPO in a run.

:class:`SB3TRPOAgent` gives a TRPO model the interface :mod:`agents.runs` drives,
as :class:`agents.sb3.ddpg_agent.SB3Agent` does for DDPG, so a TRPO run writes the same run
directory (``<env>/trpo[+vime-<posterior>]-sb3/seed<k>``), eval CSV and TensorBoard tags.
TRPO explores through its own Gaussian policy (its state-independent log σ is logged as
``explore/action_std``): no weight-noise strategy applies. Its settings are the run's
``trpo:`` mapping, the networks ``hidden_sizes`` (policy and value function alike) and the
discount ``gamma`` (:class:`agents.settings.TRPOSettings`). It acts in [−1, 1] and the env
rescales to its bounds, as VIME's rllab ran it, unless the run's ``normalize_actions`` is
false (the env it is given is already wrapped: :mod:`agents.runs.agent_factory`).

sb3-contrib is an optional extra (``pip install 'param-explore[trpo]'``): this module is
imported only when a run asks for TRPO (:mod:`agents.runs.agent_factory`).

With a bonus (``bonus: {kind: vime, ...}``) the run gives the agent a
:class:`agents.curiosity.sb3.VimeCallback` holding the run's :class:`VimeBonus` (seeded
as the native engine's, :func:`agents.runs.agent_factory.make_run_bonus`), which rescores every
rollout; its ``bonus/*`` and ``dynamics/*`` scalars reach the run's TensorBoard through
:meth:`SB3TRPOAgent.bonus_statistics`, its bonus is checkpointed. Episode returns and
evaluations stay the task's own. (The agent knows the callback only by those two
attributes, :class:`BonusCallback`: the sb3 family sits below curiosity's.)

**Rollout boundaries.** TRPO updates once per rollout of ``trpo.n_steps`` steps, and SB3
starts every rollout with an empty rollout buffer: a state in the middle of a rollout
cannot be continued. So the run's step callback is called after every step, as for DDPG
(evaluations may fall mid-rollout: the policy does not change within one), but a
checkpoint is only taken at a rollout boundary — after the rollout's update, before the
next rollout's first step. A checkpoint that falls due (``checkpoint_every``) waits for
the next boundary, and so does a stop request (Ctrl-C, SIGTERM): the rollout is finished
and trained on, then checkpointed, then the run stops. The end of the run
(``total_steps``) stops at once, even mid-rollout; those last steps are not trained on.
A run that fails inside a rollout keeps its last (boundary) checkpoint.

A checkpoint is data only (``torch.save`` of state dicts, counters, every generator and
the bonus with its pool; read back with ``torch.load(weights_only=True)``). A resumed run
continues exactly as the uninterrupted one from a boundary that is also an episode's end
(the env's generator is restored to its state before SB3's reset, so the same episode
starts); from a boundary in mid-episode it starts a new episode there.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback

from ..common.callbacks import Callback
from ..common.checkpoints import FINITE_KEYS, load_checked
from ..common.checks import check_seed
from ..common.devices import resolve_device
from ..common.envs import env_id
from ..settings.learners import TRPO_STRATEGY
from ..settings.memory import check_learners
from ..settings.run import RunSettings
from . import adapter

#: The engine a TRPO checkpoint records (``read_checkpoint`` refuses another's).
ENGINE = "sb3-trpo"


class BonusCallback(Protocol):
    """An SB3 callback that adds a curiosity bonus to each rollout (``VimeCallback``)."""

    #: The bonus, with ``state_dict(include_pool=True)`` and ``load_state_dict``.
    bonus: Any
    #: The scalars of its latest rollout.
    statistics: dict[str, float]


class _RolloutBridge(BaseCallback):
    """Calls the run's :class:`Callback` after every step, and after the update for the
    last step of a rollout (module docstring)."""

    def __init__(self, agent: SB3TRPOAgent, callback: Callback) -> None:
        super().__init__()
        self.agent = agent
        self.run_callback = callback
        self._boundary_pending = False

    def _on_training_start(self) -> None:
        self.run_callback.on_training_start(self.agent)

    def _on_step(self) -> bool:
        # After env.step; the transition is stored in the rollout buffer after this.
        adapter.check_step(self.locals, self.model.num_timesteps)
        ended = adapter.report_episode_end(self.locals, self.agent, self.run_callback)
        self.agent.episode_ended = ended
        if self.locals["n_steps"] + 1 >= self.model.n_steps:
            self._boundary_pending = True  # called once the rollout's update is done
        else:
            self._call_run(boundary=False)
        return True

    def _on_rollout_start(self) -> None:
        self._finish_rollout()  # the previous rollout is trained on

    def _on_training_end(self) -> None:
        self._finish_rollout()

    def _finish_rollout(self) -> None:
        if self._boundary_pending:
            self._boundary_pending = False
            self._call_run(boundary=True)

    def _call_run(self, boundary: bool) -> None:
        self.agent.at_boundary = boundary
        try:
            go_on = self.run_callback.on_step(self.agent)
        finally:
            self.agent.at_boundary = False
        # The run's end stops at once; a stop request waits for the rollout's end.
        if not go_on and (boundary or self.model.num_timesteps >= self.model._total_timesteps):
            raise adapter.StopLearning


class SB3TRPOAgent(adapter.SB3RunAgent):
    """An sb3-contrib TRPO model configured by a run's settings."""

    checkpoint_name = "latest.pt"
    #: A failing run keeps its last checkpoint rather than save a state inside a rollout.
    boundaries_only = True
    #: The latest update's losses.
    loss_names = (
        ("policy_objective", "train/policy_objective"),
        ("value", "train/value_loss"),
        ("kl", "train/kl_divergence_loss"),
    )
    checked_state = (*FINITE_KEYS[ENGINE], "bonus")

    def __init__(
        self,
        env: gym.Env,
        config: RunSettings,
        bonus_callback: BonusCallback | None = None,
    ) -> None:
        """``config``: the run's settings (``seed``, ``device``, and its learner's
        :class:`TRPOSettings`)."""
        check_seed(config.seed)
        self.config = config
        self.seed = config.seed
        self.settings = config.learner
        self.env = adapter.CheckedEnv(env)
        self.env_id = env_id(self.env)
        self.device = resolve_device(config.device)
        self.bonus_callback = bonus_callback
        obs_dim, action_dim = (
            int(np.prod(space.shape)) for space in (env.observation_space, env.action_space)
        )
        check_learners([self.settings], obs_dim, action_dim, self.device)
        self.model = self._build(self.seed)
        #: Whether the run's callback is called at a rollout boundary (checkpoints then).
        self.at_boundary = False
        self.episode_ended = True

    def _build(self, seed: int | None) -> TRPO:
        """The model the config describes; ``seed`` None seeds nothing (a checkpoint's
        generators are restored instead)."""
        settings = self.settings
        with warnings.catch_warnings():
            # A batch_size that does not divide n_steps leaves one shorter minibatch of
            # the value function's updates per epoch: harmless, and said in docs/sb3.md.
            warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
            return TRPO(
                "MlpPolicy",
                self.env,
                n_steps=settings.n_steps,
                batch_size=settings.batch_size,
                gamma=settings.gamma,
                gae_lambda=settings.gae_lambda,
                target_kl=settings.target_kl,
                policy_kwargs={"net_arch": list(settings.hidden_sizes)},
                seed=seed,
                device=self.device,
            )

    # ------------------------------------------------------------------ run interface
    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    @property
    def between_episodes(self) -> bool:
        """Whether a checkpoint may be taken now: at a rollout boundary only."""
        return self.at_boundary

    def sb3_callbacks(self, callback: Callback) -> list[BaseCallback]:
        callbacks: list[Any] = [_RolloutBridge(self, callback)]
        if self.bonus_callback is not None:  # rescores a rollout before the run sees it
            callbacks.insert(0, self.bonus_callback)
        return callbacks

    def bonus_statistics(self) -> dict[str, float]:
        """The bonus's ``bonus/*`` and ``dynamics/*`` scalars of the latest rollout, once."""
        if self.bonus_callback is None:
            return {}
        statistics, self.bonus_callback.statistics = self.bonus_callback.statistics, {}
        return statistics

    def exploration_statistics(self) -> dict[str, float]:
        """The Gaussian policy's mean standard deviation (state-independent)."""
        return {"action_std": float(torch.exp(self.model.policy.log_std.detach()).mean())}

    @property
    def num_updates(self) -> int:
        """Policy updates (one per rollout)."""
        return self.model._n_updates

    @property
    def skipped_updates(self) -> int:
        """TRPO has no skipped update: a failed line search keeps the policy, by design."""
        return 0

    # ----------------------------------------------------------------- persistence
    def state_dict(self, include_buffer: bool = False) -> dict[str, Any]:
        """Everything needed to continue from a rollout boundary, as tensors and plain
        values. TRPO keeps no replay buffer (``include_buffer`` is the run's interface);
        the bonus's pool is always saved."""
        model, env = self.model, self.env
        # At an episode's end SB3 has already reset the env: the resumed run resets it
        # again from the generator's state before that reset.
        rng = env.rng_before_reset if self.episode_ended else _env_rng(env)
        state = {
            "engine": ENGINE,
            "config": self.config.values(),
            "env_id": self.env_id,
            "seed": self.seed,
            "policy": model.policy.state_dict(),
            "optimizer": model.policy.optimizer.state_dict(),
            "counters": {"num_timesteps": model.num_timesteps, "num_updates": model._n_updates},
            "generators": adapter.generator_states(
                model, rng if env.rng_before_reset is not None else None
            ),
            "at_episode_boundary": self.episode_ended,
        }
        if self.bonus_callback is not None:
            state["bonus"] = self.bonus_callback.bonus.state_dict(include_pool=True)
        return state

    def load_checkpoint(
        self, path: str | Path, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Continue from a file written by :meth:`save` for this run; return its
        ``metadata``, which ``check`` sees before anything is loaded."""
        return load_checked(
            path, self.device, self.env_id, TRPO_STRATEGY, self._load_state, check, engine=ENGINE
        )

    def _load_state(self, state: dict[str, Any]) -> None:
        model = adapter.restore_generators(self, state["generators"])
        model.policy.load_state_dict(state["policy"])
        model.policy.optimizer.load_state_dict(state["optimizer"])
        counters = state["counters"]
        model.num_timesteps = counters["num_timesteps"]
        model._n_updates = counters["num_updates"]
        self.episode_ended = bool(state["at_episode_boundary"])
        if self.bonus_callback is not None:
            self.bonus_callback.bonus.load_state_dict(state["bonus"], steps=model.num_timesteps)


def _env_rng(env: gym.Env) -> dict[str, Any]:
    return env.unwrapped.np_random.bit_generator.state
