"""Hyperparameter checks with messages a user can act on.

Optimizers are built from YAML presets and ``--set key=value`` overrides, so a bad
value must fail at construction with the hyperparameter's name, the value and the
allowed range, not deep inside the first ``step()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def require_positive(name: str, value: float) -> float:
    """``value`` must be a finite number > 0."""
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def require_non_negative(name: str, value: float) -> float:
    """``value`` must be a finite number >= 0."""
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
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
