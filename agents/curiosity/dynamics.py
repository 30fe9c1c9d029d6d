"""VIME's Bayesian dynamics model p(s′ | s, a; θ) and the information gain of transitions.

The network is VIME's (``dynamics/bnn.py``; ``algos/batch_polopt_expl.py`` l.260-278): an
MLP from the normalised (s, a) to the normalised s′ itself (not s′ − s), ReLU hidden
layers, a linear output and a Gaussian likelihood of fixed σ; every weight's mean starts
from N(0, 1) (bnn.py l.50-54, l.61-66). Its posterior q(θ) is held and trained by a
``param_explore`` optimizer (:func:`~agents.curiosity.config.make_posterior_optimizer`),
one weight sample per minibatch step, minimising the ELBO per transition

    E_q[−log p(s′ | s, a; θ)] + KL(q ‖ prior)/N         (N = kl_batches · pool_batch_size).

The information gain of a batch of transitions is computed in one pass for all of them
and for K weight samples θ_k at once: the K networks run as batched matrix products, and
since each example's loss depends only on its own row, one backward pass of the summed
loss gives every example's output gradients Ds; with the layer inputs a they are the
per-example gradients Ds aᵀ of every ``Linear`` layer (rank one): the evidence
(:class:`param_explore.SampledGradients`) every posterior's ``information_gain`` reads in
the form it needs (``param_explore.posterior``, ``docs/vime.md``).

Bayes by Backprop's gain is by default VIME's released estimator: its gradients go through
the local reparameterisation trick (:meth:`BayesianDynamics.local_example_statistics`),
each layer's pre-activation s = m + √v ⊙ ε sampled with m = W_μ a + b_μ,
v = σ_W² a² + σ_b², one ε per unit, transition and sample. The same single backward pass
gives ∂f/∂m and ∂f/∂v of every transition and sample, and the per-example gradients are
again outer products: ∇W_μ f = ∂f/∂m aᵀ, ∇σ_W f = 2 σ_W ⊙ (∂f/∂v (a²)ᵀ).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from param_explore.posterior import GainEvidence, MomentGradients, SampledGradients

from .config import VimeConfig, make_posterior_optimizer


class LocalStatistics(NamedTuple):
    """What every example b contributes under every local sample k, per layer."""

    inputs: list[Tensor]  # a: (B, K, in_features)
    mean_grads: list[Tensor]  # ∂f_b/∂m, the pre-activation's mean: (B, K, out_features)
    variance_grads: list[Tensor]  # ∂f_b/∂v, the pre-activation's variance: (B, K, out_features)
    nll: Tensor  # f_b at the sample: (B, K)


class ExampleStatistics(NamedTuple):
    """What every example b contributes under every weight sample θ_k, per layer."""

    inputs: list[Tensor]  # a: (B, K, in_features)
    output_grads: list[Tensor]  # Ds = ∂f_b/∂s: (B, K, out_features)
    nll: Tensor  # f_b(θ_k): (B, K)


def gaussian_nll(prediction: Tensor, target: Tensor, std: float) -> Tensor:
    """−log N(target; prediction, std² I), summed over the last dimension (bnn.py l.345-349)."""
    squared = (target - prediction).square().sum(-1)
    return squared / (2 * std**2) + target.shape[-1] * (math.log(std) + 0.5 * math.log(2 * math.pi))


class BayesianDynamics:
    """The dynamics network, its posterior's optimizer, training and information gain."""

    def __init__(
        self, in_dim: int, out_dim: int, config: VimeConfig, generator: torch.Generator
    ) -> None:
        device = generator.device
        self.config = config
        self.generator = generator
        sizes = [in_dim, *config.hidden_sizes, out_dim]
        layers: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
            # μ ~ N(0, 1) for weights and biases, as released, from the bonus's own generator
            # (skip_init: torch's default initialisation would draw from the global one).
            linear = nn.utils.skip_init(nn.Linear, fan_in, fan_out, device=device)
            with torch.no_grad():
                linear.weight.normal_(generator=generator)
                linear.bias.normal_(generator=generator)
            layers.append(linear)
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.network = nn.Sequential(*layers)
        self.linears = [m for m in self.network if isinstance(m, nn.Linear)]
        #: Each ``Linear`` layer's weight and bias, by name (the network's and the
        #: posterior optimizer's names).
        self.layer_names = [
            (f"{index}.weight", f"{index}.bias")
            for index, module in enumerate(self.network)
            if isinstance(module, nn.Linear)
        ]
        self.optimizer = make_posterior_optimizer(config, self.network)

    @property
    def parameters(self) -> list[Tensor]:
        """The network's parameters in the posterior optimizer's order (every list of
        per-parameter tensors here is in that order, its names :attr:`names`)."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    @property
    def names(self) -> list[str]:
        return self.optimizer.param_names()

    # ------------------------------------------------------------------ training
    def train_step(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """One step of the posterior's optimizer on a minibatch, at one weight sample;
        returns the minibatch's mean negative log-likelihood (a 0-d tensor, no sync)."""
        opt = self.optimizer
        opt.zero_grad(set_to_none=True)
        opt.resample_noise(self.generator)
        with opt.training_params():
            loss = gaussian_nll(self.network(inputs), targets, self.config.likelihood_std).mean()
            loss.backward()
        opt.step()
        return loss.detach()

    def kl_to_prior(self) -> float:
        """KL(q ‖ N(0, prior_std² I)): the ELBO's KL term (before its 1/N weight)."""
        return self.optimizer.kl_divergence_to_prior()

    # ------------------------------------------------------------------ information gain
    def draw_noise(self, samples: int) -> list[Tensor]:
        """ε for ``samples`` weight samples, one tensor per parameter (K, *p.shape)."""
        return [
            torch.randn(
                (samples, *p.shape), generator=self.generator, dtype=p.dtype, device=p.device
            )
            for p in self.parameters
        ]

    @torch.no_grad()
    def example_statistics(
        self, thetas: list[Tensor], inputs: Tensor, targets: Tensor
    ) -> ExampleStatistics:
        """Every example's layer inputs, output gradients and loss at every θ_k, batched.

        ``thetas``: K weight samples, (K, *p.shape) per parameter in ``parameters`` order;
        ``inputs`` (B, in_dim) and ``targets`` (B, out_dim), normalised.
        """
        named = dict(zip(self.names, thetas, strict=True))
        hidden = inputs.expand(thetas[0].shape[0], *inputs.shape)  # (K, B, in)
        layer_inputs, outputs = [], []
        with torch.enable_grad():
            for i, (weight_name, bias_name) in enumerate(self.layer_names):
                weight, bias = named[weight_name], named[bias_name]
                layer_inputs.append(hidden)
                output = torch.baddbmm(bias[:, None, :], hidden, weight.transpose(1, 2))
                output.requires_grad_(True)
                outputs.append(output)
                hidden = torch.relu(output) if i < len(self.linears) - 1 else output
            nll = gaussian_nll(hidden, targets, self.config.likelihood_std)  # (K, B)
            grads = torch.autograd.grad(nll.sum(), outputs)
        return ExampleStatistics(
            [a.detach().transpose(0, 1) for a in layer_inputs],
            [g.transpose(0, 1) for g in grads],
            nll.detach().transpose(0, 1),
        )

    def evidence(
        self, noises: list[Tensor], thetas: list[Tensor], stats: ExampleStatistics
    ) -> SampledGradients:
        """The posterior's gain evidence at the weight samples ``thetas`` (of ``noises``)."""
        index = {name: i for i, name in enumerate(self.names)}
        layers = [(index[weight], index[bias]) for weight, bias in self.layer_names]
        return SampledGradients(noises, thetas, stats.inputs, stats.output_grads, layers)

    def dense_gradients(self, stats: ExampleStatistics) -> list[Tensor]:
        """∇θ f_b(θ_k) of every parameter: Ds aᵀ for weights, Ds for biases, (B, K, …)."""
        return self.evidence([], [], stats).gradients()

    @property
    def noise_per_unit(self) -> bool:
        """Whether the information gain samples pre-activations, noise per unit and
        transition (``VimeConfig.noise_per_unit``)."""
        return self.config.noise_per_unit

    def draw_unit_noise(self, examples: int, samples: int) -> list[Tensor]:
        """ε of every unit for ``examples`` transitions and ``samples`` local samples, one
        tensor per layer (examples, samples, out_features)."""
        shapes = [(examples, samples, layer.out_features) for layer in self.linears]
        weight = self.linears[0].weight
        return [
            torch.randn(shape, generator=self.generator, dtype=weight.dtype, device=weight.device)
            for shape in shapes
        ]

    def information_noise(self, examples: int = 1) -> list[Tensor]:
        """The noise of one information-gain call of ``examples`` transitions: K =
        ``num_samples`` draws for a posterior whose gain is a Monte Carlo estimate (Bayes by
        Backprop, VIME's; IVON) — per unit and transition (:meth:`draw_unit_noise`) or per
        weight, shared by the transitions (:meth:`draw_noise`) — and none (ε = 0, the step
        at the posterior mean) for the others (docs/decisions.md#vime)."""
        samples = self.config.gain_samples
        if self.noise_per_unit:
            return self.draw_unit_noise(examples, samples)
        if self.optimizer.gain_from_samples:
            return self.draw_noise(samples)
        return [torch.zeros((1, *p.shape), dtype=p.dtype, device=p.device) for p in self.parameters]

    def noise_rows(self, noises: list[Tensor], rows: slice) -> list[Tensor]:
        """The part of a call's noise that belongs to the transitions ``rows``: their own
        rows of noise per unit; all of a shared weight noise."""
        return [e[rows] for e in noises] if self.noise_per_unit else noises

    @torch.no_grad()
    def local_example_statistics(
        self, inputs: Tensor, targets: Tensor, noises: list[Tensor]
    ) -> LocalStatistics:
        """Every example's layer inputs, gradients w.r.t. each layer's pre-activation mean m
        and variance v, and loss, at the local samples of ``noises`` (:meth:`draw_unit_noise`).

        VIME's released forward pass (``bnn.py`` l.138-161): s = m + √v ⊙ ε with
        m = a W_μᵀ + b_μ and v = a² (σ_W²)ᵀ + σ_b², the posterior's current means and σ;
        batched over examples b and samples k, and since f_b at sample k depends only on
        its own (b, k) row, one backward pass of the summed loss gives every ∂f_b/∂m and
        ∂f_b/∂v (through the later layers' m and v, as in the released gradient).
        """
        stds = dict(zip(self.names, self.optimizer.sampling_std(), strict=True))
        hidden = inputs[:, None, :].expand(-1, noises[0].shape[1], -1)  # (B, K, in)
        layer_inputs, means, variances = [], [], []
        with torch.enable_grad():
            layers = zip(self.linears, self.layer_names, noises, strict=True)
            for i, (layer, (weight_name, bias_name), eps) in enumerate(layers):
                layer_inputs.append(hidden)
                mean = F.linear(hidden, layer.weight.detach(), layer.bias.detach())
                variance = F.linear(
                    hidden.square(), stds[weight_name].square(), stds[bias_name].square()
                )
                for node in (mean, variance):
                    if not node.requires_grad:  # the first layer: its input is data
                        node.requires_grad_(True)
                means.append(mean)
                variances.append(variance)
                output = mean + variance.sqrt() * eps
                hidden = torch.relu(output) if i < len(self.linears) - 1 else output
            nll = gaussian_nll(hidden, targets[:, None, :], self.config.likelihood_std)  # (B, K)
            grads = torch.autograd.grad(nll.sum(), means + variances)
        layers = len(self.linears)
        return LocalStatistics(
            [a.detach() for a in layer_inputs], list(grads[:layers]), list(grads[layers:]),
            nll.detach(),
        )  # fmt: skip

    @torch.no_grad()
    def local_gradients(self, stats: LocalStatistics) -> tuple[list[Tensor], list[Tensor]]:
        """Each example's K-sample estimates of ∇μ and ∇σ of every parameter, (B, *p.shape),
        in ``parameters`` order: with m = a W_μᵀ + b_μ and v = a² (σ_W²)ᵀ + σ_b²,

            ∇W_μ = mean_k ∂f/∂m aᵀ,   ∇b_μ = mean_k ∂f/∂m,
            ∇σ_W = 2 σ_W ⊙ mean_k ∂f/∂v (a²)ᵀ,   ∇σ_b = 2 σ_b ⊙ mean_k ∂f/∂v

        (the released gradient of ``loss_last_sample``, bnn.py l.374-391: the mean over the
        samples; its KL term has no gradient where it is taken, bar a 1e-8 guard, l.181)."""
        stds = dict(zip(self.names, self.optimizer.sampling_std(), strict=True))
        mean_grads, std_grads = {}, {}
        for (weight, bias), a, dm, dv in zip(
            self.layer_names, stats.inputs, stats.mean_grads, stats.variance_grads
        ):
            samples = a.shape[1]
            mean_grads[weight] = dm.transpose(1, 2).bmm(a).div_(samples)
            mean_grads[bias] = dm.mean(dim=1)
            outer = dv.transpose(1, 2).bmm(a.square()).div_(samples)
            std_grads[weight] = outer.mul_(stds[weight]).mul_(2.0)
            std_grads[bias] = dv.mean(dim=1).mul_(stds[bias]).mul_(2.0)
        return [mean_grads[n] for n in self.names], [std_grads[n] for n in self.names]

    @torch.no_grad()
    def information_gain(self, inputs: Tensor, targets: Tensor, noises: list[Tensor]) -> Tensor:
        """KL(q_after ‖ q) of one update on each transition (float64, (B,)), at the samples
        of ``noises`` (:meth:`information_noise`, :meth:`noise_rows` of these transitions);
        the posterior is not changed."""
        opt = self.optimizer
        if self.noise_per_unit:
            stats = self.local_example_statistics(inputs, targets, noises)
            evidence: GainEvidence = MomentGradients(*self.local_gradients(stats))
        else:
            thetas = opt.posterior_sample(noises)
            evidence = self.evidence(
                noises, thetas, self.example_statistics(thetas, inputs, targets)
            )
        return opt.information_gain(evidence, self.config.second_order_step)

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict:
        return {"network": self.network.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.network.load_state_dict(state["network"])
        self.optimizer.load_state_dict(state["optimizer"])
