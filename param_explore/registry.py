"""Strategies by name: ``make_optimizer("vadam", actor, lr=3e-4)``.

The names are the ones used on the command line (``--opt``), in YAML presets and in
run directories. Constructor defaults are Table 3 of Khan et al. 2018 (Appendix K) for
its six strategies, the RL (variational-optimisation) reading of Zhang et al. 2018 for
noisy Adam and noisy K-FAC, Plappert et al. 2018 for adaptive parameter noise, and
Adam-Explore's for ``fixed-noise`` (Vadam's ablation: its noise without σ learning).

Pass the network itself (an ``nn.Module``): noisy K-FAC needs its layers, the others
take its parameters — its ``LayerNorm`` parameters in a group that is trained but never
perturbed (``perturb=False``, :mod:`param_explore.sampling`). An iterable of tensors or
param groups works for all but noisy K-FAC.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .explore import AdamExplore, FixedNoise, SGDExplore
from .noisy_adam import NoisyAdam
from .noisy_kfac import NoisyKFAC
from .param_noise import AdaptiveParamNoise
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
    "noisy-adam": NoisyAdam,
    "noisy-kfac": NoisyKFAC,
    "param-noise": AdaptiveParamNoise,
    "fixed-noise": FixedNoise,
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
    _, _, *tunable = inspect.signature(optimizer_class(name).__init__).parameters.values()
    return {param.name: param.default for param in tunable}  # after (self, params/model)


def make_optimizer(
    name: str, params: nn.Module | Iterable[Tensor] | Iterable[dict], **overrides: Any
) -> torch.optim.Optimizer:
    """Build strategy ``name`` for a network (or its ``params``); ``overrides`` replace the
    defaults."""
    cls = optimizer_class(name)
    unknown = sorted(set(overrides) - set(hyperparameters(name)))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)} for optimizer {name!r}; "
            f"valid: {', '.join(hyperparameters(name))}"
        )
    if isinstance(params, nn.Module) and not cls.needs_module_calls:
        params = parameter_groups(params)
    return cls(params, **overrides)


def parameter_groups(module: nn.Module) -> list[dict]:
    """The module's parameters; those of its ``LayerNorm`` layers in a group never perturbed.

    Plappert et al. (2018) perturb a layer-normalised actor but leave the normalisation's
    own scale and shift as they are (``docs/decisions.md#layer-norm``).
    """
    normalisation = {
        id(p) for m in module.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()
    }
    perturbed = [p for p in module.parameters() if id(p) not in normalisation]
    fixed = [p for p in module.parameters() if id(p) in normalisation]
    groups = [{"params": perturbed}]
    if fixed:
        groups.append({"params": fixed, "perturb": False})
    return groups
