"""Strategies by name: ``make_optimizer("vadam", actor, lr=3e-4)``.

The names are the ones used on the command line (``--opt``), in YAML presets and in
run directories. Constructor defaults are Table 3 of Khan et al. 2018 (Appendix K) for
its six strategies, the RL (variational-optimisation) reading of Zhang et al. 2018 for
noisy Adam and noisy K-FAC, the RL actor's reading of Shen et al. 2024 for IVON
(``configs/ivon.yaml``), Plappert et al. 2018 for adaptive parameter noise, and
Adam-Explore's for ``fixed-noise`` (Vadam's ablation: its noise without σ learning).

A new strategy is its module and one entry of :data:`OPTIMIZERS` (and, for ``train_agent``,
its preset ``configs/<name>.yaml``).

Pass the network itself (an ``nn.Module``): the optimizer is built from its *named*
parameters, so that it can be told which weight is which by name (a network called at
sampled weights, a checkpoint's state matched to its parameters); noisy K-FAC needs its
layers besides. Its ``LayerNorm`` parameters go in a group that is trained but never
perturbed (``perturb=False``, :mod:`param_explore.sampling`). An iterable of tensors or
param groups works for all but noisy K-FAC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from .bbb import BayesByBackprop
from .explore import AdamExplore, FixedNoise, SGDExplore
from .ivon import IVON
from .langevin import AdamLangevin
from .noisy_adam import NoisyAdam
from .noisy_kfac import NoisyKFAC
from .param_noise import AdaptiveParamNoise
from .plain import AdamPlain, SGDPlain
from .posterior import Posterior
from .vadagrad import VadaGrad
from .vadam import Vadam
from .validation import keyword_defaults, require_known

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd-plain": SGDPlain,
    "adam-plain": AdamPlain,
    "sgd-explore": SGDExplore,
    "adam-explore": AdamExplore,
    "vadagrad": VadaGrad,
    "vadam": Vadam,
    "noisy-adam": NoisyAdam,
    "noisy-kfac": NoisyKFAC,
    "ivon": IVON,
    "param-noise": AdaptiveParamNoise,
    "fixed-noise": FixedNoise,
}

#: Posteriors a Bayesian model can be fitted with (VI forms, :class:`Posterior`): Bayes by
#: Backprop, noisy Adam and noisy K-FAC with ``kl_weight`` > 0, and IVON (VIME's dynamics
#: model, ``agents.curiosity``). A new one is its class and one entry here.
POSTERIORS: dict[str, type[Posterior]] = {
    "bbb": BayesByBackprop,
    "noisy-adam": NoisyAdam,
    "noisy-kfac": NoisyKFAC,
    "ivon": IVON,
}


#: Markov chain samplers, built by name as every optimizer is (``make_optimizer("langevin",
#: critic)``) but not strategies of the actor (``--opt``): their sample is the iterate itself,
#: with no σ of its own (:class:`AdamLangevin`), which the actor's weight noise and its
#: measurements assume. A new one is its class and one entry here.
SAMPLERS: dict[str, type[torch.optim.Optimizer]] = {
    "langevin": AdamLangevin,
}


def available_optimizers() -> list[str]:
    """The registered strategy names, in the paper's order."""
    return list(OPTIMIZERS)


def optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """The class registered as ``name`` (a strategy or a sampler); a ``ValueError`` listing
    valid names otherwise."""
    known = {**OPTIMIZERS, **SAMPLERS}
    if not isinstance(name, str) or name not in known:
        require_known("optimizer", [str(name)], known)
    return known[name]


def hyperparameters(optimizer: str | type[torch.optim.Optimizer]) -> dict[str, Any]:
    """The tunable hyperparameters of a strategy (its name or class) with their (Table 3)
    defaults: the keyword parameters after ``(self, params/model)``."""
    cls = optimizer_class(optimizer) if isinstance(optimizer, str) else optimizer
    return keyword_defaults(cls.__init__, skip=2)


def checked_hyperparameters(
    optimizer: str | type[torch.optim.Optimizer], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """Every hyperparameter of a strategy (its name or class): ``overrides`` over the
    defaults, checked by the optimizer's own checks without building it; a ``ValueError``
    naming an unknown or bad one."""
    cls = optimizer_class(optimizer) if isinstance(optimizer, str) else optimizer
    defaults = hyperparameters(cls)
    name = optimizer if isinstance(optimizer, str) else cls.__name__
    require_known(f"hyperparameter(s) for optimizer {name!r}:", overrides, defaults)
    settings = {**defaults, **overrides}
    cls.checked_settings(**settings)
    return settings


def checked_posterior_settings(
    posterior: type[Posterior],
    num_data: float,
    prior_variance: float,
    overrides: Mapping[str, Any],
    prior: str | None = None,
) -> dict[str, Any]:
    """The settings of ``posterior`` fitting N = ``num_data`` data under a prior of variance
    ``prior_variance`` (:meth:`Posterior.posterior_settings`), ``overrides`` on top, checked
    without building it: a value derived from N and the prior by the optimizer's own check
    (saying it was derived), all of them as :func:`checked_hyperparameters`, and the
    posterior's own rule (:meth:`Posterior.check_posterior`). The one check of a model's
    posterior, before a run and when it is built; a ``ValueError`` naming the setting (and
    ``prior``, what set the prior's variance, for a derived one)."""
    prior = prior or f"a prior of variance {prior_variance:g}"
    derived = posterior.posterior_settings(num_data, prior_variance)
    for name, value in derived.items():
        if name not in overrides:
            try:
                posterior.check_setting(name, value)
            except ValueError as err:
                raise ValueError(
                    f"{err}: the value {posterior.__name__}'s posterior derives from "
                    f"{prior} and N = {num_data:g} data"
                ) from None
    settings = checked_hyperparameters(posterior, {**derived, **overrides})
    posterior.check_posterior(settings)
    return {**derived, **overrides}


def make_optimizer(
    optimizer: str | type[torch.optim.Optimizer],
    params: nn.Module | Iterable[Tensor] | Iterable[dict],
    **overrides: Any,
) -> torch.optim.Optimizer:
    """Build a strategy (its name, or its class as a resolved ``Strategy`` holds it) for a
    network (or its ``params``); ``overrides`` replace the defaults."""
    cls = optimizer_class(optimizer) if isinstance(optimizer, str) else optimizer
    name = optimizer if isinstance(optimizer, str) else cls.__name__
    require_known(f"hyperparameter(s) for optimizer {name!r}:", overrides, hyperparameters(cls))
    if isinstance(params, nn.Module) and not cls.needs_module_calls:
        params = parameter_groups(params)
    return cls(params, **overrides)


def parameter_groups(module: nn.Module) -> list[dict]:
    """The module's named parameters; those of its ``LayerNorm`` layers in a group never
    perturbed.

    Plappert et al. (2018) perturb a layer-normalised actor but leave the normalisation's
    own scale and shift as they are (``docs/decisions.md#layer-norm``).
    """
    normalisation = {
        id(p) for m in module.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()
    }
    named = list(module.named_parameters())
    perturbed = [(n, p) for n, p in named if id(p) not in normalisation]
    fixed = [(n, p) for n, p in named if id(p) in normalisation]
    groups = [{"params": perturbed}]
    if fixed:
        groups.append({"params": fixed, "perturb": False})
    return groups
