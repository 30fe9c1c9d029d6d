"""Noisy Adam: natural-gradient VI with a fully factorised Gaussian (Zhang et al. 2018, Alg. 1)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from .posterior import VI_FORM, GainEvidence, Posterior
from .sampling import WeightSampling
from .traceable import Mode, StateTensors, lerp_
from .validation import Checks, require_betas, require_non_negative, require_positive


class NoisyAdam(Posterior, WeightSampling, torch.optim.Optimizer):
    """Adam-like steps on μ whose Fisher vector f is also the precision of q(θ).

    One step k, with g = ∇θF(θ) at the sample θ = μ + σ⊙ε (``p.grad``; Alg. 1 writes
    the ascent direction ∇ log p = −g), λ = ``kl_weight``, N = ``num_data``, η =
    ``prior_variance``, γ_in = λ/(Nη), γ = γ_in + ``damping`` (extrinsic γ_ex):

        m ← β₁ m + (1 − β₁)(g + γ_in θ)                          (Alg. 1 "v", momentum)
        f ← β₂ f + (1 − β₂) g²    (VI: moving average, Alg. 1)
        f ← f + (1 − β₂) g²       (VO: running sum, Sec. 4)
        μ ← μ − α · m/(1 − β₁ᵏ) / (f + γ)        (no square root: a natural-gradient step)
        σ² = (λ/N) / (f + γ_in)   (VI)      σ² = 1 / f   (VO)

    **VI** (``kl_weight`` > 0) is Alg. 1 verbatim; f starts at ``initial_precision``,
    which is Adam's 0 in the paper. **VO** (``kl_weight`` = 0, the defaults for RL):
    Sec. 4 applies noisy Adam to variational optimisation by setting the KL weight to 0
    and keeping a running sum of the per-step Fisher terms instead of a moving average.
    With λ = 0 Alg. 1's covariance (λ/N)·diag(f + γ_in)⁻¹ vanishes, so the VO covariance
    is the inverse of the summed Fisher itself, diag(f)⁻¹ — exactly as VadaGrad's σ² = 1/s
    (Khan et al. eq. 96). The running sum therefore needs a starting point, the
    precision before any data: ``initial_precision`` = 1e4, VadaGrad's s₁ (Table 3), so
    that exploration starts at σ = 0.01 like every other strategy of the paper; and β₂ =
    0.99 weighs each Fisher term by 1 − β₂ = 0.01, VadaGrad's γ₂. Then f evolves exactly
    as VadaGrad's s, and the two differ in the mean step only: momentum, and f instead
    of √f in the denominator. That step is α·g/f, so α = 1 makes the first step
    α·g/1e4 = 1e-4·g, VadaGrad's first step 1e-2·g/√1e4 — the default learning rate.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1.0,
        betas: tuple[float, float] = (0.9, 0.99),
        kl_weight: float = 0.0,
        prior_variance: float = 1.0,
        damping: float = 0.0,
        num_data: float = 1.0,
        initial_precision: float = 1e4,
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            betas=betas,
            kl_weight=kl_weight,
            prior_variance=prior_variance,
            damping=damping,
            num_data=num_data,
            initial_precision=initial_precision,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        kl_weight=require_non_negative,
        prior_variance=require_positive,
        damping=require_non_negative,
        num_data=require_positive,
        initial_precision=require_non_negative,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        if settings["kl_weight"] == 0 and settings["initial_precision"] == 0:
            raise ValueError(
                "with kl_weight = 0 (variational optimisation) σ² = 1/f needs "
                "initial_precision > 0 (VadaGrad's s₁, 1e4 in the paper)"
            )

    @staticmethod
    def _intrinsic_damping(group: dict) -> float:
        """γ_in = λ/(Nη): the prior's contribution to the precision (0 in VO)."""
        return group["kl_weight"] / (group["num_data"] * group["prior_variance"])

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = self.state[p]
        if "fisher" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["fisher"] = torch.full_like(
                p, group["initial_precision"], memory_format=torch.preserve_format
            )
        return state

    def _std(self, group: Mapping, state: StateTensors, c: NoisyAdamCoefficients) -> list[Tensor]:
        """σ² = (λ/N)/(f + γ_in) (VI) or 1/f (VO), from f before the step."""
        if group["kl_weight"] == 0:  # the form of the rule, fixed by kl_weight
            return [torch.rsqrt(f) for f in state["fisher"]]
        return [torch.sqrt(c.variance_scale / (f + c.gamma_in)) for f in state["fisher"]]

    _state_keys = ("exp_avg", "fisher")

    def _coefficients(self, group: Mapping, step: int) -> NoisyAdamCoefficients:
        beta1, beta2 = group["betas"]
        gamma_in = self._intrinsic_damping(group)
        return NoisyAdamCoefficients(
            m_weight=1.0 - beta1,
            f_decay=beta2 if group["kl_weight"] > 0 else 1.0,
            f_weight=1.0 - beta2,
            step_size=group["lr"] / (1.0 - beta1**step),
            damping=gamma_in + group["damping"],
            gamma_in=gamma_in,
            variance_scale=group["kl_weight"] / group["num_data"],
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: NoisyAdamCoefficients,
        mode: Mode,
    ) -> None:
        # VI or VO is the form of the rule (fixed by kl_weight), not a number of the step.
        vi = group["kl_weight"] > 0
        thetas = self._training_point(group, xs, state, c) if vi else None
        noisy_adam_update_(xs, grads, thetas, state["exp_avg"], state["fisher"], c, mode)

    # ------------------------------------------------------------------ the posterior
    #: ε, m and f.
    state_per_weight: ClassVar[int] = 3
    posterior_needs_positive: ClassVar[Mapping[str, str]] = VI_FORM

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        """Alg. 1's VI form: λ = 1 and f from 0 (Adam's start); α = 1e-2 is this project's."""
        return dict(
            kl_weight=1.0, num_data=num_data, prior_variance=prior_variance, lr=1e-2,
            initial_precision=0.0,
        )  # fmt: skip

    def _require_vi(self, what: str) -> None:
        if any(group["kl_weight"] == 0 for group in self.param_groups):
            raise ValueError(
                f"{what} needs noisy Adam's VI form (kl_weight > 0): with kl_weight = 0 "
                "it optimises, it does not fit a posterior"
            )

    def kl_divergence_to_prior(self) -> float:
        """KL(q ‖ N(0, η I)) of the VI posterior N(μ, (λ/N)/(f + γ_in)): the ELBO's KL term."""
        self._require_vi("kl_divergence_to_prior")
        return self._diagonal_kl_to_prior()

    @torch.no_grad()
    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        """KL(q_after ‖ q) of one VI step on each example alone, without taking it.

        From ``evidence``'s ∇θ f_b(θ_k) of every parameter (``param_groups`` order) for
        every example b and weight sample θ_k, shape (B, K, *p.shape), and the θ_k, shape
        (K, *p.shape); f_b the example's negative log-likelihood; ``step_size`` is not used
        (the step is noisy Adam's own). The step is Alg. 1 with
        a minibatch of one example and **without momentum** (β₁ = 0, eq. 11): momentum
        carries earlier minibatches' gradients, while the information gain asks what this
        example alone changes. With c = λ/N, γ_in = λ/(Nη), γ = γ_in + γ_ex:

            f′ = β₂ f + (1 − β₂) g²,    Δμ = −α (g + γ_in θ)/(f′ + γ),
            σ² = c/(f + γ_in),  σ′² = c/(f′ + γ_in),
            KL = ½ Σ [σ′²/σ² − 1 − ln(σ′²/σ²) + Δμ²/σ²],

        exact (the posterior after the step is again diagonal), averaged over the K
        samples: a float64 tensor (B,). The optimizer is not changed.
        """
        self._require_vi("information_gain")
        flat = iter(zip(evidence.gradients(), evidence.thetas))
        total = None
        for group in self.param_groups:
            _, beta2 = group["betas"]
            gamma_in = self._intrinsic_damping(group)
            lr, damping = group["lr"], group["damping"]
            scale = group["kl_weight"] / group["num_data"]
            for p in group["params"]:
                kl = _diagonal_step_kl(
                    *next(flat),
                    self._init_state(group, p)["fisher"],
                    beta2,
                    gamma_in,
                    damping,
                    lr,
                    scale,
                )
                per_example = kl.flatten(start_dim=2).sum(dim=2, dtype=torch.float64).mean(dim=1)
                total = per_example if total is None else total + per_example
        return 0.5 * total


def _diagonal_step_kl(
    g: Tensor,
    theta: Tensor,
    f: Tensor,
    beta2: float,
    gamma_in: float,
    damping: float,
    lr: float,
    scale: float,
) -> Tensor:
    """2·KL(q′ ‖ q) per weight of one no-momentum VI step (:meth:`NoisyAdam.information_gain`).

    Written as x − ln(1 + x) with x = σ′²/σ² − 1 = (1 − β₂)(f − g²)/(f′ + γ_in), exact to
    rounding in the dtype of ``g`` also when the variance barely changes (the subtraction
    r − 1 − ln r would cancel), and with few passes over the (B, K, …) tensors.
    """
    f_after = g.square().mul_(1.0 - beta2).add_(f, alpha=beta2)
    precision_after = f_after.add_(gamma_in)  # f′ + γ_in, in place of f′
    x = torch.sub(f, precision_after, alpha=1.0).add_(gamma_in).div_(precision_after)
    kl = x.sub_(torch.log1p(x))
    step = torch.add(g, theta, alpha=gamma_in).div_(precision_after.add_(damping))
    return kl.addcmul_(step.square_(), f + gamma_in, value=lr**2 / scale)


class NoisyAdamCoefficients(NamedTuple):
    """The numbers of one noisy-Adam step (floats, or 0-d tensors when traced)."""

    m_weight: float  # 1 − β₁
    f_decay: float  # β₂ (VI: moving average), 1 (VO: running sum)
    f_weight: float  # 1 − β₂
    step_size: float  # α/(1 − β₁ᵏ)
    damping: float  # γ = γ_in + γ_ex
    gamma_in: float  # λ/(Nη)
    variance_scale: float  # λ/N


def noisy_adam_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    thetas: list[Tensor] | None,
    exp_avgs: list[Tensor],
    fishers: list[Tensor],
    c: NoisyAdamCoefficients,
    mode: Mode,
) -> None:
    """m ← β₁ m + (1 − β₁)(g + γ_in θ);  f ← β₂ f + (1 − β₂) g² (VI) or f + (1 − β₂) g²
    (VO);  μ ← μ − α/(1 − β₁ᵏ) · m/(f + γ), in place; ``thetas`` (VI only) is the sample
    that produced g."""
    if mode == "eager":  # one foreach kernel per operation
        directions = (
            grads if thetas is None else torch._foreach_add(grads, thetas, alpha=c.gamma_in)
        )
        torch._foreach_lerp_(exp_avgs, directions, c.m_weight)
        if c.f_decay != 1.0:
            torch._foreach_mul_(fishers, c.f_decay)
        torch._foreach_addcmul_(fishers, grads, grads, value=c.f_weight)
        denominators = torch._foreach_add(fishers, c.damping)
        torch._foreach_addcdiv_(xs, exp_avgs, denominators, value=-c.step_size)
        return
    thetas = xs if thetas is None else thetas
    for x, g, theta, m, f in zip(xs, grads, thetas, exp_avgs, fishers):
        lerp_(m, g if thetas is xs else g + c.gamma_in * theta, c.m_weight)
        f.mul_(c.f_decay).add_(c.f_weight * g * g)
        x.sub_(c.step_size * m / (f + c.damping))
