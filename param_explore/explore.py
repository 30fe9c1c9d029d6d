"""SGD-Explore and Adam-Explore: mean and precision learned separately (eq. 111); and
``fixed-noise``, the same sampling with no variance step at all.

The naive parameter-exploration baselines of Appendix K. Each weight has a mean μ (the
parameter tensor) and a learned precision p = σ⁻², initialised to 1e4 (Table 3), and
the network is evaluated at θ = μ + ε/√p. Eq. 111 writes the variance step on σ²;
the authors' released code takes it on the precision
(``docs/decisions.md#explore-on-precision``), which is what is done here. With
g = ∇θF(θ) the chain rule through θ = μ + ε p^{-1/2} gives

    ∇μ = g,        ∇p = −g ⊙ ε / (2 p^{3/2}).

∇p is formed in :meth:`step` from ``p.grad`` and the stored ε, so it is exact for any
loss of θ whichever way the gradient was computed (``sampled_params()`` or ``sample()``).

**Keeping the precision positive.** The released code applies no safeguard; with the
paper's step sizes the precision moves by about α^(σ) = 1e-2 per step away from 1e4
and never gets near zero. A plain gradient step on p can nonetheless cross zero when
the step size is raised (∇p grows like p^{-3/2} as p shrinks), so after every step the
precision is clamped from below at ``min_precision`` (default 1, i.e. σ ≤ 1). In the
paper's regime the clamp never acts, so the updates equal the unclipped released code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from .adam_rule import AdamCoefficients, adam_update_
from .sampling import PrecisionSampling
from .traceable import Mode, StateTensors
from .validation import Checks, require_betas, require_non_negative, require_positive


class _PrecisionExplore(PrecisionSampling, torch.optim.Optimizer):
    """Shared state, σ and statistics of the two Explore variants; each has its rule."""

    _state_keys: tuple[str, ...] = ("precision",)

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = super()._init_state(group, p)
        for key in self._state_keys:
            if key not in state:
                state[key] = torch.zeros_like(state["precision"])
        return state

    @torch.no_grad()
    def exploration_statistics(self) -> dict[str, float]:
        """σ statistics plus ``clamped_fraction``: the share of precisions held at the floor.

        An entry sits at ``min_precision`` only when the clamp has acted on it (and the
        gradient has not lifted it since), so this measures whether the safeguard changes
        the released code's updates; 0 means the updates are the unclipped ones.
        """
        at_floor, total = 0, 0
        for group in self._perturbed_groups():
            for p in group["params"]:
                precision = self._init_state(group, p)["precision"]
                at_floor += int((precision <= group["min_precision"]).sum())
                total += precision.numel()
        return {**super().exploration_statistics(), "clamped_fraction": at_floor / total}


def precision_gradients(
    grads: list[Tensor], noises: list[Tensor], precisions: list[Tensor], mode: Mode
) -> list[Tensor]:
    """∇p = −g ε / (2 p^{3/2}) for θ = μ + ε/√p, at the precision that drew the sample."""
    if mode == "eager":  # one foreach kernel per operation
        out = torch._foreach_pow(precisions, -1.5)
        torch._foreach_mul_(out, noises)
        torch._foreach_mul_(out, grads)
        torch._foreach_mul_(out, -0.5)
        return out
    return [-0.5 * g * e * p.pow(-1.5) for g, e, p in zip(grads, noises, precisions)]


def _clamp_(precisions: list[Tensor], floor: float | Tensor, mode: Mode) -> None:
    if mode == "eager":
        torch._foreach_clamp_min_(precisions, floor)
    else:
        for p in precisions:
            p.clamp_min_(floor)


class SGDExplore(_PrecisionExplore):
    """Eq. 111 with plain gradient steps: μ ← μ − α g,  p ← p − α^(σ) ∇p (then clamp)."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        precision_lr: float = 1e-2,
        initial_precision: float = 1e4,
        min_precision: float = 1.0,
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            precision_lr=precision_lr,
            initial_precision=initial_precision,
            min_precision=min_precision,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        precision_lr=require_non_negative,
        initial_precision=require_positive,
        min_precision=require_positive,
    )

    def _coefficients(self, group: Mapping, step: int) -> SGDExploreCoefficients:
        return SGDExploreCoefficients(group["lr"], group["precision_lr"], group["min_precision"])

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: SGDExploreCoefficients,
        mode: Mode,
    ) -> None:
        sgd_explore_update_(xs, grads, state["precision"], state["noise"], c, mode)


class SGDExploreCoefficients(NamedTuple):
    lr: float  # α
    precision_lr: float  # α^(σ)
    min_precision: float  # the floor of p


def sgd_explore_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    precisions: list[Tensor],
    noises: list[Tensor],
    c: SGDExploreCoefficients,
    mode: Mode,
) -> None:
    """μ ← μ − α g;  p ← max(p − α^(σ) ∇p, floor), in place."""
    precision_grads = precision_gradients(grads, noises, precisions, mode)
    if mode == "eager":
        torch._foreach_add_(xs, grads, alpha=-c.lr)
        torch._foreach_add_(precisions, precision_grads, alpha=-c.precision_lr)
    else:
        for x, g, p, pg in zip(xs, grads, precisions, precision_grads):
            x.sub_(c.lr * g)
            p.sub_(c.precision_lr * pg)
    _clamp_(precisions, c.min_precision, mode)


class AdamExplore(_PrecisionExplore):
    """Eq. 111 with two independent Adams: on μ (α, γ₁, γ₂) and on p (α^(σ), γ₁^(σ), γ₂^(σ))."""

    _state_keys = (
        "precision",
        "exp_avg",
        "exp_avg_sq",
        "precision_exp_avg",
        "precision_exp_avg_sq",
    )

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        precision_lr: float = 1e-2,
        precision_betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        initial_precision: float = 1e4,
        min_precision: float = 1.0,
    ) -> None:
        settings = self.checked_settings(
            lr=lr,
            betas=betas,
            precision_lr=precision_lr,
            precision_betas=precision_betas,
            eps=eps,
            initial_precision=initial_precision,
            min_precision=min_precision,
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        precision_lr=require_non_negative,
        precision_betas=require_betas,
        eps=require_positive,
        initial_precision=require_positive,
        min_precision=require_positive,
    )

    def _coefficients(self, group: Mapping, step: int) -> AdamExploreCoefficients:
        return AdamExploreCoefficients(
            AdamCoefficients.at_step(step, group["lr"], group["betas"], group["eps"]),
            AdamCoefficients.at_step(
                step, group["precision_lr"], group["precision_betas"], group["eps"]
            ),
            group["min_precision"],
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: AdamExploreCoefficients,
        mode: Mode,
    ) -> None:
        adam_explore_update_(xs, grads, state, c, mode)


class AdamExploreCoefficients(NamedTuple):
    mean: AdamCoefficients  # the Adam on μ
    precision: AdamCoefficients  # the Adam on p
    min_precision: float  # the floor of p


def adam_explore_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    state: StateTensors,
    c: AdamExploreCoefficients,
    mode: Mode,
) -> None:
    """An Adam step on μ from g and one on p from ∇p (then the clamp), in place."""
    precisions = state["precision"]
    precision_grads = precision_gradients(grads, state["noise"], precisions, mode)
    adam_update_(xs, grads, state["exp_avg"], state["exp_avg_sq"], c.mean, mode)
    adam_update_(
        precisions,
        precision_grads,
        state["precision_exp_avg"],
        state["precision_exp_avg_sq"],
        c.precision,
        mode,
    )
    _clamp_(precisions, c.min_precision, mode)


class FixedNoise(PrecisionSampling, torch.optim.Optimizer):
    """Adam on μ and a weight noise that never changes: θ = μ + ε/√p₀ at every step.

    An ablation, not a method of the papers (``docs/decisions.md#fixed-noise``): with Table 3's
    settings Vadam's precision s + λ + c stays within a few percent of c = 1e4 for the first
    100 k steps, so its σ hardly moves from 0.01. This strategy keeps exactly that noise and
    learns μ by the same Adam as Vadam and Adam-Explore (:func:`adam_update_`, bias
    correction folded into the step), so comparing it with Vadam asks whether Vadam's
    *adaptive* σ matters or only its weight noise. It is Adam-Explore with a precision step
    of zero (eq. 111 with α^(σ) = 0), computed without the unused precision moments.
    """

    _state_keys = ("precision", "exp_avg", "exp_avg_sq")

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        initial_precision: float = 1e4,
    ) -> None:
        settings = self.checked_settings(
            lr=lr, betas=betas, eps=eps, initial_precision=initial_precision
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        eps=require_positive,
        initial_precision=require_positive,
    )

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = super()._init_state(group, p)
        for key in ("exp_avg", "exp_avg_sq"):
            if key not in state:
                state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def _coefficients(self, group: Mapping, step: int) -> AdamCoefficients:
        return AdamCoefficients.at_step(step, group["lr"], group["betas"], group["eps"])

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: AdamCoefficients,
        mode: Mode,
    ) -> None:
        adam_update_(xs, grads, state["exp_avg"], state["exp_avg_sq"], c, mode)
