"""VadaGrad: variational AdaGrad (Khan et al. 2018, Sec. 5, eq. 96; Appendix K, Alg. 1)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from .sampling import PrecisionSampling, precision_training_point, skips_non_finite
from .traceable import StateTensors, TraceableStep, single_group
from .validation import require_beta, require_positive


class VadaGrad(PrecisionSampling, torch.optim.Optimizer):
    """AdaGrad on the mean whose accumulated squared gradients are the precision of q(θ).

    One step, with g = ∇θF(θ) at the sample θ = μ + σ⊙ε (``p.grad``):

        s ← s + (1 − γ₂) g²          (eq. 96 with β = 1 − γ₂; Alg. 1 line 8)
        μ ← μ − α g / √s              (new s)
        σ = 1 / √s,  s₁ = ``initial_precision`` (1e4 in Table 3)

    No momentum, no prior and no bias correction (``NOTES.md`` item 4). s only grows, so
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
        defaults = dict(
            lr=require_positive("lr", lr),
            beta2=require_beta("beta2", beta2),
            initial_precision=require_positive("initial_precision", initial_precision),
        )
        super().__init__(params, defaults)

    @skips_non_finite
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One VadaGrad update from ``p.grad`` (∇θF at the current sample); no closure needed."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._init_state(group, p) for p in params]
            for state in states:
                state["step"] += 1
            grads = [p.grad for p in params]
            precisions = [state["precision"] for state in states]
            torch._foreach_addcmul_(precisions, grads, grads, value=1.0 - group["beta2"])
            torch._foreach_addcdiv_(
                params, grads, torch._foreach_sqrt(precisions), value=-group["lr"]
            )
        return loss

    def traceable_step(self) -> TraceableStep:
        group = single_group(self)
        params = list(group["params"])
        states = [self._init_state(group, p) for p in params]

        def coefficients(step: int) -> dict[str, float]:
            return {"lr": group["lr"], "s_weight": 1.0 - group["beta2"]}

        def update(xs: list[Tensor], grads: list[Tensor], state: StateTensors, c: dict) -> None:
            for x, g, s in zip(xs, grads, state["precision"]):
                s.add_(c["s_weight"] * g * g)
                x.sub_(c["lr"] * g / s.sqrt())

        state = {"precision": [s["precision"] for s in states], "noise": self._group_noise(group)}
        return TraceableStep(params, state, states, coefficients, update, precision_training_point)
