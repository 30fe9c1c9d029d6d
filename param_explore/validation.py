"""Hyperparameter checks with messages a user can act on.

Optimizers are built from YAML presets and ``--set key=value`` overrides, so a bad
value must fail at construction with the hyperparameter's name, the value and the
allowed range, not deep inside the first ``step()``.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

#: How each setting of an optimizer (or an action noise) is checked: name →
#: ``check(name, value)``, which returns the value as kept or raises a ValueError naming it.
Checks = Mapping[str, Callable[[str, Any], Any]]


#: The range a setting must lie in: float32's normal numbers, the dtype of the networks and
#: of every optimizer's state, where a setting lives (``torch.full_like(p, hess_init)``) or
#: meets its tensors. A value finite in float64 beyond 3.4e38 is inf there (or, filling a
#: tensor, an overflow error mid-run), one below 1.2e-38 is denormal or 0: either is refused
#: here, with the setting's name, instead of at the first step.
FLOAT32_RANGE = (torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max)
_RANGE = f"[{FLOAT32_RANGE[0]:.2g}, {FLOAT32_RANGE[1]:.2g}]"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def in_float32(value: float) -> bool:
    """Whether ``value`` is 0 or a float32 normal number in magnitude (:data:`FLOAT32_RANGE`)."""
    low, high = FLOAT32_RANGE
    return _is_number(value) and (value == 0 or low <= abs(value) <= high)


def require_positive(name: str, value: float) -> float:
    """``value`` must be a number > 0 within float32 (:data:`FLOAT32_RANGE`)."""
    if not _is_number(value) or not value > 0 or not in_float32(value):
        raise ValueError(
            f"{name} must be a finite number > 0 in {_RANGE} (float32, the dtype it is used "
            f"in), got {value!r}"
        )
    return float(value)


def require_non_negative(name: str, value: float) -> float:
    """``value`` must be 0 or a number > 0 within float32 (:data:`FLOAT32_RANGE`)."""
    if not _is_number(value) or not value >= 0 or not in_float32(value):
        raise ValueError(
            f"{name} must be a finite number >= 0: 0 or in {_RANGE} (float32, the dtype it "
            f"is used in), got {value!r}"
        )
    return float(value)


def require_beta(name: str, value: float) -> float:
    """A decay rate in [0, 1)."""
    if not _is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def require_betas(name: str, value: Sequence[float]) -> tuple[float, float]:
    """A pair (γ₁, γ₂) of decay rates, each in [0, 1)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a pair (beta1, beta2), got {value!r}")
    return (require_beta(f"{name}[0]", value[0]), require_beta(f"{name}[1]", value[1]))


def require_interval(name: str, value: int) -> int:
    """A number of steps: an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def require_known(what: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Every name in ``given`` is one of ``valid``; else one message naming the unknown ones,
    the nearest valid name of each, and the valid names (the one such check of the project)."""
    valid = list(valid)
    unknown = [str(name) for name in given if name not in valid]
    if not unknown:
        return
    close = [difflib.get_close_matches(name, valid, n=1) for name in unknown]
    hints = [f"{name} (did you mean {match[0]}?)" if match else name
             for name, match in zip(unknown, close)]  # fmt: skip
    choices = f"valid: {', '.join(valid)}" if valid else "it takes none"
    raise ValueError(f"unknown {what} {', '.join(hints)}; {choices}")


def keyword_defaults(function: Callable[..., object], skip: int = 0) -> dict[str, Any]:
    """The parameters of ``function`` after its first ``skip`` and their defaults: what a
    strategy, an action noise or a posterior can be told, with its own default values (the
    one place a signature is read)."""
    parameters = list(inspect.signature(function).parameters.values())[skip:]
    return {
        p.name: p.default for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
