"""SGD-Explore and Adam-Explore: mean and precision learned separately (eq. 111).

The naive parameter-exploration baselines of Appendix K. Each weight has a mean μ (the
parameter tensor) and a learned precision p = σ⁻², initialised to 1e4 (Table 3), and
the network is evaluated at θ = μ + ε/√p. Eq. 111 writes the variance step on σ²;
the authors' released code takes it on the precision (``NOTES.md`` item 7), which is
what is done here. With g = ∇θF(θ) the chain rule through θ = μ + ε p^{-1/2} gives

    ∇μ = g,        ∇p = −g ⊙ ε / (2 p^{3/2}).

∇p is formed in :meth:`step` from ``p.grad`` and the stored ε, so it is exact for any
loss of θ whichever way the gradient was computed (``sampled_params()`` or ``sample()``).

**Keeping the precision positive.** The released code applies no safeguard; with the
paper's step sizes the precision moves by about α^(σ) = 1e-2 per step away from 1e4
and never gets near zero. A plain gradient step on p can nonetheless cross zero when
the step size is raised (∇p grows like p^{-3/2} as p shrinks), so after every step the
precision is clamped from below at ``min_precision`` (default 1, i.e. σ ≤ 1). In the
paper's regime the clamp never acts, so the updates equal the unclipped released code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from .adam_kernel import adam_moment_step_, adam_moment_update, advance_steps
from .sampling import PrecisionSampling, precision_training_point, skips_non_finite
from .traceable import StateTensors, TraceableStep, adam_coefficients, single_group
from .validation import require_betas, require_positive


class _PrecisionExplore(PrecisionSampling, torch.optim.Optimizer):
    """Shared state and gradients of the two Explore variants; subclasses move μ and p."""

    #: State tensors beyond the precision that the subclass's update keeps.
    _moment_keys: tuple[str, ...] = ()

    def _init_moments(self, states: list[dict]) -> None:
        for state in states:
            for key in self._moment_keys:
                if key not in state:
                    state[key] = torch.zeros_like(state["precision"])

    def _step_coefficients(self, group: dict, step: int) -> dict[str, float]:
        """The numbers of :meth:`_traced_update` at step ``step``."""
        raise NotImplementedError

    @torch.no_grad()
    def exploration_statistics(self) -> dict[str, float]:
        """σ statistics plus ``clamped_fraction``: the share of precisions held at the floor.

        An entry sits at ``min_precision`` only when the clamp has acted on it (and the
        gradient has not lifted it since), so this measures whether the safeguard changes
        the released code's updates; 0 means the updates are the unclipped ones.
        """
        at_floor, total = 0, 0
        for group in self._perturbed_groups():
            for p in group["params"]:
                precision = self._init_state(group, p)["precision"]
                at_floor += int((precision <= group["min_precision"]).sum())
                total += precision.numel()
        return {**super().exploration_statistics(), "clamped_fraction": at_floor / total}

    def _traced_update(
        self,
        xs: list[Tensor],
        grads: list[Tensor],
        precision_grads: list[Tensor],
        state: StateTensors,
        c: dict,
    ) -> None:
        """:meth:`_update` as plain tensor arithmetic (``param_explore.traceable``)."""
        raise NotImplementedError

    def traceable_step(self) -> TraceableStep:
        group = single_group(self)
        params = list(group["params"])
        states = [self._init_state(group, p) for p in params]
        self._init_moments(states)

        def coefficients(step: int) -> dict[str, float]:
            return {"min_precision": group["min_precision"], **self._step_coefficients(group, step)}

        def update(xs: list[Tensor], grads: list[Tensor], state: StateTensors, c: dict) -> None:
            precisions = state["precision"]
            precision_grads = [  # ∇p = −g ε / (2 p^{3/2}), as in step()
                -0.5 * g * e * p.pow(-1.5) for g, e, p in zip(grads, state["noise"], precisions)
            ]
            self._traced_update(xs, grads, precision_grads, state, c)
            for p in precisions:
                p.clamp_min_(c["min_precision"])

        state = {key: [s[key] for s in states] for key in ("precision", *self._moment_keys)}
        state["noise"] = self._group_noise(group)
        return TraceableStep(params, state, states, coefficients, update, precision_training_point)

    def _update(
        self,
        group: dict,
        params: list[Tensor],
        states: list[dict],
        precision_grads: list[Tensor],
    ) -> None:
        raise NotImplementedError

    @skips_non_finite
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update of μ and of the precision from ``p.grad``; no closure needed."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._init_state(group, p) for p in params]
            precisions = [state["precision"] for state in states]
            # ∇p = −g ε / (2 p^{3/2}), at the precision that produced the sample. Without
            # a drawn ε the gradient was taken at μ itself and θ does not depend on p.
            noises = [s.get("noise", torch.zeros_like(p)) for s, p in zip(states, params)]
            precision_grads = torch._foreach_pow(precisions, -1.5)
            torch._foreach_mul_(precision_grads, noises)
            torch._foreach_mul_(precision_grads, [p.grad for p in params])
            torch._foreach_mul_(precision_grads, -0.5)
            self._update(group, params, states, precision_grads)
            torch._foreach_clamp_min_(precisions, group["min_precision"])
        return loss


class SGDExplore(_PrecisionExplore):
    """Eq. 111 with plain gradient steps: μ ← μ − α g,  p ← p − α^(σ) ∇p (then clamp)."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        precision_lr: float = 1e-2,
        initial_precision: float = 1e4,
        min_precision: float = 1.0,
    ) -> None:
        defaults = dict(
            lr=require_positive("lr", lr),
            precision_lr=require_positive("precision_lr", precision_lr),
            initial_precision=require_positive("initial_precision", initial_precision),
            min_precision=require_positive("min_precision", min_precision),
        )
        super().__init__(params, defaults)

    def _update(
        self,
        group: dict,
        params: list[Tensor],
        states: list[dict],
        precision_grads: list[Tensor],
    ) -> None:
        for state in states:
            state["step"] += 1
        torch._foreach_add_(params, [p.grad for p in params], alpha=-group["lr"])
        precisions = [state["precision"] for state in states]
        torch._foreach_add_(precisions, precision_grads, alpha=-group["precision_lr"])

    def _step_coefficients(self, group: dict, step: int) -> dict[str, float]:
        return {"lr": group["lr"], "precision_lr": group["precision_lr"]}

    def _traced_update(
        self,
        xs: list[Tensor],
        grads: list[Tensor],
        precision_grads: list[Tensor],
        state: StateTensors,
        c: dict,
    ) -> None:
        for x, g, p, pg in zip(xs, grads, state["precision"], precision_grads):
            x.sub_(c["lr"] * g)
            p.sub_(c["precision_lr"] * pg)


class AdamExplore(_PrecisionExplore):
    """Eq. 111 with two independent Adams: on μ (α, γ₁, γ₂) and on p (α^(σ), γ₁^(σ), γ₂^(σ))."""

    _moment_keys = ("exp_avg", "exp_avg_sq", "precision_exp_avg", "precision_exp_avg_sq")

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        precision_lr: float = 1e-2,
        precision_betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        initial_precision: float = 1e4,
        min_precision: float = 1.0,
    ) -> None:
        defaults = dict(
            lr=require_positive("lr", lr),
            betas=require_betas("betas", betas),
            precision_lr=require_positive("precision_lr", precision_lr),
            precision_betas=require_betas("precision_betas", precision_betas),
            eps=require_positive("eps", eps),
            initial_precision=require_positive("initial_precision", initial_precision),
            min_precision=require_positive("min_precision", min_precision),
        )
        super().__init__(params, defaults)

    def _update(
        self,
        group: dict,
        params: list[Tensor],
        states: list[dict],
        precision_grads: list[Tensor],
    ) -> None:
        self._init_moments(states)
        for step, idx in advance_steps(states).items():
            adam_moment_step_(
                [params[i] for i in idx], [params[i].grad for i in idx],
                [states[i]["exp_avg"] for i in idx], [states[i]["exp_avg_sq"] for i in idx],
                step, group["lr"], group["betas"], group["eps"],
            )  # fmt: skip
            adam_moment_step_(
                [states[i]["precision"] for i in idx], [precision_grads[i] for i in idx],
                [states[i]["precision_exp_avg"] for i in idx],
                [states[i]["precision_exp_avg_sq"] for i in idx],
                step, group["precision_lr"], group["precision_betas"], group["eps"],
            )  # fmt: skip

    def _step_coefficients(self, group: dict, step: int) -> dict[str, float]:
        def adam(lr: float, betas: tuple[float, float]) -> dict[str, float]:
            beta1, beta2 = betas
            step_size = lr * math.sqrt(1.0 - beta2**step) / (1.0 - beta1**step)
            return adam_coefficients(beta1, beta2, step_size, group["eps"])

        precision = adam(group["precision_lr"], group["precision_betas"])
        return {
            **adam(group["lr"], group["betas"]),
            **{f"precision_{key}": value for key, value in precision.items()},
        }

    def _traced_update(
        self,
        xs: list[Tensor],
        grads: list[Tensor],
        precision_grads: list[Tensor],
        state: StateTensors,
        c: dict,
    ) -> None:
        adam_moment_update(xs, grads, state["exp_avg"], state["exp_avg_sq"], c)
        prefix = "precision_"
        adam_moment_update(
            state["precision"], precision_grads,
            state["precision_exp_avg"], state["precision_exp_avg_sq"],
            {key[len(prefix):]: v for key, v in c.items() if key.startswith(prefix)},
        )  # fmt: skip
