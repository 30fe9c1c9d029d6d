"""param_explore: actor optimizers that explore by sampling the weights.

Every optimizer is a ``torch.optim.Optimizer`` maintaining q(θ) = N(μ, σ²) over the
parameters it owns, with one interface (:class:`WeightSampling`):

* ``resample_noise()``  draw ε (per environment step or per episode);
* ``sampled_params()``  context manager running the network at θ = μ + σ⊙ε;
* ``sample()``          θ tensors differentiable w.r.t. μ, parameters untouched;
* ``step()``            update from ``p.grad`` = ∇θF(θ), no closure required;
* ``sampling_std()``    σ per parameter;
* ``training_params()`` context in which to take the gradient for ``step()``.

Strategies: Khan et al. 2018's six (``sgd-plain``, ``adam-plain``, ``sgd-explore``,
``adam-explore``, ``vadagrad``, ``vadam``), Zhang et al. 2018's ``noisy-adam`` and
``noisy-kfac``, Shen et al. 2024's ``ivon``, Plappert et al. 2018's adaptive ``param-noise``,
and ``fixed-noise`` (Adam on μ with Vadam's initial weight noise, never adapted: the ablation
of Vadam's σ).

``BayesByBackprop`` (Blundell et al. 2015, as VIME's dynamics model trains it) has the same
interface but is not an exploration strategy of the actor; it, and the VI forms of noisy
Adam, noisy K-FAC and IVON, are :class:`Posterior` s (``POSTERIORS``): they give the
information gain of an example without taking the step (``information_gain``), for a
curiosity bonus such as VIME's, through one interface (:mod:`param_explore.posterior`).

``AdamLangevin`` (Ishfaq et al. 2024's Adam Langevin Monte Carlo, ``make_optimizer("langevin",
critic)``) has the interface too, but its sample is its iterate (σ = 0, ε the noise of its
coming step): a sampler of a critic's posterior (``SAMPLERS``), not a strategy of the actor.
"""

from .bbb import BayesByBackprop
from .explore import AdamExplore, FixedNoise, SGDExplore
from .ivon import IVON
from .langevin import AdamLangevin
from .layer_statistics import linear_layers
from .noisy_adam import NoisyAdam
from .noisy_kfac import NoisyKFAC
from .param_noise import AdaptiveParamNoise, action_space_distance
from .plain import AdamPlain, SGDPlain
from .posterior import GainEvidence, MomentGradients, Posterior, SampledGradients
from .registry import (
    OPTIMIZERS,
    POSTERIORS,
    SAMPLERS,
    available_optimizers,
    checked_hyperparameters,
    checked_posterior_settings,
    hyperparameters,
    make_optimizer,
    optimizer_class,
)
from .sampling import WeightSampling, state_by_name
from .traceable import Mode, TraceableStep, UntraceableOptimizerError
from .vadagrad import VadaGrad
from .vadam import Vadam

__all__ = [
    "IVON",
    "OPTIMIZERS",
    "POSTERIORS",
    "SAMPLERS",
    "AdamExplore",
    "AdamLangevin",
    "AdamPlain",
    "AdaptiveParamNoise",
    "BayesByBackprop",
    "FixedNoise",
    "GainEvidence",
    "Mode",
    "MomentGradients",
    "NoisyAdam",
    "NoisyKFAC",
    "Posterior",
    "SGDExplore",
    "SGDPlain",
    "SampledGradients",
    "TraceableStep",
    "UntraceableOptimizerError",
    "VadaGrad",
    "Vadam",
    "WeightSampling",
    "action_space_distance",
    "available_optimizers",
    "checked_hyperparameters",
    "checked_posterior_settings",
    "hyperparameters",
    "linear_layers",
    "make_optimizer",
    "optimizer_class",
    "state_by_name",
]
