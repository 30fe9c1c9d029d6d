"""The settings of VIME's curiosity bonus (:class:`VimeConfig`), from one config mapping.

``bonus: {kind: vime, posterior: noisy-kfac, eta: 1e-4, ...}``: every key but ``kind`` is
optional. The defaults are VIME's released code (GitHub ``openai/vime``): the run script of
its one released experiment, ``experiments/run_trpo_expl.py`` (cited as l.N), where it sets a
value, else the defaults of ``algos/batch_polopt_expl.py`` (bpe), ``dynamics/bnn.py`` and
``sampler/parallel_sampler_expl.py``; each is cited beside its field and in
``docs/decisions.md#vime``. Values the released code does not
have (the noisy posteriors' step sizes, when an off-policy learner refits the model) are
this project's and say so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import torch

import param_explore
from param_explore.posterior import GainShape
from param_explore.validation import require_positive

from ..common.checks import (
    coerce_fields,
    record_from_mapping,
    require,
    require_finishable,
    require_layers,
    require_valid,
)
from ..common.errors import ConfigError
from ..common.memory_budget import FLOAT32, MemoryNeed

#: The dynamics model's posterior: VIME's Bayes by Backprop, or a project optimizer's VI form
#: (``param_explore.POSTERIORS``, each a ``param_explore.Posterior``).
POSTERIORS = tuple(param_explore.POSTERIORS)
#: Transitions whose information gain is computed in one pass (memory: B·K·weights).
CHUNK = 256
#: The largest float32: the bonus reaches the learners' rewards as float32.
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


@dataclass(frozen=True)
class VimeConfig:
    """VIME's settings (Houthooft et al. 2016; released code ``openai/vime``), checked when
    made: an instance is a valid configuration."""

    kind: Literal["vime"] = "vime"
    #: q(θ) of the dynamics model, a name of ``param_explore.POSTERIORS``: ``bbb`` (fully
    #: factorised, Bayes by Backprop, as released), ``noisy-adam`` (NNG-FFG), ``noisy-kfac``
    #: (NNG-MVG, Zhang et al. 2018 Sec. 5.4) or ``ivon`` (Shen et al. 2024), the last three
    #: the ``param_explore`` optimizers in their VI form.
    posterior: str = "bbb"
    #: η, the bonus's weight (run_trpo_expl.py l.17, l.48).
    eta: float = 1e-4
    #: Hidden layers of the dynamics model, ReLU, both layers Bayesian (l.60-61).
    hidden_sizes: list[int] = field(default_factory=lambda: [32])
    #: σ of the Gaussian likelihood p(s′ | s, a; θ) (bnn.py l.256).
    likelihood_std: float = 5.0
    #: √η_prior: the prior N(0, prior_std²) and the initial posterior std (bpe l.129).
    prior_std: float = 0.5
    #: Weight samples of the information gain's gradient, for posteriors whose gain is a
    #: Monte Carlo estimate (bbb: snn_n_samples, l.49; bpe l.128; ivon). Noisy Adam and noisy
    #: K-FAC take their step at the posterior mean instead.
    num_samples: int = 10
    #: bbb: where the noise of those samples lives. ``unit``: the local reparameterisation
    #: trick as released (``bnn.py`` l.14, l.138-161) — each layer's pre-activation is
    #: sampled, one ε per unit, transition and sample; ``weight``: weight samples
    #: θ_k = μ + σ ε_k shared by a call's transitions. Both estimate the same gradient;
    #: the gains differ per transition (``docs/vime.md``). Training is not affected.
    bbb_gain_noise: Literal["unit", "weight"] = "unit"
    #: Step size of the posterior's optimizer; None: its own (``posterior_settings``): Adam's
    #: 1e-4 for bbb (l.62), 1e-2 for the noisy optimizers and 0.1 for ivon (project choices).
    lr: float | None = None
    #: Further settings of the posterior's optimizer (e.g. ``beta``, ``damping``).
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Transitions the dynamics model trains on, FIFO (replay_pool_size, l.57).
    pool_size: int = 1_000_000
    #: No training (and no bonus) before the pool holds this many (bpe l.136, l.317).
    min_pool_size: int = 500
    #: Transitions per training step of the dynamics model (bpe l.138).
    pool_batch_size: int = 10
    #: The ELBO weighs its KL term by 1/(kl_batches · pool_batch_size) per transition
    #: (n_batches = 5 hard-coded, bpe l.251; bnn.py l.372).
    kl_batches: int = 5
    #: Training steps per new transition: 5000 per 50 000-step iteration (l.38, l.58), as
    #: the defaults' 500 per 5000 (bpe l.114, l.137).
    updates_per_step: float = 0.1
    #: Off-policy learners: environment steps between two fits (bpe l.114's iteration);
    #: on-policy learners fit after every rollout, as VIME after every iteration.
    fit_every: int = 5000
    #: λ of bbb's second-order step (parallel_sampler_expl.py l.92).
    second_order_step: float = 0.01
    #: The bonus is divided by the mean of the last this-many batch medians (kl_q_len,
    #: bpe l.131; use_kl_ratio_q, l.52-53).
    median_window: int = 10
    #: Information gains are clipped to [0, this] (parallel_sampler_expl.py l.96).
    max_information_gain: float = 1000.0

    def __post_init__(self) -> None:
        coerce_fields(self, prefix="bonus.")
        posteriors = param_explore.POSTERIORS  # read now: a registered one counts
        require(
            self.posterior in posteriors,
            f"bonus.posterior must be one of {', '.join(posteriors)}, got {self.posterior!r}",
        )
        for key in (
            "likelihood_std", "prior_std", "updates_per_step", "second_order_step",
            "max_information_gain",
        ):  # fmt: skip
            require_valid(require_positive, f"bonus.{key}", getattr(self, key))
        for key in (
            "num_samples", "pool_size", "min_pool_size", "pool_batch_size", "kl_batches",
            "fit_every", "median_window",
        ):  # fmt: skip
            value = getattr(self, key)
            require(value >= 1, f"bonus.{key} must be an integer >= 1, got {value}")
        require_finishable(
            "bonus.updates_per_step", self.updates_per_step, "training steps of each fit"
        )
        require(self.eta >= 0, f"bonus.eta must be >= 0, got {self.eta}")
        require(
            self.eta * self.max_information_gain <= FLOAT32_MAX,
            f"bonus.eta × bonus.max_information_gain ({self.eta:g} × "
            f"{self.max_information_gain:g}) must be at most {FLOAT32_MAX:.3g}, float32's "
            "largest number: the bonus of the largest information gain would not be finite",
        )
        require(
            self.min_pool_size <= self.pool_size,
            f"bonus.min_pool_size ({self.min_pool_size}) exceeds bonus.pool_size "
            f"({self.pool_size})",
        )
        require(
            len(self.hidden_sizes) >= 1 and all(h > 0 for h in self.hidden_sizes),
            f"bonus.hidden_sizes needs at least one positive size, got {self.hidden_sizes}",
        )
        require_layers("bonus.hidden_sizes", self.hidden_sizes)
        if self.lr is not None:
            require_valid(require_positive, "bonus.lr", self.lr)
        try:  # the posterior's own checks, without building it (as it is built)
            optimizer_settings(self)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"bonus: {err}") from None

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> VimeConfig:
        """The checked settings of a ``bonus:`` mapping (``kind`` may be left out)."""
        return record_from_mapping(cls, settings, "bonus setting(s)")

    def require_fitted_within(self, total_steps: int, rollout: int | None) -> None:
        """The model is first fitted once the pool holds ``min_pool_size`` transitions, at
        the first check after that: an off-policy learner checks every step once
        ``fit_every`` steps have passed, an on-policy one after each ``rollout``, and its
        run ends with a whole rollout. One line unless that comes within ``total_steps``."""
        if rollout is None:
            first = max(self.fit_every, self.min_pool_size)
            what = f"bonus.fit_every ({self.fit_every}), bonus.min_pool_size ({self.min_pool_size})"
            last = total_steps
        else:
            first = -(-self.min_pool_size // rollout) * rollout
            what = f"bonus.min_pool_size ({self.min_pool_size}), after rollouts of {rollout} steps"
            last = -(-total_steps // rollout) * rollout
        require(
            first <= last,
            f"the bonus's model would first be fitted at step {first} ({what}), beyond the "
            f"run's {total_steps} steps: it would never be fitted, so this run would never "
            "give a bonus",
        )

    def label(self) -> str:
        """How a run directory names the bonus: ``vime-<posterior>``."""
        return f"{self.kind}-{self.posterior}"

    def values(self) -> dict[str, Any]:
        """The settings-file form (every setting)."""
        return dataclasses.asdict(self)

    @property
    def posterior_class(self) -> type[param_explore.Posterior]:
        """The optimizer class that holds and trains the dynamics model's posterior."""
        return param_explore.POSTERIORS[self.posterior]

    @property
    def noise_per_unit(self) -> bool:
        """Whether the information gain samples pre-activations, noise per unit and
        transition (the local reparameterisation, as VIME's released code; a posterior that
        allows it, with ``bbb_gain_noise: unit``)."""
        return self.posterior_class.local_reparameterisation and self.bbb_gain_noise == "unit"

    @property
    def gain_samples(self) -> int:
        """K, the weight (or unit) samples of one information gain: ``num_samples`` for a
        Monte Carlo posterior, 1 (the mean) for the others."""
        return self.num_samples if self.posterior_class.gain_from_samples else 1

    @property
    def num_data(self) -> int:
        """N of the ELBO: the KL term counts once per this many transitions."""
        return self.kl_batches * self.pool_batch_size

    def memory_needs(self, obs_dim: int, action_dim: int, batch_size: int = 1) -> list[MemoryNeed]:
        """What these settings need in memory at least (``agents.common.memory_budget``),
        for an env's observation and action sizes and a learner that scores
        ``batch_size`` transitions at once (a minibatch, a rollout): the transition pool
        exactly (s, a, s′ as float32, allocated whole when the bonus is made); the dynamics
        model, its gradient and its posterior's state; one fit step's minibatch and
        activations; and the information gain of a batch, taken :data:`CHUNK` transitions
        at a time — the last two parts of the model's and the gain's the posterior's own
        account (``Posterior.posterior_memory``)."""
        sizes = [obs_dim + action_dim, *self.hidden_sizes, obs_dim]
        layers = list(pairwise(sizes))
        hidden = list(self.hidden_sizes)
        shape = GainShape(
            layers, min(CHUNK, batch_size), batch_size, self.gain_samples, self.noise_per_unit
        )
        model, gain = self.posterior_class.posterior_memory(shape)
        row = 2 * obs_dim + action_dim
        sampled = self.posterior_class.gain_from_samples
        samples = f", bonus.num_samples={self.num_samples}" if sampled else ""
        lower = "bonus.hidden_sizes"
        if sampled and not self.noise_per_unit:
            lower = "bonus.hidden_sizes or bonus.num_samples"
        return [
            MemoryNeed(
                f"VIME's transition pool (bonus.pool_size={self.pool_size})",
                self.pool_size * row * FLOAT32,
                "bonus.pool_size",
            ),
            MemoryNeed(
                f"VIME's dynamics model and its {self.posterior} posterior "
                f"(bonus.hidden_sizes={hidden})",
                model * FLOAT32,
                "bonus.hidden_sizes",
            ),
            MemoryNeed(
                f"VIME's fit step (bonus.pool_batch_size={self.pool_batch_size})",
                self.pool_batch_size * (row + shape.units) * FLOAT32,
                "bonus.pool_batch_size",
            ),
            MemoryNeed(
                f"VIME's information gain of {batch_size} transitions "
                f"(bonus.hidden_sizes={hidden}{samples})",
                (gain + batch_size * row) * FLOAT32,
                lower,
            ),
        ]


# --------------------------------------------------------------------------- the optimizer
def optimizer_settings(config: VimeConfig) -> dict[str, Any]:
    """The keyword arguments of the posterior's optimizer: its VI form for N = ``num_data``
    and η = ``prior_std``² (``Posterior.posterior_settings``), then ``lr`` and
    ``optimizer_kwargs``, checked by the posterior's own checks
    (:func:`param_explore.checked_posterior_settings`: the one path of ``--check`` and the
    run)."""
    overrides = {} if config.lr is None else {"lr": config.lr}
    return param_explore.checked_posterior_settings(
        config.posterior_class,
        float(config.num_data),
        config.prior_std**2,
        {**overrides, **config.optimizer_kwargs},
        prior=f"bonus.prior_std = {config.prior_std:g}",
    )


def make_posterior_optimizer(
    config: VimeConfig, network: torch.nn.Module
) -> param_explore.WeightSampling:
    """The optimizer that holds and trains the dynamics model's posterior (its settings were
    checked when ``config`` was made), built from the network's named parameters."""
    return param_explore.make_optimizer(
        config.posterior_class, network, **optimizer_settings(config)
    )
