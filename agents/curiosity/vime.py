"""VIME's curiosity bonus: η · KL(q(θ | history + transition) ‖ q(θ | history)).

:class:`VimeBonus` is what a learner calls (Houthooft et al. 2016, eq. 14 of Zhang et al.
2018). It owns the dynamics model and its posterior (:mod:`agents.curiosity.dynamics`),
the pool it trains on (:mod:`agents.curiosity.pool`), the normalisation of its inputs and
of the bonus, and the statistics a run logs. The learner decides *when*:

* ``add(obs, actions, next_obs)`` — transitions into the pool;
* ``fit()`` — train the model on the pool, ``updates_per_step`` steps per transition
  added since the last fit (VIME: after every batch of paths, l.303-354 of
  ``algos/batch_polopt_expl.py``); ``due()`` says when ``fit_every`` steps have passed;
* ``intrinsic_rewards(obs, actions, next_obs)`` — η · information gain / the mean of the
  last ``median_window`` batch medians, for one batch of transitions (VIME:
  ``use_kl_ratio_q``, l.473-484), zero until the model was fitted once (VIME: none in
  the first iteration, l.461);
* ``information_gain(...)`` — the raw KL divergences, batched;
* ``pop_statistics()`` — the scalars to log since the last call.

Inputs are normalised by the pool's mean and standard deviation at the last fit (l.318-331,
``obs_std + 1e-8``): s and a as the model's input, s′ with the statistics of s as its
target. See ``docs/vime.md`` for how each learner uses it.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from ..common.checkpoints import listed, non_finite_entries
from ..common.errors import CheckpointError, ConfigError, NonFiniteDataError
from ..common.memory_budget import check_memory
from ..common.stop_requests import unless_stopped
from .config import CHUNK, VimeConfig
from .dynamics import BayesianDynamics
from .pool import TransitionPool

#: Added to the standard deviations that normalise the model's inputs (l.325).
STD_EPS = 1e-8


class MedianNormaliser:
    """Divides a batch by the mean of the medians of the last ``window`` batches, this one
    included (VIME's ``use_kl_ratio_q``: ``kl_previous``, l.232-236 and l.474-480)."""

    def __init__(self, window: int) -> None:
        self.medians: deque[float] = deque(maxlen=window)

    def __call__(self, values: Tensor) -> Tensor:
        self.medians.append(float(torch.quantile(values.double(), 0.5)))  # numpy's median
        scale = self.scale
        return values / scale if scale > 0 else torch.zeros_like(values)

    @property
    def scale(self) -> float:
        """The mean of the last ``window`` batch medians: what a batch is divided by."""
        return sum(self.medians) / len(self.medians)


def _rows(array: np.ndarray | Tensor, device: torch.device) -> Tensor:
    """Transitions as float32 rows (B, dim); a 1-D array is one transition."""
    tensor = torch.as_tensor(array, dtype=torch.float32, device=device)
    return tensor.reshape(1, -1) if tensor.dim() == 1 else tensor.reshape(tensor.shape[0], -1)


class VimeBonus:
    """The curiosity bonus of one learner (module docstring)."""

    def __init__(
        self,
        config: VimeConfig,
        obs_dim: int,
        action_dim: int,
        *,
        seed: int | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.config = config
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)
        self.pool = TransitionPool(config.pool_size, obs_dim, action_dim, device=self.device)
        self.dynamics = BayesianDynamics(obs_dim + action_dim, obs_dim, config, self.generator)
        self.normaliser = MedianNormaliser(config.median_window)
        self.moments = (
            torch.zeros(obs_dim, device=self.device),
            torch.ones(obs_dim, device=self.device),
            torch.zeros(action_dim, device=self.device),
            torch.ones(action_dim, device=self.device),
        )
        self.num_fits = 0
        self.steps_since_fit = 0
        self._scored: list[Tensor] = []  # intrinsic rewards given since the last pop
        self._medians: list[float] = []
        self._fit_log: dict[str, float] = {}
        self._non_finite = 0  # information gains that were not finite (set to 0)

    # ------------------------------------------------------------------ data and training
    @property
    def ready(self) -> bool:
        """Whether the model was fitted at least once (before that the bonus is 0)."""
        return self.num_fits > 0

    def add(
        self, obs: np.ndarray | Tensor, actions: np.ndarray | Tensor, next_obs: np.ndarray | Tensor
    ) -> None:
        """Transitions (rows) into the pool."""
        rows = [_rows(x, self.device) for x in (obs, actions, next_obs)]
        self.pool.extend(*rows)
        self.steps_since_fit += rows[0].shape[0]

    def due(self) -> bool:
        """``fit_every`` steps have been added since the last fit."""
        return self.steps_since_fit >= self.config.fit_every

    def _normalised(self, obs: Tensor, actions: Tensor, next_obs: Tensor) -> tuple[Tensor, Tensor]:
        obs_mean, obs_std, act_mean, act_std = self.moments
        inputs = torch.cat(
            [(obs - obs_mean) / (obs_std + STD_EPS), (actions - act_mean) / (act_std + STD_EPS)],
            dim=1,
        )
        return inputs, (next_obs - obs_mean) / (obs_std + STD_EPS)

    def fit(self) -> bool:
        """Train on the pool: ``updates_per_step`` minibatch steps per transition added since
        the last fit (at least one). Nothing while the pool holds fewer than
        ``min_pool_size``; returns whether it trained; NonFiniteDataError when the model
        diverged (its state is not finite). A stop request (Ctrl-C, SIGTERM)
        ends the fit between two of its updates, as it ends a round of the agent's
        (:func:`~agents.common.stop_requests.unless_stopped`); the rest is not made up."""
        cfg = self.config
        if len(self.pool) < cfg.min_pool_size or self.steps_since_fit == 0:
            return False
        self.moments = self.pool.moments()
        nll, updates = self.train(max(1, round(cfg.updates_per_step * self.steps_since_fit)))
        if updates == 0:  # stopped before the first
            return False
        bad = non_finite_entries(self.dynamics.state_dict(), "bonus.dynamics.")
        if bad:  # every later gain would be 0, and the run's end could not save it
            raise NonFiniteDataError(
                f"VIME's dynamics model diverged: {listed(bad)} not finite after "
                f"{updates} updates of its {self.config.posterior} posterior (lower bonus.lr)"
            )
        kl = self.dynamics.kl_to_prior()
        self._fit_log = {
            "dynamics/nll": nll,
            "dynamics/kl": kl,
            "dynamics/loss": nll + kl / cfg.num_data,
            "dynamics/updates": float(updates),
        }
        self.num_fits += 1
        self.steps_since_fit = 0
        return True

    def train(self, updates: int) -> tuple[float, int]:
        """Up to ``updates`` steps of the posterior's optimizer on minibatches of the pool,
        normalised by the current moments (fewer once a stop is requested); their mean
        negative log-likelihood and how many ran."""
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        ran = 0
        for _ in unless_stopped(updates):
            batch = self.pool.sample(self.config.pool_batch_size, self.generator)
            total += self.dynamics.train_step(*self._normalised(*batch))
            ran += 1
        return (float(total) / ran if ran else 0.0), ran

    # ------------------------------------------------------------------ the bonus
    @torch.no_grad()
    def information_gain(
        self, obs: np.ndarray | Tensor, actions: np.ndarray | Tensor, next_obs: np.ndarray | Tensor
    ) -> Tensor:
        """KL(q after one update on the transition ‖ q now) of every transition (float64,
        clipped to [0, ``max_information_gain``]; 0 where not finite, counted), in chunks of
        :data:`CHUNK`. The noise is drawn once per call: noise per unit (bbb as released)
        is every transition's own, noise per weight (bbb's option, ivon) is shared by the
        call's transitions, posteriors whose gain is taken at the mean have none."""
        obs, actions, next_obs = (_rows(x, self.device) for x in (obs, actions, next_obs))
        inputs, targets = self._normalised(obs, actions, next_obs)
        noises = self.dynamics.information_noise(len(inputs))
        chunks = [slice(i, i + CHUNK) for i in range(0, len(inputs), CHUNK)]
        gains = torch.cat(
            [
                self.dynamics.information_gain(
                    inputs[rows], targets[rows], self.dynamics.noise_rows(noises, rows)
                )
                for rows in chunks
            ]
        )
        finite = torch.isfinite(gains)
        if not bool(finite.all()):  # a broken model gives no bonus, and says so
            self._non_finite += int((~finite).sum())
            gains = torch.where(finite, gains, 0.0)
        return gains.clamp(0.0, self.config.max_information_gain)

    def intrinsic_rewards(
        self, obs: np.ndarray | Tensor, actions: np.ndarray | Tensor, next_obs: np.ndarray | Tensor
    ) -> Tensor:
        """η · information gain / (mean of the last batch medians), float32 (B,), for one
        batch; zeros until the model was fitted once.

        The settings keep η · ``max_information_gain`` a float32, but a small enough mean
        of medians still takes the quotient beyond it: then NonFiniteDataError, saying so,
        rather than an infinite reward for the learner."""
        if not self.ready:
            return torch.zeros(_rows(obs, self.device).shape[0], device=self.device)
        gains = self.information_gain(obs, actions, next_obs)
        rewards = (self.config.eta * self.normaliser(gains)).float()
        if not bool(torch.isfinite(rewards).all()):
            raise NonFiniteDataError(
                f"non-finite curiosity bonus ({rewards.max().item()}): η "
                f"({self.config.eta:g}) · information gain (up to {gains.max().item():.3g}) / "
                f"the mean of the last batch medians ({self.normaliser.scale:.3g}) is beyond "
                "float32 (lower bonus.eta)"
            )
        self._scored.append(rewards.detach().cpu())
        self._medians.append(self.normaliser.medians[-1])
        return rewards

    def pop_statistics(self) -> dict[str, float]:
        """``bonus/intrinsic_mean`` (over the transitions scored since the last call),
        ``bonus/info_gain_median`` (the mean of their batches' median information gains),
        ``bonus/non_finite_gains`` (gains set to 0 because they were not finite; only when
        there were some) and, after a fit, ``dynamics/nll``, ``dynamics/kl``,
        ``dynamics/loss`` (the ELBO per transition) and ``dynamics/updates``."""
        out = dict(self._fit_log)
        if self._scored:
            out["bonus/intrinsic_mean"] = float(torch.cat(self._scored).mean())
            out["bonus/info_gain_median"] = sum(self._medians) / len(self._medians)
        if self._non_finite:
            out["bonus/non_finite_gains"] = float(self._non_finite)
        self._scored, self._medians, self._fit_log, self._non_finite = [], [], {}, 0
        return out

    # ------------------------------------------------------------------ persistence
    def state_dict(self, include_pool: bool = True) -> dict:
        """Everything to continue: model, posterior, normalisation, RNG, counters, and the
        pool unless ``include_pool`` is false (a run saves it with its replay buffer)."""
        state = {
            "dynamics": self.dynamics.state_dict(),
            "moments": [m.clone() for m in self.moments],
            "medians": list(self.normaliser.medians),
            "generator": self.generator.get_state(),
            "num_fits": self.num_fits,
            "steps_since_fit": self.steps_since_fit,
        }
        if include_pool:
            state["pool"] = self.pool.state_dict()
        return state

    def load_state_dict(self, state: dict, steps: int | None = None) -> None:
        """Continue from :meth:`state_dict`'s form, checked first (it comes from a file):
        every tensor finite and of its shape, the counters integers within what ``steps``
        transitions allow, the medians and moments in their ranges, the posterior's σ
        positive. CheckpointError saying what is not, and the bonus as it was."""
        problem = self._state_problem(state, steps)
        if problem is not None:
            raise CheckpointError(f"its curiosity bonus's state is not valid: {problem}")
        before = copy.deepcopy(self.dynamics.state_dict())
        try:
            self.dynamics.load_state_dict(state["dynamics"])
        except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
            self.dynamics.load_state_dict(before)
            detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
            raise CheckpointError(
                "its curiosity bonus's dynamics model (bonus.dynamics) does not fit this "
                f"run's: {type(err).__name__}: {detail}"
            ) from None
        stds = self.dynamics.optimizer.sampling_std()  # σ as the posterior derives it
        if not all(bool((std > 0).all() and torch.isfinite(std).all()) for std in stds):
            self.dynamics.load_state_dict(before)
            raise CheckpointError(
                "its curiosity bonus's state is not valid: the posterior's σ "
                "(bonus.dynamics.optimizer) is not positive and finite"
            )
        if "pool" in state:  # else the pool refills from the coming transitions
            self.pool.load_state_dict(state["pool"])
        self.moments = tuple(m.to(self.device) for m in state["moments"])
        self.normaliser.medians.clear()
        self.normaliser.medians.extend(state["medians"])
        self.generator.set_state(state["generator"].cpu())  # a CPU byte tensor on any device
        self.num_fits = state["num_fits"]
        self.steps_since_fit = state["steps_since_fit"]

    def _state_problem(self, state: Any, steps: int | None) -> str | None:
        """What is wrong with a saved state (:meth:`state_dict`'s form), or None: checked
        before anything is loaded. ``steps`` (when known) bounds the counters: each
        environment step gave the bonus one transition, and each fit needed a new one."""
        if not isinstance(state, Mapping):
            return f"bonus is a {type(state).__name__}, not a mapping"
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            return f"bonus lacks {', '.join(missing)}"
        most = "" if steps is None else f", at most the {steps} steps saved"
        for key in ("num_fits", "steps_since_fit"):
            value = state[key]
            if not _is_int(value) or value < 0 or (steps is not None and value > steps):
                return f"bonus.{key} must be an integer >= 0{most}, got {value!r}"
        dynamics = state["dynamics"]
        if not (
            isinstance(dynamics, Mapping)
            and all(isinstance(dynamics.get(key), Mapping) for key in ("network", "optimizer"))
        ):
            return "bonus.dynamics must hold the model's network and optimizer"
        bad = non_finite_entries(dynamics, "bonus.dynamics.")
        if bad:
            return f"{listed(bad)} not finite"
        moments = state["moments"]
        shapes = [tuple(m.shape) for m in self.moments]
        if not (
            isinstance(moments, list | tuple)
            and len(moments) == len(shapes)
            and all(torch.is_tensor(m) and m.is_floating_point() for m in moments)
            and [tuple(m.shape) for m in moments] == shapes
        ):
            return f"bonus.moments must be {len(shapes)} float tensors of shapes {shapes}"
        if not all(bool(torch.isfinite(m).all()) for m in moments) or any(
            bool((m < 0).any()) for m in moments[1::2]
        ):
            return "bonus.moments must be finite, their standard deviations >= 0"
        medians, cfg = state["medians"], self.config
        if not (
            isinstance(medians, list | tuple)
            and len(medians) <= cfg.median_window
            and all(
                isinstance(m, int | float) and not isinstance(m, bool)
                and 0 <= m <= cfg.max_information_gain
                for m in medians
            )
        ):  # fmt: skip
            return (
                f"bonus.medians must be at most {cfg.median_window} numbers in "
                f"[0, {cfg.max_information_gain:g}] (bonus.median_window, "
                f"bonus.max_information_gain), got {_shown(medians)}"
            )
        generator = state["generator"]
        if not (
            torch.is_tensor(generator)
            and generator.dtype == torch.uint8
            and generator.shape == self.generator.get_state().shape
        ):
            return "bonus.generator is not the state of a random generator"
        if "pool" in state:
            return self._pool_problem(state["pool"], steps)
        return None

    def _pool_problem(self, pool: Any, steps: int | None) -> str | None:
        """What is wrong with a saved transition pool, or None."""
        if not (isinstance(pool, Mapping) and all(key in pool for key in _POOL_KEYS)):
            return f"bonus.pool must hold {', '.join(_POOL_KEYS)}"
        capacity, position, size = (pool[key] for key in ("capacity", "position", "size"))
        if not all(_is_int(n) for n in (capacity, position, size)):
            return "bonus.pool's capacity, position and size must be integers"
        if capacity != self.pool.capacity:
            return f"bonus.pool holds up to {capacity} transitions, this run's {self.pool.capacity}"
        limit = capacity if steps is None else min(capacity, steps)
        if not (0 <= size <= limit and 0 <= position < capacity):
            return f"bonus.pool's size ({size}) and position ({position}) are out of range"
        if size < capacity and position != size:
            return f"bonus.pool's position ({position}) must equal its size ({size}) until full"
        for key in TransitionPool.fields:
            rows, expected = pool[key], (size, getattr(self.pool, key).shape[1])
            if not (torch.is_tensor(rows) and rows.is_floating_point() and rows.shape == expected):
                return f"bonus.pool.{key} must be a float tensor of shape {expected}"
        bad = non_finite_entries({key: pool[key] for key in TransitionPool.fields}, "bonus.pool.")
        return f"{listed(bad)} not finite" if bad else None


#: What every saved state of a :class:`VimeBonus` holds (``pool`` only with the buffer).
_STATE_KEYS = ("dynamics", "moments", "medians", "generator", "num_fits", "steps_since_fit")
_POOL_KEYS = ("capacity", "position", "size", *TransitionPool.fields)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}…"


Settings = Mapping[str, Any] | VimeConfig | None


def make_vime_bonus(
    settings: Settings,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    seed: int | None,
    device: torch.device | str = "cpu",
) -> VimeBonus:
    """A :class:`VimeBonus` for an env's Box spaces from a :class:`VimeConfig`, or from a
    ``bonus:`` mapping (``kind`` may be left out: SB3 users pass ``{"posterior": ...}``); one
    clear :class:`ConfigError` otherwise."""
    config = (
        settings if isinstance(settings, VimeConfig) else VimeConfig.from_mapping(settings or {})
    )
    for name, space in (("observation", observation_space), ("action", action_space)):
        if not isinstance(space, spaces.Box):
            raise ConfigError(
                f"VIME's dynamics model needs a Box {name} space, got {type(space).__name__}"
            )
    obs_dim, action_dim = (int(np.prod(space.shape)) for space in (observation_space, action_space))
    # before allocating (a run checked it with its learner's: agents.runs.agent_factory)
    check_memory(config.memory_needs(obs_dim, action_dim), torch.device(device))
    return VimeBonus(config, obs_dim, action_dim, seed=seed, device=device)
