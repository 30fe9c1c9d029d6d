"""Configuration: the agent's hyperparameters and a training run's settings.

Defaults are the paper's experiment (Khan et al. 2018, Appendix K and Table 3;
Lillicrap et al. 2015). ``configs/ddpg.yaml`` restates them with the source of every
value and ``configs/<strategy>.yaml`` holds each strategy's Table 3 preset; a test keeps
the YAML and these dataclasses equal. A run's config is resolved in layers:

    dataclass defaults ← configs/<strategy>.yaml ← --config FILE ← --set k=v ← CLI flags
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

import param_explore

from .errors import ConfigError
from .strategies import make_action_noise, strategy_optimizer


@dataclass
class DDPGConfig:
    """Hyperparameters of the DDPG agent (Appendix K; ``docs/decisions.md``)."""

    #: The exploration strategy (``--opt``): a ``param_explore`` optimizer, or an
    #: action-noise baseline trained as ``adam-plain`` (:mod:`agents.strategies`).
    strategy: str = "vadam"
    #: Overrides of the strategy's optimizer defaults (``param_explore.hyperparameters``).
    optimizer_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Overrides of the action-noise settings (``gaussian-action``, ``ou-action`` only).
    action_noise: dict[str, Any] = field(default_factory=dict)
    hidden_sizes: list[int] = field(default_factory=lambda: [400, 300])
    #: How the actor and the critic start (:mod:`agents.initialisation`): the authors'
    #: released code (``khan2018``) or Lillicrap et al. 2015 (``lillicrap``).
    init: Literal["khan2018", "lillicrap"] = "khan2018"
    buffer_size: int = 1_000_000
    batch_size: int = 64
    gamma: float = 0.99
    tau: float = 1e-3
    critic_lr: float = 1e-3
    #: Updates start once the buffer holds *more* than this many transitions.
    learning_starts: int = 64
    #: Gradient updates per environment step.
    gradient_steps: int = 1
    #: ``sum`` (the released code) or ``mean`` of the minibatch policy gradient.
    actor_grad_reduction: Literal["sum", "mean"] = "sum"
    #: Draw new weight noise every environment ``step`` (Khan et al.) or every
    #: ``episode``; None: the strategy's own choice (per step; per episode for
    #: ``param-noise``, as Plappert et al.).
    resample: Literal["step", "episode"] | None = None
    #: A LayerNorm after each hidden layer of the actor, never perturbed (Plappert et
    #: al.'s parameter-noise actor; ``docs/decisions.md#layer-norm``).
    layer_norm: bool = False
    #: Run each update as one compiled graph (:mod:`agents.compiled_update`): faster,
    #: equal to the eager update up to float rounding, seconds of compiling at the first
    #: update. Strategies without a traced form (noisy-kfac) train eagerly.
    compile: bool = False

    def validate(self) -> None:
        _validate_fields(self)
        for key in ("buffer_size", "batch_size", "gradient_steps"):
            _require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        _require(self.learning_starts >= 0, "learning_starts must be >= 0")
        _require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        _require(0 < self.tau <= 1, f"tau must be in (0, 1], got {self.tau}")
        _require(self.critic_lr > 0, f"critic_lr must be > 0, got {self.critic_lr}")
        _require(
            len(self.hidden_sizes) >= 2 and all(h > 0 for h in self.hidden_sizes),
            f"hidden_sizes needs at least two positive sizes, got {self.hidden_sizes}",
        )
        check_strategy(self.strategy, self.optimizer_kwargs, self.action_noise)


@dataclass
class TrainConfig(DDPGConfig):
    """A training run: the agent's hyperparameters plus what, how long and where."""

    env: str = "HalfCheetah-v4"
    seed: int = 0
    total_steps: int = 3_000_000
    eval_every: int = 10_000
    eval_episodes: int = 20
    checkpoint_every: int = 10_000
    #: Also checkpoint the replay buffer (HalfCheetah: ~170 MB per million transitions).
    save_replay_buffer: bool = False
    #: Interval in steps of loss, σ and speed scalars.
    log_every: int = 1_000
    logdir: str = "runs"
    device: str = "auto"
    #: ``native`` (this project's DDPG) or ``sb3`` (SB3's DDPG with ParamExplorePolicy).
    engine: Literal["native", "sb3"] = "native"
    #: A run's updates are compiled unless asked not to (``--no-compile``): None means
    #: compiled on the native engine (SB3 runs its own update code). Strategies without
    #: a traced form, and machines without a C++ compiler, train eagerly with a warning.
    compile: bool | None = None

    def validate(self) -> None:
        super().validate()
        for key in ("total_steps", "eval_every", "eval_episodes", "checkpoint_every", "log_every"):
            _require(getattr(self, key) > 0, f"{key} must be > 0, got {getattr(self, key)}")
        _require(
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:"),
            f"device must be auto, cpu or cuda, got {self.device!r}",
        )
        _require(
            not (self.compile and self.engine == "sb3"),
            "compile applies to the native engine only (SB3 runs its own update code)",
        )

    def agent_config(self) -> DDPGConfig:
        names = {f.name for f in dataclasses.fields(DDPGConfig)}
        values = {k: v for k, v in dataclasses.asdict(self).items() if k in names}
        if values["compile"] is None:
            values["compile"] = self.engine == "native"
        return DDPGConfig(**values)

    def run_dir(self) -> Path:
        """``<logdir>/<env>/<strategy>[-sb3]/seed<k>``: TensorBoard overlays runs per env."""
        name = self.strategy if self.engine == "native" else f"{self.strategy}-{self.engine}"
        return Path(self.logdir) / self.env / name / f"seed{self.seed}"


# --------------------------------------------------------------------------- checks
def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def check_strategy(name: str, kwargs: dict[str, Any], action_noise: dict[str, Any]) -> None:
    """Validate a strategy and its overrides by building it for a one-unit network."""
    import torch

    try:
        optimizer = strategy_optimizer(name)
        param_explore.make_optimizer(optimizer, torch.nn.Linear(1, 1), **kwargs)
        make_action_noise(name, 1, action_noise)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


def _validate_fields(config: DDPGConfig) -> None:
    """Coerce YAML/CLI values to the declared field types, or say which one is wrong."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        setattr(config, f.name, _coerce(f.name, hints[f.name], value))


def _coerce(name: str, hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):  # X | None
        if value is None and type(None) in typing.get_args(hint):
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        _require(value in allowed, f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        return value
    if origin in (list, dict) or hint in (list, dict):
        expected = origin or hint
        _require(isinstance(value, expected), f"{name} must be a {expected.__name__}")
        if origin is list:
            (item,) = typing.get_args(hint)
            return [_coerce(f"{name}[{i}]", item, v) for i, v in enumerate(value)]
        return value
    if hint is bool:
        _require(isinstance(value, bool), f"{name} must be true or false, got {value!r}")
        return value
    if hint in (int, float):
        number = value
        if isinstance(value, str):  # YAML 1.1 reads 1e6 as a string
            try:
                number = float(value)
            except ValueError:
                number = None
        ok = isinstance(number, (int, float)) and not isinstance(number, bool)
        if ok and hint is int:
            ok = float(number).is_integer()
        kind = "an integer" if hint is int else "a number"
        _require(ok, f"{name} must be {kind}, got {value!r}")
        return hint(number)
    if hint is str:
        _require(isinstance(value, str), f"{name} must be a string, got {value!r}")
    return value


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
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise ConfigError(f"cannot parse config file {path}{line}: {problem}") from None
    if data is None:
        return {}
    _require(isinstance(data, dict), f"config file {path} must hold a mapping of keys to values")
    return _numbers(data)


def parse_set_options(options: list[str]) -> dict[str, Any]:
    """``["batch_size=128", "optimizer_kwargs.lr=3e-4"]`` → a nested dict (YAML values)."""
    result: dict[str, Any] = {}
    for option in options:
        key, sep, raw = option.partition("=")
        _require(bool(sep) and bool(key), f"--set expects key=value, got {option!r}")
        try:
            value = _numbers(yaml.safe_load(raw)) if raw else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}") from None
        *parents, leaf = key.split(".")
        target = result
        for parent in parents:
            target = target.setdefault(parent, {})
            _require(isinstance(target, dict), f"--set {key}: {parent} is not a mapping")
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
    _check_keys(file_values, str(config_file))
    set_values = parse_set_options(set_options or [])
    _check_keys(set_values, "--set")
    flag_values = {k: v for k, v in flags.items() if v is not None}
    _check_keys(flag_values, "the command line")

    name = (
        strategy
        or set_values.get("strategy")
        or file_values.get("strategy")
        or TrainConfig.strategy
    )
    try:
        strategy_optimizer(name)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    preset = load_yaml(preset_path(name))
    _check_keys(preset, f"preset {name}")

    values = dataclasses.asdict(TrainConfig())
    for layer in (preset, file_values, set_values, flag_values, {"strategy": name}):
        values = _merge(values, layer)
    config = TrainConfig(**values)
    config.validate()
    return config


def upgrade_config_keys(values: dict[str, Any]) -> dict[str, Any]:
    """Earlier versions saved the strategy as ``optimizer``."""
    if "optimizer" in values and "strategy" not in values:
        values = {("strategy" if k == "optimizer" else k): v for k, v in values.items()}
    return values


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
