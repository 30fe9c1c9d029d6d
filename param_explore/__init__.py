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
``noisy-kfac``, Plappert et al. 2018's adaptive ``param-noise``, and ``fixed-noise`` (Adam on μ with
Vadam's initial weight noise, never adapted: the ablation of Vadam's σ).
"""

from .explore import AdamExplore, FixedNoise, SGDExplore
from .noisy_adam import NoisyAdam
from .noisy_kfac import NoisyKFAC
from .param_noise import AdaptiveParamNoise, action_space_distance
from .plain import AdamPlain, SGDPlain
from .registry import (
    OPTIMIZERS,
    available_optimizers,
    hyperparameters,
    make_optimizer,
    optimizer_class,
)
from .sampling import WeightSampling
from .traceable import TraceableStep, UntraceableOptimizerError
from .vadagrad import VadaGrad
from .vadam import Vadam

__all__ = [
    "OPTIMIZERS",
    "AdamExplore",
    "AdamPlain",
    "AdaptiveParamNoise",
    "FixedNoise",
    "NoisyAdam",
    "NoisyKFAC",
    "SGDExplore",
    "SGDPlain",
    "TraceableStep",
    "UntraceableOptimizerError",
    "VadaGrad",
    "Vadam",
    "WeightSampling",
    "action_space_distance",
    "available_optimizers",
    "hyperparameters",
    "make_optimizer",
    "optimizer_class",
]
