"""Noisy K-FAC: matrix-variate Gaussian weights, Kronecker-factored natural gradient.

Zhang et al. 2018, Sec. 3.4, eq. 12-13 and Alg. 2. Each ``nn.Linear`` layer's weights
and bias, W̃ = [W | b] (out × in+1, torch's layout, the bias as a column on a constant
input 1), get a matrix-variate Gaussian whose covariance is a Kronecker product: the
weight noise is *correlated* within a layer, along the directions the curvature says
matter, instead of independent per weight as in every other strategy here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .layer_statistics import LinearLayerRecorder
from .sampling import WeightSampling, skips_non_finite
from .validation import require_interval, require_non_negative, require_positive


def linear_layers(model: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers owning every trainable parameter of ``model``.

    A ``ValueError`` names any parameter outside them: noisy K-FAC has no Kronecker
    factors for other layer types.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(
            "noisy-kfac needs the network itself (an nn.Module), to find its Linear layers "
            f"and observe them; got {type(model).__name__}"
        )
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
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


class NoisyKFAC(WeightSampling, torch.optim.Optimizer):
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
        layers = linear_layers(model)
        defaults = dict(
            lr=require_positive("lr", lr),
            beta=require_positive("beta", beta),
            kl_weight=require_non_negative("kl_weight", kl_weight),
            prior_variance=require_positive("prior_variance", prior_variance),
            damping=require_non_negative("damping", damping),
            num_data=require_positive("num_data", num_data),
            initial_precision=require_positive("initial_precision", initial_precision),
            stats_interval=require_interval("stats_interval", stats_interval),
            inverse_interval=require_interval("inverse_interval", inverse_interval),
        )
        if defaults["kl_weight"] > 0 and defaults["beta"] > 1:
            raise ValueError(
                f"beta is a moving-average weight in (0, 1] when kl_weight > 0, got {beta}"
            )
        params = [p for layer in layers for p in layer.parameters()]
        super().__init__(params, defaults)
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

    @torch.no_grad()
    def _refresh_inverses(self, state: dict) -> None:
        """Eigenbases of A and S and the step's and the sample's scales (eq. 13)."""
        a_vals, a_vecs = torch.linalg.eigh(state["A"].double())
        s_vals, s_vecs = torch.linalg.eigh(state["S"].double())
        a_vals, s_vals = a_vals.clamp_min(0.0), s_vals.clamp_min(0.0)
        gamma_in = self._sampling_damping()
        gamma = gamma_in + self._group["damping"]
        if self._group["kl_weight"] > 0:  # VI: the damping split between the factors
            a_mean, s_mean = a_vals.mean().item(), s_vals.mean().item()  # tr/dim
            pi = math.sqrt(a_mean / s_mean) if a_mean > 0 and s_mean > 0 else 1.0

            def grid(damping: float) -> Tensor:
                return torch.outer(
                    s_vals + math.sqrt(damping) / pi, a_vals + pi * math.sqrt(damping)
                )
        else:  # VO: p₀ I + S ⊗ Ā, exactly

            def grid(damping: float) -> Tensor:
                return torch.outer(s_vals, a_vals) + damping

        dtype = state["A"].dtype
        state["A_basis"] = a_vecs.to(dtype)
        state["S_basis"] = s_vecs.to(dtype)
        state["step_scale"] = grid(gamma).reciprocal().to(dtype)
        state["sample_scale"] = grid(gamma_in).rsqrt().to(dtype)
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
        return weight if layer.bias is None else torch.cat([weight, bias[:, None]], dim=1)

    @staticmethod
    def _split(layer: nn.Linear, joined: Tensor) -> list[Tensor]:
        if layer.bias is None:
            return [joined]
        return [joined[:, :-1], joined[:, -1]]

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

    def _compute_perturbations(self) -> list[Tensor]:
        scale = math.sqrt(self._sampling_scale())
        noises = iter(self._group_noise(self._group))
        out = []
        for layer in self._layers:
            state = self._layer_state(layer)
            noise = self._joined(
                layer, next(noises), next(noises) if layer.bias is not None else None
            )
            joined = self._in_eigenbasis(state, noise, state["sample_scale"])
            out.extend(self._split(layer, joined.mul_(scale)))
        return out

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
