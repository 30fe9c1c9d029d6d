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
from .sampling import WeightSampling
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
                "another kind of layer"
            )
    if not layers:
        raise ValueError("noisy-kfac found no nn.Linear layer in the network")
    return layers


class NoisyKFAC(WeightSampling, torch.optim.Optimizer):
    """Natural-gradient steps on each layer's mean M̃ with Kronecker-factored noise.

    Per layer, with a the layer's inputs (ā = [a; 1]) and Ds the gradients of the loss
    w.r.t. its outputs, over the minibatch rows i (recorded by module hooks):

        A_t = mean_i ā_i ā_iᵀ,   S_t = Σ_i Ds_i Ds_iᵀ                       (eq. 3, 12)

    so that S_t ⊗ A_t is K-FAC's estimate of Σ_i vec(DW̃_i) vec(DW̃_i)ᵀ, the (empirical)
    Fisher of the loss exactly as the caller writes it — for DDPG's summed policy
    gradient every transition contributes its own term. Every ``stats_interval``
    (T_stats) steps the factors take in (A_t, S_t); every ``inverse_interval`` (T_inv)
    steps the damped inverses are refreshed from eigendecompositions (eq. 13):

        π = √((tr A / dim A) / (tr S / dim S)),   A^γ = A + π√γ I,   S^γ = S + √γ/π I

    (π splits the damping between the factors as Martens & Grosse 2015 do.) With g̃ =
    [∇W | ∇b] at the sample (``p.grad``), a step without momentum (Alg. 2) is

        M̃ ← M̃ − α [S^γ]⁻¹ (g̃ + γ_in W̃_θ) [A^γ]⁻¹        (Alg. 2, torch's layout)

    and the sample is W̃_θ = M̃ + √c · L_S E L_Aᵀ with E standard normal (the ε of the
    layer's weight and bias, kept as for every strategy) and L = [·^{γ_in}]^{−1/2}, the
    symmetric square root, so

        Cov(vec_row W̃_θ) = c · [S^{γ_in}]⁻¹ ⊗ [A^{γ_in}]⁻¹.

    **VI** (``kl_weight`` λ > 0): Alg. 2 verbatim — factors are moving averages with
    weight β (eq. 12, from zero), γ_in = λ/(Nη), γ = γ_in + ``damping``, c = λ/N.

    **VO** (``kl_weight`` = 0, the RL defaults): Sec. 4 sets the KL weight to 0 and keeps
    a running *sum* of the per-step Fisher terms instead of a moving average; then c = 1
    and the precision is p₀ I + Σ_t β F_t. A sum of Kronecker products is not one, but
    K-FAC's own independence assumption extends over time: Σ_t β S_t ⊗ A_t ≈ (Σ_t β S_t)
    ⊗ Ā with Ā the running mean of the A_t — the count is carried by S, much as eq. 13
    assigns λ/N to one factor arbitrarily. Each stats update stands for the T_stats steps
    since the last one, so S grows by β·T_stats·S_t and the precision's growth does not
    depend on T_stats. The prior term p₀ I takes the place of the intrinsic damping
    (γ_in := p₀, via the same π split): p₀ = ``initial_precision`` = 1e4 is VadaGrad's s₁
    (Table 3), so before any statistics every weight has σ = 0.01 as in every other
    strategy of the paper, and β = 0.01 weighs each Fisher term like VadaGrad's
    1 − γ₂. The mean step is α Λ⁻¹ g̃ with Λ = p₀ I at first, so α = 1 makes the first
    step 1e-4·g — VadaGrad's first step, α/√s₁ · g = 1e-2/1e2 · g — hence the default α.

    Costs per step (out × in' layer): the sample and the preconditioned step are two
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
        """[A^γ]⁻¹, [S^γ]⁻¹ for the step and L_A, L_S for sampling (eq. 13)."""
        a_vals, a_vecs = torch.linalg.eigh(state["A"].double())
        s_vals, s_vecs = torch.linalg.eigh(state["S"].double())
        a_vals, s_vals = a_vals.clamp_min(0.0), s_vals.clamp_min(0.0)
        a_mean, s_mean = a_vals.mean().item(), s_vals.mean().item()  # tr/dim
        pi = math.sqrt(a_mean / s_mean) if a_mean > 0 and s_mean > 0 else 1.0
        gamma_in = self._sampling_damping()
        gamma = gamma_in + self._group["damping"]
        dtype = state["A"].dtype

        def power(vecs: Tensor, vals: Tensor, exponent: float) -> Tensor:
            """Q diag(valsᵉ) Qᵀ: the inverse (e = −1) or its symmetric square root."""
            return ((vecs * vals.pow(exponent)) @ vecs.T).to(dtype)

        state["A_inverse"] = power(a_vecs, a_vals + pi * math.sqrt(gamma), -1.0)
        state["S_inverse"] = power(s_vecs, s_vals + math.sqrt(gamma) / pi, -1.0)
        state["A_sample"] = power(a_vecs, a_vals + pi * math.sqrt(gamma_in), -0.5)
        state["S_sample"] = power(s_vecs, s_vals + math.sqrt(gamma_in) / pi, -0.5)
        self._perturbation_cache = None

    @torch.no_grad()
    def _update_factors(self, layer: nn.Linear, state: dict, inputs: Tensor, grads: Tensor) -> None:
        """Eq. 12 (VI, moving averages) or the VO running sum/mean (class docstring)."""
        g = self._group
        if layer.bias is not None:
            inputs = torch.cat([inputs, inputs.new_ones(inputs.shape[0], 1)], dim=1)
        a_t = inputs.T @ inputs / inputs.shape[0]
        s_t = grads.T @ grads
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
            joined = state["S_sample"] @ noise @ state["A_sample"].T
            out.extend(self._split(layer, joined.mul_(scale)))
        return out

    def _sampled(self, params: list[Tensor]) -> list[Tensor]:
        with torch.no_grad():
            perturbations = self._perturbations()
        return torch._foreach_add(params, perturbations)

    def _group_sampling_std(self, group: dict) -> list[Tensor]:
        """Marginal σ of each weight: √(c · [S^{γ_in}]⁻¹_oo · [A^{γ_in}]⁻¹_ii)."""
        scale = self._sampling_scale()
        out = []
        for layer in self._layers:
            state = self._layer_state(layer)
            s_var = state["S_sample"].pow(2).sum(1)
            a_var = state["A_sample"].pow(2).sum(1)
            out.extend(self._split(layer, torch.outer(s_var, a_var).mul_(scale).sqrt_()))
        return out

    # ------------------------------------------------------------------ update
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
            update = state["S_inverse"] @ direction @ state["A_inverse"]
            for p, u in zip(layer.parameters(), self._split(layer, update)):
                p.sub_(u, alpha=g["lr"])
        self._update_recording()
        return loss
