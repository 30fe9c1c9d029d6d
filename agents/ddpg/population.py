"""A population: members of one strategy trained together as one batched program.

Why: a comparison of exploration strategies is as good as its seeds, and a seed run alone
does its per-step work — acting, the update's few hundred small operations, the Python loop
— for one network at a time. A population does it once for all members: the update is
:func:`agents.ddpg.update.ddpg_update` vmapped over a leading member dimension (one graph,
one batched matrix product per layer, one optimizer step over stacked tensors: every rule
of ``param_explore`` is elementwise or per layer), compiled as a single run's is.

How: every member is an ordinary :class:`~agents.ddpg.agent.DDPG` — its own seed,
networks, optimizers, generator, env, action noise, bonus and settings — built as a single
run builds it. The population then stacks what the update reads and writes (networks,
targets, both optimizers' state, loss sums; the replay buffers are stacked from the start,
:meth:`ReplayBuffer.stacked`) and makes each member's own tensors views of the stack. So
each member's own code — acting, checkpoints, statistics, evaluation at μ — works on its
slice, and the batched update writes every member's tensors in place. Every member draws
its random numbers from its own generator in a single run's order (weight noise, action
noise, minibatches), so member k is the run of its seed: tests hold a member equal to the
single run of its seed, update for update, to float rounding.

Members may differ in any setting the update takes as a number (a strategy's learning
rate or Vadam's sampling constant, γ, τ, the critic's learning rate: each member's step
numbers are its own); settings that shape the tensors or the schedule must be equal.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.func import functional_call, vmap
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

import param_explore
from param_explore.adam_rule import adam_traceable_step

from ..common.callbacks import Callback
from ..common.errors import ConfigError
from ..common.reward_bonus import scored
from .agent import DDPG, Transition
from .compiled_update import CompilationError, CompiledUpdate, GraphState, inductor_compile
from .observations import normalized_observations
from .replay_buffer import Batch
from .update import EagerUpdate


def _run_traced_graph(graph: torch.fx.GraphModule, inputs: list[Tensor]) -> torch.fx.GraphModule:
    """The traced update graph as it is, op by op: a population's eager update."""
    return graph


class MemberFailure(Exception):
    """A member stopped: its own error (a non-finite number, its env's failure)."""

    def __init__(self, member: DDPG, error: Exception) -> None:
        super().__init__(str(error))
        self.member, self.error = member, error


class Population:
    """Members of one strategy (module docstring); ``learn`` trains them together."""

    def __init__(self, members: Sequence[DDPG], buffers: dict[str, Tensor] | None = None) -> None:
        """``buffers``: the stacked storage the members' replay buffers are views of
        (:meth:`ReplayBuffer.stacked`), stored into and sampled from for all at once."""
        if not members:
            raise ConfigError("a population needs at least one member")
        self.members = list(members)
        self.storage = buffers
        self._check_compatible()
        first = self.members[0]
        self.device = first.device
        self._stack()
        #: The members still training; a member whose own data or update failed stops.
        self.active = list(self.members)
        self.failures: list[MemberFailure] = []
        self._on_failure: Callable[[DDPG, Exception], None] | None = None
        self._failed: set[int] = set()
        self._update: CompiledUpdate | None = None
        self._update_pending = True
        self._acting: CompiledActing | None = None
        self._acting_pending = True

    # ----------------------------------------------------------------- building
    def _check_compatible(self) -> None:
        """Members share what shapes the stacked tensors and the schedule."""
        first = self.members[0]
        shaped = ("hidden_sizes", "buffer_size", "batch_size", "learning_starts",
                  "gradient_steps", "train_every", "actor_grad_reduction", "init", "compile",
                  "normalize_observations", "critic_layer_norm", "critic_l2_reg")  # fmt: skip
        for member in self.members[1:]:
            for key in shaped:
                if getattr(member.config, key) != getattr(first.config, key):
                    raise ConfigError(
                        f"the members of a population share {key}; got "
                        f"{getattr(first.config, key)!r} and {getattr(member.config, key)!r}"
                    )
            mine, theirs = member.config.strategy, first.config.strategy
            if (mine.optimizer, mine.layer_norm, mine.resample) != (
                theirs.optimizer,
                theirs.layer_norm,
                theirs.resample,
            ):
                raise ConfigError("the members of a population train one strategy")
            if member.env.observation_space.shape != first.env.observation_space.shape or (
                member.env.action_space.shape != first.env.action_space.shape
            ):
                raise ConfigError("the members of a population share their env's spaces")
            if member.device != first.device:
                raise ConfigError("the members of a population share one device")
            if member.num_timesteps != first.num_timesteps or (
                len(member.buffer) != len(first.buffer)
                or member.buffer.position != first.buffer.position
            ):
                raise ConfigError("the members of a population start at the same step")

    def _stack(self) -> None:
        """Stack what the update reads and writes; each member's own tensors become views
        of the stack (module docstring). Creating optimizer state here draws nothing."""
        members = self.members
        for member in members:
            _create_state(member)
        modules = ("actor", "critic", "target_actor", "target_critic")
        self.params = {
            module: _stack_parameters([getattr(m, module) for m in members]) for module in modules
        }
        self.buffers = _stack_buffers([m.actor for m in members])
        critic_steps = [adam_traceable_step(m.critic_optimizer) for m in members]
        self.critic_state = _stack_state(critic_steps)
        self.step_counts = {"critic": _stack_step_counts(critic_steps)}
        try:
            actor_steps = [m.actor_optimizer.traceable_step() for m in members]
        except param_explore.UntraceableOptimizerError:  # noisy K-FAC: each member steps
            self.actor_state = None
        else:
            self.actor_state = _stack_state(actor_steps)
            self.step_counts["actor"] = _stack_step_counts(actor_steps)
        self.loss_sums = _stack_into([m.learner for m in members], "loss_sums")
        statistics = [m.obs_statistics for m in members]
        self.obs_moments = (
            []
            if statistics[0] is None
            else [_stack_into(statistics, "mean"), _stack_into(statistics, "std")]
        )
        self.skipped = _stack_into([m.learner for m in members], "skipped")
        self.applied = torch.ones(len(members), 2, device=self.members[0].device)
        for member in members:
            # The members' own updates read the tensors they had: rebuilt on the views.
            member._eager_update = EagerUpdate(member.learner)
            member._compiled_update, member._compile_pending = None, False

    def graph_state(self) -> GraphState:
        """The stacked tensors, in the order each member's update reads its own."""
        first = self.members[0]
        critic_names = [name for name, _ in first.critic.named_parameters()]
        actor_names = first.actor_optimizer.param_names()
        critic_steps = adam_traceable_step(first.critic_optimizer)
        actor_steps = first.actor_optimizer.traceable_step()
        return GraphState(
            [self.params["critic"][n] for n in critic_names],
            [self.params["actor"][n] for n in actor_names],
            [self.params["target_critic"][n] for n in critic_names],
            [self.params["target_actor"][n] for n in actor_names],
            self.loss_sums,
            self.obs_moments,
            {key: self.critic_state[key] for key in critic_steps.state},
            {key: self.actor_state[key] for key in actor_steps.state},
            self.buffers,
            self.applied,
        )

    def _make_update(self) -> CompiledUpdate | None:
        """The members' update as one graph (compiled, or run op by op); None for a
        strategy without a traced form (noisy K-FAC), whose members step one by one."""
        if self.actor_state is None:
            return None
        try:
            update = CompiledUpdate(
                [m.learner for m in self.members], stacked=self.graph_state, applied=self._applied
            )
        except param_explore.UntraceableOptimizerError:
            return None
        if not self.members[0].config.compile:
            update.backend = _run_traced_graph
        return update

    def _applied(self, applied: np.ndarray) -> None:
        """Count every member's applied steps and skipped updates (one op per optimizer)."""
        flags = torch.as_tensor(applied, dtype=torch.float32, device=self.device)
        self.step_counts["critic"].add_(flags[:, :1])
        self.step_counts["actor"].add_(flags[:, 1:])
        self.skipped.add_(1 - flags[:, 1])

    # ----------------------------------------------------------------- training
    def learn(
        self,
        total_steps: int,
        callbacks: Sequence[Callback],
        on_failure: Callable[[DDPG, Exception], None] | None = None,
    ) -> Population:
        """Run ``total_steps`` more environment steps of every member, each with its own
        callback (as :meth:`DDPG.learn`); a member whose callback says stop stops. A member
        whose own data, env, update or run fails (a project error or the disk's) stops, is
        handed to ``on_failure`` at once (its state as it failed), and the others go on."""
        if total_steps <= 0:
            raise ConfigError(f"total_steps must be > 0, got {total_steps}")
        self._on_failure = on_failure
        self._callbacks = dict(zip(map(id, self.members), callbacks, strict=True))
        for member in self.members:
            self._callbacks[id(member)].on_training_start(member)
        try:
            for _ in range(total_steps):
                if not self.active:
                    break
                self._environment_step()
                self.active = [m for m in self.active if self._call(m, self._on_step)]
        finally:
            for member in self.members:
                self._callbacks[id(member)].on_training_end(member)
        return self

    def _on_step(self, member: DDPG) -> bool:
        return self._callbacks[id(member)].on_step(member)

    def _call(self, member: DDPG, phase: Callable[..., object], *args: object) -> bool:
        """``phase(member, *args)``; a member's own failure stops that member only."""
        try:
            result = phase(member, *args)
        except (ConfigError, OSError) as err:  # the member's own: it stops
            self._fail(member, err)
            return False
        return result is not False

    def _fail(self, member: DDPG, error: Exception) -> None:
        """Stop ``member``: it leaves :attr:`active` at the end of the phase."""
        self.failures.append(MemberFailure(member, error))
        self._failed.add(id(member))
        if self._on_failure is not None:
            self._on_failure(member, error)

    def _environment_step(self) -> None:
        """One step of every active member: each member's own phases of a single run's
        step (:meth:`DDPG._environment_step`), its acting, storing and update batched."""
        self.active = [m for m in self.active if self._call(m, DDPG._begin_step)]
        actions = self._actions(self.active)
        transitions: dict[int, tuple[np.ndarray, Transition]] = {}

        def step(member: DDPG) -> bool:
            action = member._with_action_noise(actions[id(member)])
            transitions[id(member)] = (action, member._transition(action))
            return True

        self.active = [m for m in self.active if self._call(m, step)]
        if not self.active:
            return
        self._store([(m, *transitions[id(m)]) for m in self.active])
        done = {id(m): m._record(*transitions[id(m)]) for m in self.active}
        first = self.active[0]
        if first._updates_due():
            for _ in range(first.config.gradient_steps):
                self.train_step()
            self.active = [m for m in self.active if id(m) not in self._failed]

        def after(member: DDPG) -> bool:
            member._after_updates(done[id(member)], self._callbacks[id(member)])
            return True

        self.active = [m for m in self.active if self._call(m, after)]

    def _actions(self, members: list[DDPG]) -> dict[int, np.ndarray]:
        """Every active member's policy action (before action noise): one batched graph of
        all members' θ and actor when the update is compiled, else each member's own."""
        acting = self._acting_graph()
        if acting is None:
            return {id(m): m.predict(m._obs, deterministic=False) for m in members}
        index = {id(m): k for k, m in enumerate(self.members)}
        obs = np.zeros((len(self.members), *self.members[0].env.observation_space.shape))
        for member in members:  # a member that stopped acts on zeros, its action unused
            obs[index[id(member)]] = member._obs
        actions = acting(torch.as_tensor(obs, dtype=torch.float32, device=self.device))
        actions = actions.cpu().numpy()
        return {id(m): actions[index[id(m)]] for m in members}

    def _store(self, stored: list[tuple[DDPG, np.ndarray, Transition]]) -> None:
        """Every member's transition into its replay buffer: one write per field into the
        stacked buffers when the members share them (their rows at one position)."""
        if self.storage is None or len(stored) != len(self.members):
            for member, action, (next_obs, reward, terminated, _) in stored:
                member.buffer.add(member._obs, action, reward, next_obs, terminated)
            return
        values = {
            "obs": np.stack([m._obs for m, _, _ in stored]),
            "actions": np.stack([a for _, a, _ in stored]),
            "rewards": np.array([t.reward for _, _, t in stored]),
            "next_obs": np.stack([t.next_obs for _, _, t in stored]),
            "terminated": np.array([float(t.terminated) for _, _, t in stored]),
        }
        position = stored[0][0].buffer.position
        for name, value in values.items():
            self.storage[name][:, position] = torch.as_tensor(value, dtype=torch.float32)
        for member, _, _ in stored:
            buffer = member.buffer
            buffer.position = (position + 1) % buffer.capacity
            buffer.size = min(buffer.size + 1, buffer.capacity)

    def train_step(self) -> None:
        """One update of every member: each member's own minibatch (its generator, its
        buffer, its bonus), one batched update."""
        if self._update_pending:
            self._update_pending = False
            self._update = self._make_update()
        if self._update is None:
            for member in self.members:
                member.train_step()
            return
        batch = self._minibatches()
        try:
            self._update(batch)
        except CompilationError as err:  # only the first call compiles
            warnings.warn(f"compile failed, training the population eagerly: {err}", stacklevel=2)
            self._update.backend = _run_traced_graph
            self._update._compiled = None
            self._update(batch)
        for member in self.members:
            member.num_updates += 1

    def _minibatches(self) -> Batch:
        """Each member's minibatch, as its :meth:`DDPG.replayed_batch` draws it (its
        generator's indices into its buffer, its bonus on the rewards), stacked."""
        if self.storage is None:
            batches = [member.replayed_batch() for member in self.members]
            return Batch(*(torch.stack(field) for field in zip(*batches, strict=True)))
        size = self.members[0].config.batch_size
        index = torch.stack([
            torch.randint(m.buffer.size, (size,), generator=m.generator, device=self.device)
            for m in self.members
        ])  # fmt: skip
        capacity = self.members[0].buffer.capacity
        offsets = torch.arange(0, len(self.members) * capacity, capacity, device=self.device)
        flat_index = (index + offsets[:, None]).reshape(-1)
        batch = Batch(*(
            self.storage[name].flatten(0, 1).index_select(0, flat_index).unflatten(0, index.shape)
            for name in Batch._fields
        ))  # fmt: skip
        for k, member in enumerate(self.members):
            if member.bonus is not None and member in self.active:
                where = f"in the update at step {member.num_timesteps}"
                try:
                    extra = scored(
                        member.bonus, batch.obs[k], batch.actions[k], batch.next_obs[k], where
                    )
                except (ConfigError, OSError) as err:
                    self._fail(member, err)
                    continue
                batch.rewards[k] += extra.reshape(batch.rewards[k].shape)
        return batch

    def _acting_graph(self) -> Callable[[Tensor], Tensor] | None:
        """Every member's action at its θ as one compiled graph, for a compiled population
        of a strategy that acts at its training point; None otherwise (each member acts)."""
        if self._acting is not None or not self._acting_pending:
            return self._acting
        self._acting_pending = False
        first = self.members[0]
        optimizer = first.actor_optimizer
        acts_at_training_point = optimizer.gradient_at_sample or not optimizer.explores
        if not (first.config.compile and acts_at_training_point):
            return None
        if self._update_pending:
            self._update_pending = False
            self._update = self._make_update()
        if self._update is None:
            return None
        self._acting = CompiledActing(self)
        return self._acting


class CompiledActing:
    """Every member's policy action at its sample θ = μ + σ⊙ε (its training point), as one
    graph vmapped over the members and compiled: σ from the strategy's one formula."""

    def __init__(self, population: Population) -> None:
        self._population = population
        first = population.members[0]
        self._step = first.actor_optimizer.traceable_step()
        self._actor = first.actor
        state = population.graph_state()
        self._inputs = [*state.actor, *pytree.tree_leaves(state.actor_state), *state.obs_moments]
        self._buffers = state.actor_buffers
        self._spec = pytree.tree_structure(
            (state.actor, state.actor_state, state.obs_moments, state.actor_buffers)
        )
        self._compiled: Callable[..., Tensor] | None = None

    def _act(self, *flat: Tensor) -> Tensor:
        *leaves, coefficients, obs = flat
        actor, state, moments, buffers = pytree.tree_unflatten(leaves, self._spec)
        if moments:  # the networks see normalised observations
            obs = normalized_observations(obs, *moments)
        layout = self._population._update._coefficient_layout["actor"]
        c = pytree.tree_unflatten(list(coefficients.unbind()), layout)
        with torch.no_grad():
            theta = self._step.training_point(actor, state, c)
            weights = {**dict(zip(self._step.names, theta, strict=True)), **buffers}
            return functional_call(self._actor, weights, (obs,))

    @torch.no_grad()
    def __call__(self, obs: Tensor) -> Tensor:
        coefficients = self._population._update.coefficients("actor")
        inputs = [*self._inputs, *self._buffers.values(), coefficients, obs]
        if self._compiled is None:
            graph = make_fx(vmap(self._act), tracing_mode="fake")(*inputs)
            self._compiled = inductor_compile(graph, inputs)
        actions = self._compiled(*inputs)
        return actions[0] if isinstance(actions, (list, tuple)) else actions


# --------------------------------------------------------------------------- stacking
def _create_state(member: DDPG) -> None:
    """ε as zeros until the member's first draw, which fills it in place from the member's
    generator as a single run's first draw would (no random number is drawn here); the
    other state tensors the update reads are created by the optimizers' traceable steps."""
    optimizer = member.actor_optimizer
    if optimizer.explores:
        for group in optimizer.param_groups:
            for p in group["params"]:
                optimizer.state[p].setdefault("noise", torch.zeros_like(p))


def _stack_parameters(modules: Sequence[torch.nn.Module]) -> dict[str, Tensor]:
    """Each parameter of the modules stacked by name; the modules' own become views."""
    stacked = {}
    for name, _ in modules[0].named_parameters():
        params = [module.get_parameter(name) for module in modules]
        stacked[name] = torch.stack([p.detach() for p in params])
        for k, p in enumerate(params):
            p.data = stacked[name][k]
    return stacked


def _stack_buffers(actors: Sequence[torch.nn.Module]) -> dict[str, Tensor]:
    stacked = {}
    for name, _ in actors[0].named_buffers():
        values = [actor.get_buffer(name) for actor in actors]
        stacked[name] = torch.stack([v.detach() for v in values])
        for k, actor in enumerate(actors):
            setattr(actor, name, stacked[name][k])
    return stacked


def _stack_state(steps: Sequence[param_explore.TraceableStep]) -> dict[str, list[Tensor]]:
    """The optimizers' state tensors (each key, parameter by parameter) stacked; the
    optimizers' own become views (the dicts that hold them are rewritten)."""
    stacked = {}
    for key in steps[0].state:
        stacked[key] = []
        for i in range(len(steps[0].params)):
            tensors = [step.state[key][i] for step in steps]
            stack = torch.stack([t.detach() for t in tensors])
            stacked[key].append(stack)
            for k, step in enumerate(steps):
                _replace_state(step, key, i, stack[k])
    return stacked


def _replace_state(step: param_explore.TraceableStep, key: str, index: int, view: Tensor) -> None:
    """Point the optimizer's state of parameter ``index`` under ``key`` at ``view``."""
    holder = step.step_states[index] if step.step_states else None
    if holder is not None and key in holder:
        holder[key] = view
    step.state[key][index] = view


def _stack_step_counts(steps: Sequence[param_explore.TraceableStep]) -> Tensor:
    """Each optimizer's per-parameter step counts stacked, (members, parameters); the
    optimizers' own become views: every member's count moves with one op."""
    if not steps[0].step_states:
        return torch.zeros(len(steps), 0)
    stack = torch.stack([torch.stack([s["step"] for s in step.step_states]) for step in steps])
    for k, step in enumerate(steps):
        for i, state in enumerate(step.step_states):
            state["step"] = stack[k, i]
    return stack


def _stack_into(holders: Sequence[object], attribute: str) -> Tensor:
    stack = torch.stack([getattr(h, attribute).detach() for h in holders])
    for k, holder in enumerate(holders):
        setattr(holder, attribute, stack[k])
    return stack


def stacked_step_counts(members: Sequence[DDPG]) -> np.ndarray:
    """Each member's update count (for reports)."""
    return np.array([m.num_updates for m in members])


def make_population(
    envs: Sequence[object],
    configs: Sequence[object],
    seeds: Sequence[int],
    device: str | torch.device = "auto",
    bonuses: Sequence[object | None] | None = None,
) -> Population:
    """Members built as single runs build them — member k on ``envs[k]`` with
    ``configs[k]`` (its :class:`DDPGSettings`), seed ``seeds[k]`` and bonus — their replay
    buffers rows of one stacked buffer, then stacked into a :class:`Population`."""
    from ..common.devices import resolve_device
    from ..common.envs import make_env
    from .replay_buffer import ReplayBuffer

    envs = [make_env(env) for env in envs]
    first, config = envs[0], configs[0]
    device = resolve_device(device)
    obs_dim, action_dim = first.observation_space.shape[0], first.action_space.shape[0]
    storage, buffers = ReplayBuffer.stacked(
        len(envs), config.buffer_size, obs_dim, action_dim, device=device
    )
    bonuses = bonuses or [None] * len(envs)
    members = [
        DDPG(env, cfg, seed=seed, device=device, bonus=bonus, replay_buffer=buffer)
        for env, cfg, seed, bonus, buffer in zip(
            envs, configs, seeds, bonuses, buffers, strict=True
        )
    ]
    return Population(members, storage)
