"""The posterior interface: what an optimizer offers when it fits a Bayesian model.

VIME's dynamics model (``agents.curiosity``) is fitted by a ``param_explore`` optimizer in
its variational-inference form, and rewards transitions by the information gain of the
posterior it keeps. Every such optimizer — Bayes by Backprop, noisy Adam, noisy K-FAC,
IVON — offers the same things through the same methods, so that the model's code holds
no branch on which one it has and a new posterior is its class and one entry of
``param_explore.POSTERIORS``:

* :meth:`Posterior.posterior_settings` — its settings for a model of N data under a prior
  N(0, η I) (the VI reading of its rule), before a user's overrides;
* :meth:`Posterior.kl_divergence_to_prior` — the ELBO's KL term;
* :meth:`Posterior.information_gain` — KL(q after one step on an example ‖ q now) of every
  example, from a :class:`GainEvidence`;
* :meth:`Posterior.posterior_memory` — the floats it and one gain call need, for the
  memory budget checked before a run allocates;
* :attr:`Posterior.gain_from_samples`, :attr:`Posterior.local_reparameterisation` — which
  evidence its gain takes: K weight samples or the mean; noise per unit allowed or not.

The evidence is computed once by the model, in one batched pass (the per-example gradients
of a ``Linear`` stack are outer products of each layer's input and output gradient), and
each posterior reads the form it needs: per-layer factors (noisy K-FAC), dense per-example
gradients (noisy Adam, IVON), or estimates of ∇μ and ∇σ (Bayes by Backprop).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor


class PosteriorMemory(NamedTuple):
    """Floats (not bytes) a posterior needs: the model and its state; one gain call."""

    model: int  # the weights, their gradient and the optimizer's state
    gain: int  # one information-gain call's per-example tensors


class GainShape(NamedTuple):
    """The sizes an information-gain call is made with (for :meth:`Posterior.posterior_memory`)."""

    layers: Sequence[tuple[int, int]]  # (fan_in, fan_out) of each Linear layer
    chunk: int  # transitions whose gain is computed in one pass
    batch: int  # transitions of one call (noise per unit is drawn for all of them)
    samples: int  # weight (or unit) samples K
    per_unit: bool  # noise per unit (the local reparameterisation)

    @property
    def weights(self) -> int:
        return sum((fan_in + 1) * fan_out for fan_in, fan_out in self.layers)

    @property
    def units(self) -> int:
        return sum(fan_out for _, fan_out in self.layers)


class GainEvidence:
    """What every example b's loss f_b says about the weights, for an information gain.

    :meth:`moment_gradients` is available from every form; the per-sample forms
    (:class:`SampledGradients`) also give the layer factors and dense gradients.
    """

    def moment_gradients(self) -> tuple[list[Tensor], list[Tensor]]:
        """Each example's estimates of ∇μ E_q[f_b] and ∇σ E_q[f_b], (B, *p.shape) per
        parameter."""
        raise NotImplementedError

    @property
    def noises(self) -> list[Tensor]:
        """ε_k of every weight sample, (K, *p.shape) per parameter."""
        raise TypeError(f"{type(self).__name__} holds no weight samples")

    @property
    def thetas(self) -> list[Tensor]:
        """The weight samples θ_k, (K, *p.shape) per parameter."""
        raise TypeError(f"{type(self).__name__} holds no weight samples")

    def gradients(self) -> list[Tensor]:
        """∇θ f_b(θ_k) of every parameter, (B, K, *p.shape)."""
        raise TypeError(f"{type(self).__name__} holds no per-sample gradients")


@dataclass(frozen=True)
class SampledGradients(GainEvidence):
    """The evidence at K weight samples θ_k = μ + σ ε_k (ε_k = 0: at the posterior mean),
    as per-layer factors: ``inputs`` a (B, K, in) and ``output_grads`` Ds = ∂f_b/∂s (B, K,
    out) of each ``Linear`` layer; ``layers`` gives each layer's weight and bias as indices
    into the parameters' order."""

    sample_noises: list[Tensor]
    sample_thetas: list[Tensor]
    inputs: list[Tensor]
    output_grads: list[Tensor]
    layers: Sequence[tuple[int, int]]

    @property
    def noises(self) -> list[Tensor]:
        return self.sample_noises

    @property
    def thetas(self) -> list[Tensor]:
        return self.sample_thetas

    def gradients(self) -> list[Tensor]:
        """Ds aᵀ for weights, Ds for biases."""
        grads: dict[int, Tensor] = {}
        for (weight, bias), a, ds in zip(self.layers, self.inputs, self.output_grads, strict=True):
            grads[weight] = ds[..., :, None] * a[..., None, :]
            grads[bias] = ds
        return [grads[i] for i in range(len(grads))]

    def moment_gradients(self) -> tuple[list[Tensor], list[Tensor]]:
        """mean_k g_k and mean_k g_k ⊙ ε_k: with θ = μ + σ ε, ∇μ f = g and ∇σ f = g ε."""
        grads = self.gradients()
        means = [g.mean(dim=1) for g in grads]
        stds = [(g * e).mean(dim=1) for g, e in zip(grads, self.noises)]
        return means, stds


@dataclass(frozen=True)
class MomentGradients(GainEvidence):
    """The evidence as estimates of ∇μ and ∇σ alone, however they were estimated (VIME's
    released local reparameterisation, noise per unit: ``agents.curiosity.dynamics``)."""

    mean_grads: list[Tensor]
    std_grads: list[Tensor]

    def moment_gradients(self) -> tuple[list[Tensor], list[Tensor]]:
        return self.mean_grads, self.std_grads


#: The rule of a posterior whose optimizer also optimises (noisy Adam, noisy K-FAC): its VI
#: form is ``kl_weight`` > 0 (:attr:`Posterior.posterior_needs_positive`).
VI_FORM = {"kl_weight": "with kl_weight = 0 it optimises, it does not fit a posterior"}


class Posterior:
    """Mixin of the optimizers that fit a posterior (put it before ``WeightSampling``)."""

    #: True: the information gain is a Monte Carlo estimate over K weight samples
    #: (``bonus.num_samples``); False: it is taken at the posterior mean (K = 1, ε = 0).
    gain_from_samples: ClassVar[bool] = False
    #: Whether the gain can take its ∇μ, ∇σ through the local reparameterisation, noise per
    #: unit (a fully factorised Gaussian whose gain reads :meth:`GainEvidence.moment_gradients`).
    local_reparameterisation: ClassVar[bool] = False
    #: Tensors of optimizer state per weight, besides the weight and its gradient.
    state_per_weight: ClassVar[int]

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        """The settings that make the optimizer fit q(θ) ≈ p(θ | N data) under the prior
        N(0, ``prior_variance`` I), the loss being the mean negative log-likelihood per datum
        (a user's settings go on top)."""
        raise NotImplementedError

    #: Settings the VI form needs > 0, and why (the posterior's own rule, beyond the
    #: optimizer's checks): checked by :func:`param_explore.checked_posterior_settings`
    #: before a model is built, instead of at its first fit.
    posterior_needs_positive: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def check_posterior(cls, settings: Mapping[str, Any]) -> None:
        """A ValueError naming the first setting of :attr:`posterior_needs_positive` that is
        not > 0 in ``settings`` (already checked by the optimizer's own checks)."""
        for name, why in cls.posterior_needs_positive.items():
            if not settings[name] > 0:
                raise ValueError(
                    f"{name} must be > 0 for {cls.__name__}'s posterior ({why}), "
                    f"got {settings[name]!r}"
                )

    @classmethod
    def posterior_memory(cls, shape: GainShape) -> PosteriorMemory:
        """The floats it needs: weights, gradient and state; and one gain call's dense
        per-example gradients of ``chunk`` transitions at K samples, with the samples and
        their noise (posteriors with other needs override it)."""
        weights = shape.weights
        return PosteriorMemory(
            (2 + cls.state_per_weight) * weights, (2 + shape.chunk) * shape.samples * weights
        )

    def kl_divergence_to_prior(self) -> float:
        """KL(q ‖ prior): the ELBO's KL term."""
        raise NotImplementedError

    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        """KL(q after one update on each example ‖ q now), float64 (B,), the optimizer
        unchanged; ``step_size``: the λ of a second-order step, for posteriors whose update
        is not their own step (Bayes by Backprop's Newton step)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def _prior_variance(self, group: Mapping) -> float:
        """η of a group's prior N(0, η I)."""
        return group["prior_variance"]

    @torch.no_grad()
    def _diagonal_kl_to_prior(self) -> float:
        """KL(N(μ, σ²) ‖ N(0, η I)) = Σ ½[(σ² + μ²)/η − 1 − ln(σ²/η)] over every weight: the
        KL term of a fully factorised posterior."""
        total = 0.0
        for group in self.param_groups:  # type: ignore[attr-defined]
            eta = self._prior_variance(group)
            for p, sigma in zip(group["params"], self._group_sampling_std(group)):  # type: ignore[attr-defined]
                variance = sigma.double().square()
                kl = (variance + p.double().square()) / eta - 1.0 - (variance / eta).log()
                total += 0.5 * float(kl.sum())
        return total
