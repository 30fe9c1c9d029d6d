"""Bayes by Backprop: a fully factorised Gaussian trained by Adam on (μ, ρ).

Blundell et al. (2015), as VIME's released dynamics model trains it (Houthooft et al. 2016;
``openai/vime``, ``dynamics/bnn.py``; ``docs/decisions.md#vime``): every weight has a
mean μ and a standard deviation σ = softplus(ρ) = log(1 + e^ρ), and both are moved by
Adam on the negative evidence lower bound

    F(μ, ρ) = E_q[f(θ)] + (λ/N) · KL(q ‖ N(0, η I)),     θ = μ + σ ⊙ ε,  ε ~ N(0, I),

where f is the loss the caller backpropagates (``p.grad`` = ∇θf at the sample, as for every
:class:`WeightSampling` strategy), λ = ``kl_weight``, N = ``num_data`` and η =
``prior_variance``. With one weight sample per step the reparameterisation gives

    ∇μF = g + (λ/N) μ/η,       ∇ρF = [g ⊙ ε + (λ/N)(σ/η − 1/σ)] ⊙ sigmoid(ρ),

g = ∇θf(θ), and both take Adam's step with the bias correction folded into the step size
(:mod:`param_explore.adam_rule`; lasagne's ``adam``, which VIME uses, is that rule).

:meth:`BayesByBackprop.information_gain` is VIME's second-order approximation of the
KL divergence between the posterior after and before one step on a transition
(:mod:`param_explore.posterior`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .adam_rule import AdamCoefficients, adam_update_
from .posterior import GainEvidence, GainShape, Posterior, PosteriorMemory
from .sampling import WeightSampling
from .traceable import Mode, StateTensors
from .validation import Checks, require_betas, require_non_negative, require_positive


def inverse_softplus(sigma: float) -> float:
    """ρ with softplus(ρ) = σ (VIME's ``std_to_log``)."""
    return math.log(math.expm1(sigma))


class BayesByBackprop(Posterior, WeightSampling, torch.optim.Optimizer):
    """Fully factorised Gaussian q(θ) = N(μ, softplus(ρ)²), trained by Adam on the ELBO.

    The parameters hold μ; ρ lives in the optimizer state (``state[p]["rho"]``), starting
    at softplus⁻¹(``initial_std``) — by default the prior's standard deviation √η, as
    VIME starts (``bnn.py`` l.40 and l.55-59). ``kl_weight`` = 0 leaves the prior out.
    μ and ρ each have their own Adam moments; ``lr``, ``betas`` and ``eps`` are shared.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        kl_weight: float = 1.0,
        num_data: float = 1.0,
        prior_variance: float = 1.0,
        initial_std: float | None = None,
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            betas=betas,
            eps=eps,
            kl_weight=kl_weight,
            num_data=num_data,
            prior_variance=prior_variance,
            initial_std=initial_std,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        eps=require_non_negative,
        kl_weight=require_non_negative,
        num_data=require_positive,
        prior_variance=require_positive,
        # None: the prior's standard deviation √η (checked with it, below)
        initial_std=lambda name, value: value if value is None else require_positive(name, value),
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        if settings["initial_std"] is None:
            settings["initial_std"] = math.sqrt(settings["prior_variance"])

    _state_keys = ("rho", "exp_avg", "exp_avg_sq", "rho_exp_avg", "rho_exp_avg_sq")

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = self.state[p]
        if "rho" not in state:
            state["step"] = torch.tensor(0.0)
            state["rho"] = torch.full_like(
                p, inverse_softplus(group["initial_std"]), memory_format=torch.preserve_format
            )
            for key in self._state_keys[1:]:
                state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def _std(self, group: Mapping, state: StateTensors, c: BBBCoefficients) -> list[Tensor]:
        """σ = softplus(ρ)."""
        return [F.softplus(r) for r in state["rho"]]

    def _coefficients(self, group: Mapping, step: int) -> BBBCoefficients:
        return BBBCoefficients(
            AdamCoefficients.at_step(step, group["lr"], group["betas"], group["eps"]),
            group["kl_weight"] / group["num_data"],
            1.0 / group["prior_variance"],
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: BBBCoefficients,
        mode: Mode,
    ) -> None:
        # Foreach ops, not the fused kernel: BBB serves small models (VIME's has 32 units).
        mean_grads, rho_grads = bbb_gradients(xs, grads, state["rho"], state["noise"], c)
        adam_update_(
            xs, mean_grads, state["exp_avg"], state["exp_avg_sq"], c.adam, mode, fused=False
        )
        adam_update_(
            state["rho"], rho_grads, state["rho_exp_avg"], state["rho_exp_avg_sq"], c.adam,
            mode, fused=False,
        )  # fmt: skip

    # ------------------------------------------------------------------ the posterior
    #: VIME's gain: a Monte Carlo estimate over K weight samples, or through the local
    #: reparameterisation (noise per unit), as released.
    gain_from_samples: ClassVar[bool] = True
    local_reparameterisation: ClassVar[bool] = True
    #: ε, ρ and Adam's two moments of μ and of ρ.
    state_per_weight: ClassVar[int] = 6

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        """VIME's: λ = 1, lasagne's Adam (bnn.py l.434-435) and σ₀ = √η, the prior's std
        (``initial_std`` None; l.40, l.55-59)."""
        return dict(
            kl_weight=1.0, num_data=num_data, prior_variance=prior_variance, lr=1e-4,
            betas=(0.9, 0.999), eps=1e-8,
        )  # fmt: skip

    @classmethod
    def posterior_memory(cls, shape: GainShape) -> PosteriorMemory:
        """Noise per unit (as released): two gradients per transition, of μ and σ, averaged
        over the K samples, and K noise draws per unit and transition of the whole call;
        noise per weight: as every sampled posterior's (one gradient per sample)."""
        if not shape.per_unit:
            return super().posterior_memory(shape)
        weights = shape.weights
        return PosteriorMemory(
            (2 + cls.state_per_weight) * weights,
            2 * shape.chunk * weights + shape.batch * shape.samples * shape.units,
        )

    def kl_divergence_to_prior(self) -> float:
        """KL(q ‖ N(0, η I)): the ELBO's KL term."""
        return self._diagonal_kl_to_prior()

    @torch.no_grad()
    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        """VIME's second-order information gain of each example, without a step.

        VIME's update on an example b minimises ℓ(φ) = KL(q_φ ‖ q) + E_{q_φ}[f_b] from
        φ = (μ, ρ) by one Newton step of size λ = ``step_size`` with the diagonal Hessian H
        of the KL at q_φ = q, and approximates the KL it causes by its quadratic form:

            KL(q_after ‖ q) ≈ ½ λ² ∇ℓᵀ H⁻¹ ∇ℓ,   H_μ = 1/σ²,  H_ρ = 2 sigmoid(ρ)²/σ²,

        with ∇ℓ the example's estimates ∇μ and ∇ρ = ∇σ sigmoid(ρ)
        (:meth:`GainEvidence.moment_gradients`; the KL term has no gradient at q_φ = q). As
        ∇ρ²/H_ρ = ½ σ² ∇σ², this is

            KL(q_after ‖ q) ≈ ½ λ² Σ σ² [∇μ² + ½ ∇σ²],

        a float64 tensor (B,). (The released code, ``bnn.py`` l.494-495, leaves out the ½;
        the bonus, divided by the median of earlier gains, is the same.) The estimates come
        through weight samples θ_k = μ + σ ε_k (∇μ = mean_k g_k, ∇σ = mean_k g_k ε_k; the
        option ``bbb_gain_noise: weight`` of VIME's bonus) or, as released, through the
        local reparameterisation, noise per unit (``agents.curiosity.dynamics``).
        """
        mean_grads, std_grads = evidence.moment_gradients()
        total = None
        for sigma, grad_mean, grad_std in zip(self.sampling_std(), mean_grads, std_grads):
            terms = grad_std.square().mul_(0.5).add_(grad_mean.square()).mul_(sigma.square())
            per_example = terms.flatten(start_dim=1).sum(dim=1, dtype=torch.float64)
            total = per_example if total is None else total + per_example
        return 0.5 * step_size**2 * total


class BBBCoefficients(NamedTuple):
    """The numbers of one Bayes-by-Backprop step (floats, or 0-d tensors when traced)."""

    adam: AdamCoefficients  # the step on μ and on ρ
    kl_scale: float  # λ/N
    prior_precision: float  # 1/η


def bbb_gradients(
    xs: list[Tensor],
    grads: list[Tensor],
    rhos: list[Tensor],
    noises: list[Tensor],
    c: BBBCoefficients,
) -> tuple[list[Tensor], list[Tensor]]:
    """∇μF = g + (λ/N) μ/η and ∇ρF = [g ε + (λ/N)(σ/η − 1/σ)] sigmoid(ρ), new tensors."""
    mean_grads, rho_grads = [], []
    for x, g, rho, e in zip(xs, grads, rhos, noises):
        sigma = F.softplus(rho)
        mean_grads.append(g + (c.kl_scale * c.prior_precision) * x)
        sigma_grad = g * e + c.kl_scale * (sigma * c.prior_precision - sigma.reciprocal())
        rho_grads.append(sigma_grad * torch.sigmoid(rho))
    return mean_grads, rho_grads
