"""The engine: one environment step of N members — a single run is an engine of one.

Why: a comparison of exploration strategies is as good as its seeds, and a seed run alone
does its per-step work — acting, the env's step, the update's few hundred small operations,
the random draws, the Python loop — for one network at a time. The engine does it once for
all its members; a single run is the same engine with one member, not a second code path.

How: the members' learning state is one :class:`~agents.ddpg.stacked_state.StackedState`
((N, …) tensors); every member is a :class:`~agents.ddpg.agent.DDPG` front over its row —
its networks, optimizers, settings, bonus, counters and checkpoints. The engine runs
:func:`agents.ddpg.step.environment_step` with the members side by side
(``docs/architecture.md``, "One environment step"): it provides the phases
(:class:`~agents.ddpg.step.StepPhases`). What a step counts — episodes that start and end,
steps, returns, lengths, updates — is the members' rows
(:class:`~agents.ddpg.member_rows.MemberRows`), one array operation each; a member's own code
is called only where it is its own (its ``act`` for a strategy that does not act at its
training point, :meth:`~DDPG.check_action` and :meth:`~DDPG.checked_transition` for a row
that was not finite, its bonus, noisy K-FAC's update, parameter noise's adaptation) and its
callback after the steps the callback names (:meth:`Callback.next_call
<agents.common.callbacks.Callback.next_call>`: a run's boundaries). The rest is done once
for all:

* the members' envs are one vector env (:mod:`agents.common.vector_envs`, SAME_STEP
  autoreset), stepped with every member's action at once, its episodes reset within the
  step (a single run's: its own env, :meth:`DDPG.learn`) — seen as tensors on the engine's
  device (:mod:`agents.common.tensor_envs`: MuJoCo Warp's step there, the others through
  the host), the host reading one :class:`~agents.common.tensor_envs.HostStep` a step — or,
  for a population on device envs, the rows the envs' answer changes counted on the device
  and read at its boundaries (:mod:`agents.ddpg.device_rows`, :meth:`reads_at_boundaries`);
* the update is :func:`agents.ddpg.update.ddpg_update` vmapped over the members' leading
  dimension (one graph, one batched matrix product per layer, one optimizer step over
  stacked tensors: every rule of ``param_explore`` is elementwise or per layer), compiled as
  a single run's is; one member's is its own update (a vmap over one would only cost);
* each random quantity of a step is one draw for all members, from the engine's one
  generator: the weight noise (one ``normal_`` per parameter into the stacked ε,
  :meth:`StackedState.draw_noise`), the action noise ((members, action dim)), the minibatch
  indices ((members, batch), :meth:`StackedReplayBuffer.sample`); the envs' resets are the
  vector env's own draws.

What differs between a single run and a population of runs is three decisions, taken here
at construction (``single_run``): whose generator draws (a single run's own, saved in its
checkpoint, so that a resumed run continues the stream; a population's, seeded from its
members' seeds and step, :func:`population_seed`), how envs reset after the first episode
(from the env's own RNG, restored by a resume at an episode's end; from the population's
stream), and whose a failure is (the run's, raised; a member's own, which stops that member
alone, :class:`MemberFailure`). With one member and its own generator a step draws exactly
what a single run drew before the engine was one, so a single run's stream is unchanged.

So a population's member is not the single run of its seed (its random numbers come from
the population's stream), but its update is the single run's: given the same draws and
transitions, a member's step equals a single run's to float rounding
(``tests/test_population.py``), and the same population command gives the same runs.
Members may differ in the settings the update takes as numbers
(:data:`agents.settings.sharing.PER_MEMBER_KEYS`); the others must be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor
from torch.func import functional_call

from ..common.callbacks import Callback
from ..common.errors import ConfigError, EnvironmentFailure, NonFiniteDataError
from ..common.noise_redraw import redrawn_every_step
from ..common.stop_requests import stop_requested
from ..common.tensor_envs import DeviceEnvs, EnvStep, HostStep, some, tensor_envs
from .action_noise_rows import ActionNoiseRows
from .batched_acting import BatchedActing, BatchedMove, batched_graph, graph_output
from .compiled_update import CompiledUpdate
from .device_rows import DeviceRows
from .execution import ChosenUpdate, Execution, acting_batched, update_execution
from .observations import normalized_observations
from .replay_buffer import Batch, ReplayBuffer
from .stacked_state import StackedState
from .step import environment_step


class Transition(NamedTuple):
    """The env's answer to one member's action: its s' a row of the step's tensor (on the
    engine's device), the rest host numbers."""

    next_obs: Tensor
    reward: float
    terminated: bool
    truncated: bool


class Member(Protocol):
    """What the engine reads and calls of a member's front (:class:`~agents.ddpg.agent.DDPG`)."""

    config: Any
    seed: int | None
    device: torch.device
    env: gym.Env
    env_id: str
    generator: torch.Generator
    buffer: ReplayBuffer
    learner: Any
    actor: torch.nn.Module
    actor_optimizer: Any
    action_noise: Any
    resample: str
    bonus: Any
    thompson: Any
    num_timesteps: int
    num_updates: int
    num_episodes: int

    @property
    def between_episodes(self) -> bool: ...
    def act(self, obs: Tensor, deterministic: bool = True) -> Tensor: ...
    def check_action(self, action: np.ndarray, step: int | None = None) -> None: ...
    def checked_transition(self, next_obs: np.ndarray, reward: float, terminated: bool,
                           truncated: bool, step: int | None = None) -> Transition: ...  # fmt: skip
    def add_to_bonus(self, obs: Tensor, action: Tensor, next_obs: Tensor) -> None: ...
    def updates_due(self) -> bool: ...
    def with_bonus(self, batch: Batch) -> Batch: ...
    def update(self, batch: Batch) -> None: ...
    def noise_adaptation_due(self) -> bool: ...
    def adapt_noise(self) -> None: ...
    def draw_critic_sample(self) -> None: ...


class MemberFailure(Exception):
    """A member stopped: its own error (a non-finite number, its env's failure)."""

    def __init__(self, member: Member, error: Exception) -> None:
        super().__init__(str(error))
        self.member, self.error = member, error


def population_seed(seeds: Sequence[int | None], step: int) -> int | None:
    """The seed of a population's generator: of its members' seeds, in order, and the step
    it starts at (a resumed population draws a stream of its own); None (fresh entropy)
    when a member has none."""
    if any(seed is None for seed in seeds):
        return None
    entropy = [int(step), len(seeds), *(int(seed) for seed in seeds)]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1)


def starting_point(member: Member) -> tuple[int, int, int]:
    """Where a member starts training: its step and its replay buffer's fill and position.
    Members of one population share it (they step together); runs that resume at
    different points form populations of their own."""
    return member.num_timesteps, len(member.buffer), member.buffer.position


class Engine:
    """Members of one strategy (module docstring) on one vector env of as many copies;
    ``learn`` trains them together."""

    def __init__(
        self,
        members: Sequence[Member],
        envs: gym.vector.VectorEnv,
        state: StackedState,
        *,
        single_run: bool = False,
    ) -> None:
        """``envs``: the members' envs, row k member k's (SAME_STEP autoreset,
        :mod:`agents.common.vector_envs`). ``state``: the stacked state the members are the
        rows of, in order (:func:`agents.ddpg.population.build_members`). ``single_run``:
        one member stepping its own env (:meth:`DDPG.learn`): its generator draws, its env
        resets from its own RNG, its failure is raised (module docstring)."""
        if not members:
            raise ConfigError("a population needs at least one member")
        self.members = list(members)
        if len(state) != len(self.members) or any(
            m.learner is not learner for m, learner in zip(self.members, state.learners)
        ):
            raise ConfigError("a population's members are the rows of its state, in order")
        if single_run and len(self.members) != 1:
            raise ConfigError("a single run is an engine of one member")
        self._check_compatible(envs)
        #: The members' learning state, stacked (agents.ddpg.stacked_state).
        self.state = state
        self.buffer = state.buffer
        self.buffer.join()  # the members stand at one position (checked): one fill
        first = self.members[0]
        self.device = first.device
        #: The envs as tensors on the device (agents.common.tensor_envs): stepped there
        #: where they can be, through the host otherwise.
        self.envs = tensor_envs(envs, self.device)
        self._action_shape = envs.single_action_space.shape
        #: Every member's action noise as rows on the device (None: the strategy adds none).
        self.action_noise = (
            None
            if first.action_noise is None
            else ActionNoiseRows(
                [m.action_noise for m in self.members], first.env.action_space, self.device
            )
        )
        self.single_run = single_run
        if single_run:  # its own stream, saved in its checkpoints
            self.generator = first.generator
        else:
            self.generator = torch.Generator(device=self.device)
            seed = population_seed([m.seed for m in self.members], first.num_timesteps)
            if seed is None:
                self.generator.seed()
            else:
                self.generator.manual_seed(seed)
        self._index = {id(m): k for k, m in enumerate(self.members)}
        #: The members' counters, a row each (agents.ddpg.member_rows): counted here for
        #: every member at once, read by each member's front.
        self.rows = state.rows
        #: The episode rows on the device while a population reads them at its boundaries
        #: (agents.ddpg.device_rows; set by learn where it does: reads_at_boundaries).
        self._device_rows: DeviceRows | None = None
        self._rows_crossings = 0  # those of the device rows of earlier learn calls
        #: The members still training; a member whose own data or update failed stops.
        self.active = list(self.members)
        self.failures: list[MemberFailure] = []
        self._on_failure: Callable[[Member, Exception], None] | None = None
        #: the members that failed or stopped in this step's phases: they leave at its end
        self._leaving: set[int] = set()
        self._bonus = first.bonus is not None
        self._adapts = bool(first.actor_optimizer.noise_adaptation_interval)
        # Each member's callback is called after the step it names (Callback.next_call):
        # its next boundary, or the end of its episode. Set by learn.
        self._callbacks: list[Callback] = []
        self._call_at = np.zeros(len(self.members), np.int64)
        self._call_at_episode_end = np.zeros(len(self.members), np.bool_)
        self._ended = np.zeros(len(self.members), np.bool_)
        self._obs: Tensor | None = None  # the envs' observations, a row per member
        #: The members' update: one member's own; several members' one graph, or each
        #: member's, as agents.ddpg.execution decides.
        self._update = ChosenUpdate(
            self.members[0].config.compile, True, self._make_update, self._members_update
        )
        self._batched = len(self.members) > 1
        self._acting: BatchedActing | None = None
        #: A sampled critic's move of every member's action, with the batched acting.
        self._move: BatchedMove | None = None
        self._acting_pending = True
        self._mean_graphs: dict[torch.Size, Callable[..., object]] = {}

    # ----------------------------------------------------------------- building
    def _check_compatible(self, envs: gym.vector.VectorEnv) -> None:
        """Members share their spaces, device and step (their settings were checked when
        their state was built: :meth:`StackedState.build`), and one env row each."""
        first = self.members[0]
        for member in self.members[1:]:
            if member.env.observation_space.shape != first.env.observation_space.shape or (
                member.env.action_space.shape != first.env.action_space.shape
            ):
                raise ConfigError("the members of a population share their env's spaces")
            if member.device != first.device:
                raise ConfigError("the members of a population share one device")
            if starting_point(member) != starting_point(first):
                raise ConfigError("the members of a population start at the same step")
        if envs.num_envs != len(self.members):
            raise ConfigError(
                f"a population of {len(self.members)} members steps as many envs, "
                f"not {envs.num_envs}"
            )

    def _make_update(self) -> CompiledUpdate | None:
        """The members' update as one graph; None for a strategy without a traced form
        (noisy K-FAC), whose members step one by one (:meth:`_members_update`)."""
        if self.state.actor_state is None:
            return None
        return CompiledUpdate(self.state.learners, stacked=self.state.graph_state)

    def _members_update(self, batch: Batch) -> None:
        """Each active member's own update on its rows of ``batch``: one that raises stops
        alone (a stopped member's update is not made)."""

        def update(member: Member) -> None:
            member.update(Batch(*(field[self._index[id(member)]] for field in batch)))

        self._keep_active(update)

    # ----------------------------------------------------------------- training
    def learn(
        self,
        total_steps: int,
        callbacks: Sequence[Callback],
        on_failure: Callable[[Member, Exception], None] | None = None,
    ) -> Engine:
        """Run ``total_steps`` more environment steps of every member, each with its own
        callback (as :meth:`DDPG.learn`); a member whose callback says stop stops. A member
        whose own phase fails (any exception: its data, env row, bonus, update, run) stops,
        is handed to ``on_failure`` at once (its state as it failed), and the others go on;
        an error of what is done once for all (the vector env, the batched update) is every
        member's."""
        if total_steps <= 0:
            raise ConfigError(f"total_steps must be > 0, got {total_steps}")
        self._on_failure = on_failure
        self._callbacks = list(callbacks)
        if len(self._callbacks) != len(self.members):
            raise ConfigError("a population's members need a callback each")
        #: whether every callback is called after every step (none names its boundaries:
        #: the SB3 contract of a plain Callback), so that nothing is scheduled
        self._every_step = all(type(c).next_call is Callback.next_call for c in self._callbacks)
        for member, callback in zip(self.members, self._callbacks):
            callback.on_training_start(member)
            self._schedule(member)
        #: the step the active members stand at (they step together)
        self._steps_done = int(self.rows.timesteps[self._live].max(initial=0))
        self._next_boundary()
        if self.reads_at_boundaries():
            self._device_rows = DeviceRows(self.rows, self._live, self.device, self._steps_done + 1)
        try:
            for _ in range(total_steps):
                if not self._active:
                    break
                environment_step(self)
                self._call_back()
            if self._device_rows is not None and self._device_rows.pending:
                self._read_rows()  # the steps after the last boundary
                self._drop_failed()
        finally:
            if self._device_rows is not None:
                self._rows_crossings += self._device_rows.crossings
                self._device_rows = None
            if self.action_noise is not None:
                self.action_noise.give_back()
            for member, callback in zip(self.members, self._callbacks):
                callback.on_training_end(member)
        return self

    def reads_at_boundaries(self) -> bool:
        """Whether the host reads the steps' rewards and flags at the boundaries only
        (:mod:`agents.ddpg.device_rows`): envs that step on the device, in a population
        whose callbacks name their boundaries and whose members' own per-step work needs
        none of them (no bonus, sampled critic, parameter noise's adaptation, or ε drawn
        per episode). Otherwise every step is read, as a single run's is."""
        first = self.members[0]
        return (
            isinstance(self.envs, DeviceEnvs)
            and not self.single_run
            and not self._every_step
            and not self._bonus
            and first.thompson is None
            and not self._adapts
            and (self.state.noise is None or redrawn_every_step(first.resample))
        )

    def _schedule(self, member: Member) -> None:
        """When ``member``'s callback is called next (:meth:`Callback.next_call`)."""
        k = self._index[id(member)]
        self._call_at[k], self._call_at_episode_end[k] = self._callbacks[k].next_call(member)

    def _next_boundary(self) -> None:
        """The first step after which an active member's callback is due, and whether one
        waits for an episode's end: between them a step checks two numbers."""
        live = self._live
        self._boundary = int(self._call_at[live].min(initial=np.iinfo(np.int64).max))
        self._waits_for_episodes = bool(self._call_at_episode_end[live].any())

    def _call_back(self) -> None:
        """The callbacks whose call is due after this step — at a boundary of theirs, at
        the end of an episode they wait for, or every one when a stop is requested — called
        for their members; a member whose callback says stop (or fails) stops. Between
        boundaries no member's callback is called: the step's host work does not grow with
        the members."""
        if self._every_step:
            self._keep_active(self._on_step)
            return
        stopping = stop_requested() is not None  # every member stops after this step
        if (
            self._steps_done < self._boundary
            and not (self._waits_for_episodes and self._ended.any())
            and not stopping
        ):
            return
        due = (self._call_at <= self.rows.timesteps) | (self._call_at_episode_end & self._ended)
        if stopping:
            due[:] = True
        due &= self._live
        if not due.any():
            return
        for k in np.flatnonzero(due):
            member = self.members[k]
            if self._call(member, self._on_step):
                self._schedule(member)
            else:
                self._leaving.add(id(member))  # done, or asked to stop
        self._drop_failed()
        self._next_boundary()

    def _on_step(self, member: Member) -> bool:
        return self._callbacks[self._index[id(member)]].on_step(member)

    @property
    def active(self) -> list[Member]:
        """The members still training, in order."""
        return self._active

    @active.setter
    def active(self, members: list[Member]) -> None:
        self._active = members
        self._everyone = len(members) == len(self.members)
        #: whether each member is still training, a row each
        self._live = np.zeros(len(self.members), np.bool_)
        self._live[[self._index[id(m)] for m in members]] = True
        if self._device_rows is not None:
            self._device_rows.live = self._live

    def _call(self, member: Member, phase: Callable[..., object], *args: object) -> bool:
        """``phase(member, *args)``; a member's own failure — any exception its phase
        raises: its data, env row, bonus, update, disk — stops that member only (a stop
        request is no exception: ``KeyboardInterrupt``)."""
        if self.single_run:  # the run's own failure: raised
            return phase(member, *args) is not False
        try:
            result = phase(member, *args)
        except Exception as err:  # the member's own: it stops
            self._fail(member, err)
            return False
        return result is not False

    def _fail(self, member: Member, error: Exception) -> None:
        """Stop ``member``: it leaves :attr:`active` at the end of the phase."""
        self.failures.append(MemberFailure(member, error))
        self._leaving.add(id(member))
        if self._on_failure is not None:
            self._on_failure(member, error)

    @property
    def observations(self) -> Tensor | None:
        """The envs' observations the next actions are for, a row per member (None before
        the first step)."""
        return self._obs

    def _keep_active(self, phase: Callable[[Member], object]) -> None:
        active = [m for m in self._active if self._call(m, phase)]
        if len(active) != len(self._active):
            self.active = active
            self._members_left()

    def _drop_failed(self) -> None:
        """The members whose phase failed (or that stopped) leave :attr:`active`."""
        if self._leaving:
            self.active = [m for m in self._active if id(m) not in self._leaving]
            self._leaving.clear()
            self._members_left()

    def _members_left(self) -> None:
        """Members left: that can bring a remaining member's callback's work earlier (a
        population's status lines pass to its next member), so each is asked again; a
        call already due stays due."""
        if not self._callbacks or self._every_step:
            return
        for member in self._active:
            k = self._index[id(member)]
            at, at_episode_end = self._callbacks[k].next_call(member)
            self._call_at[k] = min(self._call_at[k], at)
            self._call_at_episode_end[k] |= at_episode_end
        self._next_boundary()

    # The phases of one environment step (agents/ddpg/step.py) for every active member:
    # a member's own phases are the agent's public ones, called for each; the rest once.
    @property
    def gradient_steps(self) -> int:
        return self.members[0].config.gradient_steps

    @property
    def crossings(self) -> int:
        """Host↔device crossings of the steps so far: the envs' (:mod:`agents.common.
        tensor_envs`: one a step for envs that step on the device, two through the host;
        none where the rows stay on the device), the action noise's (which rows start an
        episode, where a process restarts from the host's rows) and the device rows' (a
        read at each boundary, :mod:`agents.ddpg.device_rows`); on a CPU they share memory,
        on a GPU each is a copy."""
        noise = 0 if self.action_noise is None else self.action_noise.crossings
        rows = self._rows_crossings + (self._device_rows.crossings if self._device_rows else 0)
        return self.envs.crossings + noise + rows

    def exploration_actions(self) -> Tensor:
        """Every member's behaviour action, a row each on the device: one acting call, one
        (members, action) standard-normal draw for every member's action noise, added on
        the device (:class:`ActionNoiseRows`). Whether each row is finite is checked where
        the envs take them (:meth:`step_envs`): a row that is not never reaches them."""
        actions = self._actions()
        if self.action_noise is not None:
            draws = torch.randn(actions.shape, generator=self.generator, dtype=torch.float64,
                                device=self.device)  # fmt: skip
            actions = self.action_noise.add(actions, draws)
        return actions

    def step_envs(self, actions: Tensor) -> tuple[EnvStep, HostStep] | None:
        """The envs' answer to every member's action (:meth:`_step_envs`): the step on the
        device, with what the host reads of it (:class:`~agents.common.tensor_envs.HostStep`);
        a member whose action or transition was not finite stops with its own error; None
        when no member is left."""
        answer = self._step_envs(actions)
        if answer is None:
            return None
        step, host = answer
        if host is None or host.all_finite:  # not read (checked at a read), or all finite
            return answer
        if not host.finite_actions.all():
            self._keep_active(
                lambda m: self._row_checked(m, host.finite_actions, m.check_action, actions)
            )
        if not host.finite.all():
            rows = (step.next_obs, host.rewards, host.terminated, host.truncated)
            self._keep_active(
                lambda m: self._row_checked(m, host.finite, m.checked_transition, *rows)
            )
        return answer if self._active else None

    def store(self, actions: Tensor, answer: tuple[EnvStep, HostStep]) -> np.ndarray:
        """One write of every member's transition into the stacked buffer, one update of
        the active members' observation statistics with its s (baselines l.277), each
        member's bonus's pool (a member whose bonus fails stops), one count of the active
        members' step, return and length; whose episode ended (a row each)."""
        step, host = answer
        obs = self._obs
        self.buffer.add(obs, actions, step.rewards, step.next_obs, step.terminated)
        everyone = self._everyone
        self.state.update_observations(obs, None if everyone else self._live)
        self._obs = step.obs
        if host is None:  # counted on the device, read at a boundary
            self._device_rows.record(step)
            self.rows.count_timesteps(None if everyone else self._live)
            self._steps_done += 1
            return None
        rewards, terminated, truncated, *_ = host
        if self._bonus:  # each member's own model: its pool, its fit

            def pooled(member: Member) -> None:
                k = self._index[id(member)]
                member.add_to_bonus(obs[k], actions[k], step.next_obs[k])

            self._keep_active(pooled)
        self.rows.count_step(None if self._everyone else self._live, rewards)
        self._steps_done += 1
        ended = terminated | truncated
        return ended if self._everyone else ended & self._live

    def updates_due(self) -> bool:
        return bool(self._active) and self._active[0].updates_due()

    def end_step(self, ended: np.ndarray | None) -> None:
        """The strategy's noise adaptation where due; the ended episodes counted, each
        handed to its member's callback (:meth:`Callback.on_episode_end`) — those of the
        steps since the last read, where the rows are on the device (``ended`` None) and a
        boundary is due. A member whose bonus failed in the updates has left."""
        if self._leaving:
            self._drop_failed()
        if not self._active:
            self._ended = np.zeros_like(self._ended)
            return
        if ended is None:
            if (
                self._steps_done >= self._boundary
                or self._waits_for_episodes
                or stop_requested() is not None
            ):
                self._read_rows()
                self._drop_failed()
            return
        if self._adapts and self._active[0].noise_adaptation_due():  # a shared schedule
            self._keep_active(lambda m: m.adapt_noise())
        if not self._everyone:  # a member left in the updates
            ended = ended & self._live
        self._ended = ended
        if not some(ended):
            return
        self.rows.end_episodes(ended)
        returns, lengths = self.rows.episode_return, self.rows.episode_length
        for k in np.flatnonzero(ended):
            self._call(self.members[k], self._episode_ended, returns[k].item(),
                       lengths[k].item(), self._steps_done)  # fmt: skip
        self._drop_failed()

    def _episode_ended(self, member: Member, episode_return: float, length: int, step: int) -> None:
        callback = self._callbacks[self._index[id(member)]]
        callback.on_episode_end(member, episode_return, length, step)

    def _read_rows(self) -> None:
        """The steps since the last read, read from the device in one copy
        (:meth:`DeviceRows.read`): each episode that ended handed to its member's callback
        with its step, in the order of the steps; the rows taken into the host's; a member
        whose action or transition was not finite stops with its own error, named at the
        step it failed (its episodes after it are not its run's)."""
        read = self._device_rows.read()
        steps = read.first_step + np.arange(len(read.ended))
        failed = read.failed_at > 0
        kept = read.ended & ~(failed & (steps[:, None] >= read.failed_at))
        self.rows.take(kept, read.episode_return, read.episode_length, read.between_episodes)
        self._ended = kept[-1] if len(kept) else np.zeros_like(self._ended)
        for t, k in np.argwhere(kept):
            member = self.members[k]
            if id(member) not in self._leaving:  # (its callback failed at an earlier end)
                self._call(member, self._episode_ended, float(read.returns[t, k]),
                           int(read.lengths[t, k]), int(steps[t]))  # fmt: skip
        for k in np.flatnonzero(failed & self._live):
            member = self.members[k]
            if id(member) not in self._leaving:
                self._fail(member, self._found_failure(member, int(read.failed_at[k])))

    def _found_failure(self, member: Member, step: int) -> NonFiniteDataError:
        """``member``'s error for its first non-finite row, of ``step``, found at a read:
        its own check's message on the row the step stored in the replay buffer (one copy),
        and the step it was read at."""
        read = f"read at step {self._steps_done}"
        back, buffer = self._steps_done - step, self.buffer
        if back >= buffer.capacity:  # the buffer has written over its row since
            return NonFiniteDataError(
                f"a non-finite action or transition at step {step} ({read}, its row since "
                "overwritten); training stopped",
                step - 1,
            )
        k, i = self._index[id(member)], (buffer.position - 1 - back) % buffer.capacity
        fields = [buffer.storage[name][k, i].reshape(-1).to(torch.float64)
                  for name in ("actions", "next_obs", "rewards")]  # fmt: skip
        self._device_rows.crossings += 1
        row = torch.cat(fields).cpu().numpy()
        width = int(np.prod(self._action_shape))
        action, next_obs, reward = row[:width], row[width:-1], float(row[-1])
        try:
            if not np.isfinite(action).all():
                member.check_action(action.reshape(self._action_shape), step)
            member.checked_transition(next_obs, reward, False, False, step)
        except NonFiniteDataError as err:
            return NonFiniteDataError(f"{err} ({read})", step - 1)
        raise AssertionError(f"member {k}: step {step}'s row is finite")

    def _row_checked(
        self,
        member: Member,
        finite: np.ndarray,
        check: Callable[..., object],
        *rows: np.ndarray | Tensor,
    ) -> None:
        """``check`` (the member's own, which raises its error) on the member's row of
        ``rows``, on the host, where the row is not all finite (every row is checked at
        once)."""
        k = self._index[id(member)]
        if not finite[k]:
            check(*(row[k].cpu().numpy() if isinstance(row, Tensor) else row[k] for row in rows))

    def start_episodes(self) -> np.ndarray | None:
        """A new episode for every member whose last one ended (the envs reset it within
        their step; the first call resets them all); which members start one (a row each),
        None when none does (most steps)."""
        if self._obs is None:
            self._obs = self._reset_envs()
        if self._device_rows is not None:  # restarted on the device (DeviceRows.record)
            if self.action_noise is not None:
                self.action_noise.reset(self._device_rows.ended & self._device_rows.live)
            return None
        between = self.rows.between_episodes
        starting = between if self._everyone else between & self._live
        if not some(starting):
            return None
        if starting is between:  # (the rows change below)
            starting = between.copy()
        self.rows.start_episodes(starting)
        if self.action_noise is not None:
            self.action_noise.reset(starting)
        return starting

    def _reset_envs(self) -> Tensor:
        """Every env reset: from each member's seed at a run's start (its single run's first
        episode); later, a single run's from its env's own RNG (a resume at an episode's end
        restored it), a population's from its stream."""
        fresh = all(m.num_timesteps == 0 for m in self.members)
        if self.single_run:
            seeds = [m.seed if m.num_episodes == 0 else None for m in self.members]
        elif fresh and all(m.seed is not None for m in self.members):
            seeds = [m.seed for m in self.members]
        else:
            draw = torch.randint(2**31 - 1, (len(self.members),), generator=self.generator,
                                 device=self.device)  # fmt: skip
            seeds = draw.tolist()
        try:
            return self.envs.reset(seeds)
        except Exception as err:  # the envs' own failure: every member's
            raise EnvironmentFailure(
                f"{self.members[0].env_id} raised {type(err).__name__}: {err} in reset, "
                f"before step {self.members[0].num_timesteps + 1}"
            ) from err

    def draw_weight_noise(self, starting: np.ndarray | None) -> None:
        """New ε for every member (per step), or for those starting an episode (per
        episode): one ``normal_`` per parameter of every member's ε, from the engine's
        generator; and a sampled critic's new held sample where due (each member's own,
        from its generator: at an episode's start, or every ``critic_hold`` steps)."""
        self.state.draw_noise(self.members[0].resample, starting, self.generator)
        thompson = self.members[0].thompson
        if thompson is None:
            return
        if thompson.hold:
            due = self.rows.timesteps % thompson.hold == 0
        elif starting is None:  # no episode starts
            return
        else:
            due = starting
        if not self._everyone:
            due = due & self._live
        for k in np.flatnonzero(due):
            self._call(self.members[k], lambda member: member.draw_critic_sample())

    def _step_envs(self, actions: Tensor) -> tuple[EnvStep, HostStep] | None:
        """The envs stepped with every member's action; a member that stopped steps with
        an action of its space (its env steps on)."""
        if not self._active:
            return None
        rows = self._device_rows
        stepping = None if self._everyone else self._live if rows is None else rows.live
        try:
            return self.envs.step(actions, stepping, read=rows is None)
        except Exception as err:  # the envs' own failure: every member stops
            step = self.active[0].num_timesteps + 1
            error = EnvironmentFailure(
                f"{self.members[0].env_id} raised {type(err).__name__}: {err} at step {step}"
            )
            if self.single_run:  # the run stops after a checkpoint
                raise error from err
            for member in self._active:
                self._fail(member, error)
            self.active = []
            return None

    def _actions(self) -> Tensor:
        """Every member's policy action (before action noise), a row per member on the
        device: one batched graph of all members' θ and actor when the update is compiled,
        else each member's own (a stopped member's row is zeros)."""
        acting = self._acting_graph() if self._acting_pending else self._acting
        if acting is not None:
            obs = self._obs.to(torch.float32)
            actions = acting(obs)
            return actions if self._move is None else self._move(obs, actions)
        if self.single_run:  # its action for its observation, as a row of one
            return self.members[0].act(self._obs[0], deterministic=False)[None]
        actions = torch.zeros((len(self.members), *self._action_shape),
                              dtype=torch.float32, device=self.device)  # fmt: skip

        def act(member: Member) -> None:
            k = self._index[id(member)]
            actions[k] = member.act(self._obs[k], deterministic=False)

        self._keep_active(act)
        return actions

    def train_step(self) -> None:
        """One update of every member: one draw of every member's minibatch indices (and
        of a sampled critic's ε), each member's bonus on its own rows, one batched update.
        One member (a single run) makes its own: its minibatch drawn from its buffer, as the
        stack's one draw of (1, batch) indices would draw it, without the stack's rows to
        take apart."""
        if not self._batched:
            self._keep_active(self._own_update)
            return
        batch = self.buffer.sample(self.members[0].config.batch_size, self.generator)
        self.state.draw_critic_noise(self.generator)  # a sampled critic's training point
        self.update(self.with_bonuses(batch))

    def _own_update(self, member: Member) -> None:
        """``member``'s update on a minibatch of its own buffer, with its bonus."""
        batch = member.buffer.sample(member.config.batch_size, self.generator)
        self.state.draw_critic_noise(self.generator)  # a sampled critic's training point
        member.update(member.with_bonus(batch))

    def update(self, batch: Batch) -> None:
        """One update of every member on its rows of ``batch`` (members, batch, …): the
        single run's update (:meth:`DDPG.update`), vmapped over the members; one member's
        own."""
        if not self._batched:
            self._members_update(batch)
            return
        if self._update(batch) is Execution.EAGER:  # each member counted its own
            return
        self.rows.updates += 1

    def capture_update(self) -> bool:
        """Replay the update (compiled, or traced op by op) from a CUDA graph from its next
        call on (:mod:`agents.ddpg.captured_call`; ``benchmarks/device_step.py --cuda-graph``
        measures it); False for an update that runs eagerly, which is left as it is."""
        chosen = self._update if self._batched else self.members[0]._update
        graph = chosen.built()
        if graph is None:
            return False
        graph.capture()
        return True

    def capture_acting(self) -> bool:
        """Replay the members' batched acting from a CUDA graph from its next call on (as
        :meth:`capture_update`); False where the members act one by one (a single run, an
        eager update, a strategy that does not act at its training point)."""
        acting = self._acting_graph() if self._acting_pending else self._acting
        if acting is None:
            return False
        acting.capture()
        return True

    def with_bonuses(self, batch: Batch) -> Batch:
        """``batch`` with each active member's bonus on its rows' rewards
        (:meth:`DDPG.with_bonus`); a member whose bonus fails stops."""
        if self.members[0].bonus is None:
            return batch
        rewards = batch.rewards.clone()

        def scored(member: Member) -> None:
            k = self._index[id(member)]
            rows = Batch(*(field[k] for field in batch))
            rewards[k] = member.with_bonus(rows).rewards

        for member in self._active:
            self._call(member, scored)
        return batch._replace(rewards=rewards)

    @torch.no_grad()
    def mean_actions(self, obs: np.ndarray | Tensor) -> Tensor:
        """Every member's action at its mean μ for its rows of ``obs`` (members, rows, obs
        dim): the actor vmapped over the stacked weights, as one graph per shape of
        ``obs`` (traced once; compiled when the members' update is)."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        state = self.state
        inputs = [*state.params["actor"].values(), *state.actor_buffers.values(),
                  *state.obs_moments]  # fmt: skip
        inputs.append(obs_t)
        graph = self._mean_graphs.get(obs_t.shape)
        if graph is None:
            names = [*state.params["actor"], *state.actor_buffers]
            actor = self.members[0].actor

            def act(*flat: Tensor) -> Tensor:
                weights = dict(zip(names, flat[: len(names)], strict=True))
                moments, member_obs = flat[len(names) : -1], flat[-1]
                if moments:  # the networks see normalised observations
                    member_obs = normalized_observations(member_obs, *moments)
                return functional_call(actor, weights, (member_obs,))

            execution = update_execution(self.members[0].config.compile, stacked=True)
            graph = batched_graph(act, inputs, execution is Execution.COMPILED)
            self._mean_graphs[obs_t.shape] = graph
        return graph_output(graph(*inputs))

    def _acting_graph(self) -> Callable[[Tensor], Tensor] | None:
        """Every member's action at its θ as one batched graph (compiled as its update is)
        for a population whose update is a graph and whose strategy acts at its training
        point; None otherwise (each member acts)."""
        if self._acting is not None or not self._acting_pending:
            return self._acting
        self._acting_pending = False
        if not self._batched:  # one member acts through its own predict
            return None
        first = self.members[0]
        optimizer = first.actor_optimizer
        if (
            not acting_batched(optimizer.explores, optimizer.gradient_at_sample)
            or self._update.built() is None
        ):
            return None
        compile = first.config.compile
        self._acting = BatchedActing(first, self.state, self._update.graph, compile)
        if first.thompson is not None:
            self._move = BatchedMove(first, self.state, compile)
        return self._acting
