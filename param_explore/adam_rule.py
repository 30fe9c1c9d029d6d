"""Adam's moment rule with the bias correction folded into the step size.

Vadam (with its prior term) and both Adams of Adam-Explore take this step, and so does
the traced form of torch's Adam (the critic, ``adam-plain``); Adam's paper (Kingma & Ba
2015, Sec. 2) and the authors' released TensorFlow code write it so:

    s ← γ₂ s + (1 − γ₂) g²
    m ← γ₁ m + (1 − γ₁)(g + d·x)         (d = λ/N, Vadam's prior, on the old x; else 0)
    x ← x − α · √(1 − γ₂ᵗ)/(1 − γ₁ᵗ) · m / (√s + δ)

which equals x − α m̂/(√ŝ + δ/√(1 − γ₂ᵗ)) with m̂ = m/(1 − γ₁ᵗ), ŝ = s/(1 − γ₂ᵗ).

:func:`adam_update_` is the rule, once, over lists of tensors sharing a step count. Its
numbers come as :class:`AdamCoefficients`: Python floats for an eager step (``mode`` =
``eager``), which runs on torch's fused Adam kernel (one pass over each tensor), or 0-d
tensors inside a compiled update graph (``traced``), which runs plain tensor ops that
TorchInductor fuses.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from .traceable import (
    Mode,
    StateTensors,
    TraceableStep,
    UntraceableOptimizerError,
    at_mean,
    group_names,
    lerp_,
    single_group,
    step_sqrt,
)


class AdamCoefficients(NamedTuple):
    """The numbers of step t of :func:`adam_update_` (floats, or 0-d tensors when traced)."""

    beta1: float  # γ₁
    beta2: float  # γ₂
    m_weight: float  # 1 − γ₁ (computed once, in double precision)
    s_weight: float  # 1 − γ₂
    step_size: float  # α √(1 − γ₂ᵗ)/(1 − γ₁ᵗ)
    eps: float  # δ, added to √s of the raw s
    decay: float  # d: the prior term d·x added to m only (Vadam's λ/N), else 0
    lr: float  # α, and
    step: float  # t: the fused kernel computes its bias corrections itself

    @classmethod
    def at_step(
        cls,
        step: int | Tensor,
        lr: float,
        betas: tuple[float, float],
        eps: float | Tensor,
        decay: float = 0.0,
    ) -> AdamCoefficients:
        """The numbers of step ``step``: an int, or a float64 tensor of counts inside a
        compiled graph (:func:`param_explore.traceable.step_sqrt`), whose numbers then
        follow the counts it keeps on the device."""
        beta1, beta2 = betas
        step_size = lr * step_sqrt(1.0 - beta2**step) / (1.0 - beta1**step)
        t = float(step) if isinstance(step, int) else step
        return cls(beta1, beta2, 1.0 - beta1, 1.0 - beta2, step_size, eps, decay, lr, t)

    @classmethod
    def of_torch_adam(
        cls, step: int | Tensor, lr: float, betas: tuple[float, float], eps: float
    ) -> AdamCoefficients:
        """torch's ``Adam``: it adds δ to the bias-corrected √ŝ, i.e. δ√(1 − γ₂ᵗ) to √s."""
        return cls.at_step(step, lr, betas, eps * step_sqrt(1.0 - betas[1] ** step))


def adam_update_(
    xs: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    c: AdamCoefficients,
    mode: Mode,
    fused: bool = True,
) -> None:
    """One step of the rule (module docstring) on ``xs`` and their moments, in place.

    ``fused=False`` runs foreach ops instead of the fused kernel: for tiny tensors (a
    32-unit dynamics model), whose step the fused kernel's parallel region only slows down.
    """
    if mode == "traced":  # plain ops, the numbers are tensors
        for x, g, m, s in zip(xs, grads, exp_avgs, exp_avg_sqs):
            lerp_(m, g + c.decay * x, c.m_weight)
            s.mul_(c.beta2).add_(c.s_weight * g * g)
            x.sub_(c.step_size * m / (s.sqrt() + c.eps))
        return
    if not fused or (c.decay and c.beta1 == 0.0):
        # Also at γ₁ = 0 with a prior, where the kernel would set m = g and discard a
        # pre-added prior term: m ← lerp(m, g + d·x, 1 − γ₁) is g + d·x exactly at γ₁ = 0.
        directions = torch._foreach_add(grads, xs, alpha=c.decay) if c.decay else grads
        torch._foreach_lerp_(exp_avgs, directions, c.m_weight)
        torch._foreach_mul_(exp_avg_sqs, c.beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=c.s_weight)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denominators, c.eps)
        torch._foreach_addcdiv_(xs, exp_avgs, denominators, value=-c.step_size)
        return
    # torch's fused kernel computes m ← γ₁ m + (1 − γ₁) g, s ← γ₂ s + (1 − γ₂) g² and
    # x ← x − α/(1 − γ₁ᵗ) · m / (√s/√(1 − γ₂ᵗ) + δ′). Two exact rewrites make it the rule:
    # δ′ = δ/√(1 − γ₂ᵗ) folds the correction into the step, and adding (1 − γ₁)/γ₁ · d·x
    # to m beforehand puts the prior term into m only, not into s.
    if c.decay:
        torch._foreach_add_(exp_avgs, xs, alpha=(1.0 - c.beta1) / c.beta1 * c.decay)
    step_tensor = torch.full((), c.step, device=xs[0].device)
    torch._fused_adam_(
        xs, grads, exp_avgs, exp_avg_sqs, [], [step_tensor] * len(xs),
        amsgrad=False, lr=c.lr, beta1=c.beta1, beta2=c.beta2, weight_decay=0.0,
        eps=c.eps / math.sqrt(1.0 - c.beta2**c.step), maximize=False,
    )  # fmt: skip


def adam_traceable_step(optimizer: torch.optim.Adam) -> TraceableStep:
    """torch's ``Adam`` (the critic's optimizer and ``adam-plain``), trained at μ.

    torch computes x ← x − α/(1 − γ₁ᵗ) · m/(√s/√(1 − γ₂ᵗ) + δ); multiplying numerator and
    denominator by √(1 − γ₂ᵗ) gives the folded form of :func:`adam_update_` with
    step size α√(1 − γ₂ᵗ)/(1 − γ₁ᵗ) and δ′ = δ√(1 − γ₂ᵗ).
    """
    group = single_group(optimizer)
    for option in ("amsgrad", "maximize"):
        if group.get(option):
            raise UntraceableOptimizerError(f"Adam with {option}=True is not traceable here")
    if group.get("weight_decay"):
        raise UntraceableOptimizerError("Adam with weight_decay is not traceable here")
    params = list(group["params"])
    states = []
    for p in params:
        state = optimizer.state[p]
        if "exp_avg" not in state:  # torch's own initial state (fused layout)
            state["step"] = torch.tensor(0.0, dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        states.append(state)

    def coefficients(step: int) -> AdamCoefficients:
        return AdamCoefficients.of_torch_adam(step, group["lr"], group["betas"], group["eps"])

    def update(
        xs: list[Tensor], grads: list[Tensor], state: StateTensors, c: AdamCoefficients
    ) -> None:
        adam_update_(xs, grads, state["exp_avg"], state["exp_avg_sq"], c, "traced")

    return TraceableStep(
        params,
        {key: [s[key] for s in states] for key in ("exp_avg", "exp_avg_sq")},
        states,
        coefficients,
        update,
        at_mean,
        group_names(group),
    )
