"""``train_agent --engine sb3 --algo trpo [--bonus vime]``: sb3-contrib's TRPO in a run.

Real Pendulum-v1 runs with tiny networks and 200-step rollouts (one episode each): the run
directory and its files, data-only checkpoints at rollout boundaries, a resumed run equal
to an uninterrupted one, VIME's bonus logged and checkpointed, a stop request honoured at
the next rollout boundary, and one error line for settings that do not apply.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.common.callbacks import Callback
from agents.common.envs import with_action_range
from agents.common.errors import NonFiniteDataError
from agents.runs.agent_factory import make_agent
from agents.runs.run_logger import read_eval_csv
from agents.runs.stopping import RunInterrupted
from agents.runs.train import train
from agents.settings import load_run_settings, resolve_settings
from agents.settings.files import write_values

from conftest import error_line

RUN = ["--env", "Pendulum-v1", "--engine", "sb3", "--algo", "trpo", "--no-progress",
       "--eval-every", "200", "--eval-episodes", "1", "--logdir", "out",
       "--set", "hidden_sizes=[16,16]", "--set", "trpo.n_steps=200",
       "--set", "trpo.batch_size=50", "--set", "log_every=100",
       "--set", "checkpoint_every=200"]  # fmt: skip
#: A tiny dynamics model, fitted after every rollout once 100 transitions are pooled.
VIME = ["--bonus", "vime", "--set", "bonus.hidden_sizes=[8]", "--set", "bonus.num_samples=3",
        "--set", "bonus.min_pool_size=100"]  # fmt: skip


def checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)


def scalar_tags(run_dir: Path) -> set[str]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return set(acc.Tags()["scalars"])


def test_a_trpo_run_writes_the_run_directory(tmp_path, train_agent):
    result = train_agent(*RUN, "--steps", "400", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / "Pendulum-v1" / "trpo-sb3" / "seed0"
    assert [row["step"] for row in read_eval_csv(run_dir / "eval.csv")] == [200, 400]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (config["algo"], config["strategy"], config["engine"]) == ("trpo", "trpo", "sb3")
    trpo = {"n_steps": 200, "target_kl": 0.01, "gae_lambda": 1.0, "batch_size": 50}
    assert config["trpo"] == trpo  # every setting, resolved
    assert config["normalize_actions"] is True  # the learner's choice, recorded
    tags = scalar_tags(run_dir)
    assert {"loss/value", "loss/policy_objective", "explore/action_std"} <= tags
    assert {"train/episode_return", "eval/return_mean"} & tags
    state = checkpoint(run_dir)  # data only
    assert state["engine"] == "sb3-trpo" and state["counters"]["num_timesteps"] == 400
    assert state["counters"]["num_updates"] == 2 and "bonus" not in state

    again = train_agent(*RUN, "--steps", "400", "--resume", cwd=tmp_path)
    assert again.returncode == 0 and "already complete" in again.stdout


def test_a_resumed_run_with_the_bonus_ends_as_an_uninterrupted_one(tmp_path, train_agent):
    whole = train_agent(*RUN, *VIME, "--steps", "600", "--logdir", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    first = train_agent(*RUN, *VIME, "--steps", "400", "--logdir", "parts", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    rest = train_agent(*RUN, *VIME, "--steps", "600", "--resume", "--logdir", "parts", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr

    name = Path("Pendulum-v1") / "trpo+vime-bbb-sb3" / "seed0"
    a, b = checkpoint(tmp_path / "whole" / name), checkpoint(tmp_path / "parts" / name)
    assert a["counters"] == b["counters"] == {"num_timesteps": 600, "num_updates": 3}
    for key in a["policy"]:
        assert torch.equal(a["policy"][key], b["policy"][key]), key
    assert a["bonus"]["num_fits"] == b["bonus"]["num_fits"] == 3
    assert a["bonus"]["pool"]["size"] == b["bonus"]["pool"]["size"] == 600
    for key in a["bonus"]["dynamics"]["network"]:
        assert torch.equal(
            a["bonus"]["dynamics"]["network"][key], b["bonus"]["dynamics"]["network"][key]
        ), key
    rows = [read_eval_csv(tmp_path / d / name / "eval.csv") for d in ("whole", "parts")]
    assert [r["mean_return"] for r in rows[0]] == [r["mean_return"] for r in rows[1]]
    tags = scalar_tags(tmp_path / "whole" / name)
    assert {"bonus/intrinsic_mean", "bonus/info_gain_median", "dynamics/nll"} <= tags


class _At(gym.Wrapper):
    """Pendulum whose ``at``-th step sends this process SIGTERM (as a user would), or
    returns a NaN reward (``nan=True``)."""

    def __init__(self, at: int, nan: bool = False) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.at, self.nan, self.steps = at, nan, 0

    def step(self, action):
        self.steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.steps == self.at and self.nan:
            reward = float("nan")
        elif self.steps == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return obs, reward, terminated, truncated, info


def trpo_config(tmp_path: Path, checkpoint_every: int):
    return resolve_settings(
        env="Pendulum-v1", engine="sb3", algo="trpo", total_steps=1000, eval_every=1000,
        eval_episodes=1, logdir=str(tmp_path),
        set_options=["hidden_sizes=[16,16]", "trpo.n_steps=200",
                     f"checkpoint_every={checkpoint_every}"],
    )  # fmt: skip


def test_a_stop_request_waits_for_the_rollout_boundary(tmp_path):
    config = trpo_config(tmp_path, checkpoint_every=1000)
    with pytest.raises(RunInterrupted):
        train(config, progress=False, env=_At(250))
    # Asked in the second rollout: it is finished, trained on and checkpointed.
    assert checkpoint(config.run_dir())["counters"] == {"num_timesteps": 400, "num_updates": 2}


def test_a_failure_inside_a_rollout_keeps_the_last_boundary_checkpoint(tmp_path):
    config = trpo_config(tmp_path, checkpoint_every=100)  # due at 100, taken at 200
    with pytest.raises(NonFiniteDataError, match=r"step 300.*not checkpointed mid-rollout"):
        train(config, progress=False, env=_At(300, nan=True))
    assert checkpoint(config.run_dir())["counters"] == {"num_timesteps": 200, "num_updates": 1}


BAD_INPUT = {
    "trpo on the native engine": (
        ["--algo", "trpo", "--engine", "native"],
        "--algo trpo runs on the sb3 engine only",
    ),
    "a weight-noise strategy": (
        ["--algo", "trpo", "--engine", "sb3", "--opt", "vadam"],
        "a weight-noise strategy (vadam) does not apply",
    ),
    "a bad trpo setting": (
        ["--algo", "trpo", "--engine", "sb3", "--set", "trpo.n_steps=1"],
        "trpo.n_steps must be >= 2, got 1",
    ),
    "an unknown trpo setting": (
        ["--algo", "trpo", "--engine", "sb3", "--set", "trpo.nsteps=100"],
        "unknown trpo setting(s) nsteps (did you mean n_steps?)",
    ),
    "trpo settings for ddpg": (["--set", "trpo.n_steps=100"], "apply with --algo trpo only"),
    "the bonus with sb3's ddpg": (
        ["--engine", "sb3", "--bonus", "vime"],
        "on the sb3 engine, with --algo trpo",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_settings_that_do_not_apply_get_one_clear_line(tmp_path, case, train_agent):
    args, message = BAD_INPUT[case]
    line = error_line(train_agent("--steps", "1", "--env", "Pendulum-v1", *args, cwd=tmp_path))
    assert message in line
    assert not (tmp_path / "runs").exists()


# ----------------------------------------------------------------- actions in [-1, 1]


class TwoForces(gym.Env):
    """A one-step-per-call env with asymmetric bounds that keeps every action it is given."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Box(
        np.array([-10, 0], dtype=np.float32), np.array([10, 4], dtype=np.float32)
    )

    def __init__(self) -> None:
        self.received: list[np.ndarray] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return np.zeros(1, dtype=np.float32), 0.0, False, False, {}


def rllab_scaled(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """rllab's ``NormalizedEnv.step`` (normalized_env.py l.81-83), written out."""
    return np.clip(low + (action + 1.0) * 0.5 * (high - low), low, high)


def test_normalized_actions_are_rllabs_map_onto_the_env_bounds():
    base = TwoForces()
    env = with_action_range(base, True)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    env.reset(seed=0)
    low, high = base.action_space.low, base.action_space.high
    given = [[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [0.5, -0.25], [3.0, -7.0], [-1.5, 1.2]]
    for action in given:
        env.step(np.array(action, dtype=np.float32))
    received = np.array(base.received)
    np.testing.assert_array_equal(received[0], low)  # -1 -> the lower bound
    np.testing.assert_array_equal(received[1], high)  # +1 -> the upper bound
    np.testing.assert_array_equal(received[2], [0.0, 2.0])  # 0 -> the middle
    np.testing.assert_allclose(received[3], [5.0, 1.5])
    np.testing.assert_array_equal(received[4], [10.0, 0.0])  # outside [-1, 1]: the bound
    np.testing.assert_array_equal(received[5], [-10.0, 4.0])
    np.testing.assert_allclose(received, rllab_scaled(np.array(given), low, high), rtol=1e-6)
    assert received.dtype == np.float32
    assert with_action_range(base, False) is base


def test_trpo_acts_in_unit_range_unless_asked_ddpg_on_the_env_range(tmp_path):
    trpo = resolve_settings(env="Pendulum-v1", engine="sb3", algo="trpo")
    assert trpo.normalize_actions is True and trpo.values()["normalize_actions"] is True
    assert resolve_settings(env="Pendulum-v1").normalize_actions is False
    raw = resolve_settings(
        env="Pendulum-v1", engine="sb3", algo="trpo", set_options=["normalize_actions=false"]
    )
    assert raw.normalize_actions is False
    # A TRPO run saved before the setting existed acted on raw ranges, and resumes so.
    old = {k: v for k, v in trpo.values().items() if k != "normalize_actions"}
    write_values(old, tmp_path / "config.yaml")
    assert load_run_settings(tmp_path / "config.yaml").normalize_actions is False


class ReceivedActions(gym.Wrapper):
    """The actions the task itself receives (inside the run's action wrapper)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.received: list[np.ndarray] = []

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return self.env.step(action)


def cartpole_trpo(normalize: bool, *options: str):
    """A TRPO agent of one 250-step rollout on the cart-pole (±10 N), its task's actions."""
    settings = resolve_settings(
        env="SparseCartpoleSwingup-v0", engine="sb3", algo="trpo", seed=0,
        set_options=["hidden_sizes=[16,16]", "trpo.n_steps=250", "trpo.batch_size=125",
                     f"normalize_actions={str(normalize).lower()}", *options],
    )  # fmt: skip
    task = ReceivedActions(gym.make("SparseCartpoleSwingup-v0"))
    agent = make_agent(settings, env=task)
    return agent, task


def test_trpos_initial_std_spans_the_cartpole_force_range():
    """σ = 1 at first, in the policy's units: with [−1, 1] actions the task sees forces
    spread over ±10 N (a clipped N(0, 10²): std ≈ 7.2 N, a third at the bounds); on the raw
    range σ = 1 N explores a tenth of it."""
    stds = {}
    for normalize in (True, False):
        agent, task = cartpole_trpo(normalize)
        model = agent.model
        expected = (-1.0, 1.0) if normalize else (-10.0, 10.0)
        assert (model.action_space.low[0], model.action_space.high[0]) == expected
        assert torch.equal(model.policy.log_std.detach(), torch.zeros(1))  # σ = 1
        agent.learn(250, Callback())
        forces = np.concatenate(task.received)
        assert len(forces) == 250 and np.abs(forces).max() <= 10.0
        stds[normalize] = forces.std()
        if normalize:
            assert 0.2 < np.mean(np.abs(forces) == 10.0) < 0.45
    assert 5.5 < stds[True] < 9.0
    assert 0.7 < stds[False] < 1.3


def test_the_dynamics_model_gets_the_policys_unit_range_sample_unclipped():
    """As rllab: the pool holds the Gaussian's sample in [−1, 1] units, unclipped (what the
    rollout buffer and TRPO's update hold), and the task gets it rescaled and clipped."""
    agent, task = cartpole_trpo(True, "bonus.kind=vime", "bonus.hidden_sizes=[8]",
                                "bonus.num_samples=2", "bonus.min_pool_size=100")  # fmt: skip
    agent.learn(250, Callback())
    pool = agent.bonus_callback.bonus.pool
    sampled = agent.model.rollout_buffer.actions.reshape(-1, 1)
    assert len(pool) == len(sampled) == 250
    np.testing.assert_array_equal(pool.actions[:250].numpy(), sampled)
    assert (np.abs(sampled) > 1).any()  # unclipped
    forces = np.concatenate(task.received).reshape(-1, 1)
    np.testing.assert_allclose(forces, rllab_scaled(sampled, -10.0, 10.0), rtol=1e-6, atol=1e-5)
