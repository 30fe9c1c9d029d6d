"""The Adam-type moment update shared by Vadam and Adam-Explore.

Both keep exponential moving averages m (first moment) and s (second moment) and take
the bias-corrected step with the correction folded into the step size, as Adam's
paper (Kingma & Ba 2015, Sec. 2) and the authors' released TensorFlow code do:

    s ← γ₂ s + (1 − γ₂) v²
    m ← γ₁ m + (1 − γ₁) u
    x ← x − α · √(1 − γ₂ᵗ)/(1 − γ₁ᵗ) · m / (√s + δ)

which equals x − α m̂/(√ŝ + δ/√(1 − γ₂ᵗ)) with m̂ = m/(1 − γ₁ᵗ), ŝ = s/(1 − γ₂ᵗ). Vadam
feeds u = g + λμ/N and v = g (Fig. 1 lines 5-6, Alg. 2 line 8); Adam-Explore feeds
u = v = the gradient of μ or of the precision (eq. 111 with two Adams). The prior term
is added to m separately, so no u = g + λμ/N temporary is allocated.

Everything runs over lists of tensors that share a step count: eagerly on torch's fused
Adam kernel (see :func:`adam_moment_step_` for why it computes exactly this update), and
as plain tensor ops with the step's numbers as tensors in a compiled update
(:func:`adam_moment_update`, which also serves torch's Adam: ``param_explore.traceable``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def advance_steps(states: list[dict]) -> dict[int, list[int]]:
    """Increment each state's ``step``; group the indices by the new step count.

    Parameters that skipped steps (no gradient) have their own bias correction, so the
    foreach updates run once per distinct step count — in practice once.
    """
    buckets: dict[int, list[int]] = {}
    for i, state in enumerate(states):
        state["step"] += 1
        buckets.setdefault(int(state["step"]), []).append(i)
    return buckets


@torch.no_grad()
def adam_moment_step_(
    xs: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    step: int,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    decay: float = 0.0,
) -> None:
    """Update the moments and then ``xs`` in place (step t = ``step`` ≥ 1).

    u = g + ``decay``·x (the old x) and v = g: Vadam passes decay = λ/N, Adam-Explore 0.

    Runs on torch's fused Adam kernel (one pass over each tensor), which computes
    m ← γ₁ m + (1 − γ₁) g, s ← γ₂ s + (1 − γ₂) g² and x ← x − α/(1 − γ₁ᵗ) · m /
    (√s/√(1 − γ₂ᵗ) + δ′). Two exact rewrites make it this update: δ′ = δ/√(1 − γ₂ᵗ) gives
    the folded correction α √(1 − γ₂ᵗ)/(1 − γ₁ᵗ) · m/(√s + δ); and adding
    (1 − γ₁)/γ₁ · decay · x to m beforehand puts the prior term into m only, not into s.
    """
    beta1, beta2 = betas
    if decay and beta1 == 0.0:
        # At γ₁ = 0 the kernel sets m = g and would discard a pre-added prior: the same
        # update in foreach ops, with m = g + decay·x.
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
        torch._foreach_copy_(exp_avgs, grads)
        torch._foreach_add_(exp_avgs, xs, alpha=decay)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denominators, eps)
        step_size = lr * math.sqrt(1.0 - beta2**step)
        torch._foreach_addcdiv_(xs, exp_avgs, denominators, value=-step_size)
        return
    if decay:
        torch._foreach_add_(exp_avgs, xs, alpha=(1.0 - beta1) / beta1 * decay)
    step_tensor = torch.full((), float(step), device=xs[0].device)
    torch._fused_adam_(
        xs, grads, exp_avgs, exp_avg_sqs, [], [step_tensor] * len(xs),
        amsgrad=False, lr=lr, beta1=beta1, beta2=beta2, weight_decay=0.0,
        eps=eps / math.sqrt(1.0 - beta2**step), maximize=False,
    )  # fmt: skip


def adam_moment_update(
    xs: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    c: dict[str, Tensor],
    decay: Tensor | None = None,
) -> None:
    """The update of :func:`adam_moment_step_` in plain tensor ops, for a compiled graph.

    Every number comes from ``c`` (0-d tensors: ``m_weight`` = 1 − γ₁, ``s_decay`` = γ₂,
    ``s_weight`` = 1 − γ₂, ``step_size`` = α√(1 − γ₂ᵗ)/(1 − γ₁ᵗ), ``eps`` = δ), so one
    traced graph serves every step; ``decay`` adds the prior term to u as there.
    """
    for x, g, m, s in zip(xs, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(g if decay is None else g + decay * x, c["m_weight"])
        s.mul_(c["s_decay"]).add_(c["s_weight"] * g * g)
        x.sub_(c["step_size"] * m / (s.sqrt() + c["eps"]))
