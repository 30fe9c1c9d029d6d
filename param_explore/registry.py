"""Strategies by name: ``make_optimizer("vadam", actor.parameters(), lr=3e-4)``.

The names are the ones used on the command line (``--opt``), in YAML presets and in
run directories. Constructor defaults are Table 3 of Khan et al. 2018 (Appendix K).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from .explore import AdamExplore, SGDExplore
from .plain import AdamPlain, SGDPlain
from .vadagrad import VadaGrad
from .vadam import Vadam

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd-plain": SGDPlain,
    "adam-plain": AdamPlain,
    "sgd-explore": SGDExplore,
    "adam-explore": AdamExplore,
    "vadagrad": VadaGrad,
    "vadam": Vadam,
}


def available_optimizers() -> list[str]:
    """The registered strategy names, in the paper's order."""
    return list(OPTIMIZERS)


def optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """The class registered as ``name``; a ``ValueError`` listing valid names otherwise."""
    try:
        return OPTIMIZERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}"
        ) from None


def hyperparameters(name: str) -> dict[str, Any]:
    """The tunable hyperparameters of strategy ``name`` with their (Table 3) defaults."""
    signature = inspect.signature(optimizer_class(name).__init__)
    return {
        key: param.default
        for key, param in signature.parameters.items()
        if key not in ("self", "params")
    }


def make_optimizer(
    name: str, params: Iterable[Tensor] | Iterable[dict], **overrides: Any
) -> torch.optim.Optimizer:
    """Build strategy ``name`` over ``params``; ``overrides`` replace Table 3 defaults."""
    cls = optimizer_class(name)
    unknown = sorted(set(overrides) - set(hyperparameters(name)))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)} for optimizer {name!r}; "
            f"valid: {', '.join(hyperparameters(name))}"
        )
    return cls(params, **overrides)
