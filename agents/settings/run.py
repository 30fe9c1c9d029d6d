"""A run's settings, resolved once: :class:`RunSettings`.

One typed, checked record holds everything a run is: the learner and its settings (DDPG
with its resolved exploration strategy, or TRPO), the curiosity bonus or none, the env,
and how long, where and how the run goes. It is made once, at the start
(:func:`agents.settings.resolve_settings` from the command line and config files, or
:meth:`RunSettings.from_values` from a saved ``config.yaml``), and everything below
receives it: no name is translated twice and no settings mapping parsed again.

A settings file (``config.yaml``, a ``--config`` file, a preset) names its keys flat, as
``configs/ddpg.yaml`` lists them; :meth:`RunSettings.values` writes that form back, with
every value resolved (a strategy's and a bonus's complete settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..common.checks import check_seed, coerce_fields, coerce_value, require, require_known
from ..common.devices import check_device
from ..common.reward_bonus import BonusSettings
from ..curiosity.registry import resolve_bonus
from .learners import NATIVE_ONLY, TRPO_STRATEGY, DDPGSettings, TRPOSettings

Algo = Literal["ddpg", "trpo"]
Engine = Literal["native", "sb3"]


@dataclass(frozen=True)
class RunSettings:
    """A training run: its learner, bonus and env, and how long, where and how it goes."""

    #: DDPG's settings and strategy (``algo: ddpg``), or TRPO's (``algo: trpo``).
    learner: DDPGSettings | TRPOSettings = field(
        default_factory=lambda: DDPGSettings(compile=True)  # a run compiles unless asked not to
    )
    #: A curiosity bonus on the reward (``agents.curiosity.registry``), or None.
    bonus: BonusSettings | None = None
    env: str = "HalfCheetah-v4"
    #: The env's own settings, passed to ``gym.make`` (e.g. ``max_episode_steps``, or
    #: ``frame_skip`` of ``SparseHalfCheetah-v5``); one it refuses is a ConfigError.
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    total_steps: int = 3_000_000
    eval_every: int = 10_000
    eval_episodes: int = 20
    checkpoint_every: int = 10_000
    #: Also checkpoint the replay buffer (HalfCheetah: ~170 MB per million transitions).
    save_replay_buffer: bool = False
    #: Interval in steps of loss, σ and speed scalars.
    log_every: int = 1_000
    #: A run stops (one error line, after a checkpoint) when every update of this many
    #: environment steps was skipped for a non-finite loss or gradient; 0 never stops.
    skipped_window: int = 1_000
    logdir: str = "runs"
    device: str = "auto"
    #: ``native`` (this project's DDPG) or ``sb3`` (SB3's DDPG with ParamExplorePolicy, or
    #: sb3-contrib's TRPO).
    engine: Engine = "native"
    #: Episode length bound: None keeps the env's own time limit (an env without one is
    #: refused: its evaluation might never return); a number replaces it.
    max_episode_steps: int | None = None
    #: The learner acts in [−1, 1] and the env rescales to its bounds, clipping there
    #: (rllab's ``NormalizedEnv``; ``agents.common.envs.NormalizedActions``). None is the
    #: learner's own choice, resolved when the record is made: on for TRPO (VIME runs every
    #: task so, and TRPO's initial σ = 1 then spans the range), off for DDPG (its actor
    #: already squashes to the bounds). ``docs/decisions.md#trpo``.
    normalize_actions: bool | None = None
    #: The per-member values of a sweep this run is one of (``sample_constant=1000``), ""
    #: for none: part of its directory's name (:mod:`agents.settings.resolve`).
    variant: str = ""

    #: The run's own keys of a settings file (the learner's and ``bonus`` come besides).
    RUN_KEYS = (
        "env", "env_kwargs", "seed", "total_steps", "eval_every", "eval_episodes",
        "checkpoint_every", "save_replay_buffer", "log_every", "skipped_window", "logdir",
        "device", "engine", "max_episode_steps", "normalize_actions", "variant",
    )  # fmt: skip

    def __post_init__(self) -> None:
        coerce_fields(self)
        if self.normalize_actions is None:  # the learner's own choice, recorded resolved
            object.__setattr__(self, "normalize_actions", self.algo == "trpo")
        check_seed(self.seed)
        require(
            self.max_episode_steps is None or self.max_episode_steps > 0,
            f"max_episode_steps must be > 0, got {self.max_episode_steps}",
        )
        for key in ("total_steps", "eval_every", "eval_episodes", "checkpoint_every", "log_every"):
            require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        require(self.skipped_window >= 0, f"skipped_window must be >= 0, got {self.skipped_window}")
        check_device(self.device)
        if isinstance(self.learner, TRPOSettings):
            require(self.engine == "sb3", "--algo trpo runs on the sb3 engine only (--engine sb3)")
            require(
                not self.save_replay_buffer,
                "save_replay_buffer applies to DDPG's replay buffer; TRPO keeps none",
            )
        else:
            require(
                not (self.learner.compile and self.engine == "sb3"),
                "compile applies to the native engine only (SB3 runs its own update code)",
            )
            for key, default in NATIVE_ONLY.items():
                require(
                    self.engine == "native" or getattr(self.learner, key) == default,
                    f"{key} applies to the native engine only (SB3's DDPG runs its own "
                    "update and loop)",
                )
            require(
                self.bonus is None or self.engine == "native",
                "a curiosity bonus with DDPG runs on the native engine only (on the sb3 "
                "engine, with --algo trpo)",
            )
            require(
                self.learner.train_every <= self.total_steps,
                f"train_every ({self.learner.train_every}) exceeds total_steps "
                f"({self.total_steps}): updates come every train_every steps, so this run "
                "would never train",
            )
            starts, every = self.learner.learning_starts, self.learner.train_every
            first = (starts // every + 1) * every  # the buffer holds one per step
            require(
                first <= self.total_steps,
                f"learning_starts ({starts}) leaves no update within total_steps "
                f"({self.total_steps}): updates start once the buffer holds more than "
                f"learning_starts transitions, at step {first} (every {every} step(s)), so "
                "this run would never train",
            )
        if self.bonus is not None:
            rollout = self.learner.n_steps if isinstance(self.learner, TRPOSettings) else None
            self.bonus.require_fitted_within(self.total_steps, rollout)

    # ----------------------------------------------------------------- views
    @property
    def algo(self) -> Algo:
        return "trpo" if isinstance(self.learner, TRPOSettings) else "ddpg"

    @property
    def strategy(self) -> str:
        """The strategy's name (``trpo`` for a TRPO run: it explores through its policy)."""
        if isinstance(self.learner, TRPOSettings):
            return TRPO_STRATEGY
        return self.learner.strategy.name

    def run_dir(self) -> Path:
        """``<logdir>/<env>/<strategy>[+critic-<critic optimizer>][+<bonus>][-sb3][@<variant>]
        /seed<k>``: TensorBoard overlays runs per env, and a strategy with a sampled critic,
        a curiosity bonus, or one value of a sweep, is another method (``vadam``,
        ``vadam+vime-noisy-kfac`` and ``vadam@sample_constant=100`` side by side in one
        grid's logdir and in ``compare_runs``)."""
        name = self.strategy
        if isinstance(self.learner, DDPGSettings) and self.learner.samples_critic:
            name += f"+critic-{self.learner.critic_optimizer}"
        if self.bonus is not None:
            name += f"+{self.bonus.label()}"
        if self.engine != "native":
            name += f"-{self.engine}"
        if self.variant:
            name += f"@{self.variant}"
        return Path(self.logdir) / self.env / name / f"seed{self.seed}"

    def with_values(self, **changes: Any) -> RunSettings:
        """This record with some settings-file keys changed (resolved again, checked)."""
        return RunSettings.from_values({**self.values(), **changes})

    # ----------------------------------------------------------------- the file form
    def values(self) -> dict[str, Any]:
        """The settings-file form (``config.yaml``), every value resolved."""
        run = {key: getattr(self, key) for key in self.RUN_KEYS}
        return {
            **self.learner.values(),
            "algo": self.algo,
            "bonus": {} if self.bonus is None else self.bonus.values(),
            **run,
        }

    @classmethod
    def keys(cls) -> list[str]:
        """Every key a settings file may hold."""
        return [*DDPGSettings.keys(), "algo", "trpo", "bonus", *cls.RUN_KEYS]

    @classmethod
    def from_values(cls, values: Mapping[str, Any], source: str = "the settings") -> RunSettings:
        """The record of a flat settings mapping (keys left out keep their defaults); one
        ConfigError line for an unknown key, a bad value or settings that do not go
        together. ``source`` names where an unknown key came from."""
        require_known(f"config key(s) in {source}:", values, cls.keys())
        algo = coerce_value("algo", Algo, values.get("algo", "ddpg"))
        learner_keys = {
            k: v for k, v in values.items() if k not in (*cls.RUN_KEYS, "algo", "bonus")
        }
        if algo == "trpo":
            learner: DDPGSettings | TRPOSettings = TRPOSettings.from_values(learner_keys)
        else:
            require(not values.get("trpo"), "trpo settings apply with --algo trpo only")
            learner_keys.pop("trpo", None)
            if learner_keys.get("compile") is None:  # compiled unless asked not to (native)
                learner_keys["compile"] = values.get("engine", "native") == "native"
            learner = DDPGSettings.from_values(learner_keys)
        run = {key: values[key] for key in cls.RUN_KEYS if key in values}
        return cls(learner=learner, bonus=resolve_bonus(values.get("bonus")), **run)
