"""The whole DDPG update as one compiled graph (``DDPGSettings.compile``, ``--compile``).

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

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, fx, nn
from torch._guards import TracingContext, tracing
from torch._inductor.exc import InductorError
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call, functionalize, grad_and_value, vmap
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

import param_explore
from param_explore.adam_rule import adam_traceable_step
from param_explore.traceable import (
    Coefficients,
    StateTensors,
    TraceableStep,
    UntraceableOptimizerError,
)

from .compile_cache import kernel_cache_dir
from .replay_buffer import Batch
from .update import LossOf, UpdateState, UpdateTensors, ddpg_update


def inductor_compile(graph: fx.GraphModule, inputs: list[Tensor]) -> Callable[..., object]:
    """TorchInductor on the traced update, through its FX graph cache.

    Why the tracing context: Inductor keys a graph in its cache only under a
    ``TracingContext`` whose fake mode has a ``ShapeEnv``. TorchDynamo provides one; a
    graph traced by ``make_fx`` has none, so without it every compile bypasses the cache
    and lowers and builds the graph again. Every shape here is static, so an empty
    ``ShapeEnv`` adds no guard. With it, compiling the same update again — a resumed run,
    the next seed of a grid, in this process or a later one — loads the same compiled code
    from the cache; tracing still runs (``docs/speed.md``: a warm start of the paper's
    networks ~3 s instead of ~6 s).

    The cache is the one of this process's kernel set (:mod:`.compile_cache`): a graph
    compiled for other CPU instructions is never loaded.
    """
    # Imported here: it brings in SymPy, a second of every process's start that only a
    # compiling run needs.
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    def compiled() -> Callable[..., object]:
        with kernel_cache_dir(), tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
            return torch._inductor.compile(graph, inputs)

    try:
        return compiled()
    except InductorError as err:
        if "KeyError" not in str(err):
            raise
        with _without_outer_loop_fusion():
            return compiled()


@contextmanager
def _without_outer_loop_fusion() -> Iterator[None]:
    """Inductor's C++ code generation with its outer-loop fusion off, for the block.

    Why: measured with torch 2.13 on this CPU, the population graph of a critic sampled by
    IVON with LayerNorm (the sparse tasks' settings, vmapped over two or more members) fails
    in that fusion's contiguity check (``try_outer_loop_fusion_with_local_buf``: ``KeyError:
    'buf97'``), and would otherwise run op by op, 10× slower. The same graph compiles and
    trains without that one fusion (Langevin, IVON without LayerNorm and one member compile
    with it); torch has no setting for it, so its scheduler's predicate is replaced for the
    retry alone, and restored."""
    from torch._inductor.codegen.cpp import CppScheduling

    original = CppScheduling.can_fuse_vertical_outer_loop
    CppScheduling.can_fuse_vertical_outer_loop = lambda self, node1, node2: False
    try:
        yield
    finally:
        CppScheduling.can_fuse_vertical_outer_loop = original


def run_traced_graph(graph: fx.GraphModule, inputs: list[Tensor]) -> fx.GraphModule:
    """The traced update graph as it is, op by op: a backend that compiles nothing."""
    return graph


def critic_traceable_step(optimizer: torch.optim.Optimizer) -> param_explore.TraceableStep:
    """The critic optimizer's step in its traced form (its state, for stacking): torch's
    Adam's, or a sampled critic's own."""
    if isinstance(optimizer, param_explore.WeightSampling):
        return optimizer.traceable_step()
    return adam_traceable_step(optimizer)


def _settings_key(learner: UpdateState, name: str) -> tuple:
    """An optimizer's settings as a hashable value (its groups' but their parameters)."""
    optimizer = learner.critic_optimizer if name == "critic" else learner.actor_optimizer
    return tuple(
        tuple(sorted((k, repr(v)) for k, v in group.items() if k not in ("params", "param_names")))
        for group in optimizer.param_groups
    )


def _numbered(values: list[tuple]) -> list[int]:
    """Each value as the index of its first occurrence's order among the distinct ones."""
    numbers: dict[tuple, int] = {}
    return [numbers.setdefault(value, len(numbers)) for value in values]


class CompilationError(RuntimeError):
    """Tracing or compiling the update failed (nothing was changed)."""


@dataclass
class GraphState:
    """What the update graph reads and writes besides the minibatch and the step's numbers:
    one learner's own tensors, or the tensors of a population's members stacked along a
    leading member dimension (each member's own tensors are views of them)."""

    critic: list[Tensor]
    actor: list[Tensor]
    target_critic: list[Tensor]
    target_actor: list[Tensor]
    loss_sums: Tensor
    #: The observations' running mean and std (``normalize_observations``: read, never
    #: written; updated in place between calls), or none.
    obs_moments: list[Tensor]
    critic_state: StateTensors
    actor_state: StateTensors
    actor_buffers: dict[str, Tensor]
    #: Set by the graph: whether the critic's and the actor's steps were applied (both are
    #: skipped for a non-finite loss or gradient), (2,) or (members, 2).
    applied: Tensor

    @classmethod
    def of(cls, learner: UpdateState, critic: TraceableStep, actor: TraceableStep) -> GraphState:
        """One learner's own tensors (the steps' states are its optimizers')."""
        t = learner.tensors()
        return cls(
            [p.detach() for p in t.critic],
            [p.detach() for p in t.actor],
            [p.detach() for p in t.target_critic],
            [p.detach() for p in t.target_actor],
            t.loss_sums,
            [] if t.obs_mean is None else [t.obs_mean, t.obs_std],
            critic.state,
            actor.state,
            {n: b.detach() for n, b in learner.actor.named_buffers()},
            torch.ones(2, device=t.loss_sums.device),
        )

    def leaves(self) -> dict:
        """The tensors by field (themselves, not copies: the graph updates them in place)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class CompiledUpdate:
    """:func:`agents.ddpg.update.ddpg_update` on an :class:`UpdateState`, compiled; call with a
    minibatch. With several learners — a population's members, whose tensors are views of
    a :class:`GraphState` stacked along a leading member dimension — it is the same traced
    function vmapped over that dimension: one graph for every member, each member with its
    own step numbers (its settings, its step counts), minibatch and skips.

    Raises ``param_explore.traceable.UntraceableOptimizerError`` when the actor's
    strategy has no traced form, or the actor trains against a sampled critic's held
    sample (``actor_critic: sample``): the agent then trains eagerly.
    """

    #: Turns the traced, functionalised update and its example inputs into the function
    #: called every step: TorchInductor (:func:`inductor_compile`). The traced graph is
    #: itself callable, so ``lambda graph, inputs: graph`` runs the trace op by op — how
    #: the tests check every strategy's trace apart from Inductor's code generation, whose
    #: build takes ~20 s per strategy on a cold cache.
    backend: Callable[[fx.GraphModule, list[Tensor]], Callable[..., object]] = staticmethod(
        inductor_compile
    )

    def __init__(
        self,
        learner: UpdateState | Sequence[UpdateState],
        stacked: Callable[[], GraphState] | None = None,
        applied: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        """``learner``: one learner; or a population's members with ``stacked``, which gives
        their stacked :class:`GraphState` (again after a member's state was replaced).
        ``applied``, told after every update which member's critic and actor steps were
        applied (a (members, 2) array), counts the steps and skips, all members at once (a
        learner's stacked state, :meth:`StackedState.count_applied`); without it, one
        learner's are counted here, parameter by parameter."""
        self._learners = [learner] if isinstance(learner, UpdateState) else list(learner)
        self._stacked = stacked
        self._population = stacked is not None
        self._on_applied = applied
        self._coefficient_layout: dict[str, pytree.TreeSpec] = {}
        #: whether each optimizer's numbers flatten by _tuple_leaves (pytree's order)
        self._tuple_flattens: dict[str, bool] = {}
        self._compiled: Callable[..., object] | None = None
        self.bind()

    def run_traced(self) -> None:
        """Run the traced graph op by op from the next call on (after Inductor failed, or
        for an update that is not to be compiled): it is traced again, not compiled."""
        self.backend = run_traced_graph
        self._compiled = None

    def coefficient_layout(self, name: str) -> pytree.TreeSpec:
        """How optimizer ``name``'s numbers are packed in :meth:`coefficients`' rows."""
        return self._coefficient_layout[name]

    def bind(self) -> None:
        """Collect the tensors the graph reads and updates, and the step numbers.

        Call again whenever the optimizers' state may have been replaced or stepped
        outside this graph (``DDPG.load_state_dict`` does)."""
        self._steps = []
        for learner in self._learners:
            if learner.thompson is not None and learner.thompson.actor_follows_sample:
                raise UntraceableOptimizerError(
                    "an actor trained against the critic's held sample (actor_critic: "
                    "sample) has no traced update"
                )
            steps = {
                "critic": critic_traceable_step(learner.critic_optimizer),
                "actor": learner.actor_optimizer.traceable_step(),
            }
            for step in steps.values():
                if step.names is None:  # the graph calls the networks by parameter name
                    raise UntraceableOptimizerError(
                        "a compiled update needs optimizers built from named parameters"
                    )
            self._steps.append(steps)
        # Step numbers are read from the optimizers' state once and then counted here:
        # reading a step tensor on a GPU every update would synchronise with it.
        self._next_steps = np.array(
            [[steps["critic"].next_step(), steps["actor"].next_step()] for steps in self._steps]
        )
        # The numbers of a step depend on an optimizer's settings and the step's count only:
        # a population computes them once per distinct pair at each step (its members mostly
        # share both; their settings are fixed while they train). One learner computes them
        # every step, so that a learning rate changed meanwhile takes effect.
        #: Each learner's settings of each optimizer as a number (equal settings, equal
        #: numbers): what, with its step count, decides its coefficients.
        self._settings_ids = {
            name: np.array(
                _numbered([_settings_key(learner, name) for learner in self._learners]),
                dtype=np.int64,
            )
            for name in ("critic", "actor")
        }
        #: The last packed numbers of each optimizer, with the step counts they are of.
        self._packed_numbers: dict[str, tuple[bytes, Tensor]] = {}
        first = self._steps[0]
        if self._stacked is None:
            self._state = GraphState.of(self._learners[0], first["critic"], first["actor"])
        else:
            self._state = self._stacked()
        self._update_numbers = self._packed(
            [[learner.settings.gamma, learner.settings.tau] for learner in self._learners]
        )
        # The leaves the graph reads every call, flattened once; the minibatch and the
        # step's numbers are appended per call.
        self._static_inputs = pytree.tree_leaves(self._state.leaves())

    def coefficients(self, name: str) -> Tensor:
        """The numbers of every learner's coming step of optimizer ``name`` in one tensor,
        (k,) or (members, k) (their layout remembered): what the update reads, and a
        population's acting (θ from σ) too."""
        column = ("critic", "actor").index(name)
        steps = self._next_steps[:, column]
        counts = steps.tobytes()
        last = self._packed_numbers.get(name)
        if self._population and last is not None and last[0] == counts:
            return last[1]  # acting and the update read the same step's numbers
        if not self._population:
            packed = self._packed([self._numbers(0, name, int(steps[0]))])
            self._packed_numbers[name] = (counts, packed)
            return packed
        # Computed once per distinct (settings, step count) of this step, in one host loop
        # over those (one, as a rule), not over the members.
        pairs = np.stack([self._settings_ids[name], steps], axis=1)
        _, firsts, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        table = self._packed([self._numbers(k, name, int(steps[k])) for k in firsts])
        if len(firsts) == 1:
            packed = table.expand(len(steps), -1).contiguous()
        else:
            packed = table[torch.as_tensor(inverse.reshape(-1), device=table.device)]
        self._packed_numbers[name] = (counts, packed)
        return packed

    def _numbers(self, k: int, name: str, step: int) -> list[float]:
        """Learner ``k``'s numbers of step ``step`` of optimizer ``name``, flat: by
        :func:`_tuple_leaves` once the layout is known and it flattens as pytree does
        (checked on the first tree)."""
        tree = self._steps[k][name].coefficients(step)
        if self._tuple_flattens.get(name):
            return _tuple_leaves(tree)
        numbers, layout = pytree.tree_flatten(tree)
        if name not in self._coefficient_layout:  # the graph's, fixed
            self._coefficient_layout[name] = layout
            self._tuple_flattens[name] = isinstance(tree, tuple) and _tuple_leaves(tree) == numbers
        return numbers

    def _packed(self, rows: list[list[float]]) -> Tensor:
        """Rows of numbers as one float32 tensor on the device: (rows, k) for a
        population, the one row's (k,) for one learner."""
        packed = torch.tensor(rows, dtype=torch.float32, device=self._state.applied.device)
        return packed if self._population else packed[0]

    @torch.no_grad()
    def __call__(self, batch: Batch) -> None:
        """One update (of every member). The first call compiles; if that fails it raises
        :class:`CompilationError` having changed nothing."""
        coefficients = [self.coefficients("critic"), self.coefficients("actor")]
        coefficients.append(self._update_numbers)
        self._coefficient_layout.setdefault("update", None)
        inputs = [*self._static_inputs, *batch, *coefficients]
        if self._compiled is None:
            tree = {
                "state": self._state.leaves(),
                "batch": list(batch),
                "coefficients": coefficients,
            }
            self._compile(inputs, tree)
        self._compiled(*inputs)
        # A skipped step changed no tensor, so its step count stays too. Reading the flags
        # is free on a CPU (a sync on a GPU).
        applied = self._state.applied.reshape(-1, 2).cpu().numpy().astype(np.int64)
        self._next_steps += applied
        if self._on_applied is not None:
            self._on_applied(applied)
            return
        (critic_applied, actor_applied), learner = applied[0], self._learners[0]
        if not actor_applied:
            learner.skipped += 1
        for name, done in (("critic", critic_applied), ("actor", actor_applied)):
            if done:
                self._steps[0][name].advance()

    def _compile(self, inputs: list[Tensor], tree: dict) -> None:
        leaves, self._spec = pytree.tree_flatten(tree)
        assert all(a is b for a, b in zip(leaves, inputs, strict=True))
        function = vmap(self._traced) if self._population else self._traced
        try:
            update = functionalize(function, remove="mutations")
            traced = make_fx(update, tracing_mode="fake")(*inputs)
            _skip_unused_columns(traced)
            backend = vars(self).get("backend", type(self).backend)  # an instance's own first
            self._compiled = backend(traced, inputs)
        except Exception as err:  # a missing C++ compiler, an unsupported op, ...
            raise CompilationError(f"{type(err).__name__}: {str(err).strip()[:500]}") from err

    def _traced(self, *flat: Tensor) -> tuple[()]:
        """:func:`ddpg_update` on one learner's graph inputs (traced once, with fake tensors;
        vmapped over a population's members)."""
        inputs = pytree.tree_unflatten(list(flat), self._spec)
        critic_c, actor_c, update_c = (
            pytree.tree_unflatten(list(packed.unbind()), self._coefficient_layout[name])
            if self._coefficient_layout[name] is not None
            else packed.unbind()
            for name, packed in zip(("critic", "actor", "update"), inputs["coefficients"])
        )
        s = inputs["state"]
        first, steps = self._learners[0], self._steps[0]
        tensors = UpdateTensors(
            s["critic"], s["actor"], s["target_critic"], s["target_actor"], s["loss_sums"],
            *s["obs_moments"],
        )  # fmt: skip
        run = TracedExecution(
            first.critic,
            first.actor,
            steps["critic"].names,
            steps["actor"].names,
            s["actor_buffers"],
            (steps["critic"], s["critic_state"], critic_c),
            (steps["actor"], s["actor_state"], actor_c),
            s["applied"],
            critic_sampled=first.thompson is not None,
        )
        gamma, tau = update_c
        settings = dataclasses.replace(first.settings, gamma=gamma, tau=tau)
        ddpg_update(tensors, inputs["batch"], settings, run)
        return ()


class TracedExecution:
    """:func:`ddpg_update` as a graph: functional networks, ``grad_and_value``, the
    optimizers' ``TraceableStep``s, and a skipped step as a select (no host decision)."""

    def __init__(
        self,
        critic: nn.Module,
        actor: nn.Module,
        critic_names: list[str],
        actor_names: list[str],
        actor_buffers: dict[str, Tensor],
        critic_step: tuple[TraceableStep, StateTensors, Coefficients],
        actor_step: tuple[TraceableStep, StateTensors, Coefficients],
        applied: Tensor,
        critic_sampled: bool = False,
    ) -> None:
        """``critic_sampled``: the critic's gradient is taken at its step's training point
        θ = μ + σ⊙ε (a sampled critic, :mod:`agents.ddpg.thompson`), else at μ."""
        self._critic, self._actor = critic, actor
        self._critic_sampled = critic_sampled
        self._critic_names, self._actor_names = critic_names, actor_names
        self._buffers = actor_buffers
        self._critic_step, self._actor_step = critic_step, actor_step
        self._applied = applied

    def q_value(self, critic: list[Tensor], obs: Tensor, actions: Tensor) -> Tensor:
        return functional_call(self._critic, dict(zip(self._critic_names, critic)), (obs, actions))

    def action(self, actor: list[Tensor], obs: Tensor) -> Tensor:
        params = {**dict(zip(self._actor_names, actor)), **self._buffers}
        return functional_call(self._actor, params, (obs,))

    target_action = action

    def loss_and_grads(self, loss_of: LossOf, at: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        grads, loss = grad_and_value(loss_of)(at)
        return loss, grads

    def critic_point(self, critic: list[Tensor]) -> list[Tensor]:
        if not self._critic_sampled:
            return critic
        step, state, c = self._critic_step
        with torch.no_grad():
            return step.training_point(critic, state, c)

    def actor_critic(self, critic: list[Tensor]) -> list[Tensor]:
        return critic

    def actor_point(self, actor: list[Tensor]) -> list[Tensor]:
        step, state, c = self._actor_step
        with torch.no_grad():
            return step.training_point(actor, state, c)

    def step_critic(self, critic: list[Tensor], grads: list[Tensor], ok: Tensor) -> None:
        self._step(self._critic_step, critic, grads, ok, 0)

    def step_actor(self, actor: list[Tensor], grads: list[Tensor], ok: Tensor) -> None:
        self._step(self._actor_step, actor, grads, ok, 1)

    def _step(
        self,
        step_state_c: tuple[TraceableStep, StateTensors, Coefficients],
        params: list[Tensor],
        grads: list[Tensor],
        ok: Tensor,
        slot: int,
    ) -> None:
        step, state, c = step_state_c
        with torch.no_grad():
            _applied_if(ok, [params, state], step.update, params, grads, state, c)
            self._applied[slot].copy_(ok)

    def lerp_targets(
        self, targets: list[Tensor], online: list[Tensor], tau: float, ok: Tensor
    ) -> None:
        for target, param in zip(targets, online):
            moved = target + tau * (param - target)  # lerp's formula for τ < ½, batchable
            target.copy_(torch.where(ok, moved, target))

    def add_losses(self, sums: Tensor, values: Tensor, ok: Tensor) -> None:
        sums.add_(torch.where(ok, values, torch.zeros_like(values)))


def _applied_if(ok: Tensor, mutated: list, update: Callable[..., None], *args: object) -> None:
    """Run the in-place ``update(*args)``, then put back every tensor in ``mutated`` (lists
    and dicts of lists of tensors) where ``ok`` is false: inside the graph, a skipped step
    is a select, with no host decision."""
    tensors = pytree.tree_leaves(mutated)
    before = [x.clone() for x in tensors]
    update(*args)
    for x, old in zip(tensors, before):
        x.copy_(torch.where(ok, x, old))


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


def _tuple_leaves(tree: tuple) -> list[float]:
    """The numbers of a tree of (named) tuples, depth first in field order — pytree's
    leaves of it — in a Python call per tuple: a single run flattens two such trees an
    update, and pytree's flatten took ~80 calls a tree (three fifths of the Python calls of
    a sparse single run's update, docs/speed.md)."""
    leaves: list[float] = []
    for value in tree:
        if isinstance(value, tuple):
            leaves.extend(_tuple_leaves(value))
        else:
            leaves.append(value)
    return leaves
