"""Resolving a run's settings from its layers, once, at the start.

    dataclass defaults ← configs/<strategy>.yaml ← --config FILE ← --set k=v ← CLI flags

A ``--config`` file may hold a ``strategies:`` mapping of strategy name → values that apply
to that strategy only, after the file's other values (e.g. a study's action-noise scale for
the action-noise baselines, so that one grid runs every strategy with its own setting).
The merged mapping becomes one :class:`RunSettings` (:meth:`RunSettings.from_values`),
which is all the layers below ever see.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common.checks import require, require_known
from ..common.strategies import available_strategies
from .files import load_yaml, parse_set_options, preset_path, upgrade_config_keys, write_values
from .learners import TRPO_STRATEGY
from .run import RunSettings


def resolve_settings(
    strategy: str | None = None,
    config_file: str | Path | None = None,
    set_options: list[str] | None = None,
    **flags: Any,
) -> RunSettings:
    """Merge the layers (module docstring) into one checked :class:`RunSettings`.

    ``flags`` are the explicit command-line values (``None`` means not given), named as the
    settings file names them (``total_steps``, ``bonus``: ``{"kind": "vime"}``, …).
    """
    file_values = load_yaml(config_file) if config_file is not None else {}
    source = str(config_file)
    per_strategy = _strategy_values(file_values.pop("strategies", {}), source)
    set_values = parse_set_options(set_options or [])
    flag_values = {k: v for k, v in flags.items() if v is not None}

    given = strategy or set_values.get("strategy") or file_values.get("strategy")
    algo = flag_values.get("algo") or set_values.get("algo") or file_values.get("algo")
    # A TRPO run records the strategy ``trpo`` (its preset); one given anyway is refused
    # by TRPOSettings, with the reason.
    name = given or (TRPO_STRATEGY if algo == "trpo" else "vadam")
    if name != TRPO_STRATEGY:
        require_known("strategy", [name], available_strategies())
    layers = (
        (load_yaml(preset_path(name)), f"preset {name}"),
        (file_values, source),
        (per_strategy.get(name, {}), f"{source} (strategies.{name})"),
        (set_values, "--set"),
        (flag_values, "the command line"),
    )
    values: dict[str, Any] = {}
    for layer, where in layers:
        require_known(f"config key(s) in {where}:", layer, RunSettings.keys())
        values = _merge(values, layer)
    return RunSettings.from_values({**values, "strategy": name})


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _strategy_values(values: Any, source: str) -> dict[str, dict[str, Any]]:
    """A config file's ``strategies:`` section, checked: known strategies, known keys."""
    require(isinstance(values, dict), f"strategies in {source} must map strategies to values")
    require_known(f"strategy in {source}'s strategies:", values, available_strategies())
    for name, overrides in values.items():
        require(
            isinstance(overrides, dict) and "strategy" not in overrides,
            f"strategies.{name} in {source} must map config keys (other than strategy) to values",
        )
        require_known(
            f"config key(s) in {source} (strategies.{name}):", overrides, RunSettings.keys()
        )
    return values


def save_settings(settings: RunSettings, path: str | Path) -> None:
    """Write the resolved settings as YAML (the run directory's ``config.yaml``)."""
    write_values(settings.values(), path)


def load_run_settings(path: str | Path) -> RunSettings:
    """Read back a ``config.yaml`` written by :func:`save_settings` (or by an earlier version,
    which saved the strategy's and bonus's given settings only, or called the strategy
    ``optimizer``)."""
    return RunSettings.from_values(upgrade_config_keys(load_yaml(Path(path))), str(path))
