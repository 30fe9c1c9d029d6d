"""The YAML presets say what the code does: every strategy has one and it restates defaults."""

from __future__ import annotations

import dataclasses

import pytest

import param_explore as pe
from agents.engine.config import DDPGConfig
from agents.engine.strategies import (
    action_noise_parameters,
    available_strategies,
    strategy_optimizer,
)
from agents.errors import ConfigError
from agents.runs.config import (
    TrainConfig,
    load_run_config,
    load_yaml,
    preset_path,
    resolve_config,
    save_config,
)


def test_ddpg_yaml_equals_the_dataclass_defaults():
    assert load_yaml(preset_path("ddpg")) == dataclasses.asdict(TrainConfig())


@pytest.mark.parametrize("name", available_strategies())
def test_every_strategy_has_a_preset_restating_its_defaults(name):
    preset = load_yaml(preset_path(name))
    assert preset["strategy"] == name
    defaults = pe.hyperparameters(strategy_optimizer(name))
    kwargs = preset["optimizer_kwargs"]
    assert set(kwargs) == set(defaults)
    for key, value in kwargs.items():
        expected = defaults[key]
        assert (list(expected) if isinstance(expected, tuple) else expected) == value, key
    assert preset.get("action_noise", {}) == action_noise_parameters(name)
    config = resolve_config(strategy=name)
    assert config.strategy == name


def test_parameter_noise_preset_resamples_per_episode():
    assert resolve_config(strategy="param-noise").resample == "episode"
    assert resolve_config(strategy="noisy-kfac").resample is None  # the strategy's own:
    assert pe.optimizer_class("noisy-kfac").default_resample == "step"


def test_a_run_config_saved_with_the_old_strategy_key_still_loads(tmp_path):
    """Earlier versions saved the strategy as ``optimizer``; such runs still resume."""
    config = resolve_config(strategy="adam-explore")
    path = tmp_path / "config.yaml"
    save_config(config, path)
    text = path.read_text()
    path.write_text(text.replace("strategy: adam-explore", "optimizer: adam-explore"))
    assert "optimizer: adam-explore" in path.read_text()
    assert load_run_config(path) == config


def test_runs_compile_by_default_on_the_native_engine_only():
    assert resolve_config().compile is None
    assert resolve_config().agent_config().compile is True
    assert resolve_config(engine="sb3").agent_config().compile is False
    assert resolve_config(compile=False).agent_config().compile is False
    assert DDPGConfig().compile is False  # the Python API: eager unless asked


def test_a_config_file_holds_values_for_one_strategy_each(tmp_path):
    """A study runs every strategy in one grid, some with settings of their own."""
    path = tmp_path / "study.yaml"
    path.write_text(
        "tau: 0.01\n"
        "strategies:\n"
        "  gaussian-action: {action_noise: {sigma: 0.6}}\n"
        "  param-noise: {optimizer_kwargs: {target_distance: 0.6}}\n"
    )
    gaussian = resolve_config(strategy="gaussian-action", config_file=path)
    assert gaussian.tau == 0.01 and gaussian.action_noise == {"sigma": 0.6}
    noise = resolve_config(strategy="param-noise", config_file=path)
    assert noise.optimizer_kwargs["target_distance"] == 0.6
    assert noise.optimizer_kwargs["initial_std"] == 0.2  # the preset's other values stay
    vadam = resolve_config(strategy="vadam", config_file=path)
    assert vadam.tau == 0.01 and vadam.action_noise == {}
    wins = resolve_config("gaussian-action", path, ["action_noise.sigma=0.3"])
    assert wins.action_noise == {"sigma": 0.3}  # --set still overrides the file
    for section, message in [
        ("  adamw: {tau: 0.1}\n", "strategies in .*: unknown optimizer 'adamw'"),
        ("  vadam: {taus: 0.1}\n", r"unknown config key 'taus' in .* \(strategies.vadam\)"),
        ("  vadam: 3\n", "strategies.vadam in .* must map config keys"),
    ]:
        path.write_text("strategies:\n" + section)
        with pytest.raises(ConfigError, match=message):
            resolve_config(strategy="vadam", config_file=path)
