"""The whole DDPG update as one compiled graph (``DDPGConfig.compile``, ``--compile``).

Why: an eager update of the paper's networks (400-300, batch 64) launches a few hundred
small operations; besides the ten large matrix products, their per-op overhead is
about a third of the time on a CPU. Tracing the update — target computation, critic
loss and gradient, the critic's Adam step, the actor's gradient at the training point
under the updated critic, the strategy's step, the target update and the loss sums —
into one graph lets TorchInductor fuse every elementwise step into a few loops and call
the matrix products directly. ``benchmarks/ddpg_speed.py`` measures the gain.

How: both optimizers describe their step as a ``param_explore.TraceableStep`` (explicit
state tensors, per-step numbers passed in as tensors). :func:`_update` is written against
those and against the agent's own modules (``torch.func.functional_call``), so it
repeats no update rule and no network. It is traced once with fake tensors (tracing
changes nothing), functionalised, and compiled by TorchInductor; the compiled function
updates the agent's tensors in place, so eager and compiled steps can alternate, and a
checkpoint is the same either way. Called directly, the compiled function has no
TorchDynamo guards to check per call.

What stays eager: drawing the minibatch (the agent's generator), advancing the step
counts (:attr:`TraceableStep.coefficients`), acting and the noise draw. The result is
the eager update's up to float rounding (different summation and fusion order); tests
compare them over several steps for every traceable strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor, fx
from torch.func import functional_call, functionalize, grad_and_value
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from param_explore.traceable import TraceableStep, adam_traceable_step

from . import losses
from .replay_buffer import Batch

if TYPE_CHECKING:
    from .ddpg import DDPG


class CompilationError(RuntimeError):
    """Tracing or compiling the update failed (nothing was changed)."""


class CompiledUpdate:
    """``agent.train_step``'s update, compiled; call with a minibatch.

    Raises ``param_explore.traceable.UntraceableOptimizerError`` when the actor's
    strategy has no traced form (the agent then trains eagerly).
    """

    def __init__(self, agent: DDPG) -> None:
        self._agent = agent
        cfg = agent.config
        self._gamma, self._tau = cfg.gamma, cfg.tau
        self._reduction = cfg.actor_grad_reduction
        self._coefficient_layout: dict[str, pytree.TreeSpec] = {}
        self._compiled: Callable[..., object] | None = None
        #: Set by the graph: whether the critic's and the actor's steps were applied
        #: (both are skipped for a non-finite loss or gradient).
        self._applied = torch.ones(2, device=agent.device)
        self.bind()

    def bind(self) -> None:
        """Collect the tensors the graph reads and updates, and the step numbers.

        Call again whenever the optimizers' state may have been replaced or stepped
        outside this graph (``DDPG.load_state_dict`` does)."""
        agent = self._agent
        self._critic_step = adam_traceable_step(agent.critic_optimizer)
        self._actor_step = agent.actor_optimizer.traceable_step()
        # Step numbers are read from the optimizers' state once and then counted here:
        # reading a step tensor on a GPU every update would synchronise with it.
        self._next_steps = {
            "critic": self._critic_step.next_step(),
            "actor": self._actor_step.next_step(),
        }
        # Parameters in the optimizers' order, named as in the modules (for
        # functional_call) and paired with their targets by name.
        self._critic_names = _names(agent.critic, self._critic_step.params)
        self._actor_names = _names(agent.actor, self._actor_step.params)
        target_critic = dict(agent.target_critic.named_parameters())
        target_actor = dict(agent.target_actor.named_parameters())
        self._state = {
            "critic": [p.detach() for p in self._critic_step.params],
            "actor": [p.detach() for p in self._actor_step.params],
            "target_critic": [target_critic[n].detach() for n in self._critic_names],
            "target_actor": [target_actor[n].detach() for n in self._actor_names],
            "critic_state": self._critic_step.state,
            "actor_state": self._actor_step.state,
            "actor_buffers": {n: b.detach() for n, b in agent.actor.named_buffers()},
            "loss_sums": agent._loss_sums,
            "applied": self._applied,
        }
        # The leaves the graph reads every call, flattened once; the minibatch and the
        # step's numbers are appended per call.
        self._static_inputs = pytree.tree_leaves(self._state)

    def _coefficients(self, name: str, step: TraceableStep) -> Tensor:
        """The numbers of ``step``'s coming step in one tensor (their layout remembered)."""
        numbers, layout = pytree.tree_flatten(step.coefficients(self._next_steps[name]))
        self._coefficient_layout.setdefault(name, layout)  # the graph's, fixed at tracing
        return torch.tensor(numbers, dtype=torch.float32, device=self._agent.device)

    @torch.no_grad()
    def __call__(self, batch: Batch) -> None:
        """One update. The first call compiles; if that fails it raises
        :class:`CompilationError` having changed nothing."""
        coefficients = [
            self._coefficients("critic", self._critic_step),
            self._coefficients("actor", self._actor_step),
        ]
        inputs = [*self._static_inputs, *batch, *coefficients]
        if self._compiled is None:
            self._compile(
                inputs, {"state": self._state, "batch": list(batch), "coefficients": coefficients}
            )
        self._compiled(*inputs)
        # A skipped step changed no tensor, so its step count stays too. Reading the flags
        # is free on a CPU (a sync on a GPU).
        critic_applied, actor_applied = self._applied.tolist()
        if not actor_applied:
            self._agent._skipped += 1
        for name, step, applied in (
            ("critic", self._critic_step, critic_applied),
            ("actor", self._actor_step, actor_applied),
        ):
            if applied:
                step.advance()
                self._next_steps[name] += 1

    def _compile(self, inputs: list[Tensor], tree: dict) -> None:
        leaves, self._spec = pytree.tree_flatten(tree)
        assert all(a is b for a, b in zip(leaves, inputs, strict=True))
        try:
            update = functionalize(self._traced, remove="mutations")
            traced = make_fx(update, tracing_mode="fake")(*inputs)
            _skip_unused_columns(traced)
            self._compiled = torch._inductor.compile(traced, inputs)
        except Exception as err:  # a missing C++ compiler, an unsupported op, ...
            raise CompilationError(f"{type(err).__name__}: {str(err).strip()[:500]}") from err

    # ------------------------------------------------------------------ the traced update
    def _traced(self, *flat: Tensor) -> tuple[()]:
        self._update(pytree.tree_unflatten(list(flat), self._spec))
        return ()

    def _update(self, inputs: dict) -> None:
        """One DDPG update (as ``DDPG._eager_update``) on the input tensors, in place."""
        critic_step, actor_step = self._critic_step, self._actor_step
        critic_c, actor_c = (
            pytree.tree_unflatten(list(packed.unbind()), self._coefficient_layout[name])
            for name, packed in zip(("critic", "actor"), inputs["coefficients"])
        )
        obs, actions, rewards, next_obs, terminated = inputs["batch"]
        t = inputs["state"]

        with torch.no_grad():
            next_actions = self._action(t["target_actor"], t["actor_buffers"], next_obs)
            next_q = self._q_value(t["target_critic"], next_obs, next_actions)
            target = losses.td_target(rewards, terminated, next_q, self._gamma)

        def critic_loss(critic: list[Tensor]) -> Tensor:
            return losses.critic_loss(self._q_value(critic, obs, actions), target)

        critic_grads, critic_loss_value = grad_and_value(critic_loss)(t["critic"])
        critic_ok = losses.all_finite(critic_loss_value, critic_grads)
        with torch.no_grad():
            _applied_if(critic_ok, [t["critic"], t["critic_state"]], critic_step.update,
                        t["critic"], critic_grads, t["critic_state"], critic_c)  # fmt: skip
            point = actor_step.training_point(t["actor"], t["actor_state"], actor_c)

        def actor_loss(theta: list[Tensor]) -> Tensor:
            # F at the training point (θ that acted, or μ) under the updated critic, whose
            # weights are constants here: no critic weight gradients are computed.
            q = self._q_value(t["critic"], obs, self._action(theta, t["actor_buffers"], obs))
            return losses.actor_loss(q, self._reduction)

        actor_grads, actor_loss_value = grad_and_value(actor_loss)(point)
        ok = critic_ok & losses.all_finite(actor_loss_value, actor_grads)

        with torch.no_grad():
            _applied_if(ok, [t["actor"], t["actor_state"]], actor_step.update,
                        t["actor"], actor_grads, t["actor_state"], actor_c)  # fmt: skip
            for targets, online in (("target_critic", "critic"), ("target_actor", "actor")):
                for target_param, param in zip(t[targets], t[online]):
                    # toward the critic and μ, unless the update was skipped
                    target_param.copy_(torch.where(ok, target_param.lerp(param, self._tau),
                                                   target_param))  # fmt: skip
            count = torch.ones((), device=critic_loss_value.device)
            sums = torch.stack([critic_loss_value, actor_loss_value, count])
            t["loss_sums"].add_(torch.where(ok, sums, torch.zeros_like(sums)))
            t["applied"].copy_(torch.stack([critic_ok, ok]).to(t["applied"].dtype))

    def _q_value(self, critic: list[Tensor], obs: Tensor, actions: Tensor) -> Tensor:
        params = dict(zip(self._critic_names, critic))
        return functional_call(self._agent.critic, params, (obs, actions))

    def _action(self, actor: list[Tensor], buffers: dict[str, Tensor], obs: Tensor) -> Tensor:
        params = {**dict(zip(self._actor_names, actor)), **buffers}
        return functional_call(self._agent.actor, params, (obs,))


def _applied_if(ok: Tensor, mutated: list, update: Callable[..., None], *args: object) -> None:
    """Run the in-place ``update(*args)``, then put back every tensor in ``mutated`` (lists
    and dicts of lists of tensors) where ``ok`` is false: inside the graph, a skipped step
    is a select, with no host decision."""
    tensors = pytree.tree_leaves(mutated)
    before = [x.clone() for x in tensors]
    update(*args)
    for x, old in zip(tensors, before):
        x.copy_(torch.where(ok, x, old))


def _names(module: torch.nn.Module, params: list[Tensor]) -> list[str]:
    """The module's names of ``params``, in the order given."""
    by_id = {id(p): name for name, p in module.named_parameters()}
    return [by_id[id(p)] for p in params]


def _skip_unused_columns(graph: fx.GraphModule) -> None:
    """Compute only the columns of a matrix product that are used.

    In the actor step, the gradient reaches the action through the critic's joint layer
    as ∂Q/∂[h, a] = δ·W, of which only the action's columns are kept: the hidden
    columns (h does not depend on the actor) would cost a 64×300×400 product, about a
    tenth of the update. Autograd computes them anyway and slices; here ``mm(x, W)``
    whose only use is a column slice becomes ``mm(x, W[:, slice])``, the same dot products.
    """
    aten = torch.ops.aten
    for node in list(graph.graph.nodes):
        if node.target != aten.mm.default:
            continue
        for use in list(node.users):  # slices nobody reads (the DCE keeps views)
            if use.target == aten.slice.Tensor and not use.users:
                graph.graph.erase_node(use)
        if len(node.users) != 1:
            continue
        (use,) = node.users
        if use.target != aten.slice.Tensor or len(use.args) < 4 or use.args[1] not in (1, -1):
            continue
        if len(use.args) > 4 and use.args[4] != 1:
            continue
        left, right = node.args
        start, end = use.args[2], use.args[3]
        with graph.graph.inserting_before(use):
            columns = graph.graph.call_function(aten.slice.Tensor, (right, 1, start, end))
            product = graph.graph.call_function(aten.mm.default, (left, columns))
        use.replace_all_uses_with(product)
        graph.graph.erase_node(use)
        graph.graph.erase_node(node)
    graph.graph.lint()
    graph.recompile()
