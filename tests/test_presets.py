"""The YAML presets say what the code does: every strategy has one and it restates defaults."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

import param_explore as pe
from agents.common.errors import ConfigError
from agents.common.strategies import ACTION_NOISE, available_strategies, resolve_strategy
from agents.settings import DDPGSettings, RunSettings, load_run_settings, resolve_settings
from agents.settings.files import load_yaml, preset_path, write_values
from agents.settings.resolve import resolve_runs


def test_ddpg_yaml_lists_every_key_with_the_defaults():
    defaults = load_yaml(preset_path("ddpg"))
    assert set(defaults) == set(RunSettings.keys())
    assert RunSettings.from_values(defaults) == RunSettings()


@pytest.mark.parametrize("name", available_strategies())
def test_every_strategy_has_a_preset_restating_its_defaults(name):
    preset = load_yaml(preset_path(name))
    assert preset["strategy"] == name
    strategy = resolve_strategy(name)
    defaults = pe.hyperparameters(strategy.optimizer)
    kwargs = preset["optimizer_kwargs"]
    assert set(kwargs) == set(defaults)
    for key, value in kwargs.items():
        expected = defaults[key]
        assert (list(expected) if isinstance(expected, tuple) else expected) == value, key
    noise = ACTION_NOISE[name].settings() if name in ACTION_NOISE else {}
    assert preset.get("action_noise", {}) == noise
    assert resolve_settings(strategy=name).strategy == name


def test_parameter_noise_preset_resamples_per_episode():
    assert resolve_settings(strategy="param-noise").learner.strategy.resample == "episode"
    # noisy-kfac's preset leaves it to the strategy, whose own choice is every step
    assert resolve_settings(strategy="noisy-kfac").learner.strategy.resample == "step"
    assert pe.optimizer_class("noisy-kfac").default_resample == "step"


def test_a_run_config_saved_with_the_old_strategy_key_still_loads(tmp_path):
    """Earlier versions saved the strategy as ``optimizer``; such runs still resume."""
    settings = resolve_settings(strategy="adam-explore")
    path = tmp_path / "config.yaml"
    values = settings.values()
    write_values({("optimizer" if k == "strategy" else k): v for k, v in values.items()}, path)
    assert "optimizer: adam-explore" in path.read_text()
    assert load_run_settings(path) == settings


def test_a_run_config_of_an_earlier_version_resolves_to_the_same_settings(tmp_path):
    """Earlier versions saved a bonus's and an action noise's given settings only, and the
    strategy's choices as null; resolved, they are the same run."""
    settings = resolve_settings(
        strategy="ou-action", bonus={"kind": "vime"}, set_options=["bonus.posterior=bbb"]
    )
    old = {
        **settings.values(),
        "action_noise": {},
        "resample": None,
        "layer_norm": None,
        "bonus": {"posterior": "bbb", "kind": "vime"},
        "trpo": {},
    }
    path = tmp_path / "config.yaml"
    write_values(old, path)
    assert load_run_settings(path) == settings


def test_runs_compile_by_default_on_the_native_engine_only():
    assert resolve_settings().learner.compile is True
    assert resolve_settings(engine="sb3").learner.compile is False
    assert resolve_settings(compile=False).learner.compile is False
    assert DDPGSettings().compile is False  # the Python API: eager unless asked


def test_a_config_file_holds_values_for_one_strategy_each(tmp_path):
    """A study runs every strategy in one grid, some with settings of their own."""
    path = tmp_path / "study.yaml"
    path.write_text(
        "tau: 0.01\n"
        "strategies:\n"
        "  gaussian-action: {action_noise: {sigma: 0.6}}\n"
        "  param-noise: {optimizer_kwargs: {target_distance: 0.6}}\n"
    )
    gaussian = resolve_settings(strategy="gaussian-action", config_file=path).learner
    assert gaussian.tau == 0.01 and gaussian.strategy.action_noise == {"sigma": 0.6}
    noise = resolve_settings(strategy="param-noise", config_file=path).learner.strategy
    assert noise.optimizer_kwargs["target_distance"] == 0.6
    assert noise.optimizer_kwargs["initial_std"] == 0.2  # the preset's other values stay
    vadam = resolve_settings(strategy="vadam", config_file=path).learner
    assert vadam.tau == 0.01 and vadam.strategy.action_noise is None
    wins = resolve_settings("gaussian-action", path, ["action_noise.sigma=0.3"]).learner
    assert wins.strategy.action_noise == {"sigma": 0.3}  # --set still overrides the file
    for section, message in [
        ("  adamw: {tau: 0.1}\n", r"unknown strategy in .*strategies: adamw \(did you mean"),
        ("  vadam: {taus: 0.1}\n", r"unknown config key\(s\) in .* \(strategies.vadam\): taus"),
        ("  vadam: 3\n", "strategies.vadam in .* must map config keys"),
    ]:
        path.write_text("strategies:\n" + section)
        with pytest.raises(ConfigError, match=message):
            resolve_settings(strategy="vadam", config_file=path)


def test_config_yaml_is_the_text_the_pure_python_emitter_writes(tmp_path):
    """config.yaml is written with libyaml's emitter where there is one: for every preset
    (and with a bonus), the same text as PyYAML's pure-Python safe emitter."""
    for strategy in available_strategies():
        for extra in ([], ["bonus.kind=vime"]):
            values = resolve_runs([strategy], [0], set_options=extra, env="Pendulum-v1")[0]
            write_values(values.values(), tmp_path / "config.yaml")
            written = (tmp_path / "config.yaml").read_text()
            assert written == yaml.safe_dump(values.values(), sort_keys=False), strategy


def test_a_checkout_run_by_pythonpath_reads_its_own_presets(tmp_path):
    """A second source tree on PYTHONPATH (an older commit a study or a benchmark runs),
    beside this one installed, reads the presets of its own configs/, not the installed
    tree's: its vadam preset's learning rate changed, the changed one is what resolves."""
    import subprocess
    import sys

    import agents

    tree = Path(agents.__file__).resolve().parents[1]
    copy = tmp_path / "checkout"
    shutil.copytree(tree / "agents", copy / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tree / "param_explore", copy / "param_explore",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copytree(tree / "configs", copy / "configs")
    preset = copy / "configs" / "vadam.yaml"
    text = preset.read_text()
    assert "lr: 1.0e-4" in text
    preset.write_text(text.replace("lr: 1.0e-4", "lr: 1.23e-4", 1))
    code = (
        "import agents; from agents.settings.resolve import resolve_runs; "
        "print(agents.__file__); "
        "run = resolve_runs(['vadam'], [0], env='Pendulum-v1')[0]; "
        "print(run.learner.values()['optimizer_kwargs']['lr'])"
    )
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout.split()  # fmt: skip
    assert out[0].startswith(str(copy)), out
    assert float(out[1]) == 1.23e-4
