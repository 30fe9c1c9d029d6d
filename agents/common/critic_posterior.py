"""The critic's optimizer by name: torch's Adam, or a posterior whose sample of Q explores.

Why: a critic's loss is a regression (a likelihood) with real curvature, so a posterior over
its weights is meaningful where the actor's was not (docs/sigma.md), and acting on a sample
of Q is Thompson sampling (docs/decisions.md#variational-critic). The toolkit's posteriors
fit that critic through their one interface (``param_explore.Posterior``: IVON, noisy Adam in
its VI form) and its Markov chain sampler (``param_explore.SAMPLERS``: Adam Langevin).

This module translates the name once, at settings time, into complete, checked settings:
the critic's loss is the mean squared TD error over a minibatch, the mean per datum of a
Gaussian log-likelihood, standing for the N transitions a run's replay buffer holds
(``buffer_size``; a 100 k-step run holds at most 1e5, so a study of that length sets
``buffer_size`` to 1e5), under a prior N(0, η I) (``critic_prior_variance``):

* a posterior (IVON, noisy Adam): :meth:`~param_explore.Posterior.posterior_settings` of N
  and η — IVON's ess = N and δ = 1/(Nη), noisy Adam's λ = 1 with N and η — as VIME's
  dynamics model reads them, step sizes included (a natural-gradient step is not Adam's:
  ``critic_lr`` does not translate);
* Adam Langevin: the step size ``critic_lr`` and the temperature β⁻¹ = 1/N, so that its
  chain samples exp(−N·L), the posterior of the summed loss (its prior is the critic's L2
  penalty, if any: the chain has no prior of its own).

A user's ``critic_optimizer_kwargs`` go on top, checked by the optimizer's own checks
before anything is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

import param_explore

from .errors import ConfigError

#: The critic's default optimizer: torch's Adam at ``critic_lr`` (Khan et al.'s critic).
PLAIN_CRITIC = "adam"

#: The optimizers a critic can sample from: the posteriors a critic's regression fits, and
#: the Langevin sampler. A new one is its class and one entry here.
CRITIC_POSTERIORS: dict[str, type[torch.optim.Optimizer]] = {
    "ivon": param_explore.IVON,
    "noisy-adam": param_explore.NoisyAdam,
    "langevin": param_explore.AdamLangevin,
}


def critic_optimizers() -> list[str]:
    """Every name ``critic_optimizer`` (``--critic-opt``) accepts."""
    return [PLAIN_CRITIC, *CRITIC_POSTERIORS]


def critic_optimizer_settings(
    name: str,
    overrides: Mapping[str, Any],
    num_data: int,
    prior_variance: float,
    lr: float,
) -> dict[str, Any]:
    """The complete, checked settings of critic optimizer ``name`` (module docstring) with
    ``overrides`` on top; {} for torch's Adam (which takes ``critic_lr`` alone). One
    ConfigError line naming the optimizer and the setting for a bad or unknown one."""
    if name == PLAIN_CRITIC:
        if overrides:
            raise ConfigError(
                "critic_optimizer_kwargs apply to a sampled critic "
                f"({', '.join(CRITIC_POSTERIORS)}); torch's Adam takes critic_lr alone"
            )
        return {}
    cls = CRITIC_POSTERIORS.get(name)
    if cls is None:
        raise ConfigError(
            f"unknown critic_optimizer {name!r}; choose one of {', '.join(critic_optimizers())}"
        )
    try:
        if issubclass(cls, param_explore.Posterior):
            settings = param_explore.checked_posterior_settings(
                cls,
                num_data,
                prior_variance,
                overrides,
                prior=f"critic_prior_variance {prior_variance:g}",
            )
        else:
            derived = {"lr": lr, "temperature": 1.0 / num_data}
            settings = param_explore.checked_hyperparameters(cls, {**derived, **overrides})
    except ValueError as err:
        raise ConfigError(f"critic_optimizer {name}: {err}") from None
    return {**param_explore.hyperparameters(cls), **settings}
