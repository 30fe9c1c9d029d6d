"""One tag vocabulary for both engines (agents.common.tags): the native DDPG, SB3's DDPG
through ``train_agent --engine sb3``, and SB3's own ``learn`` with ParamExploreCallback
and an EvalCallback log the same eval, σ-per-layer and learning-rate tags, read back
with TensorBoard's EventAccumulator; σ prints with enough digits to show a change."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import DDPG
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import HumanOutputFormat, Logger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

from agents.common.tags import Sigma
from agents.ddpg.networks import Actor
from agents.sb3.policy import ParamExploreCallback

ENV = "Pendulum-v1"
TINY = ["--env", ENV, "--steps", "200", "--eval-every", "200", "--eval-episodes", "2",
        "--no-compile", "--set", "hidden_sizes=[16,16]", "--set", "learning_starts=50",
        "--set", "log_every=100"]  # fmt: skip


def scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """Every scalar tag of a run as TensorBoard reads it: {tag: {step: value}}."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: {e.step: e.value for e in acc.Scalars(t)} for t in acc.Tags()["scalars"]}


def native_layers(hidden_sizes: list[int]) -> list[str]:
    """The native actor's linear layers' module paths, from the module itself."""
    actor = Actor(3, np.array([-2.0]), np.array([2.0]), hidden_sizes=hidden_sizes)
    return [f"net.{name}" for name, m in actor.net.named_children() if isinstance(m, nn.Linear)]


def test_sigma_prints_four_significant_digits_on_sb3_stdout_and_logs_its_full_value():
    out = io.StringIO()
    logger = Logger(folder=None, output_formats=[HumanOutputFormat(out)])
    logger.record("explore/sigma_mean", Sigma(0.0099991234))
    logger.record("explore/plain", 0.0099991234)
    logger.dump(1)
    text = out.getvalue()
    assert "9.999e-03" in text  # SB3's own "{:<8.3g}" would print 0.01
    assert "| 0.01 " in text.replace("    ", " ")  # the plain float, as SB3 prints it
    assert float(Sigma(0.0099991234)) == 0.0099991234  # as a number it is unchanged
    assert f"{Sigma(0.25):>12.2f}" == "   2.500e-01"  # width and alignment kept


@pytest.mark.parametrize("layer_norm", [False, True])
def test_sb3_layers_are_named_as_the_native_actor_names_them(layer_norm):
    kwargs = dict(strategy="vadam", net_arch=[16, 16], layer_norm=layer_norm)
    model = DDPG("ParamExplorePolicy", ENV, device="cpu", seed=0, policy_kwargs=kwargs)
    statistics = model.policy.exploration_statistics()
    layers = sorted(k.partition("/")[2] for k in statistics if k.startswith("sigma_median/"))
    assert layers == native_layers([16, 16])  # net.0, net.2, net.4, whatever SB3's indices


@pytest.mark.trains
def test_native_and_sb3_runs_log_one_tag_set(train_agent, tmp_path):
    """The same strategy on both engines: the same tags, and learning rates as set."""
    for engine in ("native", "sb3"):
        result = train_agent(*TINY, "--opt", "vadam", "--engine", engine, "--logdir", "out",
                             cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
    env_dir = tmp_path / "out" / ENV
    native, sb3 = scalars(env_dir / "vadam" / "seed0"), scalars(env_dir / "vadam-sb3" / "seed0")
    assert set(sb3) - {"explore/action_distance"} == set(native) - {"explore/action_distance"}
    layers = {f"explore/sigma_median/{layer}" for layer in native_layers([16, 16])}
    assert layers <= set(native)
    for run in (native, sb3):
        np.testing.assert_allclose(list(run["train/actor_learning_rate"].values()), 1e-4)
        np.testing.assert_allclose(list(run["train/critic_learning_rate"].values()), 1e-3)
        assert {"eval/mean_return", "eval/std_return"} <= set(run)


@pytest.mark.trains
def test_sb3_learn_with_the_callbacks_logs_the_vocabulary(tmp_path):
    """SB3's own learn (rl-zoo3's way): its EvalCallback's result under eval/mean_return
    at the evaluation's step, σ per layer under the native names, both learning rates."""
    model = DDPG("ParamExplorePolicy", ENV, device="cpu", seed=0, learning_starts=50,
                 batch_size=32, learning_rate=3e-4, tensorboard_log=str(tmp_path / "tb"),
                 policy_kwargs=dict(strategy="vadam", net_arch=[16, 16]))  # fmt: skip
    evaluator = EvalCallback(
        make_vec_env(ENV), eval_freq=100, n_eval_episodes=2, log_path=str(tmp_path / "ev")
    )
    model.learn(200, callback=[ParamExploreCallback(log_every=100), evaluator])
    (run_dir,) = (tmp_path / "tb").iterdir()
    tags = scalars(run_dir)
    returns = [float(np.mean(r)) for r in evaluator.evaluations_results]
    stds = [float(np.std(r)) for r in evaluator.evaluations_results]
    steps = list(evaluator.evaluations_timesteps)
    assert steps == [100, 200]
    assert list(tags["eval/mean_return"]) == steps
    np.testing.assert_allclose(list(tags["eval/mean_return"].values()), returns, rtol=1e-6)
    np.testing.assert_allclose(list(tags["eval/std_return"].values()), stds, rtol=1e-5)
    layers = {f"explore/sigma_median/{layer}" for layer in native_layers([16, 16])}
    assert layers <= set(tags)
    assert not any("mu." in tag for tag in tags)
    np.testing.assert_allclose(list(tags["train/actor_learning_rate"].values()), 1e-4)
    np.testing.assert_allclose(list(tags["train/critic_learning_rate"].values()), 3e-4)


def test_no_sigma_for_strategies_without_weight_noise(train_agent, tmp_path):
    result = train_agent(*TINY, "--opt", "ou-action", "--logdir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tags = set(scalars(tmp_path / "out" / ENV / "ou-action" / "seed0"))
    assert "eval/mean_return" in tags and "train/actor_learning_rate" in tags
    assert not [tag for tag in tags if tag.startswith("explore/sigma")]
    assert "σ" not in result.stdout  # nor on the eval lines

    model = DDPG("ParamExplorePolicy", ENV, device="cpu", seed=0, learning_starts=50,
                 tensorboard_log=str(tmp_path / "tb"),
                 policy_kwargs=dict(strategy="adam-plain", net_arch=[16, 16]))  # fmt: skip
    model.learn(400, callback=ParamExploreCallback(log_every=100), log_interval=1)  # 2 episodes
    (run_dir,) = (tmp_path / "tb").iterdir()
    sb3_tags = set(scalars(run_dir))
    assert "train/actor_learning_rate" in sb3_tags
    assert not [tag for tag in sb3_tags if tag.startswith("explore/sigma")]
