"""Hyperparameter checks with messages a user can act on.

Optimizers are built from YAML presets and ``--set key=value`` overrides, so a bad
value must fail at construction with the hyperparameter's name, the value and the
allowed range, not deep inside the first ``step()``.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: How each setting of an optimizer (or an action noise) is checked: name →
#: ``check(name, value)``, which returns the value as kept or raises a ValueError naming it.
Checks = Mapping[str, Callable[[str, Any], Any]]


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
