"""IVON: improved variational online Newton (Shen et al. 2024, "Variational Learning is
Effective for Large Deep Networks", ICML; the authors' implementation ``ivon-opt`` 0.1.3,
``ivon/_ivon.py``).

Why it is here: Vadam's σ = 1/√(N s + λ + c) follows *squared gradients*, which for a DDPG
actor's loss −Q are tiny, so σ barely moves (docs/sigma.md). IVON's σ = 1/√(ess·(h + δ))
follows a *Hessian* estimate h of the loss instead, obtained from the same single weight
sample by the reparameterisation trick — σ adapted to curvature, not to gradient size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from .posterior import GainEvidence, Posterior
from .sampling import WeightSampling
from .traceable import Mode, StateTensors
from .validation import Checks, require_beta, require_non_negative, require_positive

#: The Hessian estimates of ``ivon-opt`` (``IVON.hessian_approx_methods``).
HESSIAN_ESTIMATES = ("price", "gradsq")
#: The largest initial sampling std σ₀ = 1/√(ess·(h₀ + δ)) the settings may give. Weights
#: drawn with a σ of this size are noise: a network's weights start at ~1/√fan_in ≪ 1, and
#: every unit behind such weights saturates whatever its input (σ₀ is 0.1 in the preset,
#: 0.01-0.3 in the studies). A few orders more and the actor's float32 activations overflow
#: at the first step (ess = 1e-30 gives σ₀ = 1e17: non-finite actions before any update);
#: so a σ₀ above this is refused with the settings it comes from, not blamed on an update.
MAX_INITIAL_STD = 1e3


def _require_estimate(name: str, value: Any) -> str:
    if value not in HESSIAN_ESTIMATES:
        raise ValueError(f"{name} must be one of {', '.join(HESSIAN_ESTIMATES)}, got {value!r}")
    return value


def _require_radius(name: str, value: Any) -> float | None:
    """A clipping radius: None for none (``ivon-opt``'s default, infinity: a checkpoint holds
    finite settings only), or a finite number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a finite number > 0 or null (no clipping), got {value!r}")
    return float(value)


def _require_initial_hessian(name: str, value: Any) -> float | None:
    """h₀: a finite number > 0, or None for the prior's own precision per datum, h₀ = δ
    (the variational reading's start, as :meth:`IVON.posterior_settings` sets it)."""
    return None if value is None else require_positive(name, value)


class IVON(Posterior, WeightSampling, torch.optim.Optimizer):
    """Variational online Newton with a diagonal Gaussian q(θ) = N(μ, σ²), one MC sample.

    One step t, with g = ∇θF(θ) at the sample θ = μ + σ⊙ε (``p.grad``), ess the effective
    sample size, δ = ``weight_decay``, h₀ = ``hess_init``, α = ``lr``:

        σ = 1/√(ess·(h + δ))                                         (the sampling std)
        m ← β₁ m + (1 − β₁) g
        ĥ = ess·(h + δ)·(σ⊙ε)⊙g   ('price': Price's theorem, the reparameterisation trick)
        ĥ = ess·g²                ('gradsq': squared gradients)
        h ← β₂ h + (1 − β₂) ĥ + ½(1 − β₂)²(h − ĥ)²/(h + δ)   (the Riemannian correction
                                                             that keeps h + δ positive)
        μ ← μ − α(h₀ + δ)·clip((m/(1 − β₁ᵗ) + δμ)/(h + δ), ±``clip_radius``)  (None: no clip)

    — ``ivon-opt`` 0.1.3's ``_update`` with its defaults ``debias=True`` (m's bias
    correction) and ``rescale_lr=True`` (α times h₀ + δ, so that α is the first step's size
    per unit gradient), the new h in the mean's step. ``ivon-opt`` draws the perturbation
    σ⊙ε itself inside ``sampled_params``; here ε is the interface's (``resample_noise``: per
    step or per episode) and θ = μ + σ⊙ε is formed by the caller, so one draw serves acting
    and the gradient, as for every strategy of the toolkit (``tests/test_ivon.py`` holds the
    two implementations equal step by step for the same ε). A parameter never perturbed (a
    LayerNorm's, ``perturb=False``) has ε = 0, where Price's estimate reads nothing (ĥ = 0
    would drive h to 0 and the step m/(h + δ) up by 1/δ): its h stays h₀, and its mean
    takes the step of that fixed curvature.

    ``hess_init=None`` starts h at the prior's precision per datum, h₀ = δ (the variational
    reading: q starts at twice the prior's precision, σ₀ = 1/√(2·ess·δ)); σ then stays at or
    below the prior's width 1/√(ess·δ) = √2·σ₀ while h ≥ 0. The defaults are the RL actor's
    preset, ``configs/ivon.yaml`` (each value's source): ess = 1e6 transitions, δ = 5e-5 so
    that σ₀ = 0.1 under a prior of width 0.141, β₂ = 0.99999 as ``ivon-opt``, the loss a
    mean; the project's first preset (h₀ = 1, δ = 1e-4, ess = 100, β₂ = 0.9999, α = 1e-4,
    the summed loss) is ``configs/ivon-wide-prior.yaml`` (docs/strategies.md#ivon).
    """

    default_actor_grad_reduction = "mean"

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 0.01,
        ess: float = 1e6,
        hess_init: float | None = None,
        beta1: float = 0.9,
        beta2: float = 0.99999,
        weight_decay: float = 5e-5,
        clip_radius: float | None = None,
        hess_approx: str = "price",
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            ess=ess,
            hess_init=hess_init,
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            clip_radius=clip_radius,
            hess_approx=hess_approx,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        ess=require_positive,
        hess_init=_require_initial_hessian,
        beta1=require_beta,
        beta2=require_beta,
        weight_decay=require_non_negative,
        clip_radius=_require_radius,
        hess_approx=_require_estimate,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        if settings.get("hess_init", 1.0) is None and settings.get("weight_decay") == 0:
            raise ValueError(
                "hess_init null takes h0 = weight_decay, which must then be > 0 "
                "(sigma_0 = 1/sqrt(2 ess weight_decay)), got weight_decay 0"
            )
        _check_initial_std(settings)

    _state_keys = ("exp_avg", "hess")

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = self.state[p]
        if "hess" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["hess"] = torch.full_like(
                p, initial_hessian(group), memory_format=torch.preserve_format
            )
        return state

    def _std(self, group: Mapping, state: StateTensors, c: IVONCoefficients) -> list[Tensor]:
        """σ = 1/√(ess·(h + δ))."""
        return [torch.rsqrt((h + c.weight_decay) * c.ess) for h in state["hess"]]

    def _coefficients(self, group: Mapping, step: int) -> IVONCoefficients:
        beta1, beta2 = group["beta1"], group["beta2"]
        return IVONCoefficients(
            beta1=beta1,
            m_weight=1.0 - beta1,
            beta2=beta2,
            h_weight=1.0 - beta2,
            ess=group["ess"],
            weight_decay=group["weight_decay"],
            step_size=group["lr"] * (initial_hessian(group) + group["weight_decay"]),
            debias=1.0 - beta1**step,
            clip_radius=math.inf if group["clip_radius"] is None else group["clip_radius"],
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: IVONCoefficients,
        mode: Mode,
    ) -> None:
        # σ of the sample that produced g: h before this step. The estimate is the form of
        # the rule (a setting), not a number of the step.
        stds = self._std(group, state, c)
        price = group["hess_approx"] == "price"
        moments = zip(xs, grads, state["exp_avg"], state["hess"], stds, state["noise"])
        for x, g, m, h, std, e in moments:
            m.mul_(c.beta1).add_(c.m_weight * g)
            estimate = hessian_estimate(g, h, std * e, c.ess, c.weight_decay, price)
            after = riemannian_hessian_step(h, estimate, c.beta2, c.h_weight, c.weight_decay)
            if price:  # ε = 0 (never perturbed: a LayerNorm's): no sample, h stays
                after = torch.where(e != 0, after, h)
            h.copy_(after)
            step = (m / c.debias + c.weight_decay * x) / (h + c.weight_decay)
            x.sub_(c.step_size * torch.clamp(step, -c.clip_radius, c.clip_radius))

    # ------------------------------------------------------------------ the posterior
    #: The price estimate needs ε ≠ 0: the gain is a Monte Carlo estimate over weight samples.
    gain_from_samples: ClassVar[bool] = True
    #: ε, m and h.
    state_per_weight: ClassVar[int] = 3
    posterior_needs_positive: ClassVar[Mapping[str, str]] = {
        "weight_decay": "its prior is N(0, 1/(ess·weight_decay)), the KL term's"
    }

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        """The VI reading (Shen et al. Sec. 2): ess = N and δ = 1/(Nη), so that σ² =
        1/(N h + 1/η) is the posterior of a prior N(0, η) and N data; h₀ = δ starts σ at
        √(η/2), h's share being the prior's. α = 0.1 and β₂ = 0.999 (h follows the model
        within VIME's first fit of 500 updates) are this project's."""
        decay = 1.0 / (num_data * prior_variance)
        return dict(ess=num_data, weight_decay=decay, hess_init=decay, lr=0.1, beta2=0.999)

    def _prior_variance(self, group: Mapping) -> float:
        """η = 1/(ess·δ): δ is the prior's precision per datum."""
        if group["weight_decay"] == 0:
            raise ValueError(
                "IVON's prior N(0, 1/(ess·weight_decay)) needs weight_decay > 0 for a KL to it"
            )
        return 1.0 / (group["ess"] * group["weight_decay"])

    def kl_divergence_to_prior(self) -> float:
        """KL(q ‖ N(0, η I)), η = 1/(ess·δ): the ELBO's KL term."""
        return self._diagonal_kl_to_prior()

    @torch.no_grad()
    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        """KL(q_after ‖ q) of one step on each example alone, without taking it.

        The step is the rule above on a minibatch of that one example at each weight sample
        θ_k = μ + σ ε_k and **without momentum** (β₁ = 0, as noisy Adam's gain): momentum
        carries earlier minibatches' gradients, while the gain asks what this example alone
        changes. Per weight, with g the example's gradient at θ_k:

            h′ = β₂ h + (1 − β₂) ĥ + ½(1 − β₂)²(h − ĥ)²/(h + δ),
            Δμ = −α(h₀ + δ)·clip((g + δμ)/(h′ + δ)),
            KL = ½ [σ′²/σ² − 1 − ln(σ′²/σ²) + Δμ²/σ²],  σ′²/σ² = (h + δ)/(h′ + δ),

        exact (the posterior after the step is again diagonal), averaged over the K samples:
        a float64 tensor (B,). ``step_size`` (Bayes by Backprop's λ) is not used: the step
        is IVON's own. The optimizer is not changed.
        """
        flat = iter(zip(evidence.gradients(), evidence.noises))
        total = None
        for group in self.param_groups:
            c = self._coefficients(group, 1)
            price = group["hess_approx"] == "price"
            for p in group["params"]:
                g, e = next(flat)
                h = self._init_state(group, p)["hess"]
                std = torch.rsqrt((h + c.weight_decay) * c.ess)
                estimate = hessian_estimate(g, h, std * e, c.ess, c.weight_decay, price)
                after = riemannian_hessian_step(h, estimate, c.beta2, c.h_weight, c.weight_decay)
                ratio = (h - after) / (after + c.weight_decay)  # σ′²/σ² − 1
                step = torch.clamp(
                    (g + c.weight_decay * p) / (after + c.weight_decay),
                    -c.clip_radius,
                    c.clip_radius,
                )
                mahalanobis = (c.step_size * step).square() * ((h + c.weight_decay) * c.ess)
                kl = ratio - torch.log1p(ratio) + mahalanobis
                per_example = kl.flatten(start_dim=2).sum(dim=2, dtype=torch.float64).mean(dim=1)
                total = per_example if total is None else total + per_example
        return 0.5 * total


def _check_initial_std(settings: Mapping[str, Any]) -> None:
    """σ₀ = 1/√(ess·(h₀ + δ)), derived from three settings, at most :data:`MAX_INITIAL_STD`;
    else a ValueError naming them (``ess`` first: the effective sample size is the one a
    user scales over decades)."""
    h0 = initial_hessian(settings)
    sigma0 = 1.0 / math.sqrt(settings["ess"] * (h0 + settings["weight_decay"]))
    if sigma0 > MAX_INITIAL_STD:
        given = settings["hess_init"] is not None
        h0_from = "hess_init" if given else "hess_init null: h0 = weight_decay"
        raise ValueError(
            f"ess = {settings['ess']:g} gives the initial sampling std sigma_0 = "
            f"1/sqrt(ess (h0 + weight_decay)) = {sigma0:.3g} (h0 = {h0:g}, {h0_from}; "
            f"weight_decay = {settings['weight_decay']:g}), above {MAX_INITIAL_STD:g}: weights "
            "drawn with it are noise, and the actor's activations overflow; raise ess (or "
            "hess_init, weight_decay)"
        )


def initial_hessian(group: Mapping) -> float:
    """h₀: ``hess_init``, or δ where it is None (the prior's precision per datum, so that
    σ₀ = 1/√(2·ess·δ) and the prior N(0, 1/(ess δ)) caps σ at √2·σ₀ while h ≥ 0)."""
    h0 = group["hess_init"]
    return group["weight_decay"] if h0 is None else h0


def hessian_estimate(
    g: Tensor, h: Tensor, perturbation: Tensor, ess: float, weight_decay: float, price: bool
) -> Tensor:
    """ĥ of one sample: ess·(h + δ)·(σ⊙ε)⊙g (``price``) or ess·g² (``gradsq``), as
    ``ivon-opt``'s ``_get_nll_hess`` times ess."""
    if price:
        return perturbation * g * (h + weight_decay) * ess
    return g.square() * ess


def riemannian_hessian_step(
    h: Tensor, estimate: Tensor, beta2: float, h_weight: float, weight_decay: float
) -> Tensor:
    """h′ = β₂ h + (1 − β₂) ĥ + ½(1 − β₂)²(h − ĥ)²/(h + δ), a new tensor (``ivon-opt``'s
    ``_new_hess``). ``h_weight`` is 1 − β₂ computed once in double precision: traced, β₂ is a
    float32 tensor, and 1 − 0.99999 in float32 is 1.0014e-5, 0.14 % off."""
    return (
        beta2 * h
        + h_weight * estimate
        + (0.5 * h_weight**2) * (h - estimate).square() / (h + weight_decay)
    )


class IVONCoefficients(NamedTuple):
    """The numbers of one IVON step (floats, or 0-d tensors when traced)."""

    beta1: float  # β₁
    m_weight: float  # 1 − β₁
    beta2: float  # β₂
    h_weight: float  # 1 − β₂ (computed once, in double precision)
    ess: float  # the effective sample size
    weight_decay: float  # δ
    step_size: float  # α(h₀ + δ)
    debias: float  # 1 − β₁ᵗ
    clip_radius: float  # the mean step's clip (inf: none)
