"""DDPG whose actor update is delegated to a ``param_explore`` optimizer.

One environment step follows Algorithms 1-2 of Khan et al. 2018 (Appendix K):

1. (per step, or per episode) draw new weight noise ε — line 3;
2. act with θ_t = μ_t + σ_t⊙ε — line 4 — and store the transition;
3. once the buffer holds more than ``learning_starts`` transitions, every
   ``train_every`` steps (every step in the paper), for each of
   ``gradient_steps`` updates: sample a minibatch (line 5), take an Adam step on the
   critic's TD loss with targets from the target networks (line 6), compute the
   deterministic policy gradient at the *same* θ_t under the updated critic (line 7,
   ``docs/decisions.md#sample-per-step``) and hand it to the strategy's ``step()``
   (line 8-9), then move the target networks toward the critic and the actor's *mean* μ
   (line 9-10).

Noise-free strategies (``sgd-plain``, ``adam-plain``) act with μ and no noise at all. The
baselines differ only where the comparison needs them to: ``gaussian-action`` and
``ou-action`` act with μ plus action noise (scaled to the bounds, clipped), and
``param-noise`` acts with a perturbed copy taken at each episode start, is trained at μ
(the strategy's ``training_params()``) and adapts its σ every few steps
(``adapt_noise``, on a replay minibatch).
Time-limit truncation is bootstrapped through: only ``terminated`` ends the return.

Plappert et al.'s DDPG (OpenAI baselines, ``configs/sparse-study.yaml``) is the same loop
with four settings: ``normalize_observations`` (the networks see observations normalised
by running statistics, kept here, updated after each transition is stored, saved in
checkpoints; the buffer keeps raw ones), ``critic_layer_norm`` and ``critic_l2_reg`` (in
the critic and its loss), and ``train_every`` (50 updates every 100 steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from param_explore import action_space_distance

from ..common.callbacks import Callback
from ..common.checkpoints import (
    FINITE_KEYS,
    listed,
    load_checked,
    load_named,
    non_finite_entries,
    read_checkpoint,
    save_finite,
)
from ..common.checks import check_seed
from ..common.devices import resolve_device
from ..common.envs import coverage_statistics, env_id, make_env
from ..common.errors import CheckpointError, ConfigError, NonFiniteDataError
from ..common.forwarded import Forwarded
from ..common.reward_bonus import RewardBonus, fitted, scored
from ..common.vector_envs import OneEnv
from ..settings.files import upgrade_config_keys
from ..settings.learners import DDPGSettings
from .compiled_update import CompiledUpdate
from .engine import Engine, Transition
from .execution import ChosenUpdate
from .observations import ObservationStatistics
from .replay_buffer import Batch, ReplayBuffer
from .stacked_state import StackedState, load_in_place
from .thompson import ThompsonCritic
from .update import EagerUpdate

#: The parts of a state that must be finite to be saved or trusted.
_CHECKED_STATE = FINITE_KEYS["native"]
#: What must be finite to be saved: the agent's state and its curiosity bonus's.
_SAVED_CHECKED_STATE = (*_CHECKED_STATE, "bonus")


def _measurement_seed(seed: int) -> int:
    """The seed of a run's measurement generator: a stream of its own, not the training
    generator's (which the same seed would repeat)."""
    return int(np.random.SeedSequence([seed, 1]).generate_state(1, np.uint64)[0] >> 1)


def _seeded_generator(device: torch.device, seed: int | None) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed``, or from fresh entropy if None."""
    generator = torch.Generator(device=device)
    if seed is not None:
        generator.manual_seed(seed)
    else:
        generator.seed()
    return generator


class DDPG:
    """Deep deterministic policy gradient with parameter-space exploration.

    ``checkpoint_name`` is the file name the training loop uses for this engine. The
    settings are a :class:`DDPGSettings` (resolved once: its strategy is translated and
    checked there), with ``overrides`` as a settings file names them (``strategy``,
    ``optimizer_kwargs``, ``batch_size``, …).

    >>> agent = DDPG("Pendulum-v1", strategy="vadam", seed=0)   # doctest: +SKIP
    >>> agent.learn(10_000)                                       # doctest: +SKIP
    >>> action = agent.predict(obs, deterministic=True)           # doctest: +SKIP
    """

    checkpoint_name = "latest.pt"
    #: Its counters, its row of its stack's (agents.ddpg.member_rows).
    num_timesteps = Forwarded("counters", "timesteps", "Environment steps taken.")
    num_updates = Forwarded("counters", "updates", "Updates made (applied or skipped).")
    num_episodes = Forwarded("counters", "episodes", "Training episodes ended.")

    def __init__(
        self,
        env: str | gym.Env,
        config: DDPGSettings | None = None,
        *,
        seed: int | None = None,
        device: str | torch.device = "auto",
        bonus: RewardBonus | None = None,
        stack: StackedState | None = None,
        row: int = 0,
        coverage: Callable[[], dict[str, float]] | None = None,
        **overrides: Any,
    ) -> None:
        """``stack``: the state of a population this agent is member ``row`` of
        (:meth:`StackedState.build`, with this agent's settings and seed at that row);
        without it the agent builds its own, of one member. ``coverage``: what reports the
        coverage of its row of the population's envs; without it, its own env's."""
        if overrides:  # resolved once more only for what the caller changes here
            base = config.values() if config is not None else {}
            config = DDPGSettings.from_values({**base, **overrides})
        self.config = cfg = config or DDPGSettings()
        check_seed(seed)
        self.env = make_env(env)
        self.env_id = env_id(self.env)
        self.device = resolve_device(device)
        self.seed = seed

        action_space = self.env.action_space
        if seed is not None:
            action_space.seed(seed)
        if stack is None:  # a single run: the state of one member, built as a population's
            stack = StackedState.build(
                [cfg], [seed], self.env.observation_space, action_space, self.device
            )
        #: Its networks, optimizers, observation statistics and the update's counters: its
        #: row of the stacked state (agents.ddpg.stacked_state).
        self.learner = learner = stack.learners[row]
        self.actor, self.critic = learner.actor, learner.critic
        self.target_actor, self.target_critic = learner.target_actor, learner.target_critic
        self.actor_optimizer, self.critic_optimizer = (
            learner.actor_optimizer,
            learner.critic_optimizer,
        )
        self.buffer: ReplayBuffer = stack.buffer.members[row]
        #: When new weight noise is drawn (the strategy's choice unless the settings say).
        self.resample = cfg.strategy.resample
        self._build_draws(seed, action_space.shape[0])
        #: A sampled critic's held sample and acting move (agents.ddpg.thompson), or None.
        self.thompson = learner.thompson = (
            ThompsonCritic(
                learner.critic,
                learner.critic_optimizer,
                self.generator,
                cfg,
                [sample[row] for sample in stack.critic_samples],
                stack.critic_moves[row],
            )
            if cfg.samples_critic
            else None
        )
        #: A curiosity bonus added to replayed rewards (``agents.common.reward_bonus``).
        self.bonus = bonus
        self._action_low, self._action_high = action_space.low, action_space.high
        self._action_scale = (action_space.high - action_space.low) / 2

        #: Its step, update and episode counters: its row of the stack's
        #: (agents.ddpg.member_rows), counted by the engine for every member at once.
        self.counters = learner.counters
        #: Its own update, compiled or eager as agents.ddpg.execution decides: the update of
        #: an engine of one; a member of a stack of several is updated by its population's
        #: batched graph, and this eager form is its fallback.
        self._update = self._chosen_update(cfg.compile and len(stack) == 1)
        self._stack = stack
        #: What a single run steps (agents.ddpg.engine, built at its first learn): its env,
        #: which remembers its RNG as it was before each reset.
        self._env_steps = _ResetRecorder(self.env)
        self._engine: Engine | None = None
        #: The coverage of the state space its env reports since the last call.
        self.coverage: Callable[[], dict[str, float]] = coverage or (
            lambda: coverage_statistics(self.env)
        )

    def _build_draws(self, seed: int | None, action_dim: int) -> None:
        """The agent's generators, from ``seed`` (fresh entropy if None), and its action
        noise, if its strategy adds any, drawn from the training one."""
        # One generator for everything the agent draws (minibatches, weight noise), so a
        # checkpoint captures the agent's randomness in one state.
        self.generator = _seeded_generator(self.device, seed)
        #: The generator of what is measured for the logs alone (the action distance the
        #: weight noise causes): logging never moves the training's random numbers.
        self.measure_generator = _seeded_generator(
            self.device, None if seed is None else _measurement_seed(seed)
        )
        strategy = self.config.strategy
        self.action_noise = (
            None
            if strategy.noise is None
            else strategy.noise(action_dim, generator=self.generator, **strategy.action_noise)
        )

    @property
    def obs_statistics(self) -> ObservationStatistics | None:
        """The running statistics the networks' observations are normalised by (its row of
        the stacked state's), or None."""
        return self.learner.obs_statistics

    # ----------------------------------------------------------------- acting
    def _network_input(self, obs: np.ndarray | Tensor) -> Tensor:
        """Observations as the networks see them: normalised, with
        ``normalize_observations``, by the statistics of this moment."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        statistics = self.learner.obs_statistics
        return obs_t if statistics is None else statistics.normalize(obs_t)

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The action for ``obs`` (one observation or a batch).

        ``deterministic=True`` uses the mean μ (evaluation, target); otherwise the
        current sample θ = μ + σ⊙ε is used (the exploration policy), its action moved by a
        sampled critic's held sample if the critic is one.
        """
        return self.act(obs, deterministic).cpu().numpy()

    def act(self, obs: np.ndarray | Tensor, deterministic: bool = True) -> Tensor:
        """:meth:`predict`'s action as a tensor on the training device (what the engine
        steps its envs with: no copy to the host)."""
        with torch.no_grad():  # (as a decorator it would cost two more calls a step)
            obs_t = self._network_input(obs)
            weights = None if deterministic else self.actor_optimizer.named_sample()
            action = self.actor(obs_t, weights)
        if deterministic or self.thompson is None:
            return action
        # moved along the held sample of a sampled critic (agents.ddpg.thompson)
        return self.thompson.moved(obs_t, action, self.actor.action_offset, self.actor.action_scale)

    def draw_critic_sample(self) -> None:
        """A new held sample of a sampled critic (the engine calls it at an episode's
        start, or every ``critic_hold`` steps: :meth:`Engine.draw_weight_noise`)."""
        assert self.thompson is not None
        self.thompson.draw()

    def with_action_noise(self, action: np.ndarray) -> np.ndarray:
        """The policy's action plus the action noise, if the strategy adds any, clipped, of a
        standard normal draw from :attr:`generator` (the engine adds every member's at once
        on the device: :class:`~agents.ddpg.action_noise_rows.ActionNoiseRows`)."""
        if self.action_noise is None:
            return action
        noise = self.action_noise()
        noisy = action + noise * self._action_scale  # noise in [-1, 1] units
        return np.clip(noisy, self._action_low, self._action_high).astype(action.dtype)

    @property
    def between_episodes(self) -> bool:
        """True after an episode ended and before the next one starts."""
        return self.counters.between_episodes

    @property
    def observation(self) -> Tensor | None:
        """A single run's observation the next action is for; None between episodes (and
        for a population's member: its population's envs hold it)."""
        if self._engine is None or self.between_episodes:
            return None
        return self._engine.observations[0]

    # ----------------------------------------------------------------- learning
    def learn(self, total_steps: int, callback: Callback | None = None) -> DDPG:
        """Run ``total_steps`` more environment steps, updating as ``train_every`` says."""
        if total_steps <= 0:
            raise ConfigError(f"total_steps must be > 0, got {total_steps}")
        if self._engine is None:  # kept between calls: an episode goes on across them
            envs = OneEnv(self._env_steps)
            self._engine = Engine([self], envs, self._stack, single_run=True)
        self._engine.learn(total_steps, [callback or Callback()])
        return self

    # The phases of one environment step (agents/ddpg/step.py) that are a member's own,
    # public because the engine (agents/ddpg/engine.py) calls them for each member.
    def check_action(self, action: np.ndarray, step: int | None = None) -> None:
        """NonFiniteDataError, saying which of the agent's tensors went bad, for an action
        that is not finite: it never reaches the env. ``step``: the step it is of (default
        the coming one)."""
        if not np.isfinite(action).all():
            raise self._non_finite_action(action, step)

    def checked_transition(
        self,
        next_obs: np.ndarray,
        reward: float,
        terminated: bool,
        truncated: bool,
        step: int | None = None,
    ) -> Transition:
        """The env's answer as a :class:`Transition`, every number checked finite (of
        ``step``, default the coming one)."""
        self._check_finite(next_obs, reward, step)
        return Transition(next_obs, float(reward), bool(terminated), bool(truncated))

    def add_to_bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> None:
        """After the transition is stored, before it is counted: into the curiosity bonus's
        pool (its model fitted when due). Nothing without a bonus."""
        if self.bonus is not None:
            self.bonus.add(obs, action, next_obs)
            if self.bonus.due():
                fitted(self.bonus, f"in its fit at step {self.num_timesteps + 1}")

    def updates_due(self) -> bool:
        """Whether this step ends with updates: once the buffer holds more than
        ``learning_starts`` transitions, ``gradient_steps`` every ``train_every`` steps."""
        cfg = self.config
        step = self.counters.timesteps
        return step % cfg.train_every == 0 and len(self.buffer) > cfg.learning_starts

    def noise_adaptation_due(self) -> bool:
        """Whether the strategy adapts its noise after this step (parameter noise, every
        ``noise_adaptation_interval`` steps once the buffer holds a minibatch)."""
        interval = self.actor_optimizer.noise_adaptation_interval
        if not interval or self.counters.timesteps % interval:
            return False
        return len(self.buffer) >= self.config.batch_size

    def _check_finite(self, obs: np.ndarray, reward: float, step: int | None = None) -> None:
        """Nothing non-finite from the environment reaches the buffer (and the networks)."""
        step = self.num_timesteps + 1 if step is None else step
        if not math.isfinite(reward):
            raise NonFiniteDataError(
                f"non-finite reward ({reward}) from {self.env_id} at step {step}; training stopped"
            )
        if not np.isfinite(obs).all():
            raise NonFiniteDataError(
                f"non-finite observation ({obs.tolist()}) from {self.env_id} at step {step}; "
                "training stopped"
            )

    def _non_finite_action(self, action: np.ndarray, step: int | None = None) -> NonFiniteDataError:
        """The policy's fault, not the env's: say which of the agent's tensors went bad."""
        step = self.num_timesteps + 1 if step is None else step
        bad = self.non_finite_state()
        if bad:
            what = f"its weights are no longer finite ({listed(bad)})"
        else:
            largest = max(float(p.detach().abs().max()) for p in self.actor.parameters())
            what = f"its weights reach {largest:.1e}, so its action overflows"
        return NonFiniteDataError(
            f"non-finite action ({action.tolist()}) from the actor at step {step}: {what}; "
            "an update diverged (a learning rate too large?); training stopped"
        )

    def non_finite_state(self) -> list[str]:
        """Names of the networks' and optimizers' tensors holding a non-finite value."""
        state = self.state_dict()
        return non_finite_entries({k: state[k] for k in _CHECKED_STATE})

    @property
    def skipped_updates(self) -> int:
        """Updates skipped so far because a loss or gradient was not finite."""
        return int(self.learner.skipped.item())

    def replayed_batch(self) -> Batch:
        """A minibatch from the replay buffer, its rewards plus the curiosity bonus if any.

        The bonus is scored here, outside the compiled graph (rewards are the graph's input),
        with the model as it is now: the buffer keeps the task's own rewards, so an old
        transition's bonus falls as the model learns it (``docs/vime.md``).
        """
        return self.with_bonus(self.buffer.sample(self.config.batch_size, self.generator))

    def with_bonus(self, batch: Batch) -> Batch:
        """``batch`` (this agent's minibatch) with the curiosity bonus on its rewards, if
        the agent has one: scored by the model as it is now."""
        if self.bonus is None:
            return batch
        where = f"in the update at step {self.num_timesteps}"
        extra = scored(self.bonus, batch.obs, batch.actions, batch.next_obs, where)
        return batch._replace(rewards=batch.rewards + extra.reshape(batch.rewards.shape))

    def train_step(self) -> None:
        """One DDPG update (Alg. 1-2 lines 5-10) at the current weight sample (a sampled
        critic's at a fresh ε, drawn after the minibatch, as the engine draws them)."""
        batch = self.replayed_batch()
        if self.thompson is not None:
            self.critic_optimizer.resample_noise(self.generator)
        self.update(batch)

    def update(self, batch: Batch) -> None:
        """One DDPG update on ``batch`` (its rewards with the bonus already on them, as
        :meth:`replayed_batch` gives it), compiled or eager as the settings say
        (:mod:`agents.ddpg.execution`)."""
        self._update(batch)
        self.counters.count_update()

    def _chosen_update(self, compile: bool) -> ChosenUpdate:
        """Its update; compiled, its graph moves its step counts and skips on, on its stack
        of one (its optimizers' step counts are views of the stack's row)."""
        return ChosenUpdate(
            compile,
            False,
            lambda: CompiledUpdate(self.learner, counts=lambda: self._stack.counts_of(0)),
            EagerUpdate(self.learner),
        )

    @property
    def compiled(self) -> bool:
        """Whether updates run as one compiled graph (``compile=True`` and a traced strategy)."""
        return self._update.graph is not None

    @torch.no_grad()
    def adapt_noise(self) -> None:
        """The strategy's noise adaptation (parameter noise) on a fresh replay minibatch,
        with actions in units of half the action range."""
        obs = self._network_input(self.buffer.sample(self.config.batch_size, self.generator).obs)
        center, scale = self.actor.action_offset, self.actor.action_scale
        self.actor_optimizer.adapt_noise(
            lambda weights: (self.actor(obs, weights) - center) / scale, self.generator
        )

    def pop_losses(self) -> dict[str, float]:
        """Mean critic and actor loss since the last call (empty before the first update)."""
        critic, actor, count = self.learner.loss_sums.tolist()
        self.learner.loss_sums.zero_()
        if count == 0:
            return {}
        return {"critic": critic / count, "actor": actor / count}

    def bonus_statistics(self) -> dict[str, float]:
        """The curiosity bonus's scalars since the last call, by tag (empty without one)."""
        return {} if self.bonus is None else self.bonus.pop_statistics()

    def exploration_statistics(self) -> dict[str, float]:
        """The ``explore/*`` scalars: the strategy's (σ over all actor weights, and its
        own), the action distance its weight noise causes, a sampled critic's (its moves and
        its spread of Q, :meth:`ThompsonCritic.statistics`), and the coverage the training
        env reports since the last call, if any."""
        statistics = self.actor_optimizer.exploration_statistics()
        distance = self.action_distance()
        if distance is not None:
            statistics["action_distance"] = distance
        if self.thompson is not None and len(self.buffer) >= self.config.batch_size:
            batch = self.buffer.sample(self.config.batch_size, self.measure_generator)
            statistics.update(
                self.thompson.statistics(
                    self._network_input(batch.obs), self.actor, self.measure_generator
                )
            )
        return {**statistics, **self.coverage()}

    @torch.no_grad()
    def action_distance(self) -> float | None:
        """d = √(mean (π_μ(s) − π_θ'(s))²) in units of half the action range, θ' a fresh
        sample of the strategy's weight distribution and s a replay minibatch, both drawn
        by :attr:`measure_generator`: parameter noise's distance (which it adapts its σ to),
        measured for every weight-noise strategy so that their σ read on one scale. None
        for strategies without weight noise and before the buffer holds a minibatch."""
        optimizer = self.actor_optimizer
        if not optimizer.explores or len(self.buffer) < self.config.batch_size:
            return None
        batch = self.buffer.sample(self.config.batch_size, self.measure_generator)
        obs = self._network_input(batch.obs)
        center, scale = self.actor.action_offset, self.actor.action_scale
        mean = (self.actor(obs) - center) / scale
        sampled = (self.actor(obs, optimizer.fresh_sample(self.measure_generator)) - center) / scale
        return action_space_distance(mean, sampled)

    # ----------------------------------------------------------------- persistence
    def state_dict(self, include_buffer: bool = False) -> dict[str, Any]:
        """Everything needed to continue training (the buffer only on request)."""
        state = {
            "config": self.config.values(),
            "env_id": self.env_id,
            "seed": self.seed,
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target_actor": self.target_actor.state_dict(),
            "target_critic": self.target_critic.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "measure_generator": self.measure_generator.get_state(),
            "counters": {
                "num_timesteps": self.num_timesteps,
                "num_updates": self.num_updates,
                "num_episodes": self.num_episodes,
                "skipped_updates": self.skipped_updates,
            },
            # The env's own RNG, so that a run resumed at an episode boundary continues
            # with the same episodes as one that was never interrupted.
            # The env resets itself as an episode ends (SAME_STEP): at a boundary, its RNG
            # as it was before that reset, which the resumed run's first reset repeats.
            "env_rng": self._env_steps.rng_state(self.between_episodes),
            "at_episode_boundary": self.between_episodes,
        }
        if self.obs_statistics is not None:  # the networks' input scale: always saved
            state["observation_statistics"] = self.obs_statistics.state_dict()
        if include_buffer:
            state["buffer"] = self.buffer.state_dict()
        if self.bonus is not None:  # its pool only with the buffer, like it
            state["bonus"] = self.bonus.state_dict(include_pool=include_buffer)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in ("actor", "critic", "target_actor", "target_critic"):
            getattr(self, name).load_state_dict(state[name])
        # into the tensors they hold (views of the stacked state, a compiled graph's inputs)
        load_in_place(self.actor_optimizer, state["actor_optimizer"])
        load_in_place(self.critic_optimizer, state["critic_optimizer"])
        # A generator's state is a CPU byte tensor whatever its device, but a checkpoint
        # loaded onto a GPU (map_location) brings it there: back to the CPU first.
        self.generator.set_state(state["generator"].cpu())
        if "measure_generator" in state:  # checkpoints before it measured start it afresh
            self.measure_generator.set_state(state["measure_generator"].cpu())
        if self.obs_statistics is not None:
            self.obs_statistics.load_state_dict(state["observation_statistics"])
        counters = state["counters"]
        self.num_timesteps = counters["num_timesteps"]
        self.num_updates = counters["num_updates"]
        self.num_episodes = counters["num_episodes"]
        self.learner.skipped.fill_(counters.get("skipped_updates", 0))
        if state.get("at_episode_boundary"):
            self.env.unwrapped.np_random.bit_generator.state = state["env_rng"]
        # a mid-episode state cannot be restored: start a new episode
        self.counters.between_episodes = True
        self._engine = None  # its first step resets the env
        if "buffer" in state:
            self.buffer.load_state_dict(state["buffer"])
        if (self.bonus is None) != ("bonus" not in state):
            raise CheckpointError(
                "the checkpoint and this run disagree on the curiosity bonus (one has none)"
            )
        if self.bonus is not None:
            self.bonus.load_state_dict(state["bonus"], steps=self.num_timesteps)
        if self._update.graph is not None:  # the optimizers hold new state tensors
            self._update.graph.bind()

    def load_checkpoint(
        self, path: str | Path, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Continue from a file written by :meth:`save` (this agent's env and strategy);
        return the ``metadata`` saved with it, which ``check`` sees before anything is
        loaded (and may refuse by raising).

        A damaged file, one of another env, strategy or engine, or one that holds anything
        but tensors and plain data raises :class:`CheckpointError` naming the file.
        """
        return load_checked(
            path, self.device, self.env_id, self.config.strategy.name, self.load_state_dict, check
        )

    def save(
        self,
        path: str | Path,
        include_buffer: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Write the agent (and ``metadata``: plain data) to ``path`` atomically, a crash
        never leaving half a file. A state with a non-finite weight or optimizer tensor is
        not written (nor one whose curiosity bonus's state is not finite):
        NonFiniteDataError, and ``path`` keeps the last good state."""
        save_finite(self.state_dict(include_buffer), path, _SAVED_CHECKED_STATE, metadata)

    @classmethod
    def load(
        cls,
        path: str | Path,
        env: str | gym.Env | None = None,
        device: str = "auto",
        bonus: RewardBonus | None = None,
    ) -> DDPG:
        """Rebuild an agent saved with :meth:`save` (on ``env``, or a new env of its id;
        with ``bonus``, a fresh bonus of the saved run's settings, whose state is loaded)."""
        state = read_checkpoint(path)
        agent = cls(
            env if env is not None else state["env_id"],
            DDPGSettings.from_values(upgrade_config_keys(state["config"])),
            seed=state["seed"],
            device=device,
            bonus=bonus,
        )
        load_named(path, state, agent.load_state_dict)
        return agent


class _ResetRecorder(gym.Wrapper):
    """The env a single run steps, remembering its RNG's state before each reset: the
    engine's env resets an episode in the step that ends it, before a checkpoint at that
    boundary is written, and a resumed run must reset from the state before that reset."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._before_reset: dict | None = None
        self.step = env.step  # its env's own (a wrapper's would be one more call a step)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self._before_reset = self.env.unwrapped.np_random.bit_generator.state
        return self.env.reset(**kwargs)

    def rng_state(self, between_episodes: bool) -> dict:
        """The RNG state a resume restores: before the last reset at an episode boundary
        (if the env was reset), else as it is."""
        if between_episodes and self._before_reset is not None:
            return self._before_reset
        return self.env.unwrapped.np_random.bit_generator.state
