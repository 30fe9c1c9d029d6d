"""The learners' settings: DDPG's (either engine) and TRPO's, each a typed, checked record.

Defaults are the paper's experiment for DDPG (Khan et al. 2018, Appendix K and Table 3;
Lillicrap et al. 2015) and VIME's released code for TRPO (``docs/decisions.md#trpo``);
``configs/ddpg.yaml`` restates every DDPG default with its source and a test keeps the two
equal. A settings file names them flat (``hidden_sizes``, ``tau``, ``strategy``,
``optimizer_kwargs``, …, and TRPO's own under ``trpo:``); :meth:`DDPGSettings.from_values`
and :meth:`TRPOSettings.from_values` read that form, and ``values()`` gives it back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from param_explore.validation import require_non_negative, require_positive

from ..common.checks import (
    coerce_fields,
    coerce_value,
    require,
    require_finishable,
    require_known,
    require_layers,
    require_valid,
)
from ..common.critic_posterior import PLAIN_CRITIC, critic_optimizer_settings
from ..common.memory_budget import FLOAT32, MemoryNeed
from ..common.strategies import Resample, Strategy, resolve_strategy

#: The settings-file keys that make up a DDPG strategy (:class:`Strategy`).
STRATEGY_KEYS = ("strategy", "optimizer_kwargs", "action_noise", "resample", "layer_norm")
#: What each strategy key may hold as read from a file (before it is resolved).
_STRATEGY_HINTS = {
    "strategy": str,
    "optimizer_kwargs": dict,
    "action_noise": dict,
    "resample": Resample | None,
    "layer_norm": bool | None,
}


@dataclass(frozen=True)
class DDPGSettings:
    """DDPG's hyperparameters (Appendix K; ``docs/decisions.md``) and its strategy."""

    #: The exploration strategy (``--opt``), resolved (:mod:`agents.common.strategies`).
    strategy: Strategy = field(default_factory=lambda: resolve_strategy("vadam"))
    hidden_sizes: list[int] = field(default_factory=lambda: [400, 300])
    #: How the actor and the critic start (:mod:`agents.common.initialisation`): the
    #: authors' released code (``khan2018``) or Lillicrap et al. 2015 (``lillicrap``).
    init: Literal["khan2018", "lillicrap"] = "khan2018"
    buffer_size: int = 1_000_000
    batch_size: int = 64
    gamma: float = 0.99
    tau: float = 1e-3
    critic_lr: float = 1e-3
    #: Updates start once the buffer holds *more* than this many transitions.
    learning_starts: int = 64
    #: Gradient updates every ``train_every`` environment steps.
    gradient_steps: int = 1
    #: Environment steps between rounds of ``gradient_steps`` updates: Khan et al. update
    #: once every step; Plappert et al.'s DDPG 50 times every 100 steps (OpenAI baselines
    #: ``main.py`` l.102-104, ``training.py`` l.69-119; ``docs/decisions.md#schedule``).
    train_every: int = 1
    #: ``sum`` (the released code) or ``mean`` of the minibatch policy gradient; None: the
    #: strategy's own (``default_actor_grad_reduction``: a mean for IVON, a sum otherwise),
    #: resolved here, so that ``DDPG(env, strategy="ivon")`` trains as ``--opt ivon`` does.
    actor_grad_reduction: Literal["sum", "mean"] | None = None
    #: Normalise observations for every network by their running mean and standard
    #: deviation, clipped to ±5 (baselines ``main.py`` l.90, ``ddpg.py`` l.100-109, l.277-278;
    #: ``docs/decisions.md#observation-normalisation``). Khan et al.'s networks see raw ones.
    normalize_observations: bool = False
    #: A LayerNorm after each hidden layer of the critic, before its ReLU (baselines
    #: ``models.py`` l.59-69; ``docs/decisions.md#critic-layer-norm``); Khan et al.'s has none.
    critic_layer_norm: bool = False
    #: λ of the L2 penalty λ·½‖W‖² on the critic's weight matrices, added to its loss
    #: (baselines ``main.py`` l.92: 1e-2, ``ddpg.py`` l.183-192;
    #: ``docs/decisions.md#critic-l2``); Khan et al.'s critic has none.
    critic_l2_reg: float = 0.0
    #: The critic's optimizer (``--critic-opt``): ``adam``, torch's at ``critic_lr`` (Khan et
    #: al.'s critic), or a posterior (``ivon``, ``noisy-adam``) or sampler (``langevin``) whose
    #: sample of Q, held for ``critic_hold`` steps, moves the acting action
    #: (:mod:`agents.common.critic_posterior`, :mod:`agents.ddpg.thompson`;
    #: ``docs/decisions.md#variational-critic``).
    critic_optimizer: str = PLAIN_CRITIC
    #: A sampled critic's settings over those derived from ``buffer_size`` (the data N) and
    #: ``critic_prior_variance`` (η); resolved complete at construction.
    critic_optimizer_kwargs: dict = field(default_factory=dict)
    #: η of a sampled critic's prior N(0, η I) (a posterior's; Langevin's chain has none).
    critic_prior_variance: float = 1.0
    #: Environment steps a sample of the critic is held for; 0: one sample per episode.
    critic_hold: int = 0
    #: How far the acting action moves along the sampled critic's ∇ₐQ̃ (normalised), in
    #: units of half the action range: OAC's shift with Thompson's sample for its bound.
    critic_shift: float = 0.3
    #: What the actor is trained against: the critic's ``mean`` (its parameters; the
    #: design) or the held ``sample`` (LSAC's way, the comparison).
    actor_critic: Literal["mean", "sample"] = "mean"
    #: Run each update as one compiled graph (:mod:`agents.ddpg.compiled_update`): faster,
    #: equal to the eager update up to float rounding, seconds of compiling at the first
    #: update. Strategies without a traced form (noisy-kfac) train eagerly.
    compile: bool = False

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.actor_grad_reduction is None:  # frozen: resolved once, at construction
            reduction = self.strategy.optimizer_class.default_actor_grad_reduction
            object.__setattr__(self, "actor_grad_reduction", reduction)
        for key in ("buffer_size", "batch_size", "gradient_steps", "train_every"):
            require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        require_finishable(
            "gradient_steps",
            self.gradient_steps / self.train_every,
            f"{self.gradient_steps} every {self.train_every} step(s)",
        )
        require_valid(require_non_negative, "critic_l2_reg", self.critic_l2_reg)
        require(self.learning_starts >= 0, "learning_starts must be >= 0")
        require(
            self.buffer_size > self.learning_starts,
            f"buffer_size ({self.buffer_size}) must exceed learning_starts "
            f"({self.learning_starts}): updates start once the buffer holds more than "
            "learning_starts transitions, so this run would never train",
        )
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        require(0 < self.tau <= 1, f"tau must be in (0, 1], got {self.tau}")
        require_valid(require_positive, "critic_lr", self.critic_lr)
        require(
            len(self.hidden_sizes) >= 2 and all(h > 0 for h in self.hidden_sizes),
            f"hidden_sizes needs at least two positive sizes, got {self.hidden_sizes}",
        )
        require_layers("hidden_sizes", self.hidden_sizes)
        self._resolve_critic()

    def _resolve_critic(self) -> None:
        """The critic's optimizer settings resolved complete (frozen: once, here); the
        sampled critic's own settings refused for torch's Adam, which has no sample."""
        require_valid(require_positive, "critic_prior_variance", self.critic_prior_variance)
        require(self.critic_hold >= 0, f"critic_hold must be >= 0, got {self.critic_hold}")
        require_valid(require_non_negative, "critic_shift", self.critic_shift)
        kwargs = critic_optimizer_settings(
            self.critic_optimizer,
            self.critic_optimizer_kwargs,
            self.buffer_size,
            self.critic_prior_variance,
            self.critic_lr,
        )
        object.__setattr__(self, "critic_optimizer_kwargs", kwargs)
        if self.critic_optimizer == PLAIN_CRITIC:
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            for key in ("critic_prior_variance", "critic_hold", "critic_shift", "actor_critic"):
                require(
                    getattr(self, key) == defaults[key],
                    f"{key} applies to a sampled critic (--critic-opt ivon, noisy-adam or "
                    "langevin); torch's Adam keeps no posterior",
                )

    @property
    def samples_critic(self) -> bool:
        """Whether the critic is a posterior whose sample explores (not torch's Adam)."""
        return self.critic_optimizer != PLAIN_CRITIC

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The settings-file keys this record is read from."""
        return (*STRATEGY_KEYS, *(f.name for f in dataclasses.fields(cls)[1:]))

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> DDPGSettings:
        """The record of a settings mapping's DDPG keys (any left out keep their defaults);
        one ConfigError line for an unknown key or a bad value."""
        require_known("DDPG setting(s)", values, cls.keys())
        given = {
            key: coerce_value(key, _STRATEGY_HINTS[key], values[key])
            for key in STRATEGY_KEYS
            if key in values
        }
        strategy = resolve_strategy(
            given.get("strategy", "vadam"),
            given.get("optimizer_kwargs"),
            given.get("action_noise"),
            given.get("layer_norm"),
            given.get("resample"),
        )
        scalars = {key: value for key, value in values.items() if key not in STRATEGY_KEYS}
        return cls(strategy=strategy, **scalars)

    def values(self) -> dict[str, Any]:
        """The settings-file form: the strategy's keys, then the hyperparameters."""
        hyperparameters = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "strategy"
        }
        return {**self.strategy.settings(), **hyperparameters}

    def memory_needs(self, obs_dim: int, action_dim: int) -> list[MemoryNeed]:
        """What these settings need in memory at least (``agents.common.memory_budget``):
        the replay buffer's tensors exactly (two observations, the action, reward and flag
        per transition, as float32), four copies of the networks' parameters (networks,
        targets, two optimizer moments), and per update the activations autograd must keep
        for a minibatch — every layer of the critic twice (its loss, and the actor's loss
        through it) and of the actor once."""
        hidden = list(self.hidden_sizes)
        actor_layers = [obs_dim, *hidden, action_dim]
        critic_layers = [obs_dim + action_dim, *hidden, 1]
        critic = sum((a + 1) * b for a, b in pairwise(critic_layers))
        params = critic + sum((a + 1) * b for a, b in pairwise(actor_layers))
        if self.samples_critic:  # its ε, a third state tensor and the held sample
            params += critic * 3 // 4 + 1
        per_transition = 2 * obs_dim + action_dim + 2
        per_sample = 2 * sum(critic_layers) + sum(actor_layers)
        return [
            MemoryNeed(
                f"replay buffer (buffer_size={self.buffer_size})",
                self.buffer_size * per_transition * FLOAT32,
                "buffer_size",
            ),
            MemoryNeed(f"networks (hidden_sizes={hidden})", 4 * params * FLOAT32, "hidden_sizes"),
            MemoryNeed(
                f"one update (batch_size={self.batch_size})",
                self.batch_size * per_sample * FLOAT32,
                "batch_size",
            ),
        ]


#: The settings of the native DDPG's own update and loop, each at the value that keeps
#: Khan et al.'s protocol (SB3's DDPG runs its own update and loop: they do not reach it).
NATIVE_ONLY = {
    "train_every": 1,
    "normalize_observations": False,
    "critic_layer_norm": False,
    "critic_l2_reg": 0.0,
    "critic_optimizer": PLAIN_CRITIC,
}


#: The strategy a TRPO run records: it explores through its own Gaussian policy.
TRPO_STRATEGY = "trpo"


@dataclass(frozen=True)
class TRPOSettings:
    """sb3-contrib TRPO's settings a run exposes (``trpo:`` mapping; defaults and their
    anchors in ``docs/decisions.md#trpo``), and the networks and discount it shares with
    DDPG's keys (``hidden_sizes``, ``gamma``)."""

    #: Steps per rollout (one policy update each): VIME's batch of 5000 steps.
    n_steps: int = 5000
    #: Maximum KL divergence of an update: VIME's step size 0.01 (sb3-contrib's default).
    target_kl: float = 0.01
    #: GAE's λ: 1.0 as VIME's BatchPolopt (sb3-contrib's default is 0.95).
    gae_lambda: float = 1.0
    #: Minibatch of the value function's updates (sb3-contrib's default).
    batch_size: int = 128
    #: Policy and value function alike (VIME: GaussianMLPPolicy hidden_sizes=(64, 32)).
    hidden_sizes: list[int] = field(default_factory=lambda: [64, 32])
    gamma: float = 0.99

    #: The keys of the ``trpo:`` mapping (the others are top-level keys shared with DDPG).
    OWN = ("n_steps", "target_kl", "gae_lambda", "batch_size")

    def __post_init__(self) -> None:
        coerce_fields(self, prefix="trpo.")
        require(self.n_steps >= 2, f"trpo.n_steps must be >= 2, got {self.n_steps}")
        require(self.target_kl > 0, f"trpo.target_kl must be > 0, got {self.target_kl}")
        require(
            0 <= self.gae_lambda <= 1, f"trpo.gae_lambda must be in [0, 1], got {self.gae_lambda}"
        )
        require(self.batch_size >= 1, f"trpo.batch_size must be >= 1, got {self.batch_size}")
        require(
            len(self.hidden_sizes) >= 1 and all(h > 0 for h in self.hidden_sizes),
            f"hidden_sizes needs at least one positive size, got {self.hidden_sizes}",
        )
        require_layers("hidden_sizes", self.hidden_sizes)
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TRPOSettings:
        """The record of a settings mapping's ``trpo:`` mapping, ``hidden_sizes`` and
        ``gamma``. DDPG's other keys do not apply: one given a value other than its
        default is refused (files of earlier versions list every key at its default)."""
        require(
            values.get("strategy", TRPO_STRATEGY) == TRPO_STRATEGY,
            f"--algo trpo explores through TRPO's own Gaussian policy, so a weight-noise "
            f"strategy ({values.get('strategy')}) does not apply: leave --opt out",
        )
        own = values.get("trpo", {})
        require(isinstance(own, dict), f"trpo must be a mapping of settings, got {own!r}")
        require_known("trpo setting(s)", own, cls.OWN)
        for key in ("optimizer_kwargs", "action_noise", "resample", "layer_norm", "compile"):
            require(
                not values.get(key),
                f"{key} applies to a DDPG exploration strategy or learner, not to --algo trpo",
            )
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(DDPGSettings)
            if f.default is not dataclasses.MISSING
        }
        for key, default in defaults.items():
            if key in values and key not in ("gamma", "compile"):
                require(
                    values[key] == default,
                    f"{key} applies to a DDPG learner, not to --algo trpo",
                )
        shared = {key: values[key] for key in ("hidden_sizes", "gamma") if key in values}
        return cls(**own, **shared)

    def memory_needs(self, obs_dim: int, action_dim: int) -> list[MemoryNeed]:
        """What these settings need in memory at least (``agents.common.memory_budget``),
        as sb3-contrib's TRPO allocates it: the rollout buffer of ``n_steps`` transitions
        (observation, action and six float32 scalars each: reward, return, episode start,
        value, log-probability, advantage), allocated whole when the model is built, and
        as much again for the update, which takes the rollout in one batch (its arrays as
        tensors, a permutation of its indices); the policy's activations on that batch and
        the value function's on a minibatch; the networks' parameters, the gradients of the
        value function and the policy's two (objective, KL), the value function's Adam
        moments and the line search's copy of the policy."""
        hidden = list(self.hidden_sizes)
        actor_layers = [obs_dim, *hidden, action_dim]
        critic_layers = [obs_dim, *hidden, 1]
        actor = sum((a + 1) * b for a, b in pairwise(actor_layers)) + action_dim  # and log σ
        critic = sum((a + 1) * b for a, b in pairwise(critic_layers))
        per_step = obs_dim + action_dim + 6
        minibatch = min(self.batch_size, self.n_steps)
        return [
            MemoryNeed(
                f"rollout buffer and its copy for the update (trpo.n_steps={self.n_steps})",
                2 * self.n_steps * per_step * FLOAT32,
                "trpo.n_steps",
            ),
            MemoryNeed(
                f"networks (hidden_sizes={hidden})",
                # parameters, gradients (the policy's two), Adam, the line search's copy
                ((1 + 2 + 1) * actor + (1 + 1 + 2) * critic) * FLOAT32,
                "hidden_sizes",
            ),
            MemoryNeed(
                f"one update (trpo.n_steps={self.n_steps}, trpo.batch_size={self.batch_size})",
                (self.n_steps * (sum(hidden) + action_dim) + minibatch * (sum(hidden) + 1))
                * FLOAT32,
                "trpo.n_steps",
            ),
        ]

    def values(self) -> dict[str, Any]:
        """The settings-file form."""
        return {
            "strategy": TRPO_STRATEGY,
            "hidden_sizes": list(self.hidden_sizes),
            "gamma": self.gamma,
            "trpo": {key: getattr(self, key) for key in self.OWN},
        }
