"""Resolving a run's settings from its layers, once, at the start.

    dataclass defaults ← configs/<strategy>.yaml ← --config FILE … ← --set k=v ← CLI flags

``--config`` may be given more than once, each file a layer over the one before. A file
may hold a ``strategies:`` mapping of strategy name → values that apply to that strategy
only, after the file's other values (e.g. a study's action-noise scale for the action-noise
baselines, so that one grid runs every strategy with its own setting). A file's two parts
are one layer: a later file's values, plain or under ``strategies:``, win over an earlier
file's (``--config study.yaml --config mine.yaml``: mine.yaml's ``action_noise`` wins over
the study's ``strategies.gaussian-action``).
The merged mapping becomes one :class:`RunSettings` (:meth:`RunSettings.from_values`),
which is all the layers below ever see.

**Per-member values.** A ``--set`` value that is a list where the setting takes one number
(``--set optimizer_kwargs.sample_constant=[1e4,1e3]``) makes one run per value — a sweep,
crossed with the seeds and strategies (:func:`resolve_runs`): each run records its own value
and a directory of its own (``vadam@sample_constant=1000``), and the runs of a strategy train
as one population. A list for a setting that takes a list (``hidden_sizes``) is its value;
a list of those would change the network's shape from member to member and is refused, as is
an empty list or one of anything but numbers.

**A short run's schedule.** A run whose length the caller gives (``--steps``) and whose
evaluation interval nothing gives (no ``--eval-every``, ``--set``, ``--config``) is evaluated
every tenth of its length (:data:`CURVE_POINTS`) when the preset's interval, set for the
paper's 3 M steps, would give it fewer points: ``--steps 3000`` gets a curve of 10 points, not
one evaluation at its end. Runs of 10 intervals of the preset or more (the paper's, the
studies' 100 k) keep the preset's; a run that exists already keeps its own schedule
(``saved_eval_every``), so extending it (``--steps`` larger, ``--resume``) is not refused.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import param_explore

from ..common.checks import require, require_known
from ..common.critic_posterior import CRITIC_POSTERIORS
from ..common.errors import ConfigError
from ..common.strategies import ACTION_NOISE, available_strategies, resolve_strategy
from ..curiosity.registry import BONUSES
from .files import load_yaml, parse_set_options, preset_path, upgrade_config_keys, write_values
from .learners import TRPO_STRATEGY, DDPGSettings, TRPOSettings
from .run import RunSettings

#: Evaluations a run of a given length and no given schedule gets (module docstring).
CURVE_POINTS = 10


def resolve_settings(
    strategy: str | None = None,
    config_file: str | Path | Sequence[str | Path] | None = None,
    set_options: list[str] | None = None,
    **flags: Any,
) -> RunSettings:
    """Merge the layers (module docstring) into one checked :class:`RunSettings`.

    ``flags`` are the explicit command-line values (``None`` means not given), named as the
    settings file names them (``total_steps``, ``bonus``: ``{"kind": "vime"}``, …).
    """
    (run,) = resolve_runs([strategy], [flags.pop("seed", None)], config_file, set_options, **flags)
    if run.variant:
        raise ConfigError(f"one run takes one value per setting; {run.variant} is a sweep")
    return run


def resolve_runs(
    strategies: list[str | None],
    seeds: list[int | None],
    config_file: str | Path | Sequence[str | Path] | None = None,
    set_options: list[str] | None = None,
    notes: list[str] | None = None,
    saved_eval_every: Callable[[RunSettings], int | None] = lambda run: None,
    **flags: Any,
) -> list[RunSettings]:
    """Every run of ``strategies`` × ``seeds`` × the per-member values of ``set_options``
    (module docstring), seed-major (a grid stopped part-way has every strategy and value
    on the same seeds); the files and options are read once. A short run's schedule
    (module docstring) is said once in ``notes``; ``saved_eval_every`` gives the interval
    a run already trained with, if it exists."""
    files = _config_files(config_file)
    file_values: dict[str, Any] = {}
    for _, values, _ in files:
        file_values = _merge(file_values, values)
    set_values = parse_set_options(set_options or [])
    flag_values = {k: v for k, v in flags.items() if v is not None}
    runs = []
    for seed in seeds:
        for strategy in strategies:
            name = _strategy_name(strategy, file_values, set_values, flag_values)
            preset = load_yaml(preset_path(name))
            file_layers = _file_layers(files, name)
            for variant, values in _sweep(name, set_values):
                seeded = flag_values if seed is None else {**flag_values, "seed": seed}
                layers = (
                    (f"preset {name}", preset),
                    *file_layers,
                    ("--set", values),
                    ("the command line", seeded),
                )
                run = _resolve(name, layers)
                if variant:
                    run = dataclasses.replace(run, variant=variant)
                runs.append(_curve_schedule(run, layers, saved_eval_every, notes))
    return runs


def _curve_schedule(
    run: RunSettings,
    layers: tuple[tuple[str, dict], ...],
    saved_eval_every: Callable[[RunSettings], int | None],
    notes: list[str] | None,
) -> RunSettings:
    """``run`` with a short run's schedule (module docstring) where it applies."""
    *given, flags = (values for _, values in layers[1:])
    if "total_steps" not in flags or any("eval_every" in layer for layer in (*given, flags)):
        return run
    saved = saved_eval_every(run)
    if saved is not None:  # the run exists: its schedule is its own
        return dataclasses.replace(run, eval_every=saved)
    if run.total_steps >= CURVE_POINTS * run.eval_every:
        return run
    every = max(1, run.total_steps // CURVE_POINTS)
    # every ``every`` steps, and one at the end of a run the schedule misses (the callback's)
    count = -(-run.total_steps // every)
    note = (
        f"--steps {run.total_steps} without --eval-every: an evaluation every {every} "
        f"step{'s' if every != 1 else ''}, {count} in all (the preset's {run.eval_every} is "
        "for longer runs)"
    )
    if notes is not None and note not in notes:
        notes.append(note)
    return dataclasses.replace(run, eval_every=every)


def _config_files(
    config_file: str | Path | Sequence[str | Path] | None,
) -> list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]]:
    """The ``--config`` files in order, each a layer over the one before (a study's
    protocol, then a strategy's earlier preset, …), each read and checked once: its name,
    its values, its ``strategies:`` section."""
    if config_file is None:
        paths: list[str | Path] = []
    elif isinstance(config_file, (str, Path)):
        paths = [config_file]
    else:
        paths = list(config_file)
    files = []
    for path in paths:
        layer = load_yaml(path)
        strategies = _strategy_values(layer.pop("strategies", {}), str(path))
        require_known(f"config key(s) in {path}:", layer, RunSettings.keys())
        files.append((str(path), layer, strategies))
    return files


def _file_layers(
    files: list[tuple[str, dict[str, Any], dict[str, dict[str, Any]]]], name: str
) -> list[tuple[str, dict[str, Any]]]:
    """The files' layers for strategy ``name``, in order: each file's values, then its
    ``strategies.<name>`` section, before the next file's (module docstring)."""
    layers = []
    for path, values, strategies in files:
        layers.append((path, values))
        if name in strategies:
            layers.append((f"{path} (strategies.{name})", strategies[name]))
    return layers


def _strategy_name(
    strategy: str | None, file_values: dict, set_values: dict, flag_values: dict
) -> str:
    """The strategy a run trains, checked."""
    given = strategy or set_values.get("strategy") or file_values.get("strategy")
    algo = flag_values.get("algo") or set_values.get("algo") or file_values.get("algo")
    # A TRPO run records the strategy ``trpo`` (its preset); one given anyway is refused
    # by TRPOSettings, with the reason.
    name = given or (TRPO_STRATEGY if algo == "trpo" else "vadam")
    if name != TRPO_STRATEGY:
        require_known("strategy", [name], available_strategies())
    return name


def _resolve(name: str, layers: tuple[tuple[str, dict], ...]) -> RunSettings:
    """The layers (preset, each file and its strategy section, --set, flags: each named
    for messages) merged in order and resolved for strategy ``name``."""
    values: dict[str, Any] = {}
    for where, layer in layers:
        require_known(f"config key(s) in {where}:", layer, RunSettings.keys())
        values = _merge(values, layer)
    return RunSettings.from_values({**values, "strategy": name})


def _sweep(name: str, set_values: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``set_values`` once per combination of its per-member values, with its label
    (``sample_constant=1000``; "" without per-member values)."""
    swept = [(path, values) for path, values in _leaves(set_values) if isinstance(values, list)
             and _takes_a_number(name, path, values)]  # fmt: skip
    if not swept:
        return [("", set_values)]
    leaves = [path[-1] for path, _ in swept]
    labels = [path[-1] if leaves.count(path[-1]) == 1 else ".".join(path) for path, _ in swept]
    out = []
    for combination in itertools.product(*(values for _, values in swept)):
        values = copy.deepcopy(set_values)
        for (path, _), value in zip(swept, combination, strict=True):
            target = values
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        label = ",".join(f"{lab}={value:g}" for lab, value in zip(labels, combination))
        out.append((label, values))
    return out


def _leaves(values: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple, Any]]:
    found = []
    for key, value in values.items():
        if isinstance(value, dict):
            found += _leaves(value, (*path, key))
        else:
            found.append(((*path, key), value))
    return found


def _takes_a_number(name: str, path: tuple[str, ...], values: list) -> bool:
    """Whether the setting at ``path`` takes one number (so a list is one value per
    member); a list for a setting that takes a list is its value; anything else is one
    line."""
    key = ".".join(path)
    kind = _setting_kind(name, path)
    if kind == "list":
        require(
            not any(isinstance(v, list) for v in values),
            f"--set {key}: one {path[-1]} per member would change the network's shape from "
            "member to member; a population's members share it (run the shapes as grids "
            "of their own)",
        )
        return False
    require(
        kind == "number",
        f"--set {key}: a list of values, one per member, is for settings that take a "
        f"number; {path[-1]} takes one {kind}",
    )
    require(bool(values), f"--set {key}: an empty list of values")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise ConfigError(f"--set {key}: every value of a list must be a number, got {bad[0]!r}")
    return True


def _setting_kind(name: str, path: tuple[str, ...]) -> str:
    """``number``, ``list`` or another kind (a string, a mapping, …) of a setting."""
    if len(path) == 1:
        hints = {}
        for record in (RunSettings, DDPGSettings, TRPOSettings):
            hints.update(typing.get_type_hints(record))
        return _kind(hints.get(path[0], str))
    section, key = path[0], path[-1]
    if section == "optimizer_kwargs" and name in available_strategies():
        default = param_explore.hyperparameters(resolve_strategy(name).optimizer).get(key)
        return _kind(type(default) if default is not None else float)
    if section == "critic_optimizer_kwargs":  # a sampled critic's, whichever it is
        defaults = [param_explore.hyperparameters(cls).get(key, "")
                    for cls in CRITIC_POSTERIORS.values()]  # fmt: skip
        kinds = {_kind(float if value is None else type(value)) for value in defaults}
        return "number" if "number" in kinds else kinds.pop()
    if section == "action_noise" and name in ACTION_NOISE:
        return _kind(type(ACTION_NOISE[name].settings().get(key, "")))
    if section == "trpo":
        return _kind(typing.get_type_hints(TRPOSettings).get(key, str))
    if section == "bonus":
        hints = {}
        for kind in BONUSES.values():
            hints.update(typing.get_type_hints(kind.settings))
        return _kind(hints.get(key, str))
    return "setting"


def _kind(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Union or isinstance(hint, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))  # X | None
    origin = typing.get_origin(hint) or hint
    if origin is bool:
        return "true or false"
    if origin in (int, float):
        return "number"
    if origin in (list, tuple):
        return "list"
    if origin is typing.Literal:
        return "of " + ", ".join(map(str, typing.get_args(hint)))
    return "value"


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
