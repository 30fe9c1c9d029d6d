"""VadaGrad: variational AdaGrad (Khan et al. 2018, Sec. 5, eq. 96; Appendix K, Alg. 1)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from .sampling import PrecisionSampling
from .traceable import Mode, StateTensors
from .validation import Checks, require_beta, require_positive


class VadaGrad(PrecisionSampling, torch.optim.Optimizer):
    """AdaGrad on the mean whose accumulated squared gradients are the precision of q(θ).

    One step, with g = ∇θF(θ) at the sample θ = μ + σ⊙ε (``p.grad``):

        s ← s + (1 − γ₂) g²          (eq. 96 with β = 1 − γ₂; Alg. 1 line 8)
        μ ← μ − α g / √s              (new s)
        σ = 1 / √s,  s₁ = ``initial_precision`` (1e4 in Table 3)

    No momentum, no prior and no bias correction (``docs/decisions.md#vadagrad``). s only grows, so
    σ never increases: the search distribution contracts to a point (Sec. 5), which is
    VadaGrad's fast start and its premature convergence in Appendix K.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-2,
        beta2: float = 0.99,
        initial_precision: float = 1e4,
    ) -> None:
        settings = self.checked_settings(lr=lr, beta2=beta2, initial_precision=initial_precision)
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive, beta2=require_beta, initial_precision=require_positive
    )

    _state_keys = ("precision",)

    def _coefficients(self, group: Mapping, step: int) -> VadaGradCoefficients:
        return VadaGradCoefficients(group["lr"], 1.0 - group["beta2"])

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: VadaGradCoefficients,
        mode: Mode,
    ) -> None:
        vadagrad_update_(xs, grads, state["precision"], c, mode)


class VadaGradCoefficients(NamedTuple):
    """The numbers of one VadaGrad step (floats, or 0-d tensors when traced)."""

    lr: float  # α
    s_weight: float  # 1 − γ₂


def vadagrad_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    precisions: list[Tensor],
    c: VadaGradCoefficients,
    mode: Mode,
) -> None:
    """s ← s + (1 − γ₂) g²;  μ ← μ − α g/√s (new s), in place."""
    if mode == "eager":  # one foreach kernel per operation
        torch._foreach_addcmul_(precisions, grads, grads, value=c.s_weight)
        torch._foreach_addcdiv_(xs, grads, torch._foreach_sqrt(precisions), value=-c.lr)
        return
    for x, g, s in zip(xs, grads, precisions):
        s.add_(c.s_weight * g * g)
        x.sub_(c.lr * g / s.sqrt())
