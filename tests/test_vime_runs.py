"""VIME's bonus in the native DDPG agent and in ``train_agent --bonus vime``.

The bonus itself (its mathematics, normalisation and SB3 forms) is tested in test_vime.py and
test_information_gain.py; here: the agent pools every transition, fits on the schedule and
adds the bonus to each replayed minibatch while the replay buffer keeps the task's rewards,
and a run logs the bonus, saves it in its checkpoint and resumes it (real Pendulum-v1 runs,
tiny models: seconds).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.common.checkpoints import read_checkpoint
from agents.common.envs import make_env
from agents.curiosity import make_vime_bonus
from agents.ddpg import DDPG

from conftest import error_line

#: A tiny model and schedule: fits every 100 steps once 100 transitions are pooled.
TINY = {"hidden_sizes": [8], "num_samples": 3, "min_pool_size": 100, "fit_every": 100}
TINY_SET = [f"--set=bonus.{key}={value}" for key, value in TINY.items()]
RUN = ["--env", "Pendulum-v1", "--opt", "vadam", "--no-compile", "--no-progress",
       "--eval-every", "200", "--eval-episodes", "1", "--logdir", "out",
       "--set", "hidden_sizes=[16,16]", "--set", "learning_starts=100", "--set", "batch_size=16",
       "--set", "log_every=100", "--set", "save_replay_buffer=true"]  # fmt: skip


def test_the_agent_pools_every_transition_fits_on_schedule_and_adds_the_bonus():
    env = make_env("Pendulum-v1")
    bonus = make_vime_bonus(
        {"posterior": "noisy-kfac", **TINY}, env.observation_space, env.action_space, seed=0
    )
    agent = DDPG(
        env, strategy="vadam", hidden_sizes=[16, 16], learning_starts=100, batch_size=16,
        seed=0, device="cpu", bonus=bonus,
    )  # fmt: skip
    agent.learn(250)
    assert len(bonus.pool) == 250 and bonus.num_fits == 2  # at steps 100 and 200
    statistics = agent.bonus_statistics()
    assert statistics["bonus/intrinsic_mean"] > 0  # every update's minibatch was scored
    assert agent.bonus_statistics() == {}  # popped

    stored = agent.buffer.state_dict()["rewards"].clone()
    state = agent.generator.get_state()
    replayed = agent.replayed_batch()
    agent.generator.set_state(state)
    plain = agent.buffer.sample(16, agent.generator)
    torch.testing.assert_close(replayed.obs, plain.obs)
    added = (replayed.rewards - plain.rewards).numpy()
    assert added.shape == (16,) and (added > 0).all() and np.isfinite(added).all()
    torch.testing.assert_close(agent.buffer.state_dict()["rewards"], stored)  # task's own


def test_an_agent_without_a_bonus_replays_the_buffer_as_it_is():
    agent = DDPG("Pendulum-v1", hidden_sizes=[8, 8], learning_starts=20, batch_size=8, seed=0)
    agent.learn(30)
    state = agent.generator.get_state()
    replayed = agent.replayed_batch()
    agent.generator.set_state(state)
    torch.testing.assert_close(replayed.rewards, agent.buffer.sample(8, agent.generator).rewards)
    assert agent.bonus_statistics() == {}


def bonus_scalars(run_dir: Path) -> dict[str, list[int]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = [t for t in acc.Tags()["scalars"] if t.startswith(("bonus/", "dynamics/"))]
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in tags}


def test_a_run_with_the_bonus_logs_checkpoints_and_resumes_it(tmp_path, train_agent):
    args = [*RUN, "--bonus", "vime", "--set", "bonus.posterior=noisy-adam", *TINY_SET]
    result = train_agent(*args, "--steps", "200", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam+vime-noisy-adam" / "seed0"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    given = {"kind": "vime", "posterior": "noisy-adam", **TINY}
    assert {key: config["bonus"][key] for key in given} == given  # and every other setting
    assert config["bonus"]["eta"] == 1e-4
    logged = bonus_scalars(run_dir)
    assert {"bonus/intrinsic_mean", "bonus/info_gain_median"} <= set(logged)
    assert max(logged["bonus/intrinsic_mean"]) == 200
    state = read_checkpoint(run_dir / "checkpoints" / "latest.pt")
    assert state["counters"]["num_timesteps"] == 200
    assert state["bonus"]["num_fits"] == 2  # at 100 and 200

    result = train_agent(*args, "--steps", "400", "--resume", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    state = read_checkpoint(run_dir / "checkpoints" / "latest.pt")
    assert state["bonus"]["num_fits"] == 4  # continued: 300 and 400 on top of the two
    assert state["bonus"]["pool"]["size"] == 400

    # Without the bonus it is another method, in its own directory beside this one.
    plain = train_agent(*RUN, "--steps", "200", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    plain_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    assert not yaml.safe_load((plain_dir / "config.yaml").read_text())["bonus"]
    # Other bonus settings in the bonus run's directory are refused with one line.
    other = ["--set", "bonus.eta=0.5", "--steps", "600", "--resume"]
    line = error_line(train_agent(*args, *other, cwd=tmp_path))
    assert "different config" in line and "bonus" in line


def test_bad_bonus_settings_get_one_clear_line(tmp_path, train_agent):
    line = error_line(train_agent(*RUN, "--bonus", "vime", "--set", "bonus.posterior=mcmc",
                                  "--steps", "200", cwd=tmp_path))  # fmt: skip
    assert "posterior" in line and "mcmc" in line
    line = error_line(train_agent(*RUN, "--bonus", "vime", "--engine", "sb3", "--steps", "200",
                                  cwd=tmp_path))  # fmt: skip
    assert "native engine only" in line
    assert not (tmp_path / "out").exists()  # nothing half-written
