"""The DDPG agent's hyperparameters (:class:`DDPGConfig`) and how a value is checked.

Defaults are the paper's experiment (Khan et al. 2018, Appendix K and Table 3;
Lillicrap et al. 2015); ``configs/ddpg.yaml`` restates them with the source of every
value. A run's settings and the YAML layering that resolves them are
:mod:`agents.runs.config`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import param_explore

from ..errors import ConfigError
from .strategies import make_action_noise, strategy_optimizer


@dataclass
class DDPGConfig:
    """Hyperparameters of the DDPG agent (Appendix K; ``docs/decisions.md``)."""

    #: The exploration strategy (``--opt``): a ``param_explore`` optimizer, or an
    #: action-noise baseline trained as ``adam-plain`` (:mod:`agents.engine.strategies`).
    strategy: str = "vadam"
    #: Overrides of the strategy's optimizer defaults (``param_explore.hyperparameters``).
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Overrides of the action-noise settings (``gaussian-action``, ``ou-action`` only).
    action_noise: dict[str, Any] = field(default_factory=dict)
    hidden_sizes: list[int] = field(default_factory=lambda: [400, 300])
    #: How the actor and the critic start (:mod:`agents.engine.initialisation`): the authors'
    #: released code (``khan2018``) or Lillicrap et al. 2015 (``lillicrap``).
    init: Literal["khan2018", "lillicrap"] = "khan2018"
    buffer_size: int = 1_000_000
    batch_size: int = 64
    gamma: float = 0.99
    tau: float = 1e-3
    critic_lr: float = 1e-3
    #: Updates start once the buffer holds *more* than this many transitions.
    learning_starts: int = 64
    #: Gradient updates per environment step.
    gradient_steps: int = 1
    #: ``sum`` (the released code) or ``mean`` of the minibatch policy gradient.
    actor_grad_reduction: Literal["sum", "mean"] = "sum"
    #: Draw new weight noise every environment ``step`` (Khan et al.) or every
    #: ``episode``; None: the strategy's own choice (per step; per episode for
    #: ``param-noise``, as Plappert et al.).
    resample: Literal["step", "episode"] | None = None
    #: A LayerNorm after each hidden layer of the actor, never perturbed (Plappert et
    #: al.'s parameter-noise actor; ``docs/decisions.md#layer-norm``); None: the
    #: strategy's own choice (on for ``param-noise`` only), the same in every engine.
    layer_norm: bool | None = None
    #: Run each update as one compiled graph (:mod:`agents.engine.compiled_update`): faster,
    #: equal to the eager update up to float rounding, seconds of compiling at the first
    #: update. Strategies without a traced form (noisy-kfac) train eagerly.
    compile: bool = False

    def validate(self) -> None:
        coerce_fields(self)
        for key in ("buffer_size", "batch_size", "gradient_steps"):
            require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        require(self.learning_starts >= 0, "learning_starts must be >= 0")
        require(
            self.buffer_size > self.learning_starts,
            f"buffer_size ({self.buffer_size}) must exceed learning_starts "
            f"({self.learning_starts}): updates start once the buffer holds more than "
            "learning_starts transitions, so this run would never train",
        )
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        require(0 < self.tau <= 1, f"tau must be in (0, 1], got {self.tau}")
        require(self.critic_lr > 0, f"critic_lr must be > 0, got {self.critic_lr}")
        require(
            len(self.hidden_sizes) >= 2 and all(h > 0 for h in self.hidden_sizes),
            f"hidden_sizes needs at least two positive sizes, got {self.hidden_sizes}",
        )
        self.check_strategy()

    def check_strategy(self) -> None:
        """The strategy and its overrides (a run of another learner checks its own)."""
        check_strategy(self.strategy, self.optimizer_kwargs, self.action_noise)


# --------------------------------------------------------------------------- checks
def require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


#: Seeds every RNG a run seeds accepts (NumPy's legacy seeding is the narrowest: 32 bits).
MAX_SEED = 2**32 - 1


def check_seed(seed: int | None) -> None:
    """A seed is None or an integer in [0, 2³² − 1]."""
    require(
        seed is None or (isinstance(seed, int) and 0 <= seed <= MAX_SEED),
        f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}",
    )


def check_strategy(name: str, kwargs: dict[str, Any], action_noise: dict[str, Any]) -> None:
    """Validate a strategy and its overrides by building it for a one-unit network."""
    import torch

    try:
        optimizer = strategy_optimizer(name)
        param_explore.make_optimizer(optimizer, torch.nn.Linear(1, 1), **kwargs)
        make_action_noise(name, 1, action_noise)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


def coerce_fields(config: Any, prefix: str = "") -> None:
    """Coerce a config dataclass's YAML/CLI values to its declared field types, or say which
    one is wrong (named ``prefix`` + field)."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        setattr(config, f.name, _coerce(prefix + f.name, hints[f.name], value))


def _coerce(name: str, hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):  # X | None
        if value is None and type(None) in typing.get_args(hint):
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        require(value in allowed, f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        return value
    if origin in (list, dict) or hint in (list, dict):
        expected = origin or hint
        require(isinstance(value, expected), f"{name} must be a {expected.__name__}")
        if origin is list:
            (item,) = typing.get_args(hint)
            return [_coerce(f"{name}[{i}]", item, v) for i, v in enumerate(value)]
        return value
    if hint is bool:
        require(isinstance(value, bool), f"{name} must be true or false, got {value!r}")
        return value
    if hint in (int, float):
        number = value
        if isinstance(value, str):  # YAML 1.1 reads 1e6 as a string
            try:
                number = float(value)
            except ValueError:
                number = None
        ok = isinstance(number, (int, float)) and not isinstance(number, bool)
        if ok and isinstance(number, float):
            ok = math.isfinite(number) and (hint is float or number.is_integer())
        kind = "an integer" if hint is int else "a finite number"
        require(ok, f"{name} must be {kind}, got {value!r}")
        # Torch and NumPy take 64-bit integers (and floats end at 1.8e308): a larger number
        # would overflow deep inside.
        limit = 2**63 if hint is int else 2**1023
        shown = repr(value) if len(repr(value)) <= 30 else f"{repr(value)[:12]}… (too long)"
        require(abs(number) < limit, f"{name} is too large: {shown}")
        return hint(number)
    if hint is str:
        require(isinstance(value, str), f"{name} must be a string, got {value!r}")
    return value


def strategy_layer_norm(strategy: str, layer_norm: bool | None) -> bool:
    """``layer_norm`` as given, or the strategy's own choice when it is None."""
    if layer_norm is not None:
        return layer_norm
    return param_explore.optimizer_class(strategy_optimizer(strategy)).default_layer_norm


def upgrade_config_keys(values: dict[str, Any]) -> dict[str, Any]:
    """Earlier versions saved the strategy as ``optimizer``."""
    if "optimizer" in values and "strategy" not in values:
        values = {("strategy" if k == "optimizer" else k): v for k, v in values.items()}
    return values
