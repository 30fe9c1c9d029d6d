"""One DDPG update (Khan et al. 2018, Alg. 1-2 lines 5-10), written once.

:func:`ddpg_update` is the update: the TD target from the target networks, the critic's
loss, gradient and step, the deterministic policy gradient at the strategy's training
point (θ_t that acted, ``docs/decisions.md#sample-per-step``, or μ) under the *updated*
critic, the strategy's step, the target networks' move toward the critic and μ, and the
loss sums. Plappert et al.'s protocol adds three settings: observations normalised by
running statistics for every network, an L2 penalty in the critic's loss (reported in its
loss sum, as baselines reports it), and the critic's LayerNorm (in the network itself).
A non-finite critic loss or gradient skips the whole update; a non-finite
actor loss or gradient the actor's step and the targets': nothing non-finite reaches a
weight, σ or an optimizer's state, and the skip is counted.

It runs two ways, which differ in mechanics only (an :class:`Execution`):

* :class:`EagerExecution` — op by op, with autograd and the optimizers' own ``step()``
  (torch's fused kernels; noisy K-FAC's hooks see the actor's modules run);
* ``agents.ddpg.compiled_update.TracedExecution`` — traced once into a graph that
  TorchInductor compiles, with the optimizers' steps from their ``TraceableStep``.

Both read and write the same :class:`UpdateTensors` (in the eager case the networks' own
parameters), so the two can alternate and a checkpoint is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn
from torch.func import functional_call

import param_explore

from .losses import actor_loss, all_finite, critic_loss, l2_penalty, td_target
from .member_rows import MemberCounters
from .networks import Actor, Critic
from .observations import ObservationStatistics, normalized_observations
from .replay_buffer import Batch
from .thompson import ThompsonCritic

LossOf = Callable[[list[Tensor]], Tensor]


@dataclass
class UpdateTensors:
    """What an update reads and writes, in the optimizers' parameter order."""

    critic: list[Tensor]
    actor: list[Tensor]
    target_critic: list[Tensor]
    target_actor: list[Tensor]
    #: Running (critic loss, actor loss, count) over applied updates, on the device.
    loss_sums: Tensor
    #: The observations' running mean and std (``normalize_observations``), else None.
    obs_mean: Tensor | None = None
    obs_std: Tensor | None = None


@dataclass(frozen=True)
class UpdateSettings:
    gamma: float
    tau: float
    reduction: str  # of the actor loss over the minibatch: "sum" or "mean"
    #: λ of the critic's L2 penalty λ·½‖W‖² (0: none), on the critic tensors at
    #: ``critic_l2_indices`` (its weight matrices, :meth:`Critic.weight_names`).
    critic_l2_reg: float = 0.0
    critic_l2_indices: tuple[int, ...] = ()
    #: Whether every network sees the minibatch's observations normalised by the running
    #: statistics of :attr:`UpdateTensors.obs_mean` and ``obs_std``.
    normalize_observations: bool = False

    @classmethod
    def of(
        cls,
        critic: Critic,
        critic_optimizer: torch.optim.Optimizer,
        gamma: float,
        tau: float,
        reduction: str,
        critic_l2_reg: float = 0.0,
        normalize_observations: bool = False,
    ) -> UpdateSettings:
        """The settings of an update of ``critic``: its penalised weights found by name,
        at their places in :meth:`UpdateState.tensors`'s critic list (:func:`critic_order`)."""
        names = critic_order(critic, critic_optimizer)
        indices = tuple(names.index(name) for name in critic.weight_names())
        return cls(
            gamma, tau, reduction, critic_l2_reg, indices if critic_l2_reg else (),
            normalize_observations,
        )  # fmt: skip


def critic_order(critic: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The critic's parameter names in the order its update lists them: its optimizer's
    (a sampled critic's groups its LayerNorm parameters apart), else ``named_parameters``'
    (torch's Adam is built from them in that order)."""
    if isinstance(optimizer, param_explore.WeightSampling):
        return optimizer.param_names()
    return [name for name, _ in critic.named_parameters()]


@dataclass
class UpdateState:
    """Everything an update reads and writes: the networks and their optimizers, the
    update's settings and its running counters (loss sums, skipped updates), all on the
    training device. :meth:`tensors` flattens it for :func:`ddpg_update`."""

    actor: Actor
    critic: nn.Module
    target_actor: Actor
    target_critic: nn.Module
    actor_optimizer: param_explore.WeightSampling
    critic_optimizer: torch.optim.Optimizer
    settings: UpdateSettings
    #: (critic loss, actor loss, count) summed over applied updates since the last read.
    loss_sums: Tensor
    #: Updates skipped for a non-finite loss or gradient (a 0-d tensor).
    skipped: Tensor
    #: The observations' running statistics (``normalize_observations``), else None.
    obs_statistics: ObservationStatistics | None = None
    #: Its step, update and episode counters: its row of its stack's
    #: (:class:`~agents.ddpg.member_rows.MemberRows`), set when it is stacked.
    counters: MemberCounters | None = None
    #: A sampled critic's held sample and acting move (:mod:`agents.ddpg.thompson`), set by
    #: its member; None for torch's Adam critic.
    thompson: ThompsonCritic | None = None

    def tensors(self) -> UpdateTensors:
        """The networks' own parameters: the critic's and the actor's in their optimizers'
        order (:func:`critic_order`); each target's matched to its network's by name; the
        observation statistics' mean and std tensors, if any."""
        critic_names = critic_order(self.critic, self.critic_optimizer)
        actor_names = self.actor_optimizer.param_names()
        critic, target_critic = (
            dict(self.critic.named_parameters()),
            dict(self.target_critic.named_parameters()),
        )
        actor, target_actor = (
            dict(self.actor.named_parameters()),
            dict(self.target_actor.named_parameters()),
        )
        return UpdateTensors(
            [critic[name] for name in critic_names],
            [actor[name] for name in actor_names],
            [target_critic[name] for name in critic_names],
            [target_actor[name] for name in actor_names],
            self.loss_sums,
            *(() if self.obs_statistics is None else
              (self.obs_statistics.mean, self.obs_statistics.std)),
        )  # fmt: skip


class EagerUpdate:
    """:func:`ddpg_update` op by op on the learner's networks.

    What an update reads is gathered once, not per update: parameters keep their identity
    for the agent's lifetime (loading a checkpoint copies into them), and the optimizers'
    state is read through the optimizers at every step.
    """

    def __init__(self, learner: UpdateState) -> None:
        self._tensors = learner.tensors()
        self._settings = learner.settings
        self._execution = EagerExecution(learner)

    def __call__(self, batch: Batch) -> None:
        ddpg_update(self._tensors, batch, self._settings, self._execution)


class Execution(Protocol):
    """How :func:`ddpg_update` runs: the mechanics, never the update's logic."""

    def q_value(self, critic: list[Tensor], obs: Tensor, actions: Tensor) -> Tensor: ...
    def action(self, actor: list[Tensor], obs: Tensor) -> Tensor: ...
    def target_action(self, actor: list[Tensor], obs: Tensor) -> Tensor: ...
    def loss_and_grads(self, loss_of: LossOf, at: list[Tensor]) -> tuple[Tensor, list[Tensor]]: ...
    def critic_point(self, critic: list[Tensor]) -> list[Tensor]: ...
    def actor_critic(self, critic: list[Tensor]) -> list[Tensor]: ...
    def actor_point(self, actor: list[Tensor]) -> list[Tensor]: ...
    def step_critic(self, critic: list[Tensor], grads: list[Tensor], ok: Tensor) -> None: ...
    def step_actor(self, actor: list[Tensor], grads: list[Tensor], ok: Tensor) -> None: ...
    def lerp_targets(
        self, targets: list[Tensor], online: list[Tensor], tau: float, ok: Tensor
    ) -> None: ...
    def add_losses(self, sums: Tensor, values: Tensor, ok: Tensor) -> None: ...


def ddpg_update(t: UpdateTensors, batch: Batch, s: UpdateSettings, run: Execution) -> None:
    """One DDPG update on ``t`` from a minibatch (see the module docstring)."""
    obs, actions, rewards, next_obs, terminated = batch
    if s.normalize_observations:  # every network sees them so (the buffer keeps raw ones)
        assert t.obs_mean is not None and t.obs_std is not None
        obs, next_obs = (normalized_observations(x, t.obs_mean, t.obs_std) for x in (obs, next_obs))
    with torch.no_grad():
        next_q = run.q_value(t.target_critic, next_obs, run.target_action(t.target_actor, next_obs))
        target = td_target(rewards, terminated, next_q, s.gamma)

    def critic_loss_at(critic: list[Tensor]) -> Tensor:
        loss = critic_loss(run.q_value(critic, obs, actions), target)
        if s.critic_l2_reg:
            loss = loss + l2_penalty([critic[i] for i in s.critic_l2_indices], s.critic_l2_reg)
        return loss

    critic_loss_value, critic_grads = run.loss_and_grads(critic_loss_at, run.critic_point(t.critic))
    critic_ok = all_finite(critic_loss_value, critic_grads)
    run.step_critic(t.critic, critic_grads, critic_ok)

    def actor_loss_at(theta: list[Tensor]) -> Tensor:
        # F at the training point under the updated critic (its mean, or a sampled critic's
        # held sample); only ∇θ is taken, so no critic weight gradient is computed.
        q = run.q_value(run.actor_critic(t.critic), obs, run.action(theta, obs))
        return actor_loss(q, s.reduction)

    actor_loss_value, actor_grads = run.loss_and_grads(actor_loss_at, run.actor_point(t.actor))
    ok = critic_ok & all_finite(actor_loss_value, actor_grads)
    run.step_actor(t.actor, actor_grads, ok)

    with torch.no_grad():  # targets follow the critic and the actor's mean μ, never θ
        run.lerp_targets([*t.target_critic, *t.target_actor], [*t.critic, *t.actor], s.tau, ok)
        count = torch.ones((), device=t.loss_sums.device)
        run.add_losses(t.loss_sums, torch.stack([critic_loss_value, actor_loss_value, count]), ok)


class EagerExecution:
    """:func:`ddpg_update` op by op on the networks' own parameters (module docstring).

    Whether to step is decided on the host (one flag read per step), so nothing runs that
    would be undone; ``skipped`` (a 0-d tensor) counts the updates skipped.
    """

    def __init__(self, learner: UpdateState) -> None:
        self.actor, self.target_actor = learner.actor, learner.target_actor
        self.actor_optimizer = learner.actor_optimizer
        self.critic_optimizer = learner.critic_optimizer
        self.skipped = learner.skipped
        # The critics by their first parameter: a list of a module's own is that module.
        self._critics = {
            id(next(module.parameters())): module
            for module in (learner.critic, learner.target_critic)
        }
        # The actor's tensors by name, in the optimizer's order.
        self._actor_names = self.actor_optimizer.param_names()
        self.critic = learner.critic
        self.thompson = learner.thompson

    # -------------------------------------------------------------- networks
    def q_value(self, critic: list[Tensor], obs: Tensor, actions: Tensor) -> Tensor:
        module = self._critics.get(id(critic[0]))
        if module is not None:  # a network's own parameters
            return module(obs, actions)
        assert self.thompson is not None  # a sample of the critic's posterior
        return self.thompson.q_value(critic, obs, actions)

    def target_action(self, actor: list[Tensor], obs: Tensor) -> Tensor:
        return self.target_actor(obs)

    def action(self, actor: list[Tensor], obs: Tensor) -> Tensor:
        weights = dict(zip(self._actor_names, actor, strict=True))
        if self.actor_optimizer.needs_module_calls:  # its hooks must see the modules run
            return functional_call(self.actor, weights, (obs,))
        return self.actor(obs, weights)

    # -------------------------------------------------------------- gradients
    def loss_and_grads(self, loss_of: LossOf, at: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        with torch.enable_grad():
            loss = loss_of(at)
            return loss.detach(), list(torch.autograd.grad(loss, at))

    def critic_point(self, critic: list[Tensor]) -> list[Tensor]:
        """The critic's parameters; a sampled critic's training point θ = μ + σ⊙ε at the ε
        in its state, drawn fresh before each update (leaves of their own: their gradient is
        ∇θL at θ, which the posterior's step reads with that ε)."""
        if self.thompson is None:
            return critic
        with torch.no_grad():
            sample = self.critic_optimizer.named_sample()
        return [sample[name].detach().requires_grad_() for name in self.thompson.names]

    def actor_critic(self, critic: list[Tensor]) -> list[Tensor]:
        """The critic the actor is trained against: its mean, or the held sample."""
        if self.thompson is not None and self.thompson.actor_follows_sample:
            return self.thompson.weights
        return critic

    def actor_point(self, actor: list[Tensor]) -> list[Tensor]:
        """θ that acted (leaves of their own: their gradient is ∇θF), or μ itself."""
        if not self.actor_optimizer.gradient_at_sample:
            return actor
        with torch.no_grad():
            return [theta.detach().requires_grad_() for theta in self.actor_optimizer.sample()]

    # -------------------------------------------------------------- steps
    def step_critic(self, critic: list[Tensor], grads: list[Tensor], ok: Tensor) -> None:
        if bool(ok):
            _step(self.critic_optimizer, critic, grads)

    def step_actor(self, actor: list[Tensor], grads: list[Tensor], ok: Tensor) -> None:
        if bool(ok):  # the strategy's own guard agrees: ok covers these gradients
            _step(self.actor_optimizer, actor, grads)
        else:
            self.skipped += 1

    def lerp_targets(
        self, targets: list[Tensor], online: list[Tensor], tau: float, ok: Tensor
    ) -> None:
        if bool(ok):
            torch._foreach_lerp_(targets, online, tau)  # one fused op over all tensors

    def add_losses(self, sums: Tensor, values: Tensor, ok: Tensor) -> None:
        if bool(ok):
            sums += values


def _step(optimizer: torch.optim.Optimizer, params: list[Tensor], grads: list[Tensor]) -> None:
    """``optimizer.step()`` from ``grads``, given to it as ``p.grad`` (left there after, as
    a ``backward()`` would)."""
    for p, g in zip(params, grads):
        p.grad = g
    optimizer.step()
