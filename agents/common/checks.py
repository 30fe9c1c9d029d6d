"""How a setting is checked: the one-line refusals every family gives for bad input.

A setting reaches the project from YAML, ``--set`` or Python, so it is checked where it
enters — its type, its range, whether the key exists at all — and refused with one
:class:`ConfigError` line naming it, before anything is built or allocated.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from param_explore import validation

from .errors import ConfigError


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


#: The most hidden layers a network of a run may have. A layer's cost is mostly not its
#: tensors' bytes but Python's: a module, its parameters, their optimizer state, and autograd
#: nodes at every pass, each an object of its own. Fifty thousand layers of one unit ran
#: for minutes per step at gigabytes that no estimate of tensor bytes sees (and that a
#: large machine would hold, so a memory estimate would let it crawl on); a plain ReLU MLP
#: this deep does not train in the first place, and every network here has one to three.
MAX_HIDDEN_LAYERS = 100


def require_layers(name: str, sizes: list[int]) -> None:
    """At most :data:`MAX_HIDDEN_LAYERS` hidden layers in ``sizes`` (the setting ``name``)."""
    require(
        len(sizes) <= MAX_HIDDEN_LAYERS,
        f"{name} has {len(sizes)} hidden layers, more than the {MAX_HIDDEN_LAYERS} a network "
        "may have (a plain MLP that deep does not train, and each layer costs Python objects "
        "and time at every step)",
    )


#: The most updates per environment step a schedule may make (a learner's
#: ``gradient_steps`` per ``train_every`` steps, a bonus's model fits per transition): 8 ×
#: the largest replay ratio studied (128, D'Oro et al. 2023, "Sample-efficient RL by
#: breaking the replay ratio barrier"). More is a schedule no run finishes (the default
#: 3 M steps would make 3 × 10⁹ updates, and one round of ``gradient_steps=1e9`` outlasts
#: any run), most likely a typo for a smaller number.
MAX_UPDATES_PER_STEP = 1000


def require_finishable(name: str, updates_per_step: float, how: str) -> None:
    """At most :data:`MAX_UPDATES_PER_STEP` updates per environment step, or one line
    naming the setting (``name``) and its rate (``how``: what makes it)."""
    require(
        updates_per_step <= MAX_UPDATES_PER_STEP,
        f"{name} makes {updates_per_step:g} updates per environment step ({how}), more than "
        f"the {MAX_UPDATES_PER_STEP} a run may make: a schedule no run finishes",
    )


def require_valid(check: Callable[[str, Any], Any], name: str, value: Any) -> None:
    """``check(name, value)``, one of :mod:`param_explore.validation`'s (e.g. a number > 0
    within float32, the dtype it lives in), its ValueError as one ConfigError line."""
    try:
        check(name, value)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def require_known(what: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Every key of ``given`` is one of ``valid``, or one line naming the unknown ones, the
    nearest valid name and the valid names (:func:`param_explore.validation.require_known`)."""
    try:
        validation.require_known(what, given, valid)
    except ValueError as err:
        raise ConfigError(str(err)) from None


#: Seeds every RNG a run seeds accepts (NumPy's legacy seeding is the narrowest: 32 bits).
MAX_SEED = 2**32 - 1


def check_seed(seed: int | None) -> None:
    """A seed is None or an integer in [0, 2³² − 1]."""
    require(
        seed is None or (isinstance(seed, int) and 0 <= seed <= MAX_SEED),
        f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}",
    )


def coerce_fields(config: Any, prefix: str = "") -> None:
    """Coerce a settings dataclass's YAML/CLI values to its declared field types, or say
    which one is wrong (named ``prefix`` + field)."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        object.__setattr__(config, f.name, coerce_value(prefix + f.name, hints[f.name], value))


def coerce_value(name: str, hint: Any, value: Any) -> Any:
    """``value`` as type ``hint`` (what a YAML or command-line value may be read as), or one
    line naming ``name`` and what it must be."""
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
            return [coerce_value(f"{name}[{i}]", item, v) for i, v in enumerate(value)]
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


def record_from_mapping(record: type, values: Mapping[str, Any], what: str) -> Any:
    """``record(**values)`` for a settings dataclass checked when made, after one line for a
    key it does not have (``what`` names the keys, e.g. ``bonus setting(s)``)."""
    require(isinstance(values, Mapping), f"{what} must be a mapping, got {values!r}")
    require_known(what, values, [f.name for f in dataclasses.fields(record)])
    return record(**values)
