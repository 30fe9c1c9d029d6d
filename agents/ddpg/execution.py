"""How an update, and a population's acting, run — compiled, traced or eager: decided here
once, for a single run and a population.

Why one place: the choice depends on the settings (``compile``), on the strategy (does it
have a traced form?), on whether the learner is one or a population's stacked members, and
on whether TorchInductor managed to compile; each engine deciding it had grown its own
fallbacks and messages. The rule (:func:`update_execution`):

* a strategy without a traced form (noisy K-FAC): eager — a single run's
  :class:`~agents.ddpg.update.EagerUpdate`, a population's members one by one;
* ``compile=True``: the traced update compiled by TorchInductor at the first call
  (:class:`~agents.ddpg.compiled_update.CompiledUpdate`); if compiling fails, one warning,
  and the run goes on as ``compile=False`` would;
* ``compile=False``: a single run eager; a population the traced graph run op by op (one
  vmapped graph for every member beats N eager updates).

A population whose update is a graph acts through one batched graph of every member's θ
(compiled when the update is) when its strategy acts at its training point
(:func:`acting_batched`); otherwise each member acts.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable

from param_explore import UntraceableOptimizerError

from .compiled_update import CompilationError, CompiledUpdate
from .replay_buffer import Batch


class Execution(enum.Enum):
    """How an update runs."""

    #: One graph, compiled by TorchInductor.
    COMPILED = "compiled"
    #: The same graph, run op by op (traced, not compiled).
    TRACED = "traced"
    #: The update's own eager code (a population's: each member's).
    EAGER = "eager"


def update_execution(compile: bool, stacked: bool, traceable: bool = True) -> Execution:
    """How the update of a single run (``stacked`` False) or of a population's stacked
    members runs, given the ``compile`` setting and whether the strategy has a traced form
    (module docstring)."""
    if not traceable:
        return Execution.EAGER
    if compile:
        return Execution.COMPILED
    return Execution.TRACED if stacked else Execution.EAGER


def acting_batched(explores: bool, gradient_at_sample: bool) -> bool:
    """Whether a population whose update is a graph acts through one batched graph of every
    member's θ (compiled when the update is): when its strategy acts at its training point
    (θ = μ + σ⊙ε where its gradient is taken, or μ without weight noise)."""
    return gradient_at_sample or not explores


class ChosenUpdate:
    """An update run as :func:`update_execution` decides, the graph built at the first
    call (the strategy's state, ε included, exists by then): call it with a minibatch.

    ``build`` makes the graph (None, or ``UntraceableOptimizerError``, for a strategy
    without a traced form); ``eager`` is the update's eager form. A single run asked to
    compile a strategy without a traced form says so once; a compile that fails says so
    once and goes on as ``compile=False`` would.
    """

    def __init__(
        self,
        compile: bool,
        stacked: bool,
        build: Callable[[], CompiledUpdate | None],
        eager: Callable[[Batch], None],
    ) -> None:
        self._compile, self._stacked = compile, stacked
        self._build, self._eager = build, eager
        self._graph: CompiledUpdate | None = None
        self._pending = True

    @property
    def graph(self) -> CompiledUpdate | None:
        """The update's graph once built (None before, or when it runs eagerly)."""
        return self._graph

    def built(self) -> CompiledUpdate | None:
        """The update's graph, built now if it is due and not built yet."""
        if not self._pending:
            return self._graph
        self._pending = False
        execution = update_execution(self._compile, self._stacked)
        if execution is Execution.EAGER:
            return None
        try:
            graph = self._build()
        except UntraceableOptimizerError as err:
            if self._compile and not self._stacked:
                warnings.warn(f"compile: {err}; training eagerly", stacklevel=4)
            graph = None
        if graph is not None and execution is Execution.TRACED:
            graph.run_traced()
        self._graph = graph
        return graph

    def __call__(self, batch: Batch) -> Execution:
        """One update on ``batch``; how it ran."""
        graph = self.built()
        if graph is None:
            self._eager(batch)
            return Execution.EAGER
        try:
            graph(batch)
        except CompilationError as err:  # only the first call compiles
            fallback = update_execution(False, self._stacked)
            who = "the population " if self._stacked else ""
            warnings.warn(f"compile failed, training {who}eagerly: {err}", stacklevel=3)
            if fallback is Execution.EAGER:
                self._graph = None
                self._eager(batch)
                return Execution.EAGER
            graph.run_traced()
            graph(batch)
            return Execution.TRACED
        return Execution.COMPILED if self._compile else Execution.TRACED
