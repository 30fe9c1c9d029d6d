"""Optimizer steps written out for tracing into one compiled training graph.

Why this exists: the native agent's compiled update (``DDPGSettings.compile``) traces a
whole DDPG update — forward and backward passes, both optimizer steps, the target
update — into one graph that TorchInductor compiles, which removes the per-op overhead
that dominates an eager update of small networks. A traced graph sees only the tensors
passed in and bakes every Python number into its code, while ``Optimizer.step`` reads
its state from dicts and computes step-dependent numbers (bias corrections) in Python.
A :class:`TraceableStep` makes both explicit:

* ``state`` — the optimizer's own state tensors by name, aligned with ``params``. The
  graph updates them in place, so eager and compiled steps can alternate and
  ``state_dict()`` is the same either way;
* ``coefficients(t)`` — every number step t needs (learning rate, bias corrections,
  ...) as a NamedTuple: of floats for an int t (an eager step), of floats and 0-d tensors
  for a float64 tensor t — the step count a compiled graph keeps on the device, from which
  it computes the step-dependent numbers itself (nothing is read back or sent per step);
  :meth:`TraceableStep.advance` moves the optimizer's step counts (``step_states``) on,
  as ``step()`` would;
* ``update(params, grads, state, c)`` — the step, in place;
* ``training_point(params, state, c)`` — where the gradient for the step is taken:
  θ = μ + σ⊙ε for the variational strategies, μ for the others (as
  :meth:`WeightSampling.training_params`);
* ``names`` — the parameters' names, by which a graph calls the network.

``update`` is the very rule ``step()`` runs (``WeightSampling._update``), in its
``traced`` mode: plain tensor ops on the graph's tensors, where ``step()`` runs torch's
foreach and fused kernels on floats. Tests hold the two equal over several steps for
every strategy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

#: How a rule runs, chosen by its caller: ``eager`` — the step's numbers are Python floats
#: and the rule runs torch's foreach and fused kernels (``step()``); ``traced`` — the
#: numbers are tensors and the rule runs plain tensor ops, which a compiled graph traces
#: (``traceable_step()``) and which broadcast over a leading member dimension.
Mode = Literal["eager", "traced"]

#: Numbers of one step: a NamedTuple of floats, of 0-d tensors inside the graph.
Coefficients = tuple
#: State tensors by name, each list aligned with the parameters.
StateTensors = dict[str, list[Tensor]]


class UntraceableOptimizerError(TypeError):
    """The optimizer's step cannot be traced into a compiled graph."""


@dataclass(frozen=True)
class TraceableStep:
    """One optimizer's step over explicit tensors (see the module docstring)."""

    params: list[Tensor]
    state: StateTensors
    #: The per-parameter state dicts holding a ``step`` count (none for SGD).
    step_states: list[dict]
    coefficients: Callable[[int | Tensor], Coefficients]
    update: Callable[[list[Tensor], list[Tensor], StateTensors, Coefficients], None]
    training_point: Callable[[list[Tensor], StateTensors, Coefficients], list[Tensor]]
    #: The parameters' names (``param_groups``' ``param_names``), aligned with ``params``;
    #: None for an optimizer built from unnamed parameters.
    names: list[str] | None

    def next_step(self) -> int:
        """The number t of the coming step (1 for the first).

        In a compiled update every parameter is stepped every time, so the counts never
        part; counts that already differ (a parameter skipped eagerly) cannot be traced.
        """
        counts = {int(state["step"]) for state in self.step_states}
        if len(counts) > 1:
            raise UntraceableOptimizerError(
                f"parameters are at different step counts {sorted(counts)}; a compiled "
                "update steps all parameters together"
            )
        return counts.pop() + 1 if counts else 1

    def advance(self) -> None:
        """Count one step, as the optimizer's ``step()`` does."""
        for state in self.step_states:
            state["step"] += 1


def lerp_(start: Tensor, end: Tensor, weight: Tensor) -> Tensor:
    """``start.lerp_(end, weight)`` in ops that broadcast and batch: torch's formula for
    weights below ½, start + w·(end − start) (a vmapped ``lerp_`` with a tensor weight has
    no batching rule and would loop over the members)."""
    return start.add_(weight * (end - start))


def step_sqrt(value: float | Tensor) -> float | Tensor:
    """√value of a number that depends on the step count: ``math.sqrt`` of a float (an eager
    step, exactly as before), ``torch.sqrt`` of a tensor (the count a compiled graph keeps
    on the device: ``coefficients`` called with a float64 tensor step)."""
    return math.sqrt(value) if isinstance(value, float) else torch.sqrt(value)


def at_mean(params: list[Tensor], state: StateTensors, c: Coefficients) -> list[Tensor]:
    """The training point of strategies trained at μ (plain, parameter noise)."""
    return params


class _JoinedGroups(Mapping):
    """Groups that share their settings, seen as one: every group's parameters, and the
    first group's settings read live (a learning rate changed later takes effect)."""

    def __init__(self, groups: list[dict]) -> None:
        self._groups = groups

    def __getitem__(self, key: str) -> object:
        if key in ("params", "param_names"):
            return [p for group in self._groups for p in group[key]]
        return self._groups[0][key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups[0])

    def __len__(self) -> int:
        return len(self._groups[0])


def single_group(optimizer: torch.optim.Optimizer) -> Mapping:
    """The optimizer's parameter group (a compiled graph serves one set of settings).

    Groups that differ only in whether their weights are perturbed (``perturb``) count as
    one: an unperturbed parameter's ε is zero, so the same traced arithmetic gives θ = μ.
    """
    groups = optimizer.param_groups
    if len(groups) == 1:
        return groups[0]

    def settings(group: dict) -> dict:
        return {k: v for k, v in group.items() if k not in ("params", "param_names", "perturb")}

    if any(settings(group) != settings(groups[0]) for group in groups[1:]):
        raise UntraceableOptimizerError(
            f"a compiled update needs one set of settings for all parameters; "
            f"{type(optimizer).__name__} has {len(groups)} parameter groups that differ"
        )
    return _JoinedGroups(groups)


def group_names(group: Mapping) -> list[str] | None:
    """The names of a parameter group's parameters, or None if it was built unnamed."""
    names = list(group.get("param_names", ()))
    return names if len(names) == len(group["params"]) else None
