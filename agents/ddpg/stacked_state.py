"""The learning state of N members of one strategy, held stacked: the one owner of it.

Why: a population's update, acting and draws are batched over a leading member
dimension, so every tensor they read — parameters, the actor's buffers, optimizer state
and step counts, weight noise ε, loss sums, skip counts, observation moments, the replay
buffer — is one (N, …) tensor. A single run is N = 1 of the same state, built by the same
code (:meth:`StackedState.build`), so there is one way a learner's state comes to be.

How: :meth:`StackedState.build` checks the members' settings (that they may share a stack,
and the memory all of them need) before anything is allocated (unless its caller did:
a run's driver checks its runs once), allocates the replay
buffers as one (N, capacity, …) storage, builds member k's networks from the global torch
RNG seeded with its seed (as a single run of that seed builds them), creates the
optimizers' state (drawing nothing: ε is zero until the first draw), and stacks every
tensor into (N, …) storage, binding member k's modules, optimizers and statistics to row
k as it goes — before anything else has seen them. Each member's front (:class:`DDPG
<agents.ddpg.agent.DDPG>`) receives its row, an :class:`~agents.ddpg.update.UpdateState`
whose tensors are views of the stack; nothing outside this module binds a tensor to the
stack, and loading a checkpoint writes into the same tensors (:func:`load_in_place`), so
the views hold for the state's life.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

import param_explore

from ..common.critic_posterior import CRITIC_POSTERIORS
from ..common.noise_redraw import redrawn_every_step
from ..settings.learners import DDPGSettings
from ..settings.memory import check_learners
from ..settings.sharing import check_members_share
from .compiled_update import GraphState, critic_traceable_step
from .member_rows import MemberRows
from .networks import Actor, Critic
from .observations import ObservationStatistics, StackedObservationStatistics
from .replay_buffer import ReplayBuffer, StackedReplayBuffer
from .update import UpdateSettings, UpdateState, critic_order


def build_learner(
    config: DDPGSettings,
    obs_dim: int,
    action_space: gym.spaces.Box,
    device: torch.device,
    obs_statistics: ObservationStatistics | None,
) -> UpdateState:
    """One member's networks (from the global torch RNG, seeded already), their targets,
    optimizers (the strategy's for the actor; for the critic torch's fused Adam, matched to
    a checkpoint's state by name, or the posterior its settings name), the update's
    counters, on its observation statistics."""
    actor = Actor(
        obs_dim,
        action_space.low,
        action_space.high,
        config.hidden_sizes,
        init=config.init,
        layer_norm=config.strategy.layer_norm,
    ).to(device)
    critic = Critic(
        obs_dim,
        action_space.shape[0],
        config.hidden_sizes,
        init=config.init,
        layer_norm=config.critic_layer_norm,
    ).to(device)
    strategy = config.strategy
    actor_optimizer = param_explore.make_optimizer(
        strategy.optimizer_class, actor, **strategy.optimizer_kwargs
    )
    if config.samples_critic:  # a posterior over the critic (agents.common.critic_posterior)
        critic_optimizer = param_explore.make_optimizer(
            CRITIC_POSTERIORS[config.critic_optimizer], critic, **config.critic_optimizer_kwargs
        )
    else:
        critic_optimizer = torch.optim.Adam(
            critic.named_parameters(), lr=config.critic_lr, fused=True
        )
        critic_optimizer.register_load_state_dict_pre_hook(param_explore.state_by_name)
    return UpdateState(
        actor,
        critic,
        copy.deepcopy(actor).requires_grad_(False),
        copy.deepcopy(critic).requires_grad_(False),
        actor_optimizer,
        critic_optimizer,
        UpdateSettings.of(
            critic,
            critic_optimizer,
            config.gamma,
            config.tau,
            config.actor_grad_reduction,
            critic_l2_reg=config.critic_l2_reg,
            normalize_observations=config.normalize_observations,
        ),
        # kept on the device: reading them every update would force a host sync
        loss_sums=torch.zeros(3, device=device),
        skipped=torch.zeros((), device=device),
        obs_statistics=obs_statistics,
    )


class StackedState:
    """N members' learning state as (N, …) tensors (module docstring); :attr:`learners`
    are the members' rows, whose tensors are views of it."""

    def __init__(
        self,
        learners: Sequence[UpdateState],
        buffer: StackedReplayBuffer,
        obs_statistics: StackedObservationStatistics | None,
        rows: MemberRows | None = None,
    ) -> None:
        """Stack ``learners``' tensors (their replay buffers are ``buffer``'s rows, their
        observation statistics ``obs_statistics``'s, their counters ``rows``'s — new ones
        at zero if not given); each learner's become views of its row. Used by
        :meth:`build` and :meth:`regrouped`."""
        self.learners = list(learners)
        self.buffer = buffer
        #: The members' step, update and episode counters, a row each (agents.ddpg.member_rows).
        self.rows = MemberRows(len(self.learners)) if rows is None else rows
        for k, learner in enumerate(self.learners):
            if learner.counters is None:
                learner.counters = self.rows.row(k)
            else:
                learner.counters.rebind(self.rows, k)
        #: The members' observation statistics, (N, obs dim), or None.
        self.obs_statistics = obs_statistics
        self.device = self.learners[0].loss_sums.device
        optimizers = [learner.actor_optimizer for learner in self.learners]
        #: Every member's ε of its perturbed weights, flat, and its blocks: each perturbed
        #: parameter's ε of every member, (members, …), in the parameters' order.
        self.noise, self.noise_stacks = _stack_noise(optimizers)
        #: Whether the strategy derives anything from ε (parameter noise's acting copy,
        #: noisy K-FAC's perturbation): only then is each drawn member told.
        self._derives_from_noise = (
            type(optimizers[0]).noise_changed is not param_explore.WeightSampling.noise_changed
        )
        modules = ("actor", "critic", "target_actor", "target_critic")
        self.params = {
            module: _stack_tensors(
                [dict(getattr(learner, module).named_parameters()) for learner in self.learners]
            )
            for module in modules
        }
        self.actor_buffers = _stack_tensors(
            [dict(learner.actor.named_buffers()) for learner in self.learners]
        )
        critic_steps = [critic_traceable_step(learner.critic_optimizer) for learner in learners]
        self.critic_state = _stack_state(critic_steps)
        first = self.learners[0]
        #: A sampled critic's ε of its training point, the (members, …) stacks of its
        #: perturbed parameters (drawn before every update: :meth:`draw_critic_noise`).
        self.critic_noise = (
            [
                stack
                for stack, perturbed in zip(
                    self.critic_state["noise"], first.critic_optimizer.perturbed(), strict=True
                )
                if perturbed
            ]
            if isinstance(first.critic_optimizer, param_explore.WeightSampling)
            else []
        )
        #: A sampled critic's held samples, (members, …) per critic parameter in its
        #: update's order (agents.ddpg.update.critic_order), and each member's (moved,
        #: clipped, actions) sums of its acting moves (agents.ddpg.thompson): a member's
        #: are views of its rows.
        self.critic_samples = (
            [
                torch.zeros(len(self.learners), *p.shape, dtype=p.dtype, device=p.device)
                for p in first.tensors().critic
            ]
            if self.critic_noise
            else []
        )
        self.critic_moves = torch.zeros(len(self.learners), 3, device=self.device)
        self.step_counts = {"critic": _stack_step_counts(critic_steps, self.device)}
        try:
            actor_steps = [optimizer.traceable_step() for optimizer in optimizers]
        except param_explore.UntraceableOptimizerError:  # noisy K-FAC: each member steps
            self.actor_state: dict[str, list[Tensor]] | None = None
        else:
            self.actor_state = _stack_state(actor_steps, {"noise": self.noise_stacks})
            self.step_counts["actor"] = _stack_step_counts(actor_steps, self.device)
        counters = _stack_tensors(
            [
                {"loss_sums": learner.loss_sums, "skipped": learner.skipped}
                for learner in self.learners
            ]
        )
        self.loss_sums, self.skipped = counters["loss_sums"], counters["skipped"]
        self.obs_moments = (
            [] if obs_statistics is None else [obs_statistics.mean, obs_statistics.std]
        )

    @classmethod
    def build(
        cls,
        configs: Sequence[DDPGSettings],
        seeds: Sequence[int | None],
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Box,
        device: torch.device,
        *,
        checked: bool = False,
    ) -> StackedState:
        """The state of members with ``configs`` and ``seeds`` (member k's networks from
        ``seeds[k]``, as its single run's; a None seed: the global RNG as it stands), after
        the settings' one check that they may share a stack and the memory check of all of
        them (nothing allocated before either) — made by the caller where ``checked`` says
        so (a run's driver, :mod:`agents.runs.population_run`, checks its runs once)."""
        obs_dim, action_dim = observation_space.shape[0], action_space.shape[0]
        if not checked:
            check_members_share(configs)
            check_learners(configs, obs_dim, action_dim, device)
        buffer = ReplayBuffer.stacked(
            len(configs), configs[0].buffer_size, obs_dim, action_dim, device=device
        )
        statistics = (
            StackedObservationStatistics(len(configs), obs_dim, device)
            if configs[0].normalize_observations
            else None
        )
        learners = []
        for k, (config, seed) in enumerate(zip(configs, seeds, strict=True)):
            if seed is not None:
                torch.manual_seed(seed)
            rows = None if statistics is None else statistics.row(k)
            learners.append(build_learner(config, obs_dim, action_space, device, rows))
        return cls(learners, buffer, statistics)

    def regrouped(self, rows: Sequence[int]) -> StackedState:
        """The members of ``rows`` alone, in a stack of their own (a copy): members that
        resume at another step than the others train as a population of their own."""
        buffer = StackedReplayBuffer.of([self.buffer.members[k] for k in rows])
        learners = [self.learners[k] for k in rows]
        statistics = None
        old = self.obs_statistics
        if old is not None:
            statistics = StackedObservationStatistics(len(rows), old.sum.shape[1], self.device)
            for name in ("sum", "sumsq", "count"):
                getattr(statistics, name)[...] = getattr(old, name)[list(rows)]
            statistics.publish()
            for row, learner in enumerate(learners):
                learner.obs_statistics = statistics.row(row)
        return StackedState(learners, buffer, statistics, self.rows.taken(rows))

    def __len__(self) -> int:
        return len(self.learners)

    def graph_state(self) -> GraphState:
        """The stacked tensors, in the order each member's update reads its own."""
        first = self.learners[0]
        critic_names = critic_order(first.critic, first.critic_optimizer)
        actor_names = first.actor_optimizer.param_names()
        critic_steps = critic_traceable_step(first.critic_optimizer)
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
            self.actor_buffers,
            self.step_counts["critic"],
            self.step_counts["actor"],
            self.skipped,
        )

    def counts_of(self, k: int) -> tuple[Tensor, Tensor]:
        """Member ``k``'s critic's and actor's step counts (views of its rows): what its
        own compiled update reads and moves on."""
        return self.step_counts["critic"][k], self.step_counts["actor"][k]

    def draw_noise(
        self, resample: str, starting: np.ndarray | None, generator: torch.Generator
    ) -> list[int]:
        """New ε for every member (per step), or for the members ``starting`` an episode
        (per episode, ``resample``; a row each, None for none), from ``generator``: one
        ``normal_`` per parameter of
        every member's (members, …) block, in the parameters' order — for one member the
        very draws of its optimizer's ``resample_noise``. The rows drawn (whose strategies
        then derive what they derive from ε: ``noise_changed``)."""
        every_step = redrawn_every_step(resample)
        if self.noise is None or not (every_step or (starting is not None and starting.any())):
            return []
        if every_step or starting.all():
            for stack in self.noise_stacks.values():
                stack.normal_(generator=generator)
            rows = range(len(self.learners))
        else:  # the others keep their episode's ε (and what derives from it)
            starts = torch.as_tensor(starting, device=self.device)
            for stack in self.noise_stacks.values():
                drawn = torch.empty_like(stack).normal_(generator=generator)
                mask = starts.view(-1, *[1] * (stack.dim() - 1))
                stack.copy_(torch.where(mask, drawn, stack))
            rows = np.flatnonzero(starting).tolist()
        if self._derives_from_noise:
            for k in rows:
                self.learners[k].actor_optimizer.noise_changed()
        return list(rows)

    def draw_critic_noise(self, generator: torch.Generator) -> None:
        """A sampled critic's fresh ε for every member's coming update (its training point
        θ = μ + σ⊙ε): one ``normal_`` per perturbed parameter's (members, …) stack, from
        ``generator``; nothing for torch's Adam critic."""
        for stack in self.critic_noise:
            stack.normal_(generator=generator)

    def update_observations(self, obs: np.ndarray | Tensor, rows: np.ndarray | None = None) -> None:
        """Every member's observation of this step (a row each) into its statistics, of the
        members whose ``rows`` are True only if given; nothing without statistics."""
        if self.obs_statistics is not None:
            self.obs_statistics.update(obs, rows)


def load_in_place(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(saved)`` written into the state tensors it holds now.

    torch's load replaces an optimizer's state tensors with new ones; a member's are views
    of its stack (and a compiled graph's inputs), so the loaded values are copied into them
    and they are put back. State the file lacks (a checkpoint from before the state was
    created) keeps its value; a tensor the file has of another shape is the file's."""
    held = {p: dict(state) for p, state in optimizer.state.items()}
    optimizer.load_state_dict(saved)
    for p, before in held.items():
        after = optimizer.state[p]
        for key, tensor in before.items():
            if not torch.is_tensor(tensor):
                continue
            loaded = after.get(key)
            if loaded is None:
                after[key] = tensor
            elif torch.is_tensor(loaded) and loaded.shape == tensor.shape:
                tensor.copy_(loaded)
                after[key] = tensor


# --------------------------------------------------------------------------- stacking
def _stack_noise(
    optimizers: Sequence[param_explore.WeightSampling],
) -> tuple[Tensor | None, dict[int, Tensor]]:
    """Every member's ε of its perturbed weights in one flat tensor, and for each perturbed
    parameter (by index, in order) the (members, …) stack of its ε, a
    contiguous block of it; each member's ε (its optimizer's state) is a view of its row
    of the block. None for a noise-free strategy. ε is zero until the first draw."""
    first = optimizers[0]
    perturbed = first.perturbed()
    if not any(perturbed):
        return None, {}
    count = len(optimizers)
    params = [[p for group in o.param_groups for p in group["params"]] for o in optimizers]
    sizes = [p.numel() for p, is_perturbed in zip(params[0], perturbed) if is_perturbed]
    reference = params[0][0]
    noise = torch.zeros(count * sum(sizes), dtype=reference.dtype, device=reference.device)
    stacks: dict[int, Tensor] = {}
    offset = 0
    for i, p in enumerate(params[0]):
        if not perturbed[i]:
            for optimizer, own in zip(optimizers, params, strict=True):
                optimizer.state[own[i]].setdefault("noise", torch.zeros_like(own[i]))
            continue
        stacks[i] = noise[offset : offset + count * p.numel()].view(count, *p.shape)
        for k, (optimizer, own) in enumerate(zip(optimizers, params, strict=True)):
            view = stacks[i][k]
            drawn = optimizer.state[own[i]].get("noise")
            if drawn is not None:
                view.copy_(drawn)
            optimizer.state[own[i]]["noise"] = view
        offset += count * p.numel()
    return noise, stacks


def _stack_tensors(members: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Each member's tensors (parameters or buffers, by name) stacked by name; the members'
    own become views of their rows (the same tensor objects, their data rebound)."""
    stacked = {}
    for name in members[0]:
        stacked[name] = torch.stack([tensors[name].detach() for tensors in members])
        for k, tensors in enumerate(members):
            tensors[name].data = stacked[name][k]
    return stacked


def _stack_state(
    steps: Sequence[param_explore.TraceableStep],
    stacked_already: dict[str, dict[int, Tensor]] | None = None,
) -> dict[str, list[Tensor]]:
    """The optimizers' state tensors (each key, parameter by parameter) stacked; the
    optimizers' own become views (the dicts that hold them are rewritten).
    ``stacked_already``: key → {parameter index: stack} of state whose tensors are views of
    that stack already (the members' ε, :func:`_stack_noise`)."""
    stacked_already = stacked_already or {}
    stacked = {}
    for key in steps[0].state:
        stacked[key] = []
        for i in range(len(steps[0].params)):
            given = stacked_already.get(key, {}).get(i)
            if given is not None:
                stacked[key].append(given)
                continue
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


def _stack_step_counts(
    steps: Sequence[param_explore.TraceableStep], device: torch.device
) -> Tensor:
    """Each optimizer's per-parameter step counts stacked, (members, parameters), on the
    members' ``device``; the optimizers' own become views: a compiled update moves every
    member's counts on inside its graph, with nothing read back.

    On a GPU torch's own ``Adam`` then finds its ``step`` there, as with ``capturable``;
    an eager step reads it (a sync), which a compiled update never does."""
    if not steps[0].step_states:
        return torch.zeros(len(steps), 0, device=device)
    stack = torch.stack([torch.stack([s["step"] for s in step.step_states]) for step in steps]).to(
        device
    )
    for k, step in enumerate(steps):
        for i, state in enumerate(step.step_states):
            state["step"] = stack[k, i]
    return stack
