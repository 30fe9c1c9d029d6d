"""DDPG's two objectives (Lillicrap et al. 2015; Khan et al. 2018, Alg. 1-2 lines 6-7).

One definition for :func:`agents.ddpg.update.ddpg_update`, which runs eagerly and compiled
alike, so the two can differ in how they run, never in what they compute.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor


def td_target(rewards: Tensor, terminated: Tensor, next_q: Tensor, gamma: float) -> Tensor:
    """y = r + γ(1 − terminated)·Q̃(s′, π̃(s′)): time-limit truncation bootstraps through."""
    return rewards + gamma * (1.0 - terminated) * next_q


def critic_loss(q: Tensor, target: Tensor) -> Tensor:
    """The mean squared TD error."""
    return (q - target).pow(2).mean()


def l2_penalty(weights: list[Tensor], coefficient: float) -> Tensor:
    """λ·½Σ‖W‖² over ``weights``: TensorFlow's ``l2_regularizer(λ)`` (λ times ``l2_loss``,
    which is ½Σw²) summed over the weights by ``apply_regularization``, as OpenAI baselines
    adds it to the critic's loss (``ddpg.py`` l.183-192; ``docs/decisions.md#critic-l2``)."""
    return coefficient * 0.5 * torch.stack([w.pow(2).sum() for w in weights]).sum()


def actor_loss(q: Tensor, reduction: Literal["sum", "mean"]) -> Tensor:
    """−Q(s, π(s)) over the minibatch: summed as in the released code, or averaged."""
    return -(q.sum() if reduction == "sum" else q.mean())


def all_finite(loss: Tensor, grads: list[Tensor | None]) -> Tensor:
    """Whether a loss and its gradients are all finite, as a 0-d bool tensor (no sync)."""
    flags = [torch.isfinite(loss).reshape(1)]
    flags += [torch.isfinite(g).all().reshape(1) for g in grads if g is not None]
    return torch.cat(flags).all()
