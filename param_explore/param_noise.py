"""Adaptive parameter-space noise (Plappert et al. 2018), the practitioners' baseline.

As released with the paper (OpenAI baselines, ``baselines/ddpg/`` at commit 8b3a6c2, the
DDPG code the paper's experiments ran; ``docs/decisions.md#param-noise``):

* **A perturbed copy acts, fixed for the episode.** At each episode start the acting
  weights are set once to θ̃ = μ + σ ε, ε ~ N(0, I), and stay as they are until the next
  episode, whatever μ and σ do meanwhile (``ddpg.py`` l.371-378 ``reset`` runs
  ``perturb_policy_ops``, built by ``get_perturbed_actor_updates`` l.47-60). Here
  :meth:`AdaptiveParamNoise.resample_noise` takes that snapshot, and it is what
  :meth:`sample` returns; the optimizer's ``default_resample`` is ``episode``.
* **The mean is trained, by Adam**, at μ itself: :attr:`gradient_at_sample` is false.
* **Normalisation is not perturbed.** Only "perturbable" variables get noise — all
  trainable ones except those of LayerNorm (``models.py`` l.18-19, ``ddpg.py`` l.53-58);
  the others are copied. ``make_optimizer`` puts LayerNorm parameters in a group with
  ``perturb=False`` for that.
* **σ adapts on a separate perturbed copy.** Every ``adaptation_interval`` training steps
  (``training.py`` l.112, interval 50) a second copy gets *fresh* noise of the current σ,
  and its distance to the mean policy on a replay minibatch (``ddpg.py`` l.353-369,
  ``adaptive_param_noise_actor``)

      d = √(mean over states and action dimensions of (π_μ(s) − π_{μ+σε'}(s))²)

  scales σ (``noise.py`` l.12-18, Plappert et al. Sec. 3):

      σ ← σ / α  if d > δ,    σ ← α σ  otherwise.

Defaults are the baselines' ``adaptive-param_0.2`` (initial σ = δ = 0.2, ``main.py``
l.44-46 and l.105) and α = 1.01 (``noise.py`` l.5); Adam as Khan et al.'s Table 3
``adam-plain``, so that only the exploration differs from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar

import torch
from torch import Tensor

from .plain import AdamPlain
from .sampling import skips_non_finite
from .validation import Checks, require_interval, require_positive

#: State keys of the perturbation, set aside while torch's Adam steps.
_PERTURBATION_KEYS = ("noise", "perturbed")


def action_space_distance(mean_actions: Tensor, perturbed_actions: Tensor) -> float:
    """d = √(mean over states and action dimensions of (π_μ(s) − π_θ̃(s))²).

    Plappert et al. 2018's distance for DDPG; give actions normalised to [−1, 1] so that
    the target δ does not depend on the action bounds.
    """
    return (mean_actions - perturbed_actions).pow(2).mean().sqrt().item()


class AdaptiveParamNoise(AdamPlain):
    """Adam on μ (as ``adam-plain``) plus an isotropic, adaptively scaled perturbation.

    σ is kept in the param groups (``noise_std``) and the acting copy θ̃ in the optimizer
    state (``perturbed``), so both are saved with ``state_dict`` and a resumed run acts
    with the very weights it was acting with.
    """

    explores = True
    gradient_at_sample = False
    default_resample = "episode"
    default_layer_norm = True

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
        noise = self.checked_settings(
            initial_std=initial_std,
            target_distance=target_distance,
            adaptation_factor=adaptation_factor,
            adaptation_interval=adaptation_interval,
        )
        super().__init__(params, lr=lr, betas=betas, eps=eps)
        for group in self.param_groups:
            group.setdefault("noise_std", noise["initial_std"])
            group["target_distance"] = noise["target_distance"]
            group["adaptation_factor"] = noise["adaptation_factor"]
            group["adaptation_interval"] = noise["adaptation_interval"]

    _setting_checks: ClassVar[Checks] = dict(
        AdamPlain._setting_checks,
        initial_std=require_positive,
        target_distance=require_positive,
        adaptation_factor=require_positive,
        adaptation_interval=require_interval,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        factor = settings.get("adaptation_factor")
        if factor is not None and not factor > 1:
            raise ValueError(f"adaptation_factor must be > 1, got {factor!r}")

    @property
    def noise_adaptation_interval(self) -> int:
        """Environment steps between two calls of :meth:`adapt_noise`."""
        return self.param_groups[0]["adaptation_interval"]

    # ------------------------------------------------------------------ the acting copy
    @torch.no_grad()
    def resample_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw ε and set the acting copy θ̃ = μ + σ ε, fixed until the next call."""
        super().resample_noise(generator)
        self.noise_changed()

    @torch.no_grad()
    def noise_changed(self) -> None:
        """The acting copy θ̃ = μ + σ ε of the ε just written."""
        self._perturb()

    def _perturb(self) -> list[Tensor]:
        stds, noises = self._stds_and_noises()
        perturbed = torch._foreach_addcmul(self._params(), stds, noises)
        for p, theta in zip(self._params(), perturbed):
            self.state[p]["perturbed"] = theta
        return perturbed

    @torch.no_grad()
    def _sampled(self, params: list[Tensor]) -> list[Tensor]:
        """The acting copy θ̃ taken at the last :meth:`resample_noise`."""
        snapshot = [self.state[p].get("perturbed") for p in self._params()]
        if any(theta is None for theta in snapshot):  # before the first draw
            return self._perturb()
        return snapshot

    # ------------------------------------------------------------------ adaptation
    @torch.no_grad()
    def adapt_noise(
        self,
        actions_at: Callable[[Mapping[str, Tensor] | None], Tensor],
        generator: torch.Generator | None = None,
    ) -> float:
        """Measure d on a copy perturbed with fresh noise of the current σ, then scale σ.

        The acting copy and its ε are left as they are.
        """
        copy = self.fresh_sample(generator)
        distance = action_space_distance(actions_at(None), actions_at(copy))
        self.adapt(distance)
        return distance

    def adapt(self, distance: float) -> None:
        """Scale σ up when the measured action distance is at most δ, down otherwise."""
        for group in self.param_groups:
            factor = group["adaptation_factor"]
            if distance > group["target_distance"]:
                group["noise_std"] /= factor
            else:
                group["noise_std"] *= factor

    # ------------------------------------------------------------------ training
    @skips_non_finite
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Adam's step on μ. torch's Adam initialises a parameter's state only when it is
        empty, so the stored perturbation is set aside while the step runs."""
        params = self._params()
        kept = [
            {key: self.state[p].pop(key) for key in _PERTURBATION_KEYS if key in self.state[p]}
            for p in params
        ]
        try:
            return super().step(closure)
        finally:
            for p, entries in zip(params, kept):
                self.state[p].update(entries)

    def _group_sampling_std(self, group: dict) -> list[Tensor]:
        return [torch.full_like(p, group["noise_std"]) for p in group["params"]]
