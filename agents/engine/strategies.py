"""Exploration strategies by name: the ``param_explore`` optimizers plus action noise.

A strategy says how the actor explores and how it is trained. Most are an optimizer of
``param_explore`` (weight-space exploration, trained by that optimizer). The two
action-noise baselines train the actor exactly as ``adam-plain`` and add noise to its
actions instead:

* ``gaussian-action``: N(0, 0.1²) per dimension and step;
* ``ou-action``: Lillicrap et al.'s Ornstein-Uhlenbeck process (θ = 0.15, σ = 0.2).

Their noise settings are the strategy's ``action_noise`` config; ``optimizer_kwargs``
remain Adam's.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from stable_baselines3.common.noise import ActionNoise

import param_explore

from .action_noise import GaussianActionNoise, OrnsteinUhlenbeckActionNoise

#: Action-noise baselines and their noise process; their actor optimizer is ``adam-plain``.
ACTION_NOISE: dict[str, type[ActionNoise]] = {
    "gaussian-action": GaussianActionNoise,
    "ou-action": OrnsteinUhlenbeckActionNoise,
}
ACTION_NOISE_OPTIMIZER = "adam-plain"


def available_strategies() -> list[str]:
    """Every strategy ``--opt`` accepts: the optimizers, then the action-noise baselines."""
    return [*param_explore.available_optimizers(), *ACTION_NOISE]


def strategy_optimizer(name: str) -> str:
    """The ``param_explore`` optimizer that trains the actor under strategy ``name``."""
    if name in ACTION_NOISE:
        return ACTION_NOISE_OPTIMIZER
    if name not in param_explore.OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {name!r}; choose one of: {', '.join(available_strategies())}"
        )
    return name


def action_noise_parameters(name: str) -> dict[str, Any]:
    """The noise settings of strategy ``name`` with their defaults ({} without action noise)."""
    strategy_optimizer(name)
    if name not in ACTION_NOISE:
        return {}
    _, _, *tunable = inspect.signature(ACTION_NOISE[name].__init__).parameters.values()
    return {p.name: p.default for p in tunable if p.name != "generator"}


def make_action_noise(
    name: str,
    action_dim: int,
    overrides: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
) -> ActionNoise | None:
    """The action-noise process of strategy ``name`` (None for weight-space strategies)."""
    overrides = dict(overrides or {})
    valid = action_noise_parameters(name)
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        what = f"valid: {', '.join(valid)}" if valid else "it adds no action noise"
        raise ValueError(
            f"unknown action_noise setting(s) {', '.join(unknown)} for {name!r}; {what}"
        )
    if name not in ACTION_NOISE:
        return None
    return ACTION_NOISE[name](action_dim, generator=generator, **overrides)
