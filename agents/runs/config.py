"""A training run's settings (:class:`TrainConfig`) and how they are resolved.

The agent's hyperparameters are :class:`agents.engine.config.DDPGConfig`; a run adds
what, how long and where. ``configs/ddpg.yaml`` restates every default with its source
and ``configs/<strategy>.yaml`` holds each strategy's Table 3 preset; a test keeps the
YAML and these dataclasses equal. A run's config is resolved in layers:

    dataclass defaults ← configs/<strategy>.yaml ← --config FILE ← --set k=v ← CLI flags

A ``--config`` file may hold a ``strategies:`` mapping of strategy name → values that apply
to that strategy only, after the file's other values (e.g. a study's action-noise scale for
the action-noise baselines, so that one grid runs every strategy with its own setting).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from ..curiosity.config import bonus_config
from ..engine.config import DDPGConfig, check_seed, require, upgrade_config_keys
from ..engine.strategies import strategy_optimizer
from ..errors import ConfigError
from ..sb3.trpo_config import TRPO_STRATEGY, trpo_settings
from .bounded_yaml import load_yaml_text


@dataclass
class TrainConfig(DDPGConfig):
    """A training run: the agent's hyperparameters plus what, how long and where."""

    env: str = "HalfCheetah-v4"
    #: The env's own settings, passed to ``gym.make`` (e.g. ``max_episode_steps``, or
    #: ``frame_skip`` of ``SparseHalfCheetah-v5``); one it refuses is a ConfigError.
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: A curiosity bonus added to the replayed rewards: {} for none, or VIME's settings
    #: ``{kind: vime, posterior: bbb|noisy-adam|noisy-kfac, ...}`` (``docs/vime.md``).
    bonus: dict[str, Any] = field(default_factory=dict)
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
    #: ``native`` (this project's DDPG) or ``sb3`` (SB3's DDPG with ParamExplorePolicy).
    engine: Literal["native", "sb3"] = "native"
    #: The learner: ``ddpg`` (either engine) or ``trpo`` (sb3-contrib's TRPO, ``engine: sb3``),
    #: which explores through its own Gaussian policy: its ``strategy`` is ``trpo``.
    algo: Literal["ddpg", "trpo"] = "ddpg"
    #: TRPO's settings (:class:`TRPOSettings`), with ``algo: trpo`` only.
    trpo: dict[str, Any] = field(default_factory=dict)
    #: A run's updates are compiled unless asked not to (``--no-compile``): None means
    #: compiled on the native engine (SB3 runs its own update code). Strategies without
    #: a traced form, and machines without a C++ compiler, train eagerly with a warning.
    compile: bool | None = None
    #: Episode length bound: None keeps the env's own time limit (an env without one is
    #: refused: its evaluation might never return); a number replaces it.
    max_episode_steps: int | None = None

    def validate(self) -> None:
        super().validate()
        self._check_algo()
        if bonus_config(self.bonus) is not None:  # one clear line for a bad setting
            require(
                self.engine == "native" or self.algo == "trpo",
                "a curiosity bonus with DDPG runs on the native engine only (on the sb3 "
                "engine, with --algo trpo)",
            )
        check_seed(self.seed)
        require(
            self.max_episode_steps is None or self.max_episode_steps > 0,
            f"max_episode_steps must be > 0, got {self.max_episode_steps}",
        )
        for key in ("total_steps", "eval_every", "eval_episodes", "checkpoint_every", "log_every"):
            require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        require(self.skipped_window >= 0, f"skipped_window must be >= 0, got {self.skipped_window}")
        require(
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
            f"device must be auto, cpu or cuda, got {self.device!r}",
        )
        require(
            not (self.compile and self.engine == "sb3"),
            "compile applies to the native engine only (SB3 runs its own update code)",
        )

    def check_strategy(self) -> None:
        if self.algo != "trpo":  # a TRPO run's strategy is checked in _check_algo
            super().check_strategy()

    def _check_algo(self) -> None:
        """``algo: trpo`` runs on the sb3 engine, without DDPG's exploration settings."""
        if self.algo == "ddpg":
            require(not self.trpo, "trpo settings apply with --algo trpo only")
            return
        require(self.engine == "sb3", "--algo trpo runs on the sb3 engine only (--engine sb3)")
        require(
            self.strategy == TRPO_STRATEGY,
            f"--algo trpo explores through TRPO's own Gaussian policy, so a weight-noise "
            f"strategy ({self.strategy}) does not apply: leave --opt out",
        )
        for key in ("optimizer_kwargs", "action_noise"):
            require(
                not getattr(self, key),
                f"{key} applies to a DDPG exploration strategy, not to --algo trpo",
            )
        require(
            not self.save_replay_buffer,
            "save_replay_buffer applies to DDPG's replay buffer; TRPO keeps none",
        )
        trpo_settings(self.trpo)

    def agent_config(self) -> DDPGConfig:
        names = {f.name for f in dataclasses.fields(DDPGConfig)}
        values = {k: v for k, v in dataclasses.asdict(self).items() if k in names}
        if values["compile"] is None:
            values["compile"] = self.engine == "native"
        return DDPGConfig(**values)

    def run_dir(self) -> Path:
        """``<logdir>/<env>/<strategy>[+vime-<posterior>][-sb3]/seed<k>``: TensorBoard
        overlays runs per env, and a strategy with a curiosity bonus is another method
        (``vadam`` and ``vadam+vime-noisy-kfac`` side by side in one grid's logdir, and in
        ``compare_runs``)."""
        name = self.strategy
        bonus = bonus_config(self.bonus)
        if bonus is not None:
            name += f"+{bonus.kind}-{bonus.posterior}"
        if self.engine != "native":
            name += f"-{self.engine}"
        return Path(self.logdir) / self.env / name / f"seed{self.seed}"


# --------------------------------------------------------------------------- loading
def preset_path(name: str) -> Path:
    """The YAML shipped in ``configs/`` under ``name`` (e.g. ``ddpg`` or ``vadam``)."""
    return Path(str(resources.files("configs").joinpath(f"{name}.yaml")))


_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _numbers(value: Any) -> Any:
    """Read ``3e-4``-style strings as floats: YAML 1.1 needs a dot (``3.0e-4``) for that."""
    if isinstance(value, str) and _FLOAT.match(value):
        return float(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path``, or a ConfigError saying why it is not one."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"cannot parse config file {path}: it is not text") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    try:
        data = load_yaml_text(text, f"config file {path}")
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise ConfigError(f"cannot parse config file {path}{line}: {problem}") from None
    if data is None:
        return {}
    require(isinstance(data, dict), f"config file {path} must hold a mapping of keys to values")
    return _numbers(data)


def parse_set_options(options: list[str]) -> dict[str, Any]:
    """``["batch_size=128", "optimizer_kwargs.lr=3e-4"]`` → a nested dict (YAML values)."""
    result: dict[str, Any] = {}
    for option in options:
        key, sep, raw = option.partition("=")
        require(bool(sep) and bool(key), f"--set expects key=value, got {option!r}")
        try:
            value = _numbers(load_yaml_text(raw, f"--set {key}")) if raw else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}") from None
        *parents, leaf = key.split(".")
        target = result
        for parent in parents:
            target = target.setdefault(parent, {})
            require(isinstance(target, dict), f"--set {key}: {parent} is not a mapping")
        target[leaf] = value
    return result


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_keys(values: dict[str, Any], source: str) -> None:
    valid = [f.name for f in dataclasses.fields(TrainConfig)]
    for key in values:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {key!r} in {source}{hint}")


def _strategy_values(values: Any, source: str) -> dict[str, dict[str, Any]]:
    """A config file's ``strategies:`` section, checked: known strategies, known keys."""
    require(isinstance(values, dict), f"strategies in {source} must map strategies to values")
    for name, overrides in values.items():
        try:
            strategy_optimizer(name)
        except ValueError as err:
            raise ConfigError(f"strategies in {source}: {err}") from None
        require(
            isinstance(overrides, dict) and "strategy" not in overrides,
            f"strategies.{name} in {source} must map config keys (other than strategy) to values",
        )
        _check_keys(overrides, f"{source} (strategies.{name})")
    return values


def resolve_config(
    strategy: str | None = None,
    config_file: str | Path | None = None,
    set_options: list[str] | None = None,
    **flags: Any,
) -> TrainConfig:
    """Merge the layers (see module docstring) into a validated :class:`TrainConfig`.

    ``flags`` are the explicit command-line values (``None`` means not given).
    """
    file_values = load_yaml(config_file) if config_file is not None else {}
    per_strategy = _strategy_values(file_values.pop("strategies", {}), str(config_file))
    _check_keys(file_values, str(config_file))
    set_values = parse_set_options(set_options or [])
    _check_keys(set_values, "--set")
    flag_values = {k: v for k, v in flags.items() if v is not None}
    _check_keys(flag_values, "the command line")

    given = strategy or set_values.get("strategy") or file_values.get("strategy")
    algo = flag_values.get("algo") or set_values.get("algo") or file_values.get("algo")
    # A TRPO run records the strategy ``trpo`` (its preset); one given anyway is refused
    # by TrainConfig.validate, with the reason.
    name = given or (TRPO_STRATEGY if algo == "trpo" else TrainConfig.strategy)
    if name != TRPO_STRATEGY:
        try:
            strategy_optimizer(name)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    preset = load_yaml(preset_path(name))
    _check_keys(preset, f"preset {name}")

    values = dataclasses.asdict(TrainConfig())
    layers = (preset, file_values, per_strategy.get(name, {}), set_values, flag_values)
    for layer in (*layers, {"strategy": name}):
        values = _merge(values, layer)
    config = TrainConfig(**values)
    config.validate()
    return config


def save_config(config: TrainConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (the run directory's ``config.yaml``)."""
    Path(path).write_text(yaml.safe_dump(dataclasses.asdict(config), sort_keys=False))


def load_run_config(path: str | Path) -> TrainConfig:
    """Read back a ``config.yaml`` written by :func:`save_config` (or by a version that
    called the strategy ``optimizer``)."""
    values = upgrade_config_keys(load_yaml(path))
    _check_keys(values, str(path))
    config = TrainConfig(**values)
    config.validate()
    return config
