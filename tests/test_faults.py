"""Faults injected on purpose: runs cannot be poisoned, damaged files give one clear line.

Through the CLI (``train_agent`` as a process where a process matters, its ``main()``
otherwise; ``conftest.py``) and the Python API, on real environments:

* a crafted checkpoint whose pickle would write a file is refused, and nothing executes;
* a non-finite reward or observation stops the run with one line naming the step and the
  quantity, after a checkpoint of the last good state;
* an update whose loss or gradient is non-finite is skipped and counted, and never
  reaches the weights, σ or the optimizer state (every strategy, both engines); a run in
  which every update of a window is skipped stops with one line, after a checkpoint;
* a damaged or foreign checkpoint (truncated, another env, another strategy, another
  engine's) gives ``train_agent: error: ...`` naming the file, exit 2, and leaves the run
  directory as it was;
* a run restarted from scratch shows no step twice in TensorBoard;
* a grid killed (kill -9) at random moments and re-run completes every run exactly.
"""

from __future__ import annotations

import builtins
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import param_explore as pe
from agents import DDPG
from agents.errors import CheckpointError, NonFiniteDataError
from agents.runs.config import resolve_config
from agents.runs.run_logger import read_eval_csv
from agents.runs.training import train

from conftest import error_line, train_agent_process

SMALL_NET = ["--set", "hidden_sizes=[32,32]", "--no-compile"]  # eager: no compile time
TINY = ["--env", "Pendulum-v1", "--eval-episodes", "1", "--logdir", "out", *SMALL_NET]


def snapshot(directory: Path) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in directory.rglob("*") if p.is_file()}


def scalar_steps(run_dir: Path) -> dict[str, list[int]]:
    """Steps per tag as TensorBoard reads the run (purged events dropped)."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_no_step_twice(run_dir: Path) -> None:
    for tag, steps in scalar_steps(run_dir).items():
        assert len(steps) == len(set(steps)), (run_dir, tag, steps)
    rows = [r["step"] for r in read_eval_csv(run_dir / "eval.csv")]
    assert len(rows) == len(set(rows)), rows


class _WritesAFile:
    """Unpickling this would create ``path``: a stand-in for code in a checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


# --------------------------------------------------------------------------- safe loading
def test_crafted_checkpoint_is_refused_and_nothing_executes(tmp_path, finished_runs):
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    marker = tmp_path / "executed"
    state = torch.load(checkpoint, weights_only=True)
    state["counters"] = _WritesAFile(marker)
    torch.save(state, checkpoint)
    before = snapshot(run_dir)

    with pytest.raises(CheckpointError, match=f"{checkpoint}.*refused"):
        DDPG.load(checkpoint)
    assert not marker.exists()

    line = error_line(train_agent_process(*TINY, "--steps", "400", "--eval-every", "200",
                                          "--resume", cwd=tmp_path))  # fmt: skip
    assert str(checkpoint.relative_to(tmp_path)) in line, line
    assert "refused" in line and "io.open" in line, line
    assert not marker.exists()
    assert snapshot(run_dir) == before  # the run directory is unchanged


def copy_run(runs: Path, name: str, tmp_path: Path) -> Path:
    """A finished 200-step run of ``finished_runs``, copied to ``tmp_path/out``."""
    run_dir = tmp_path / "out" / "Pendulum-v1" / name / "seed0"
    shutil.copytree(runs / "Pendulum-v1" / name / "seed0", run_dir)
    return run_dir


# --------------------------------------------------------------------------- damaged files
@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory):
    """Small finished runs to take checkpoints from: two strategies, two envs, two engines."""
    root = tmp_path_factory.mktemp("runs") / "out"
    for env, strategy, steps, engine in (
        ("Pendulum-v1", "vadam", 200, "native"),
        ("Pendulum-v1", "adam-plain", 200, "native"),
        ("MountainCarContinuous-v0", "vadam", 999, "native"),
        ("Pendulum-v1", "vadam", 200, "sb3"),
    ):
        config = resolve_config(
            strategy=strategy, env=env, total_steps=steps, eval_every=200, eval_episodes=1,
            engine=engine, logdir=str(root), set_options=["hidden_sizes=[32,32]"], compile=False,
        )  # fmt: skip
        train(config, progress=False)
    return root


DAMAGE = {
    "truncated": lambda runs, path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "another env": lambda runs, path: path.write_bytes(
        (
            runs / "MountainCarContinuous-v0" / "vadam" / "seed0" / "checkpoints" / "latest.pt"
        ).read_bytes()
    ),
    "another strategy": lambda runs, path: path.write_bytes(
        (runs / "Pendulum-v1" / "adam-plain" / "seed0" / "checkpoints" / "latest.pt").read_bytes()
    ),
    "another engine's": lambda runs, path: path.write_bytes(
        (runs / "Pendulum-v1" / "vadam-sb3" / "seed0" / "checkpoints" / "latest.zip").read_bytes()
    ),
}
EXPECTED = {
    "truncated": "damaged",
    "another env": "MountainCarContinuous-v0",
    "another strategy": "adam-plain",
    "another engine's": "not a checkpoint of the native engine",
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_or_foreign_checkpoint_gives_one_line_and_changes_nothing(
    tmp_path, finished_runs, case, train_agent
):
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    DAMAGE[case](finished_runs, checkpoint)
    before = snapshot(run_dir)
    line = error_line(train_agent(*TINY, "--steps", "400", "--eval-every", "200", "--resume",
                                  cwd=tmp_path))  # fmt: skip
    assert str(checkpoint.relative_to(tmp_path)) in line and EXPECTED[case] in line, line
    assert snapshot(run_dir) == before
    with pytest.raises(CheckpointError, match=EXPECTED[case]):
        DDPG("Pendulum-v1", hidden_sizes=[32, 32]).load_checkpoint(checkpoint)


def test_sb3_engine_refuses_a_native_checkpoint(tmp_path, finished_runs, train_agent):
    args = [*TINY, "--engine", "sb3", "--steps", "200", "--eval-every", "200"]
    run_dir = copy_run(finished_runs, "vadam-sb3", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.zip"
    native = finished_runs / "Pendulum-v1" / "vadam" / "seed0" / "checkpoints" / "latest.pt"
    checkpoint.write_bytes(native.read_bytes())
    before = snapshot(run_dir)
    line = error_line(train_agent(*args[:-4], "--steps", "400", "--eval-every", "200",
                                  "--resume", cwd=tmp_path))  # fmt: skip
    assert str(checkpoint.relative_to(tmp_path)) in line, line
    assert "not a checkpoint of the sb3 engine" in line, line
    assert snapshot(run_dir) == before


# --------------------------------------------------------------------------- non-finite data
FAULTY_ENVS = '''
import math
import gymnasium as gym


class Faulty(gym.Wrapper):
    """Pendulum whose step AT returns a non-finite reward or observation."""

    def __init__(self, env, at, what):
        super().__init__(env)
        self.at, self.what, self.steps = at, what, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.what == "reward":
                reward = math.nan
            else:
                obs = obs.copy()
                obs[1] = math.inf
        return obs, reward, terminated, truncated, info


for what in ("reward", "observation"):
    gym.register(
        f"NaN{what.title()}Pendulum-v0",
        entry_point=lambda what=what: Faulty(gym.make("Pendulum-v1"), 300, what),
        max_episode_steps=200,
    )
'''


@pytest.mark.parametrize("engine", ["native", "sb3"])
def test_non_finite_environment_data_stops_the_run_after_a_checkpoint(tmp_path, engine):
    (tmp_path / "faulty_envs.py").write_text(FAULTY_ENVS)
    env_id = "faulty_envs:NaNRewardPendulum-v0"
    result = train_agent_process("--env", env_id, "--steps", "600", "--eval-every", "200",
                                 "--eval-episodes", "1", "--logdir", "out", "--engine", engine,
                                 *SMALL_NET, cwd=tmp_path,
                                 env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    line = error_line(result)
    assert "non-finite reward" in line and "step 300" in line, line
    if engine == "sb3":  # SB3's zip, saved before the transition was stored
        zip_path = tmp_path / "out" / env_id / "vadam-sb3" / "seed0" / "checkpoints" / "latest.zip"
        assert zip_path.exists() and str(zip_path.relative_to(tmp_path)) in line
        return
    run_dir = tmp_path / "out" / env_id / "vadam" / "seed0"
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 299  # the last good state
    assert all(torch.isfinite(v).all() for v in state["actor"].values())
    assert all(torch.isfinite(v).all() for v in state["critic"].values())
    assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == [200]


def test_non_finite_observation_through_the_python_api(tmp_path):
    sys.path.insert(0, str(tmp_path))
    (tmp_path / "faulty_envs_api.py").write_text(FAULTY_ENVS)
    try:
        import faulty_envs_api  # noqa: F401  (registers the envs)

        config = resolve_config(
            env="NaNObservationPendulum-v0", total_steps=600, eval_every=200, eval_episodes=1,
            logdir=str(tmp_path / "out"), set_options=["hidden_sizes=[32,32]"], compile=False,
        )  # fmt: skip
        with pytest.raises(NonFiniteDataError, match=r"non-finite observation .* at step 300"):
            train(config, progress=False)
        state = torch.load(next((tmp_path / "out").rglob("latest.pt")), weights_only=True)
        assert state["counters"]["num_timesteps"] == 299
    finally:
        sys.path.remove(str(tmp_path))


def poisoned_agent(strategy: str, compile: bool) -> tuple[DDPG, list[bool]]:
    """An agent whose buffer holds one NaN reward, and a record of which minibatches
    contained it (every update with it must be skipped, every other one made)."""
    # test_compiled_update's networks: a compiled vadam update is then in Inductor's cache.
    agent = DDPG("Pendulum-v1", seed=0, device="cpu", strategy=strategy, compile=compile,
                 hidden_sizes=[32, 24], batch_size=16)  # fmt: skip
    agent.learn(100)  # 36 updates on clean data
    agent.buffer.rewards[50] = float("nan")  # past the storage check: as a bug would
    poisoned = []
    sample = agent.buffer.sample

    def recording_sample(batch_size, generator=None):
        batch = sample(batch_size, generator)
        poisoned.append(bool(torch.isnan(batch.rewards).any()))
        return batch

    agent.buffer.sample = recording_sample
    return agent, poisoned


@pytest.mark.trains
@pytest.mark.parametrize(
    ("strategy", "compile"), [("vadam", False), ("adam-plain", False), ("vadam", True)]
)
def test_non_finite_update_is_skipped_counted_and_reaches_nothing(strategy, compile):
    agent, poisoned = poisoned_agent(strategy, compile)
    agent.learn(200)
    assert agent.compiled == compile
    assert 0 < sum(poisoned) < len(poisoned)
    assert agent.skipped_updates == sum(poisoned)
    assert agent.num_updates == 36 + 200
    for module in (agent.actor, agent.critic, agent.target_actor, agent.target_critic):
        assert all(torch.isfinite(p).all() for p in module.parameters())
    for optimizer in (agent.actor_optimizer, agent.critic_optimizer):
        for state in optimizer.state.values():
            assert all(torch.isfinite(v).all() for v in state.values() if torch.is_tensor(v))
    assert all(torch.isfinite(s).all() for s in agent.actor_optimizer.sampling_std())
    losses = agent.pop_losses()
    assert np.isfinite(losses["critic"]) and np.isfinite(losses["actor"])


@pytest.mark.parametrize("strategy", pe.available_optimizers())
def test_every_strategy_skips_a_step_with_a_non_finite_gradient(strategy):
    """The guard is the strategy's own, so SB3's bare ``optimizer.step()`` has it too."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = pe.make_optimizer(strategy, net)
    for _ in range(2):  # a clean step first, so that every piece of state exists
        opt.resample_noise()
        opt.zero_grad()
        with opt.training_params():
            net(torch.randn(5, 3)).pow(2).sum().backward()
        opt.step()
    opt.resample_noise()
    opt.zero_grad()
    with opt.training_params():
        net(torch.randn(5, 3)).pow(2).sum().backward()
    next(net.parameters()).grad[0, 0] = float("inf")
    params = [p.detach().clone() for p in net.parameters()]
    state = {k: v.clone() for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v)}
    sigma = [s.clone() for s in opt.sampling_std()]
    opt.step()
    assert opt.skipped_steps == 1
    assert all(torch.equal(a, b) for a, b in zip(params, net.parameters()))
    after = {k: v for s in opt.state.values() for k, v in s.items() if torch.is_tensor(v)}
    assert all(torch.equal(state[k], after[k]) for k in state)
    assert all(torch.equal(a, b) for a, b in zip(sigma, opt.sampling_std()))


def test_skipped_updates_are_logged(tmp_path, train_agent):
    """train/skipped_updates is in TensorBoard (0 on clean data)."""
    result = train_agent(*TINY, "--steps", "400", "--eval-every", "400", "--set",
                         "log_every=200", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    assert [e.value for e in acc.Scalars("train/skipped_updates")] == [0.0, 0.0]


@pytest.mark.trains
def test_a_run_whose_every_update_is_skipped_stops_after_a_checkpoint(tmp_path, train_agent):
    """critic_lr=1e30: the first critic step makes its weights ~1e30, after which every loss
    overflows and every update is skipped. The run stops at the first window's end."""
    result = train_agent(*TINY, "--steps", "1000", "--eval-every", "500", "--set",
                         "critic_lr=1e30", "--set", "skipped_window=200",
                         cwd=tmp_path)  # fmt: skip
    line = error_line(result)
    assert "updates of steps 1-200 were skipped for a non-finite loss or gradient" in line
    assert "skipped_window=200" in line and "checkpoint of the last good state" in line
    state = torch.load(next((tmp_path / "out").rglob("latest.pt")), weights_only=True)
    assert state["counters"]["num_timesteps"] == 200
    assert state["counters"]["skipped_updates"] == 200 - 64  # every update made
    for network in ("actor", "critic", "target_actor", "target_critic"):
        assert all(torch.isfinite(v).all() for v in state[network].values())
    bad = train_agent(*TINY, "--steps", "100", "--set", "skipped_window=-1", cwd=tmp_path)
    assert "skipped_window must be >= 0, got -1" in error_line(bad)


# --------------------------------------------------------------------------- kills
def test_restart_from_scratch_shows_no_step_twice(tmp_path, train_agent):
    """Killed before its first checkpoint, a run restarts from scratch; the killed
    attempt's events are gone."""
    args = [*TINY, "--steps", "1200", "--eval-every", "200", "--set", "checkpoint_every=5000",
            "--set", "log_every=100"]  # fmt: skip
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    exe = Path(sys.executable).with_name("train_agent")
    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    for line in proc.stdout:
        if line.startswith("step 600: eval"):
            break
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "checkpoints" / "latest.pt").exists()
    assert scalar_steps(run_dir)["eval/mean_return"][:3] == [200, 400, 600]

    resumed = train_agent(*args, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    steps = scalar_steps(run_dir)
    assert steps["eval/mean_return"] == list(range(200, 1201, 200))
    assert steps["train/episode_return"] == list(range(200, 1201, 200))
    assert steps["loss/critic"] == list(range(100, 1201, 100))


def test_grid_killed_at_random_moments_completes_exactly(tmp_path):
    command = [str(Path(sys.executable).with_name("train_agent")), *TINY,
               "--opt", "vadam,adam-plain", "--seeds", "2", "--steps", "600",
               "--eval-every", "200", "--workers", "2", "--set", "checkpoint_every=200",
               "--set", "log_every=100"]  # fmt: skip
    env_dir = tmp_path / "out" / "Pendulum-v1"
    rng = random.Random(0)
    for _ in range(3):
        proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        time.sleep(rng.uniform(3.0, 9.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = [d for d in env_dir.glob("*/seed*") if (d / "eval.csv").exists()
                and 600 in [r["step"] for r in read_eval_csv(d / "eval.csv")]]  # fmt: skip
    untouched = {d: snapshot(d) for d in finished}

    rerun = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "4 of 4 runs finished, 0 failed" in rerun.stdout
    for strategy in ("vadam", "adam-plain"):
        for seed in (0, 1):
            run_dir = env_dir / strategy / f"seed{seed}"
            assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == [200, 400, 600]
            assert_no_step_twice(run_dir)
            assert scalar_steps(run_dir)["eval/mean_return"] == [200, 400, 600]
    for run_dir, files in untouched.items():
        assert snapshot(run_dir) == files, run_dir
