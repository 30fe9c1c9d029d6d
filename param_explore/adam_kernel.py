"""The Adam-type moment update shared by Vadam and Adam-Explore.

Both keep exponential moving averages m (first moment) and s (second moment) and take
the bias-corrected step with the correction folded into the step size, as Adam's
paper (Kingma & Ba 2015, Sec. 2) and the authors' released TensorFlow code do:

    s ← γ₂ s + (1 − γ₂) v²
    m ← γ₁ m + (1 − γ₁) u
    x ← x − α · √(1 − γ₂ᵗ)/(1 − γ₁ᵗ) · m / (√s + δ)

which equals x − α m̂/(√ŝ + δ/√(1 − γ₂ᵗ)) with m̂ = m/(1 − γ₁ᵗ), ŝ = s/(1 − γ₂ᵗ). Vadam
feeds u = g + λμ/N and v = g (Fig. 1 lines 5-6, Alg. 2 line 8); Adam-Explore feeds
u = v = the gradient of μ or of the precision (eq. 111 with two Adams).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


@torch.no_grad()
def adam_moment_step_(
    x: Tensor,
    first_input: Tensor,
    second_input: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    step: int,
    lr: float,
    betas: tuple[float, float],
    eps: float,
) -> None:
    """Update ``exp_avg``, ``exp_avg_sq`` and then ``x`` in place (step t = ``step`` ≥ 1)."""
    beta1, beta2 = betas
    exp_avg_sq.mul_(beta2).addcmul_(second_input, second_input, value=1.0 - beta2)
    exp_avg.mul_(beta1).add_(first_input, alpha=1.0 - beta1)
    step_size = lr * math.sqrt(1.0 - beta2**step) / (1.0 - beta1**step)
    x.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-step_size)
