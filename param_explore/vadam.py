"""Vadam: variational Adam (Khan et al. 2018, Fig. 1 and Appendix K, Algorithm 2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from .adam_rule import AdamCoefficients, adam_update_
from .sampling import MomentSampling
from .traceable import Mode, StateTensors
from .validation import Checks, require_betas, require_non_negative, require_positive


class Vadam(MomentSampling, torch.optim.Optimizer):
    """Adam whose second-moment vector doubles as the precision of q(θ) = N(μ, σ²).

    One step, with g = ∇θF(θ) at the sample θ = μ + σ⊙ε (``p.grad``), t the step count
    after incrementing, N = ``num_data``, λ = ``prior_precision``, c = ``sample_constant``:

        s ← γ₂ s + (1 − γ₂) g²                                   (Fig. 1 l.6, Alg. 2 l.8)
        m ← γ₁ m + (1 − γ₁)(g + λμ/N)     (old μ)                 (Fig. 1 l.5, Alg. 2 l.8)
        μ ← μ − α √(1 − γ₂ᵗ)/(1 − γ₁ᵗ) · m / (√s + λ/N)           (Fig. 1 l.7-8, Alg. 2 l.9)
        σ = 1 / √(N s + λ + c)            (raw s, not bias-corrected)  (Alg. 2 l.3)

    This is Adam's moment rule (:mod:`param_explore.adam_rule`) with δ = λ/N and the
    prior term λμ/N in m. The bias correction is folded into the step size as in the
    authors' released code (``docs/decisions.md#vadam``), which resolves the index typos
    of Alg. 2 lines 8-9; it equals Fig. 1's m̂/(√ŝ + λ/N) up to a change of the tiny
    constant λ/N.

    Two readings of the same rule:

    * **RL / variational optimisation** (the defaults, Table 3 and Appendix K):
      N = 1, λ = 1e-8, c = 1e4, s₁ = m₁ = 0, so the first samples have σ = 1/√(λ + c)
      ≈ 0.01 and the mean follows exactly Adam-Plain's path for the same gradients.
      c enters only the sampling precision, never the update.
    * **Variational inference** (Fig. 1): set ``num_data`` to the training-set size N,
      ``prior_precision`` to the Gaussian prior's precision λ and ``sample_constant=0``;
      ``p.grad`` must then be the gradient of the *mean* per-example negative
      log-likelihood at θ.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        prior_precision: float = 1e-8,
        sample_constant: float = 1e4,
        num_data: float = 1.0,
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            betas=betas,
            prior_precision=prior_precision,
            sample_constant=sample_constant,
            num_data=num_data,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        prior_precision=require_non_negative,
        sample_constant=require_non_negative,
        num_data=require_positive,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        if settings["prior_precision"] + settings["sample_constant"] <= 0:
            raise ValueError(
                "the initial sampling precision prior_precision + sample_constant must be "
                "> 0 (s starts at 0); set sample_constant > 0 or prior_precision > 0"
            )

    def _std(self, group: Mapping, state: StateTensors, c: VadamCoefficients) -> list[Tensor]:
        """σ = 1/√(N s + λ + c) (Alg. 2 l.3), from the raw s."""
        return [torch.rsqrt(c.num_data * s + c.sampling_offset) for s in state["exp_avg_sq"]]

    def _coefficients(self, group: Mapping, step: int) -> VadamCoefficients:
        prior = group["prior_precision"] / group["num_data"]
        return VadamCoefficients(
            # δ = λ/N in the denominator and the prior term λμ/N in m (Fig. 1 l.5-8)
            AdamCoefficients.at_step(step, group["lr"], group["betas"], eps=prior, decay=prior),
            group["num_data"],
            group["prior_precision"] + group["sample_constant"],
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: VadamCoefficients,
        mode: Mode,
    ) -> None:
        # The prior term λμ/N uses the mean *before* this step.
        adam_update_(xs, grads, state["exp_avg"], state["exp_avg_sq"], c.adam, mode)


class VadamCoefficients(NamedTuple):
    """The numbers of one Vadam step (floats, or 0-d tensors when traced)."""

    adam: AdamCoefficients  # the moment step, with δ = d = λ/N
    num_data: float  # N
    sampling_offset: float  # λ + c
