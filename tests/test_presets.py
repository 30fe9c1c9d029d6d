"""The YAML presets say what the code does: every strategy has one and it restates defaults."""

from __future__ import annotations

import dataclasses

import pytest

import param_explore as pe
from agents.config import TrainConfig, load_yaml, preset_path, resolve_config
from agents.strategies import action_noise_parameters, available_strategies, strategy_optimizer


def test_ddpg_yaml_equals_the_dataclass_defaults():
    assert load_yaml(preset_path("ddpg")) == dataclasses.asdict(TrainConfig())


@pytest.mark.parametrize("name", available_strategies())
def test_every_strategy_has_a_preset_restating_its_defaults(name):
    preset = load_yaml(preset_path(name))
    assert preset["optimizer"] == name
    defaults = pe.hyperparameters(strategy_optimizer(name))
    kwargs = preset["optimizer_kwargs"]
    assert set(kwargs) == set(defaults)
    for key, value in kwargs.items():
        expected = defaults[key]
        assert (list(expected) if isinstance(expected, tuple) else expected) == value, key
    assert preset.get("action_noise", {}) == action_noise_parameters(name)
    config = resolve_config(optimizer=name)
    assert config.optimizer == name


def test_parameter_noise_preset_resamples_per_episode():
    assert resolve_config(optimizer="param-noise").resample == "episode"
    assert resolve_config(optimizer="noisy-kfac").resample is None  # the strategy's own:
    assert pe.optimizer_class("noisy-kfac").default_resample == "step"
