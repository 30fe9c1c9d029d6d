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

The step's numbers (bias corrections, learning rates) are computed inside the graph from
the optimizers' step counts, which live on the run's device and which the graph moves on
by the steps it applied: no flag is read back and nothing is sent to the device per update
(on a GPU either would wait for the update to finish). The optimizers' settings enter the
graph as constants: a changed setting of one learner is seen at its next update, which
compiles the graph again; a population's members keep their settings while they train.

What stays eager: drawing the minibatch (the agent's generator), acting and the noise
draw. The result is the eager update's up to float rounding (different summation and
fusion order); tests compare them over several steps for every traceable strategy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

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

from .captured_call import CapturedCall
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
    """What the update graph reads and writes besides the minibatch: one learner's own
    tensors, or the tensors of a population's members stacked along a leading member
    dimension (each member's own tensors are views of them)."""

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
    #: The critic's and the actor's optimizers' per-parameter step counts, (parameters,)
    #: or (members, parameters), on the device (the optimizers' ``step`` states are views
    #: of them): what the graph computes its numbers from, and moves on by the steps applied.
    critic_counts: Tensor
    actor_counts: Tensor
    #: The updates skipped (the actor's step not applied), () or (members,).
    skipped: Tensor

    @classmethod
    def of(
        cls,
        learner: UpdateState,
        critic: TraceableStep,
        actor: TraceableStep,
        counts: tuple[Tensor, Tensor],
    ) -> GraphState:
        """One learner's own tensors (the steps' states are its optimizers'; ``counts``,
        the critic's and the actor's step counts, views of its stack's row)."""
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
            *counts,
            learner.skipped,
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
        counts: Callable[[], tuple[Tensor, Tensor]] | None = None,
    ) -> None:
        """``learner``: one learner with ``counts``, which gives its optimizers' step counts
        (the critic's, the actor's: views of its stack's row, :meth:`StackedState.counts_of`);
        or a population's members with ``stacked``, which gives their stacked
        :class:`GraphState` (again after a member's state was replaced)."""
        self._learners = [learner] if isinstance(learner, UpdateState) else list(learner)
        if (stacked is None) == (counts is None):
            raise TypeError("CompiledUpdate takes stacked members or one learner's counts")
        self._stacked, self._counts = stacked, counts
        self._population = stacked is not None
        self._compiled: Callable[..., object] | None = None
        #: Whether calls go through a :class:`CapturedCall` (:meth:`capture`), and it.
        self._captures = False
        self.captured: CapturedCall | None = None
        self.bind()

    def capture(self) -> None:
        """Replay the compiled update from a CUDA graph from the next calls on
        (:mod:`agents.ddpg.captured_call`; on the CPU its copies and the same call)."""
        self._captures = True

    def run_traced(self) -> None:
        """Run the traced graph op by op from the next call on (after Inductor failed, or
        for an update that is not to be compiled): it is traced again, not compiled."""
        self.backend = run_traced_graph
        self._compiled = self.captured = None

    def bind(self) -> None:
        """Collect the tensors the graph reads and updates, and the optimizers' settings.

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
                step.next_step()  # refuses counts that have parted
            self._steps.append(steps)
        first = self._steps[0]
        if self._stacked is None:
            self._state = GraphState.of(
                self._learners[0], first["critic"], first["actor"], self._counts()
            )
        else:
            self._state = self._stacked()
        self._bind_settings()
        self.captured = None  # its fixed tensors may have been replaced
        self._update_numbers = torch.tensor(
            [[learner.settings.gamma, learner.settings.tau] for learner in self._learners],
            dtype=torch.float32,
            device=self._state.skipped.device,
        )
        if not self._population:
            self._update_numbers = self._update_numbers[0]
        # The leaves the graph reads every call, flattened once; the minibatch is appended
        # per call.
        self._static_inputs = [*pytree.tree_leaves(self._state.leaves()), self._update_numbers]
        if self._population:
            self._static_inputs.append(self.member_settings)

    def _bind_settings(self) -> None:
        """The learners' distinct settings of each optimizer, which the graph holds as
        constants: the first learner of each, and each learner's (members, 2) index into
        them (a population's members mostly share them; their settings stay as they are
        while they train). One learner's settings are seen again before every update."""
        self._settings_firsts: dict[str, list[int]] = {}
        ids = []
        for name in ("critic", "actor"):
            numbers = _numbered([_settings_key(learner, name) for learner in self._learners])
            self._settings_firsts[name] = [numbers.index(k) for k in range(max(numbers) + 1)]
            ids.append(numbers)
        #: Each member's index of its critic's and its actor's settings, (members, 2).
        self.member_settings = torch.tensor(
            ids, dtype=torch.int64, device=self._state.skipped.device
        ).T.contiguous()
        self._settings_seen = self._settings_now()

    def _settings_now(self) -> list | None:
        """One learner's optimizers' groups as they are now (compared whole: their
        parameter lists are the same objects), None for a population."""
        if self._population:
            return None
        learner = self._learners[0]
        return [
            [dict(group) for group in learner.critic_optimizer.param_groups],
            [dict(group) for group in learner.actor_optimizer.param_groups],
        ]

    def traced_numbers(self, name: str, counts: Tensor, settings: Tensor | None) -> tuple:
        """The numbers of one learner's coming step of optimizer ``name``, as 0-d float32
        tensors, computed inside a graph (the update's, a population's acting) from its
        step counts ``counts`` (its parameters', equal) and, in a population, its row of
        the members' settings indices ``settings``.

        The step-dependent numbers (bias corrections) are computed in float64 from
        t = count + 1, the rest are the settings' floats, each rounded once to float32: the
        numbers the eager step computes in Python, rounded as they always were."""
        t = counts[0].double() + 1 if counts.shape[-1] else 1
        column = ("critic", "actor").index(name)
        rows = []
        for k in self._settings_firsts[name]:
            leaves, layout = pytree.tree_flatten(self._steps[k][name].coefficients(t))
            rows.append(
                [
                    x.to(torch.float32)
                    if isinstance(x, Tensor)
                    else counts.new_full((), x, dtype=torch.float32)
                    for x in leaves
                ]
            )
        if len(rows) == 1:
            leaves = rows[0]
        else:  # members of several settings: each takes its own
            leaves = [torch.stack(values)[settings[column]] for values in zip(*rows)]
        leaves = list(_computed_once(torch.stack(leaves)).unbind())
        return pytree.tree_unflatten(leaves, layout)  # every settings' numbers: one layout

    @torch.no_grad()
    def __call__(self, batch: Batch) -> None:
        """One update (of every member). The first call compiles; if that fails it raises
        :class:`CompilationError` having changed nothing."""
        if not self._population and self._settings_now() != self._settings_seen:
            self._bind_settings()  # a changed setting: its constants, compiled again
            self._compiled = self.captured = None
        inputs = [*self._static_inputs, *batch]
        if self._compiled is None:
            tree = {
                "state": self._state.leaves(),
                "update": self._update_numbers,
                **({"settings": self.member_settings} if self._population else {}),
                "batch": list(batch),
            }
            self._compile(inputs, tree)
        if self._captures:
            if self.captured is None:
                self.captured = CapturedCall(self._compiled, self._static_inputs, batch)
            self.captured(batch)
            return
        self._compiled(*inputs)

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
        s = inputs["state"]
        member_settings = inputs.get("settings")
        critic_c = self.traced_numbers("critic", s["critic_counts"], member_settings)
        actor_c = self.traced_numbers("actor", s["actor_counts"], member_settings)
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
            (s["critic_counts"], s["actor_counts"], s["skipped"]),
            critic_sampled=first.thompson is not None,
        )
        gamma, tau = inputs["update"].unbind()
        settings = dataclasses.replace(first.settings, gamma=gamma, tau=tau)
        ddpg_update(tensors, inputs["batch"], settings, run)
        return ()


class TracedExecution:
    """:func:`ddpg_update` as a graph: functional networks, ``grad_and_value``, the
    optimizers' ``TraceableStep``s, and a skipped step as a select (no host decision),
    counted on the device: a step applied moves its optimizer's step counts on, an actor's
    step skipped counts a skipped update."""

    def __init__(
        self,
        critic: nn.Module,
        actor: nn.Module,
        critic_names: list[str],
        actor_names: list[str],
        actor_buffers: dict[str, Tensor],
        critic_step: tuple[TraceableStep, StateTensors, Coefficients],
        actor_step: tuple[TraceableStep, StateTensors, Coefficients],
        counts: tuple[Tensor, Tensor, Tensor],
        critic_sampled: bool = False,
    ) -> None:
        """``critic_sampled``: the critic's gradient is taken at its step's training point
        θ = μ + σ⊙ε (a sampled critic, :mod:`agents.ddpg.thompson`), else at μ."""
        self._critic, self._actor = critic, actor
        self._critic_sampled = critic_sampled
        self._critic_names, self._actor_names = critic_names, actor_names
        self._buffers = actor_buffers
        self._critic_step, self._actor_step = critic_step, actor_step
        self._critic_counts, self._actor_counts, self._skipped = counts

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
        self._step(self._critic_step, critic, grads, ok)
        with torch.no_grad():
            self._critic_counts.add_(ok.to(self._critic_counts.dtype))

    def step_actor(self, actor: list[Tensor], grads: list[Tensor], ok: Tensor) -> None:
        self._step(self._actor_step, actor, grads, ok)
        with torch.no_grad():
            self._actor_counts.add_(ok.to(self._actor_counts.dtype))
            self._skipped.add_((~ok).to(self._skipped.dtype))

    def _step(
        self,
        step_state_c: tuple[TraceableStep, StateTensors, Coefficients],
        params: list[Tensor],
        grads: list[Tensor],
        ok: Tensor,
    ) -> None:
        step, state, c = step_state_c
        with torch.no_grad():
            _applied_if(ok, [params, state], step.update, params, grads, state, c)

    def lerp_targets(
        self, targets: list[Tensor], online: list[Tensor], tau: float, ok: Tensor
    ) -> None:
        for target, param in zip(targets, online):
            moved = target + tau * (param - target)  # lerp's formula for τ < ½, batchable
            target.copy_(torch.where(ok, moved, target))

    def add_losses(self, sums: Tensor, values: Tensor, ok: Tensor) -> None:
        sums.add_(torch.where(ok, values, torch.zeros_like(values)))


#: Copies of each number :func:`_computed_once` reduces: more than Inductor unrolls into
#: pointwise code (``torch._inductor.config.unroll_reductions_threshold``, 8).
_REDUCED_COPIES = 16


def _computed_once(numbers: Tensor) -> Tensor:
    """``numbers`` as they are (the max of identical copies is each number exactly), through
    a reduction, which Inductor computes into a buffer of its own.

    Why: Inductor inlines a cheap pointwise result into every kernel that reads it, and the
    C++ compiler cannot hoist it out of the loop (the count it reads may alias the outputs):
    the bias corrections — float64 ``pow`` of the step count — were recomputed for every 16
    elements of every parameter and state they scale, 0.38 ms of a 3.2 ms update of
    HalfCheetah's 400-300 networks (``docs/speed.md``). Reduced, they are computed once an
    update and read from memory."""
    return numbers.unsqueeze(-1).expand(*numbers.shape, _REDUCED_COPIES).amax(-1)


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
