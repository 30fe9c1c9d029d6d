"""Noisy K-FAC: matrix-variate Gaussian weights, Kronecker-factored natural gradient.

Zhang et al. 2018, Sec. 3.4, eq. 12-13 and Alg. 2. Each ``nn.Linear`` layer's weights
and bias, W̃ = [W | b] (out × in+1, torch's layout, the bias as a column on a constant
input 1), get a matrix-variate Gaussian whose covariance is a Kronecker product: the
weight noise is *correlated* within a layer, along the directions the curvature says
matter, instead of independent per weight as in every other strategy here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from .layer_statistics import LinearLayerRecorder, linear_layers
from .posterior import VI_FORM, GainEvidence, GainShape, Posterior, PosteriorMemory
from .sampling import WeightSampling, skips_non_finite
from .validation import Checks, require_interval, require_non_negative, require_positive


def kfac_layers(model: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers of ``model``, which must own every trainable parameter.

    A ``ValueError`` names any parameter outside them: noisy K-FAC has no Kronecker
    factors for other layer types.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(
            "noisy-kfac needs the network itself (an nn.Module), to find its Linear layers "
            f"and observe them; got {type(model).__name__}"
        )
    layers = linear_layers(model)
    covered = {id(p) for layer in layers for p in layer.parameters()}
    for name, p in model.named_parameters():
        if p.requires_grad and id(p) not in covered:
            raise ValueError(
                f"noisy-kfac handles nn.Linear layers only; parameter {name!r} belongs to "
                "another kind of layer (a LayerNorm: use noisy-kfac without layer_norm)"
            )
    if not layers:
        raise ValueError("noisy-kfac found no nn.Linear layer in the network")
    return layers


class NoisyKFAC(Posterior, WeightSampling, torch.optim.Optimizer):
    """Natural-gradient steps on each layer's mean M̃ with Kronecker-factored noise.

    **Statistics (eq. 3, 12).** Per layer, with ā_i = [a_i; 1] the layer's inputs and
    ∂L/∂s_i the gradients of the caller's loss L w.r.t. its outputs, recorded by module
    hooks over the minibatch's M rows:

        A_t = mean_i ā_i ā_iᵀ,   S_t = mean_i Ds_i Ds_iᵀ   with Ds_i = M · ∂L/∂s_i.

    Both are per-example means, as eq. 12 writes them. Ds_i is example i's gradient when
    L is the minibatch mean (Zhang et al.'s convention: the VI form below is Alg. 2
    verbatim); for the *summed* policy gradient of the RL presets it is M times that,
    which puts the Fisher term S_t ⊗ A_t on the scale of noisy Adam's (∇L)² — the two are
    equal when the minibatch's per-example gradients are parallel — so that a noisy-adam
    against noisy-kfac comparison differs in the Fisher's structure, not its scale
    (``docs/decisions.md#noisy-kfac``). A caller whose loss is scaled by a factor κ
    before the step (SB3's mean → the paper's sum) calls :meth:`scale_gradients_`,
    which scales the recorded ∂L/∂s with ``p.grad``: the statistics are the same as
    with the summed loss itself.

    Every ``stats_interval`` (T_stats) steps the factors take in (A_t, S_t); every
    ``inverse_interval`` (T_inv) steps both are eigendecomposed, A = Q_A diag(a) Q_Aᵀ and
    S = Q_S diag(s) Q_Sᵀ, and kept as Q_A, Q_S and two grids over (k, l) (eq. 13):

        step   M̃ ← M̃ − α Q_S [(Q_Sᵀ (g̃ + γ_in W̃_θ) Q_A) ⊘ Δ] Q_Aᵀ       (Alg. 2, descent)
        sample W̃_θ = M̃ + √c · Q_S [(Q_Sᵀ E Q_A) ⊘ √Δ_in] Q_Aᵀ

    with g̃ = [∇W | ∇b] at the sample (``p.grad``) and E standard normal (the ε of the
    layer's weight and bias, kept as for every strategy), so that Cov(vec_row W̃_θ) =
    c · (Q_S ⊗ Q_A) diag(1/Δ_in) (Q_S ⊗ Q_A)ᵀ. What Δ is depends on the form:

    **VI** (``kl_weight`` λ > 0): Alg. 2 verbatim — factors are moving averages with
    weight β (eq. 12, from zero), γ_in = λ/(Nη), γ = γ_in + ``damping``, c = λ/N, and
    the damping is split between the factors as eq. 13 does (Martens & Grosse 2015):

        π = √((tr A / dim A) / (tr S / dim S)),
        Δ = (s_k + √γ/π)(a_l + π√γ),   Δ_in = (s_k + √γ_in/π)(a_l + π√γ_in).

    **VO** (``kl_weight`` = 0, the RL defaults): Sec. 4 sets the KL weight to 0 and keeps
    a running *sum* of the per-step Fisher terms instead of a moving average; then c = 1
    and the precision is exactly

        Λ = p₀ I + S ⊗ Ā,   Δ_in = s_k a_l + p₀,   Δ = s_k a_l + p₀ + ``damping``,

    with Ā the running mean of the A_t and S = Σ_t β T_stats S_t: a sum of Kronecker
    products is not one, but K-FAC's own independence assumption extends over time
    (Σ_t β S_t ⊗ A_t ≈ (Σ_t β S_t) ⊗ Ā), and each stats update stands for the T_stats
    steps since the last. The prior term p₀ I is added to the Kronecker product exactly,
    in its eigenbasis, not through the π split (which would add cross terms
    √p₀(π a_l + s_k/π) and let the precision outgrow p₀ + Σ β F_t while the Fisher term is
    small). p₀ = ``initial_precision`` = 1e4 is VadaGrad's s₁ (Table 3), so before any
    statistics every weight has σ = 0.01 as in every other strategy of the paper, and
    β = 0.01 weighs each Fisher term like VadaGrad's 1 − γ₂. The mean step is α Λ⁻¹ g̃,
    Λ = p₀ I at first, so α = 1 makes the first step 1e-4·g — VadaGrad's first step,
    α/√s₁ · g = 1e-2/1e2 · g — hence the default α.

    Costs per step (out × in' layer): the sample and the preconditioned step are four
    matrix products each, O(out² in' + out in'²); a stats update O(rows (in'² + out²));
    an inverse refresh two eigendecompositions, O(in'³ + out³), every T_inv steps.

    ``model`` is the network (an ``nn.Module``) whose ``nn.Linear`` layers are trained;
    its modules must be *called* for the statistics to be seen (:attr:`needs_module_calls`).
    """

    needs_module_calls = True
    supports_layer_norm = False

    _setting_checks: ClassVar[Checks] = dict(
        lr=require_positive,
        beta=require_positive,
        kl_weight=require_non_negative,
        prior_variance=require_positive,
        damping=require_non_negative,
        num_data=require_positive,
        initial_precision=require_positive,
        stats_interval=require_interval,
        inverse_interval=require_interval,
    )

    @classmethod
    def _check_together(cls, settings: dict) -> None:
        if settings["kl_weight"] > 0 and settings["beta"] > 1:
            raise ValueError(
                "beta is a moving-average weight in (0, 1] when kl_weight > 0, got "
                f"{settings['beta']}"
            )

    def __init__(
        self,
        model: nn.Module,
        lr: float = 1.0,
        beta: float = 0.01,
        kl_weight: float = 0.0,
        prior_variance: float = 1.0,
        damping: float = 0.0,
        num_data: float = 1.0,
        initial_precision: float = 1e4,
        stats_interval: int = 10,
        inverse_interval: int = 100,
    ) -> None:
        layers = kfac_layers(model)
        settings = self.checked_settings(
            lr=lr,
            beta=beta,
            kl_weight=kl_weight,
            prior_variance=prior_variance,
            damping=damping,
            num_data=num_data,
            initial_precision=initial_precision,
            stats_interval=stats_interval,
            inverse_interval=inverse_interval,
        )
        names = {id(p): name for name, p in model.named_parameters()}
        params = [(names[id(p)], p) for layer in layers for p in layer.parameters()]
        super().__init__(params, settings)
        if len(self.param_groups) != 1:  # pragma: no cover - torch builds exactly one
            raise ValueError("noisy-kfac takes one network, not parameter groups")
        self._layers = layers
        self._recorder = LinearLayerRecorder(layers)
        # θ − μ depends on ε and the sampling factors only, not on μ: computed once per
        # draw and reused by acting, the gradient pass and the update.
        self._perturbation_cache: list[Tensor] | None = None
        self._update_recording()

    # ------------------------------------------------------------------ constants
    @property
    def _group(self) -> dict:
        return self.param_groups[0]

    def _sampling_damping(self) -> float:
        """γ_in: λ/(Nη) in VI; the prior precision p₀ in VO."""
        g = self._group
        if g["kl_weight"] > 0:
            return g["kl_weight"] / (g["num_data"] * g["prior_variance"])
        return g["initial_precision"]

    def _sampling_scale(self) -> float:
        """c: λ/N in VI (eq. 13), 1 in VO."""
        g = self._group
        return g["kl_weight"] / g["num_data"] if g["kl_weight"] > 0 else 1.0

    # ------------------------------------------------------------------ state
    def _layer_state(self, layer: nn.Linear) -> dict:
        state = self.state[layer.weight]
        if "A" not in state:
            width = layer.in_features + (layer.bias is not None)
            kwargs = dict(dtype=layer.weight.dtype, device=layer.weight.device)
            state["step"] = torch.tensor(0.0)
            state["stats_updates"] = torch.tensor(0.0)
            state["A"] = torch.zeros(width, width, **kwargs)
            state["S"] = torch.zeros(layer.out_features, layer.out_features, **kwargs)
            self._refresh_inverses(state)
        return state

    def _update_recording(self) -> None:
        """Record layer statistics only for the forward pass preceding a stats step."""
        step = int(self._layer_state(self._layers[0])["step"])
        self._recorder.active = (step + 1) % self._group["stats_interval"] == 0

    def _eigen_factors(self, state: dict) -> tuple[Tensor, Tensor, Tensor, Tensor, float]:
        """Eigenvalues (clamped at 0) and eigenvectors of A and S in float64, and eq. 13's
        π = √((tr A / dim A)/(tr S / dim S)) (1 while either factor is 0)."""
        a_vals, a_vecs = torch.linalg.eigh(state["A"].double())
        s_vals, s_vecs = torch.linalg.eigh(state["S"].double())
        a_vals, s_vals = a_vals.clamp_min(0.0), s_vals.clamp_min(0.0)
        a_mean, s_mean = a_vals.mean().item(), s_vals.mean().item()  # tr/dim
        pi = math.sqrt(a_mean / s_mean) if a_mean > 0 and s_mean > 0 else 1.0
        return a_vals, a_vecs, s_vals, s_vecs, pi

    def _grid(self, a_vals: Tensor, s_vals: Tensor, pi: float, damping: float) -> Tensor:
        """The precision's eigenvalues over (k, l) for a damping (eq. 13 or the VO sum)."""
        if self._group["kl_weight"] > 0:  # VI: the damping split between the factors
            return torch.outer(s_vals + math.sqrt(damping) / pi, a_vals + pi * math.sqrt(damping))
        return torch.outer(s_vals, a_vals) + damping  # VO: p₀ I + S ⊗ Ā, exactly

    @torch.no_grad()
    def _refresh_inverses(self, state: dict) -> None:
        """Eigenbases of A and S and the step's and the sample's scales (eq. 13)."""
        a_vals, a_vecs, s_vals, s_vecs, pi = self._eigen_factors(state)
        gamma_in = self._sampling_damping()
        gamma = gamma_in + self._group["damping"]
        dtype = state["A"].dtype
        state["A_basis"] = a_vecs.to(dtype)
        state["S_basis"] = s_vecs.to(dtype)
        state["step_scale"] = self._grid(a_vals, s_vals, pi, gamma).reciprocal().to(dtype)
        state["sample_scale"] = self._grid(a_vals, s_vals, pi, gamma_in).rsqrt().to(dtype)
        self._perturbation_cache = None

    @staticmethod
    def _in_eigenbasis(state: dict, matrix: Tensor, scale: Tensor) -> Tensor:
        """Q_S [(Q_Sᵀ X Q_A) ⊙ scale] Q_Aᵀ: a function of S ⊗ A applied to vec_row X."""
        rotated = state["S_basis"].T @ matrix @ state["A_basis"]
        return state["S_basis"] @ rotated.mul_(scale) @ state["A_basis"].T

    @torch.no_grad()
    def _update_factors(self, layer: nn.Linear, state: dict, inputs: Tensor, grads: Tensor) -> None:
        """Eq. 12 (VI, moving averages) or the VO running sum/mean (class docstring)."""
        g = self._group
        if layer.bias is not None:
            inputs = torch.cat([inputs, inputs.new_ones(inputs.shape[0], 1)], dim=1)
        rows = inputs.shape[0]
        a_t = inputs.T @ inputs / rows
        s_t = grads.T @ grads * rows  # mean of (M ∂L/∂s)(M ∂L/∂s)ᵀ
        state["stats_updates"] += 1
        if g["kl_weight"] > 0:
            state["A"].lerp_(a_t, g["beta"])
            state["S"].lerp_(s_t, g["beta"])
        else:
            state["A"].lerp_(a_t, 1.0 / float(state["stats_updates"]))
            state["S"].add_(s_t, alpha=g["beta"] * g["stats_interval"])

    # ------------------------------------------------------------------ sampling
    @staticmethod
    def _joined(layer: nn.Linear, weight: Tensor, bias: Tensor | None) -> Tensor:
        """[W | b] (leading batch dimensions kept)."""
        return weight if layer.bias is None else torch.cat([weight, bias[..., None]], dim=-1)

    @staticmethod
    def _split(layer: nn.Linear, joined: Tensor) -> list[Tensor]:
        if layer.bias is None:
            return [joined]
        return [joined[..., :-1], joined[..., -1]]

    def _skip_step(self) -> None:
        super()._skip_step()
        for index in range(len(self._layers)):  # the skipped pass's statistics
            self._recorder.pop(index)

    @torch.no_grad()
    def scale_gradients_(self, factor: float) -> None:
        """``p.grad`` and the output gradients recorded in the same pass, times ``factor``."""
        super().scale_gradients_(factor)
        self._recorder.scale_output_grads_(factor)

    @torch.no_grad()
    def resample_noise(self, generator: torch.Generator | None = None) -> None:
        super().resample_noise(generator)
        self.noise_changed()

    def noise_changed(self) -> None:
        """The perturbation is recomputed from the ε just written, at its next use."""
        self._perturbation_cache = None

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._perturbation_cache = None
        self._update_recording()

    def _perturbations(self) -> list[Tensor]:
        """√c · L_S E L_Aᵀ per layer, split back into weight and bias, in params order."""
        if self._perturbation_cache is None:
            self._perturbation_cache = self._compute_perturbations()
        return self._perturbation_cache

    def _compute_perturbations(self, noise_list: list[Tensor] | None = None) -> list[Tensor]:
        """The perturbations of the state's noise, or of ``noise_list`` (in params order)."""
        scale = math.sqrt(self._sampling_scale())
        noises = iter(self._group_noise(self._group) if noise_list is None else noise_list)
        out = []
        for layer in self._layers:
            state = self._layer_state(layer)
            noise = self._joined(
                layer, next(noises), next(noises) if layer.bias is not None else None
            )
            joined = self._in_eigenbasis(state, noise, state["sample_scale"])
            out.extend(self._split(layer, joined.mul_(scale)))
        return out

    @torch.no_grad()
    def fresh_sample(self, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """θ' = μ + √c · L_S E' L_Aᵀ with E' drawn now from ``generator``, the acting
        sample's noise and its cache left as they are."""
        params = self._params()
        fresh = [
            torch.randn(p.shape, dtype=p.dtype, device=p.device, generator=generator)
            for p in params
        ]
        sample = torch._foreach_add(params, self._compute_perturbations(fresh))
        return dict(zip(self.param_names(), sample, strict=True))

    def _sampled(self, params: list[Tensor]) -> list[Tensor]:
        with torch.no_grad():
            perturbations = self._perturbations()
        return torch._foreach_add(params, perturbations)

    def _group_sampling_std(self, group: dict) -> list[Tensor]:
        """Marginal σ of each weight: √(c · Σ_kl Q_S[o,k]² Q_A[i,l]² / Δ_in[k,l])."""
        scale = self._sampling_scale()
        out = []
        for layer in self._layers:
            state = self._layer_state(layer)
            variance = state["S_basis"].pow(2) @ state["sample_scale"].pow(2)
            variance = variance @ state["A_basis"].pow(2).T
            out.extend(self._split(layer, variance.mul_(scale).sqrt_()))
        return out

    # ------------------------------------------------------------------ update
    @skips_non_finite
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One noisy K-FAC update (Alg. 2) from ``p.grad`` (∇θF at the current sample)."""
        loss = self._closure_loss(closure)
        g = self._group
        gamma_in = g["kl_weight"] / (g["num_data"] * g["prior_variance"])
        # The prior term of VI needs the very θ that produced the gradient (old factors).
        thetas = iter(self._sampled(self._params())) if gamma_in else None
        for index, layer in enumerate(self._layers):
            state = self._layer_state(layer)
            theta = None
            if thetas is not None:
                theta_w = next(thetas)
                theta = self._joined(
                    layer, theta_w, next(thetas) if layer.bias is not None else None
                )
            if layer.weight.grad is None:
                continue
            state["step"] += 1
            step = int(state["step"])
            record = self._recorder.pop(index)
            if step % g["stats_interval"] == 0 and record is not None:
                self._update_factors(layer, state, *record)
            if step % g["inverse_interval"] == 0:
                self._refresh_inverses(state)
            bias_grad = layer.bias.grad if layer.bias is not None else None
            if layer.bias is not None and bias_grad is None:
                bias_grad = torch.zeros_like(layer.bias)
            direction = self._joined(layer, layer.weight.grad, bias_grad)
            if theta is not None:
                direction = direction + gamma_in * theta
            update = self._in_eigenbasis(state, direction, state["step_scale"])
            for p, u in zip(layer.parameters(), self._split(layer, update)):
                p.sub_(u, alpha=g["lr"])
        self._update_recording()
        return loss

    # ------------------------------------------------------------------ the posterior
    # The matrix-variate Gaussian of the VI form, its samples for given noise, its KL to the
    # prior, and the information gain of an example (docs/vime.md, "Information gain under
    # the matrix-variate Gaussian"). All three read the posterior of the *current* factors
    # A and S, freshly decomposed: the one the optimizer samples from after its next
    # inverse refresh, i.e. now when ``inverse_interval`` is 1.
    #: ε and the step and sample scales (the Kronecker factors come on top).
    state_per_weight: ClassVar[int] = 3
    posterior_needs_positive: ClassVar[Mapping[str, str]] = VI_FORM

    @classmethod
    def posterior_settings(cls, num_data: float, prior_variance: float) -> dict[str, Any]:
        """Alg. 2's VI form with λ = 1, the factors and their inverses every step (a small
        model); α = 1e-2 is this project's."""
        return dict(
            kl_weight=1.0, num_data=num_data, prior_variance=prior_variance, lr=1e-2,
            stats_interval=1, inverse_interval=1,
        )  # fmt: skip

    @classmethod
    def posterior_memory(cls, shape: GainShape) -> PosteriorMemory:
        """A and S and their eigenbases per layer on top of the state; the gain keeps the
        mean rotated into the eigenbases, in float64, instead of per-example gradients."""
        weights = shape.weights
        factors = 2 * sum((fan_in + 1) ** 2 + fan_out**2 for fan_in, fan_out in shape.layers)
        return PosteriorMemory((2 + cls.state_per_weight) * weights + factors, 4 * weights)

    def _require_vi(self, what: str) -> None:
        if self._group["kl_weight"] == 0:
            raise ValueError(
                f"{what} needs noisy K-FAC's VI form (kl_weight > 0): with kl_weight = 0 "
                "it optimises, it does not fit a posterior"
            )

    def _joined_list(self, tensors: list[Tensor]) -> list[Tensor]:
        """Per layer [W | b] from tensors in ``params`` order (leading batch dims kept)."""
        flat = iter(tensors)
        return [
            self._joined(layer, next(flat), next(flat) if layer.bias is not None else None)
            for layer in self._layers
        ]

    @torch.no_grad()
    def posterior_sample(self, noises: list[Tensor]) -> list[Tensor]:
        """θ = M̃ + √c · Q_S[(Q_Sᵀ E Q_A) ⊘ √Δ_in]Q_Aᵀ for given ε (``params`` order, any
        leading batch dims), from the current factors; the optimizer's own ε is untouched."""
        scale = math.sqrt(self._sampling_scale())
        gamma_in = self._sampling_damping()
        out = []
        for layer, noise in zip(self._layers, self._joined_list(noises)):
            a_vals, a_vecs, s_vals, s_vecs, pi = self._eigen_factors(self._layer_state(layer))
            root = self._grid(a_vals, s_vals, pi, gamma_in).rsqrt()
            rotated = s_vecs.T @ noise.double() @ a_vecs
            perturbation = (s_vecs @ (rotated * root) @ a_vecs.T) * scale
            mean = self._joined(layer, layer.weight, layer.bias).double()
            out.extend(self._split(layer, (mean + perturbation).to(layer.weight.dtype)))
        return out

    @torch.no_grad()
    def kl_divergence_to_prior(self) -> float:
        """KL(q ‖ N(0, η I)) of the VI posterior, Σ_l = c [S_l^γin]⁻¹ ⊗ [A_l^γin]⁻¹ (eq. 13):
        ½ [tr Σ/η + ‖M̃‖²/η − d + d ln η − ln det Σ] per layer, from the eigenvalues."""
        self._require_vi("kl_divergence_to_prior")
        c, gamma_in = self._sampling_scale(), self._sampling_damping()
        eta = self._group["prior_variance"]
        total = 0.0
        for layer in self._layers:
            a_vals, _, s_vals, _, pi = self._eigen_factors(self._layer_state(layer))
            a_damped = a_vals + pi * math.sqrt(gamma_in)
            s_damped = s_vals + math.sqrt(gamma_in) / pi
            rows, cols = len(s_vals), len(a_vals)
            dim = rows * cols
            trace = c * s_damped.reciprocal().sum() * a_damped.reciprocal().sum()
            log_det = dim * math.log(c) - cols * s_damped.log().sum() - rows * a_damped.log().sum()
            mean = self._joined(layer, layer.weight, layer.bias).double()
            kl = trace / eta + mean.square().sum() / eta - dim + dim * math.log(eta) - log_det
            total += 0.5 * float(kl)
        return total

    @torch.no_grad()
    def information_gain(self, evidence: GainEvidence, step_size: float = 0.01) -> Tensor:
        """KL(q_after ‖ q) of one VI step on each example alone, without taking it.

        From ``evidence`` (a :class:`~param_explore.posterior.SampledGradients`), per
        ``nn.Linear`` layer: ``inputs`` a (B, K, in_features) and ``output_grads``
        Ds = ∂f_b/∂s (B, K, out_features) of every example b at every weight sample θ_k,
        f_b the example's negative log-likelihood; and the θ_k in ``params`` order,
        (K, *p.shape). ``step_size`` is not used (the step is noisy K-FAC's own). The step is
        Alg. 2 on a minibatch of that one example with a
        statistics update and an inverse refresh (T_stats = T_inv = 1):

            A′ = (1 − β)A + β ā āᵀ,   S′ = (1 − β)S + β Ds Dsᵀ                  (eq. 12)
            M̃′ = M̃ − α [S′^γ]⁻¹ (Ds āᵀ + γ_in Θ̃) [A′^γ]⁻¹                     (Alg. 2)

        and both posteriors are matrix-variate Gaussians, Σ = c [S^γin]⁻¹ ⊗ [A^γin]⁻¹
        (eq. 13), so their KL divergence has a closed form; in the eigenbases of the current
        A and S every factor after the step is diagonal plus rank one, which makes it
        O(out · in) per example (derivation: docs/vime.md). Exact, averaged over the K
        samples: a float64 tensor (B,). The optimizer is not changed.
        """
        self._require_vi("information_gain")
        group = self._group
        beta, lr = group["beta"], group["lr"]
        c, gamma_in = self._sampling_scale(), self._sampling_damping()
        gamma = gamma_in + group["damping"]
        total = None
        layers = zip(
            self._layers, evidence.inputs, evidence.output_grads,
            self._joined_list(evidence.thetas), strict=True,
        )  # fmt: skip
        for layer, a, ds, theta in layers:
            a, ds, theta = a.double(), ds.double(), theta.double()
            if layer.bias is not None:
                a = torch.cat([a, a.new_ones((*a.shape[:-1], 1))], dim=-1)
            a_vals, a_vecs, s_vals, s_vecs, pi = self._eigen_factors(self._layer_state(layer))
            rows, cols = len(s_vals), len(a_vals)
            # Before: the damped factors' eigenvalues.
            a_before = a_vals + pi * math.sqrt(gamma_in)
            s_before = s_vals + math.sqrt(gamma_in) / pi
            # After: (1 − β) diag + damping + β (rank one) in the current eigenbases.
            u, v = a @ a_vecs, ds @ s_vecs  # (B, K, cols), (B, K, rows)
            trace_a = (1 - beta) * a_vals.sum() + beta * a.square().sum(-1)
            trace_s = (1 - beta) * s_vals.sum() + beta * ds.square().sum(-1)
            positive = (trace_a > 0) & (trace_s > 0)
            ratio = (trace_a / cols) / torch.where(positive, trace_s / rows, 1.0)
            pi_after = torch.where(positive, ratio.clamp_min(0).sqrt(), 1.0)

            def diagonal(vals: Tensor, shift: Tensor) -> Tensor:
                return (1 - beta) * vals + shift[..., None]

            a_in = diagonal(a_vals, pi_after * math.sqrt(gamma_in))
            s_in = diagonal(s_vals, math.sqrt(gamma_in) / pi_after)
            log_det_a, trace_ratio_a = _rank_one_terms(a_in, u, a_before, beta)
            log_det_s, trace_ratio_s = _rank_one_terms(s_in, v, s_before, beta)
            kl = (
                trace_ratio_s * trace_ratio_a
                - rows * cols
                + cols * (log_det_s - s_before.log().sum())
                + rows * (log_det_a - a_before.log().sum())
            )
            # The mean's step, rotated into the eigenbases: −α X with X = Q_Sᵀ ΔM̃ Q_A/(−α),
            # X = (E_S + β v vᵀ)⁻¹ (v uᵀ + γ_in T) (E_A + β u uᵀ)⁻¹, T = Q_Sᵀ Θ̃ Q_A, E the
            # step's diagonals. Sherman-Morrison turns X into γ_in E_S⁻¹ T E_A⁻¹ + m qᵀ + p rᵀ
            # (p = E_S⁻¹v, q = E_A⁻¹u), and its Mahalanobis norm Σ_kl s̃_k ã_l X_kl² into
            # bilinear forms of T and T⊙T: no (B, K, out, in) tensor (docs/vime.md).
            e_s = diagonal(s_vals, math.sqrt(gamma) / pi_after)
            e_a = diagonal(a_vals, pi_after * math.sqrt(gamma))
            p, q = v / e_s, u / e_a
            one_s, one_a = 1 + beta * (v * p).sum(-1), 1 + beta * (u * q).sum(-1)
            rotated = s_vecs.T @ theta @ a_vecs  # T: (K, out, in)
            t_q = torch.einsum("koi,bki->bko", rotated, q)
            t_p = torch.einsum("koi,bko->bki", rotated, p)
            m = (-gamma_in * beta / one_a)[..., None] * t_q / e_s
            kappa = 1 / (one_s * one_a) + gamma_in * beta**2 * (p * t_q).sum(-1) / (one_s * one_a)
            r = (-gamma_in * beta / one_s)[..., None] * t_p / e_a + kappa[..., None] * q
            x_s, x_a = s_before / e_s, a_before / e_a  # s̃ E_S⁻¹, ã E_A⁻¹
            quadratic = (
                gamma_in**2 * _bilinear(x_s / e_s, rotated.square(), x_a / e_a)
                + (s_before * m.square()).sum(-1) * (a_before * q.square()).sum(-1)
                + (s_before * p.square()).sum(-1) * (a_before * r.square()).sum(-1)
                + 2 * gamma_in * _bilinear(x_s * m, rotated, x_a * q)
                + 2 * gamma_in * _bilinear(x_s * p, rotated, x_a * r)
                + 2 * (s_before * m * p).sum(-1) * (a_before * q * r).sum(-1)
            )
            kl = kl + lr**2 / c * quadratic
            per_example = 0.5 * kl.mean(dim=1)
            total = per_example if total is None else total + per_example
        return total


def _rank_one_terms(diagonal: Tensor, vector: Tensor, before: Tensor, beta: float):
    """ln det(D + β w wᵀ) and tr(B (D + β w wᵀ)⁻¹) for diagonal D, B (matrix determinant
    lemma and Sherman-Morrison), batched over the leading dims of ``diagonal``."""
    weighted = vector.square() / diagonal
    denominator = 1 + beta * weighted.sum(-1)
    log_det = diagonal.log().sum(-1) + denominator.log()
    trace = (before / diagonal).sum(-1) - beta * (before * weighted / diagonal).sum(
        -1
    ) / denominator
    return log_det, trace


def _bilinear(x: Tensor, matrices: Tensor, y: Tensor) -> Tensor:
    """Σ_kl x[…, k] M[k, l] y[…, l] for x (B, K, out), M (K, out, in), y (B, K, in)."""
    return (x * torch.einsum("koi,bki->bko", matrices, y)).sum(-1)
