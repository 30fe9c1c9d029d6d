"""Every member's action as one graph vmapped over the members: at its training point
(:class:`BatchedActing`), moved along a sampled critic's held sample (:class:`BatchedMove`).

Why: a population acts every step. Each member's own ``act`` would be N small forward
passes (and N Python calls) a step; one graph of every member's weights stacked is one
batched matrix product per layer, compiled as the members' update is (traced op by op
otherwise), and replayable from a CUDA graph (:mod:`agents.ddpg.captured_call`). The engine
(:mod:`agents.ddpg.engine`) builds them where its members act at their training point and
their update is a graph; :func:`batched_graph` is also how it builds the members' mean
actions for their test episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.func import functional_call, vmap
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from .captured_call import CapturedCall
from .compiled_update import CompiledUpdate, inductor_compile
from .observations import normalized_observations
from .stacked_state import StackedState
from .thompson import count_moves, moved_units


class BatchedActing:
    """Every member's policy action at its sample θ = μ + σ⊙ε (its training point), as one
    graph vmapped over the members, compiled with ``compile`` (else run op by op, as the
    population's traced update): σ from the strategy's one formula."""

    def __init__(
        self, first: Any, stacked: StackedState, update: CompiledUpdate, compile: bool
    ) -> None:
        """``first``: a member (its actor and optimizer stand for all); ``stacked``: the
        members' state; ``update``: their compiled update, whose numbers it shares."""
        self._compile = compile
        self._step = first.actor_optimizer.traceable_step()
        self._actor = first.actor
        state = stacked.graph_state()
        self._update = update
        members = update.member_settings
        self._inputs = [*state.actor, *pytree.tree_leaves(state.actor_state), *state.obs_moments,
                        *state.actor_buffers.values(), state.actor_counts, members]  # fmt: skip
        self._spec = pytree.tree_structure(
            (state.actor, state.actor_state, state.obs_moments, state.actor_buffers)
        )
        self._compiled: Callable[..., Tensor] | None = None
        #: Whether calls go through a :class:`CapturedCall` (:meth:`capture`), and it.
        self._captures = False
        self.captured: CapturedCall | None = None

    def capture(self) -> None:
        """Replay the acting from a CUDA graph from the next call on
        (:mod:`agents.ddpg.captured_call`: its observations copied in, its actions the
        capture's output; on the CPU the same copies and calls)."""
        self._captures = True

    def _act(self, *flat: Tensor) -> Tensor:
        *leaves, counts, members, obs = flat
        actor, state, moments, buffers = pytree.tree_unflatten(leaves, self._spec)
        if moments:  # the networks see normalised observations
            obs = normalized_observations(obs, *moments)
        # θ from σ of the coming step: its numbers from the members' counts, in the graph
        c = self._update.traced_numbers("actor", counts, members)
        with torch.no_grad():
            theta = self._step.training_point(actor, state, c)
            weights = {**dict(zip(self._step.names, theta, strict=True)), **buffers}
            return functional_call(self._actor, weights, (obs,))

    @torch.no_grad()
    def __call__(self, obs: Tensor) -> Tensor:
        inputs = [*self._inputs, obs]
        if self._compiled is None:
            self._compiled = batched_graph(self._act, inputs, compile=self._compile)
        if not self._captures:
            return graph_output(self._compiled(*inputs))
        if self.captured is None:
            self.captured = CapturedCall(self._compiled, self._inputs, [obs])
        return graph_output(self.captured([obs]))


class BatchedMove:
    """Every member's action moved along its held sample of a sampled critic
    (:func:`agents.ddpg.thompson.moved_units`), as one graph vmapped over the members,
    compiled with ``compile``; the moves counted in the stack's rows, on the device."""

    def __init__(self, first: Any, state: StackedState, compile: bool) -> None:
        """``first``: a member (its critic, actor and sampled critic stand for all);
        ``state``: the members' state (their held samples, moves)."""
        thompson = first.thompson
        self._critic, self._names, self._shift = first.critic, thompson.names, thompson.shift
        self._center, self._scale = first.actor.action_offset, first.actor.action_scale
        self._samples, self._moments, self._moves = (
            state.critic_samples,
            state.obs_moments,
            state.critic_moves,
        )
        self._compile = compile
        self._graph: Callable[..., object] | None = None

    def _move(self, *flat: Tensor) -> tuple[Tensor, Tensor]:
        count = len(self._names)
        weights = dict(zip(self._names, flat[:count], strict=True))
        *moments, obs, units, center, scale = flat[count:]
        if moments:  # the networks see normalised observations
            obs = normalized_observations(obs, *moments)

        def q_of(moved: Tensor) -> Tensor:
            return functional_call(self._critic, weights, (obs, center + scale * moved))

        return moved_units(q_of, units, self._shift)

    @torch.no_grad()
    def __call__(self, obs: Tensor, actions: Tensor) -> Tensor:
        """``actions`` (members, action dim) for the members' raw ``obs``, moved."""
        units = (actions - self._center) / self._scale
        members = len(actions)
        inputs = [*self._samples, *self._moments, obs, units,
                  self._center.expand(members, -1), self._scale.expand(members, -1)]  # fmt: skip
        if self._graph is None:
            self._graph = batched_graph(self._move, inputs, compile=self._compile)
        clipped, wanted = self._graph(*inputs)
        count_moves(self._moves, units, clipped, wanted)
        return self._center + self._scale * clipped


def batched_graph(
    function: Callable[..., Tensor], inputs: list[Tensor], compile: bool
) -> Callable[..., object]:
    """``function`` of one member vmapped over the members' leading dimension of
    ``inputs``, traced once into a graph of batched ops (no per-call vmap overhead), and
    compiled by TorchInductor if ``compile``."""
    graph = make_fx(vmap(function), tracing_mode="fake")(*inputs)
    return inductor_compile(graph, inputs) if compile else graph


def graph_output(result: object) -> Tensor:
    """A traced graph's one output (a compiled graph returns it in a list)."""
    return result[0] if isinstance(result, (list, tuple)) else result
