"""Exploration strategies by name: what ``--opt NAME`` means, translated once.

A strategy says how the actor explores and how it is trained. Most are an optimizer of
``param_explore`` (weight-space exploration, trained by that optimizer). The two
action-noise baselines train the actor exactly as ``adam-plain`` and add noise to its
actions instead:

* ``gaussian-action``: N(0, 0.1²) per dimension and step;
* ``ou-action``: Lillicrap et al.'s Ornstein-Uhlenbeck process (θ = 0.15, σ = 0.2).

:func:`resolve_strategy` is the one place a strategy's name is translated: into a
:class:`Strategy`, a record holding its ``param_explore`` optimizer (the class, looked up
once; learners build it with ``make_optimizer(strategy.optimizer_class, …)``) with complete,
checked settings, its action noise (if any) with complete, checked settings, and the choices the
strategy makes where a run does not (a layer-normalised actor, when new weight noise is
drawn). Nothing is built to check a setting: each optimizer and noise checks its own
settings before it exists (``checked_settings``). Every learner — the native DDPG, SB3's
policy — receives the resolved :class:`Strategy` and builds from it.

**Adding a strategy.** An optimizer registered in ``param_explore.OPTIMIZERS`` is a
strategy of the same name; an action-noise baseline is one entry of :data:`ACTION_NOISE`.
Either needs its preset, ``configs/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import param_explore

from .action_noise import CheckedActionNoise, GaussianActionNoise, OrnsteinUhlenbeckActionNoise
from .checks import require, require_known
from .errors import ConfigError

#: Action-noise baselines and their noise process; their actor optimizer is ``adam-plain``.
ACTION_NOISE: dict[str, type[CheckedActionNoise]] = {
    "gaussian-action": GaussianActionNoise,
    "ou-action": OrnsteinUhlenbeckActionNoise,
}
ACTION_NOISE_OPTIMIZER = "adam-plain"

Resample = Literal["step", "episode"]


def available_strategies() -> list[str]:
    """Every strategy ``--opt`` accepts: the optimizers, then the action-noise baselines."""
    return [*param_explore.available_optimizers(), *ACTION_NOISE]


@dataclass(frozen=True)
class Strategy:
    """A strategy, resolved: everything a learner needs to explore and train its actor."""

    #: The name (``--opt``; the run directory's).
    name: str
    #: The ``param_explore`` optimizer that trains the actor (and perturbs its weights), by
    #: its registered name (what a saved SB3 model and a population compare) and as the class
    #: that name was resolved to.
    optimizer: str
    optimizer_class: type[param_explore.WeightSampling]
    #: Its settings, complete (defaults filled in) and checked.
    optimizer_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: The action noise's class, and its settings, complete and checked; None for a
    #: strategy without (weight noise only).
    noise: type[CheckedActionNoise] | None = None
    action_noise: Mapping[str, Any] | None = None
    #: A LayerNorm after each hidden layer of the actor (never perturbed).
    layer_norm: bool = False
    #: When new weight noise is drawn: every environment ``step`` or every ``episode``.
    resample: Resample = "step"

    def settings(self) -> dict[str, Any]:
        """The strategy as a run's settings file holds it (the keys it was resolved from)."""
        return {
            "strategy": self.name,
            "optimizer_kwargs": dict(self.optimizer_kwargs),
            "action_noise": dict(self.action_noise or {}),
            "layer_norm": self.layer_norm,
            "resample": self.resample,
        }


def resolve_strategy(
    name: str,
    optimizer_kwargs: Mapping[str, Any] | None = None,
    action_noise: Mapping[str, Any] | None = None,
    layer_norm: bool | None = None,
    resample: Resample | None = None,
) -> Strategy:
    """The strategy ``name`` with these overrides of its defaults, checked: one
    :class:`ConfigError` line for an unknown strategy or setting or a bad value. ``None``
    for ``layer_norm`` and ``resample`` is the strategy's own choice (parameter noise: a
    layer-normalised actor and a new perturbation per episode; the others: a plain actor
    and new weight noise every step)."""
    require_known("strategy", [name], available_strategies())
    optimizer = ACTION_NOISE_OPTIMIZER if name in ACTION_NOISE else name
    cls = param_explore.optimizer_class(optimizer)
    try:
        kwargs = param_explore.checked_hyperparameters(optimizer, optimizer_kwargs or {})
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None
    noise = _checked_action_noise(name, action_noise or {})
    require(
        resample in (None, "step", "episode"),
        f"resample must be step or episode, got {resample!r}",
    )
    layer_norm = cls.default_layer_norm if layer_norm is None else bool(layer_norm)
    require(
        not layer_norm or cls.supports_layer_norm,
        f"{name} trains nn.Linear layers only, so its actor cannot be layer-normalised: "
        "leave layer_norm out (or false)",
    )
    return Strategy(
        name=name,
        optimizer=optimizer,
        optimizer_class=cls,
        optimizer_kwargs=kwargs,
        noise=ACTION_NOISE.get(name),
        action_noise=noise,
        layer_norm=layer_norm,
        resample=resample or cls.default_resample,
    )


def _checked_action_noise(name: str, overrides: Mapping[str, Any]) -> dict[str, Any] | None:
    """The complete, checked action-noise settings of strategy ``name`` (None without)."""
    if name not in ACTION_NOISE:
        require(
            not overrides,
            f"unknown action_noise setting(s) {', '.join(map(str, overrides))} for {name!r}; "
            "it adds no action noise",
        )
        return None
    noise = ACTION_NOISE[name]
    defaults = noise.settings()
    require_known(f"action_noise setting(s) for {name!r}:", overrides, defaults)
    settings = {**defaults, **overrides}
    try:
        noise.checked_settings(**settings)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None
    return settings
