"""param_explore: actor optimizers that explore by sampling the weights.

Every optimizer is a ``torch.optim.Optimizer`` maintaining q(θ) = N(μ, σ²) over the
parameters it owns, with one interface (:class:`WeightSampling`):

* ``resample_noise()``  draw ε (per environment step or per episode);
* ``sampled_params()``  context manager running the network at θ = μ + σ⊙ε;
* ``sample()``          θ tensors differentiable w.r.t. μ, parameters untouched;
* ``step()``            update from ``p.grad`` = ∇θF(θ), no closure required;
* ``sampling_std()``    σ per parameter.
"""

from .explore import AdamExplore, SGDExplore
from .plain import AdamPlain, SGDPlain
from .registry import (
    OPTIMIZERS,
    available_optimizers,
    hyperparameters,
    make_optimizer,
    optimizer_class,
)
from .sampling import WeightSampling
from .vadagrad import VadaGrad
from .vadam import Vadam

__all__ = [
    "OPTIMIZERS",
    "AdamExplore",
    "AdamPlain",
    "SGDExplore",
    "SGDPlain",
    "VadaGrad",
    "Vadam",
    "WeightSampling",
    "available_optimizers",
    "hyperparameters",
    "make_optimizer",
    "optimizer_class",
]
