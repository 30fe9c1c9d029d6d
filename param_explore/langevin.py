"""Adam Langevin Monte Carlo: a Q function sampled from its posterior by noisy Adam-like steps
(Ishfaq et al. 2024, "Provable and Practical: Efficient Exploration in Reinforcement Learning
via Langevin Monte Carlo", ICLR; Adam LMCDQN, Sec. 5, after Kim et al. 2022's Adam SGLD).

Why it is here: a critic's loss is a regression with real curvature, and Thompson sampling
asks for a sample of Q from its posterior, not for a Gaussian around a mean. Langevin Monte
Carlo gives one without a variational family: gradient steps with Gaussian noise of variance
2η/β, whose iterates are distributed as exp(−β L(w)) once the chain has mixed. The
released code of the paper (repository ``hmishfaq/LMC-LSVI``, ``components/lmc_dqn/optim.py``,
class ``aSGLD``; the same class trains LSAC's critics, ``hmishfaq/LSAC``, ``utils/optims.py``)
decides where the paper's text could not be read here: the order of the moments and the step,
and δ's place (docs/decisions.md#variational-critic).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from .sampling import MomentSampling
from .traceable import Mode, StateTensors, lerp_
from .validation import (
    Checks,
    in_float32,
    require_betas,
    require_non_negative,
    require_positive,
)


class AdamLangevin(MomentSampling, torch.optim.Optimizer):
    """Adam Langevin Monte Carlo (Adam LMCDQN's update): one step, with g = ∇L(w) at the
    iterate w (``p.grad``), η = ``lr``, (α₁, α₂) = ``betas`` (the paper's smoothing factors),
    λ = ``eps``, a = ``bias_factor``, β⁻¹ = ``temperature`` and ε ~ N(0, I):

        m ← α₁ m + (1 − α₁) g
        v ← α₂ v + (1 − α₂) g⊙g
        w ← w − η (g + a m ⊘ (√v + λ)) + √(2η β⁻¹) ε

    The drift is the gradient plus Adam's direction scaled by the bias factor a (Kim et al.'s
    adaptive drift); the noise is isotropic, √(2η β⁻¹) ε, not preconditioned (pSGLD divides it
    by the preconditioner; Adam SGLD does not). No bias correction of m, v (the released
    code: "there is no bias correction in the original description of Adam SGLD"). The order —
    the moments take this step's g before the step uses them — and λ added to √v are the
    released ``aSGLD``'s; β⁻¹ is its ``noise_scale`` squared (it adds
    ``noise_scale · √(2η) · ε``). With β⁻¹ = 0 the step is deterministic, the drift alone;
    with a = 0 it is plain Langevin Monte Carlo (the LMC-LSVI update, Alg. 1), whose chain on
    L(w) = ½k w² has the stationary variance β⁻¹/(k(1 − ηk/2)).

    The defaults are the released ``aSGLD``'s own (the same in both repositories): η = 1e-3,
    (α₁, α₂) = (0.9, 0.999), λ = 1e-8, a = 1, β⁻¹ = 1e-4 (``noise_scale`` 0.01). The paper's
    Atari runs swept a ∈ {1, 0.1, 0.01} and ``noise_scale`` ∈ {1e-8, 1e-7, 1e-6} (β⁻¹ ∈
    {1e-16, 1e-14, 1e-12}) at η = 1e-4 (``configs/atari8_lmc.json``); LSAC's MuJoCo critics use
    η = 1e-3, a = 1, β⁻¹ = 1e-16, and clip the gradient's global norm at 0.7 (not part of the
    rule; not done here).

    **The sampling interface.** A Langevin chain's posterior sample is its current iterate:
    there is no σ of its own. θ = w: :meth:`sample`, :meth:`sampled_params` and
    :meth:`training_params` give the parameters themselves, :meth:`sampling_std` reads 0, and
    the gradient is taken at w. The interface's ε is the Langevin noise of the coming step:
    :attr:`explores` is true so that :meth:`resample_noise` (and a population's one draw into
    every member's ε, :meth:`perturbed`) draws it, and it is saved with the state. An eager
    :meth:`step` uses the ε in its state (drawing one first if none was) and then draws the
    next, so a plain ``backward(); step()`` loop is a Langevin chain; a traced step
    (:meth:`traceable_step`) uses the ε in its state, which its caller draws before every call,
    as it draws the actor's. A parameter never perturbed (``perturb=False``, a LayerNorm's)
    has ε = 0: it takes the drift alone.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        bias_factor: float = 1.0,
        temperature: float = 1e-4,
    ) -> None:
        settings = self.checked_settings(
            lr=lr, betas=betas, eps=eps, bias_factor=bias_factor, temperature=temperature
        )
        super().__init__(params, settings)

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        betas=require_betas,
        eps=require_positive,
        bias_factor=require_non_negative,
        temperature=require_non_negative,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        scale = noise_scale(settings["lr"], settings["temperature"])
        if not in_float32(scale):
            raise ValueError(
                f"lr = {settings['lr']:g} and temperature = {settings['temperature']:g} give "
                f"the noise scale sqrt(2 lr temperature) = {scale:.3g}, outside float32 (the "
                "dtype it is used in); lower lr or temperature"
            )

    def _std(self, group: Mapping, state: StateTensors, c: tuple) -> list[Tensor]:
        """σ = 0: the iterate is the sample."""
        return [torch.zeros_like(m) for m in state["exp_avg"]]

    def _coefficients(self, group: Mapping, step: int) -> LangevinCoefficients:
        beta1, beta2 = group["betas"]
        return LangevinCoefficients(
            m_weight=1.0 - beta1,
            beta2=beta2,
            s_weight=1.0 - beta2,
            lr=group["lr"],
            drift_step=group["lr"] * group["bias_factor"],
            eps=group["eps"],
            noise_scale=noise_scale(group["lr"], group["temperature"]),
        )

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: LangevinCoefficients,
        mode: Mode,
    ) -> None:
        langevin_update_(xs, grads, state["exp_avg"], state["exp_avg_sq"], state["noise"], c, mode)

    def _training_point(
        self, group: Mapping, xs: list[Tensor], state: StateTensors, c: tuple
    ) -> list[Tensor]:
        """The gradient is taken at the iterate itself."""
        return xs

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One Langevin step with the ε in the state (drawn now if none was), then the next
        ε drawn; a non-finite gradient skips the step (ε is redrawn all the same)."""
        for group in self.param_groups:
            self._group_noise(group)
        loss = super().step(closure)
        self.resample_noise()
        return loss

    def sample(self) -> list[Tensor]:
        """The iterate: the parameters themselves."""
        return self._params()

    @contextmanager
    def sampled_params(self) -> Iterator[None]:
        """The parameters already hold the sample (the iterate): nothing to write."""
        yield


def noise_scale(lr: float, temperature: float) -> float:
    """√(2η β⁻¹): the standard deviation of one step's noise, in double precision."""
    return math.sqrt(2.0 * lr * temperature)


class LangevinCoefficients(NamedTuple):
    """The numbers of one Adam-Langevin step (floats, or 0-d tensors when traced)."""

    m_weight: float  # 1 − α₁
    beta2: float  # α₂
    s_weight: float  # 1 − α₂
    lr: float  # η
    drift_step: float  # η·a
    eps: float  # λ
    noise_scale: float  # √(2η β⁻¹)


def langevin_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    noises: list[Tensor],
    c: LangevinCoefficients,
    mode: Mode,
) -> None:
    """m ← α₁ m + (1 − α₁) g;  v ← α₂ v + (1 − α₂) g²;
    w ← w − η g − η a · m/(√v + λ) + √(2η β⁻¹) ε, in place (:class:`AdamLangevin`)."""
    if mode == "traced":  # plain ops, the numbers are tensors
        for x, g, m, s, e in zip(xs, grads, exp_avgs, exp_avg_sqs, noises):
            lerp_(m, g, c.m_weight)
            s.mul_(c.beta2).add_(c.s_weight * g * g)
            x.sub_(c.lr * g + c.drift_step * m / (s.sqrt() + c.eps)).add_(c.noise_scale * e)
        return
    torch._foreach_lerp_(exp_avgs, grads, c.m_weight)
    torch._foreach_mul_(exp_avg_sqs, c.beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=c.s_weight)
    denominators = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_add_(denominators, c.eps)
    torch._foreach_add_(xs, grads, alpha=-c.lr)
    torch._foreach_addcdiv_(xs, exp_avgs, denominators, value=-c.drift_step)
    torch._foreach_add_(xs, noises, alpha=c.noise_scale)
