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
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.common.errors import NonFiniteDataError
from agents.runs.run_logger import read_eval_csv
from agents.runs.stopping import RunInterrupted
from agents.runs.train import train
from agents.settings import resolve_settings

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
