"""Adaptive parameter-space noise (Plappert et al. 2018), the practitioners' baseline.

The actor acts with a perturbed copy θ̃ = μ + σ ε of its weights, ε ~ N(0, I) redrawn
at each episode start, and is trained at the *unperturbed* μ with plain Adam. The single
scalar σ has no meaning of its own, so it is adapted to a target distance in action
space: every few steps the agent measures d = √(mean over states and action dimensions
of (π_μ(s) − π_θ̃(s))²) and calls :meth:`AdaptiveParamNoise.adapt` —

    σ ← α σ  if d ≤ δ,    σ ← σ / α  if d > δ         (Plappert et al. 2018, Sec. 3)

so σ settles where the perturbation moves actions by about δ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from .plain import AdamPlain
from .validation import require_interval, require_positive


def action_space_distance(mean_actions: Tensor, perturbed_actions: Tensor) -> float:
    """d = √(mean over states and action dimensions of (π_μ(s) − π_θ̃(s))²).

    Plappert et al. 2018's distance for DDPG; give actions normalised to [−1, 1] so that
    the target δ does not depend on the action bounds.
    """
    return (mean_actions - perturbed_actions).pow(2).mean().sqrt().item()


class AdaptiveParamNoise(AdamPlain):
    """Adam on μ (as ``adam-plain``) plus an isotropic, adaptively scaled perturbation.

    Defaults follow the DDPG setting of Plappert et al. (OpenAI baselines'
    ``adaptive-param_0.2``): initial σ = 0.2, target action distance δ = 0.2 (actions
    normalised to [−1, 1]), α = 1.01, adaptation every 50 environment steps; Adam as
    Table 3's ``adam-plain``. σ is kept in the param group (``noise_std``), so it is
    saved with the optimizer's ``state_dict``. Unlike the variational strategies,
    ``step()`` expects the gradient at μ (:attr:`gradient_at_sample` is false).
    """

    explores = True
    gradient_at_sample = False

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        initial_std: float = 0.2,
        target_distance: float = 0.2,
        adaptation_factor: float = 1.01,
        adaptation_interval: int = 50,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps)
        require_positive("initial_std", initial_std)
        require_positive("target_distance", target_distance)
        if not require_positive("adaptation_factor", adaptation_factor) > 1:
            raise ValueError(f"adaptation_factor must be > 1, got {adaptation_factor!r}")
        for group in self.param_groups:
            group.setdefault("noise_std", float(initial_std))
            group["target_distance"] = float(target_distance)
            group["adaptation_factor"] = float(adaptation_factor)
            group["adaptation_interval"] = require_interval(
                "adaptation_interval", adaptation_interval
            )

    @property
    def adaptation_interval(self) -> int:
        """Environment steps between two calls of :meth:`adapt`."""
        return self.param_groups[0]["adaptation_interval"]

    def adapt(self, distance: float) -> None:
        """Scale σ up when the measured action distance is at most δ, down otherwise."""
        for group in self.param_groups:
            factor = group["adaptation_factor"]
            if distance > group["target_distance"]:
                group["noise_std"] /= factor
            else:
                group["noise_std"] *= factor

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Adam's step on μ. torch's Adam initialises a parameter's state only when it is
        empty, so the stored ε is set aside while the step runs."""
        params = self._params()
        noises = [self.state[p].pop("noise", None) for p in params]
        try:
            return super().step(closure)
        finally:
            for p, noise in zip(params, noises):
                if noise is not None:
                    self.state[p]["noise"] = noise

    def _group_sampling_std(self, group: dict) -> list[Tensor]:
        return [torch.full_like(p, group["noise_std"]) for p in group["params"]]
