"""SGD-Plain and Adam-Plain: the original DDPG actor optimizers, no noise injection.

These are ``torch.optim.SGD`` / ``torch.optim.Adam`` themselves (so they keep torch's
fast kernels and state layout) with the sampling interface answering σ = 0: θ is μ,
``sampled_params()`` leaves the weights untouched and ``resample_noise()`` draws no
random numbers. Agents therefore run the paper's "original DDPG without any noise
injection" (Appendix K) through exactly the code path the exploring strategies use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from .adam_rule import adam_traceable_step
from .sampling import WeightSampling, skips_non_finite
from .traceable import StateTensors, TraceableStep, at_mean, group_names, single_group
from .validation import Checks, require_betas, require_positive


class SGDPlain(WeightSampling, torch.optim.SGD):
    """μ ← μ − α g with Table 3's α = 1e-4."""

    explores = False

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-4) -> None:
        super().__init__(params, **self.checked_settings(lr=lr))

    _setting_checks: ClassVar[Checks] = dict(lr=require_positive)

    @skips_non_finite
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        return torch.optim.SGD.step(self)

    def traceable_step(self) -> TraceableStep:
        group = single_group(self)

        def update(xs: list[Tensor], grads: list[Tensor], state: StateTensors, c: SGDStep) -> None:
            for x, g in zip(xs, grads):
                x.sub_(c.lr * g)

        def coefficients(step: int) -> SGDStep:
            return SGDStep(group["lr"])

        return TraceableStep(
            list(group["params"]), {}, [], coefficients, update, at_mean, group_names(group)
        )


class SGDStep(NamedTuple):
    lr: float  # α


class AdamPlain(WeightSampling, torch.optim.Adam):
    """torch's Adam with Table 3's α = 1e-4, (γ₁, γ₂) = (0.9, 0.999), δ = 1e-8.

    Uses torch's fused kernel (one pass over all tensors per step; CPU and CUDA).
    """

    explores = False

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, **self.checked_settings(lr=lr, betas=betas, eps=eps), fused=True)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive, betas=require_betas, eps=require_positive
    )

    @skips_non_finite
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        return torch.optim.Adam.step(self)

    def traceable_step(self) -> TraceableStep:
        return adam_traceable_step(self)
