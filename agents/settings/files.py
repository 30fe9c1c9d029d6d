"""Settings files: YAML read as data, the shipped presets, and a run's ``config.yaml``.

A preset is a YAML file shipped with the package (``configs/`` in the repository, installed
as ``agents.presets``): ``ddpg.yaml`` restates every default with its source, and
``<strategy>.yaml`` holds each strategy's settings (Table 3 for Khan et al.'s six), each
value with its source.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from ..common.bounded_yaml import MAX_CHARS, load_yaml_text
from ..common.checks import require
from ..common.errors import ConfigError


def _shipped_presets() -> Traversable | Path:
    """``configs/`` beside the ``agents`` package that runs, where it is a source tree, else
    the installed presets (``agents.presets``, a wheel's package data).

    Why the tree's own first: with one checkout installed (editable), a second one run by
    ``PYTHONPATH`` — an older commit a study or ``benchmarks/against_checkout.py`` runs —
    imports its own ``agents`` but would read ``agents.presets`` through the installed
    checkout's finder, its presets the other commit's."""
    beside = Path(__file__).resolve().parents[2] / "configs"
    if (beside / "ddpg.yaml").is_file():
        return beside
    return resources.files("agents.presets")


#: Where presets are looked up, in order: the shipped ones (``configs/`` of the repository).
#: A project with strategies of its own may put its presets' folder in front.
PRESET_DIRS: list[Traversable | Path] = [_shipped_presets()]

_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def preset_path(name: str) -> Traversable | Path:
    """The preset ``<name>.yaml`` (``ddpg``, or a strategy), or one line saying it has none."""
    for directory in PRESET_DIRS:
        path = directory.joinpath(f"{name}.yaml")
        if path.is_file():
            return path
    raise ConfigError(f"strategy {name!r} has no preset {name}.yaml")


def numbers(value: Any) -> Any:
    """Read ``3e-4``-style strings as floats: YAML 1.1 needs a dot (``3.0e-4``) for that."""
    if isinstance(value, str) and _FLOAT.match(value):
        return float(value)
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return value


def load_yaml(path: str | Path | Traversable) -> dict[str, Any]:
    """A YAML mapping from ``path``, or a ConfigError saying why it is not one. The file is
    read no further than a config can be long, and parsed within the bounds of
    :mod:`agents.common.bounded_yaml`."""
    if isinstance(path, str):
        path = Path(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CHARS + 1)
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"cannot parse config file {path}: it is not text") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    if len(raw) > MAX_CHARS:
        raise ConfigError(f"cannot parse config file {path}: it is longer than a config can be")
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
    return numbers(data)


def parse_set_options(options: list[str]) -> dict[str, Any]:
    """``["batch_size=128", "optimizer_kwargs.lr=3e-4"]`` → a nested dict (YAML values)."""
    result: dict[str, Any] = {}
    for option in options:
        key, sep, raw = option.partition("=")
        require(bool(sep) and bool(key), f"--set expects key=value, got {option!r}")
        try:
            value = numbers(load_yaml_text(raw, f"--set {key}")) if raw else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}") from None
        *parents, leaf = key.split(".")
        target = result
        for parent in parents:
            target = target.setdefault(parent, {})
            require(isinstance(target, dict), f"--set {key}: {parent} is not a mapping")
        target[leaf] = value
    return result


#: libyaml's safe emitter where PyYAML was built with it: the same text as the pure-Python
#: one for every setting (checked on every preset and committed config.yaml), ~10× faster —
#: a population of a thousand members writes a thousand config.yaml files as it starts.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_values(values: dict[str, Any], path: str | Path) -> None:
    """Write a settings mapping as YAML (a run directory's ``config.yaml``)."""
    Path(path).write_text(yaml.dump(values, Dumper=_DUMPER, sort_keys=False))


def upgrade_config_keys(values: dict[str, Any]) -> dict[str, Any]:
    """A saved run's settings in today's form. Earlier versions saved the strategy as
    ``optimizer``, and ran TRPO on the env's own action ranges: a saved TRPO run without
    ``normalize_actions`` is one with it off (not the learner's choice of today, which
    would resume it on other actions)."""
    if "optimizer" in values and "strategy" not in values:
        values = {("strategy" if k == "optimizer" else k): v for k, v in values.items()}
    if values.get("algo") == "trpo" and "normalize_actions" not in values:
        values = {**values, "normalize_actions": False}
    return values
