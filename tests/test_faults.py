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

import base64
import builtins
import json
import os
import pickle
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import param_explore as pe
from agents import DDPG
from agents.cli import main
from agents.common.bounded_yaml import load_yaml_text
from agents.common.envs import make_env
from agents.common.errors import CheckpointError, NonFiniteDataError
from agents.curiosity import make_vime_bonus
from agents.runs.agent_factory import make_agent
from agents.runs.run_lock import LOCK_FILE, run_dir_lock
from agents.runs.run_logger import read_eval_csv
from agents.runs.train import train
from agents.settings import resolve_settings

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


class _RunsACommand:
    """Unpickling this would run a shell command that creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.command = f"touch {path}"

    def __reduce__(self):
        return (os.system, (self.command,))


# torch.save writes GLOBAL (protocol 2); protocol 4 names globals by STACK_GLOBAL.
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_checkpoint_that_would_run_a_command_is_refused_without_torchs_advice(
    tmp_path, finished_runs, train_agent, protocol
):
    """torch's own refusal advises loading again with ``weights_only=False``, which would
    run the command: the line says what the file would do, never how to let it."""
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    marker = tmp_path / "executed"
    state = torch.load(checkpoint, weights_only=True)
    state["counters"] = _RunsACommand(marker)
    torch.save(state, checkpoint, pickle_protocol=protocol)
    before = snapshot(run_dir)
    result = train_agent(*RESUME, cwd=tmp_path)
    line = error_line(result)
    assert f"checkpoint {checkpoint.relative_to(tmp_path)} refused: " in line, line
    assert f"({os.system.__module__}.system)" in line and "would run code" in line
    assert "weights_only" not in result.stderr + result.stdout, result.stderr
    assert not marker.exists() and snapshot(run_dir) == before
    with pytest.raises(CheckpointError, match="would run code"):
        DDPG.load(checkpoint)
    assert not marker.exists()


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
        config = resolve_settings(
            strategy=strategy, env=env, total_steps=steps, eval_every=200, eval_episodes=1,
            engine=engine, logdir=str(root), set_options=["hidden_sizes=[32,32]"], compile=False,
        )  # fmt: skip
        train(config, progress=False)
    return root


def poison(path: Path, part: str) -> str:
    """Write a NaN into the first tensor of ``part`` of the checkpoint at ``path``, as an
    edited file would hold it; its name in the checkpoint."""
    state = torch.load(path, weights_only=True)
    name, tensor = next((n, t) for n, t in state[part].items() if torch.is_tensor(t))
    tensor.view(-1)[0] = float("nan")
    torch.save(state, path)
    return f"{part}.{name}"


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
        (runs / "Pendulum-v1" / "vadam-sb3" / "seed0" / "checkpoints" / "latest.pt").read_bytes()
    ),
    "garbage": lambda runs, path: path.write_bytes(random.Random(0).randbytes(5000)),
    "empty": lambda runs, path: path.write_bytes(b""),
    "text": lambda runs, path: path.write_text("hello\n" * 10),
    "a NaN weight": lambda runs, path: poison(path, "actor"),
}
EXPECTED = {
    "truncated": "is damaged: it is truncated",
    "another env": "MountainCarContinuous-v0",
    "another strategy": "adam-plain",
    "another engine's": "not a checkpoint of the native engine (it is one of the sb3 engine)",
    # item 14: a reason, and garbage is never taken for code
    "garbage": "is damaged: it is not a checkpoint archive",
    "empty": "is damaged: the file is empty",
    "text": "is damaged: it is not a checkpoint archive",
    # found on reading, not at the first action the weights take
    "a NaN weight": "refused: its weights or optimizer state are not finite (actor.",
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
    with pytest.raises(CheckpointError, match=re.escape(EXPECTED[case])):
        DDPG("Pendulum-v1", hidden_sizes=[32, 32]).load_checkpoint(checkpoint)


@pytest.mark.parametrize("engine", ["native", "sb3"])
def test_non_finite_weights_in_a_checkpoint_are_refused_on_reading(tmp_path, finished_runs, engine):
    """Neither a resume nor ``DDPG.load`` takes a state a run would never have saved."""
    name, part = {"native": ("vadam", "critic"), "sb3": ("vadam-sb3", "policy")}[engine]
    checkpoint = copy_run(finished_runs, name, tmp_path) / "checkpoints" / "latest.pt"
    entry = poison(checkpoint, part)
    expected = f"checkpoint {checkpoint} refused: its weights or optimizer state are not finite"
    with pytest.raises(CheckpointError, match=re.escape(f"{expected} ({entry}")):
        if engine == "native":
            DDPG.load(checkpoint)
        else:
            agent = make_agent(resolve_settings(
                strategy="vadam", env="Pendulum-v1", engine="sb3", compile=False,
                set_options=["hidden_sizes=[32,32]"],
            ))  # fmt: skip
            agent.load_checkpoint(checkpoint)


def test_sb3_engine_refuses_a_native_checkpoint(tmp_path, finished_runs, train_agent):
    args = [*TINY, "--engine", "sb3", "--steps", "200", "--eval-every", "200"]
    run_dir = copy_run(finished_runs, "vadam-sb3", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
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
    if engine == "sb3":  # the state before the transition was stored
        checkpoint = tmp_path / "out" / env_id / "vadam-sb3" / "seed0" / "checkpoints" / "latest.pt"
        assert str(checkpoint.relative_to(tmp_path)) in line
        assert torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"] == 299
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

        config = resolve_settings(
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
    update = agent.update

    def recording_update(batch):
        poisoned.append(bool(torch.isnan(batch.rewards).any()))
        update(batch)

    agent.update = recording_update
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
    """Killed before its first periodic checkpoint, a run resumes from the one of step 0,
    past its lock (stale: its holder is dead); TensorBoard hides the killed attempt's
    events (they are kept on disk)."""
    args = [*TINY, "--steps", "1200", "--eval-every", "200", "--set", "checkpoint_every=5000",
            "--set", "log_every=100"]  # fmt: skip
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    exe = Path(sys.executable).with_name("train_agent")
    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    for line in proc.stdout:
        if "vadam/seed0 step 600: eval" in line:  # lines name their run
            break
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    assert torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"] == 0
    assert (run_dir / ".lock").read_text().split()[0] == str(proc.pid)  # left by the dead
    assert scalar_steps(run_dir)["eval/mean_return"][:3] == [200, 400, 600]
    killed = set(run_dir.glob("events.out.tfevents.*"))

    resumed = train_agent(*args, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert killed < set(run_dir.glob("events.out.tfevents.*"))  # nothing deleted
    steps = scalar_steps(run_dir)
    assert steps["eval/mean_return"] == list(range(200, 1201, 200))
    assert steps["train/episode_return"] == list(range(200, 1201, 200))
    assert steps["loss/critic"] == list(range(100, 1201, 100))


@pytest.mark.slow  # ~40 s of kills at random moments; the deterministic kills are above
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
    # A finished run's files stay as they were; a lock file left by a killed holder (the
    # kernel released its lock) goes with the next holder's release.
    for run_dir, files in untouched.items():
        files.pop(run_dir / LOCK_FILE, None)
        assert snapshot(run_dir) == files, run_dir


# =========================================================================== issue 24
# One test per item of "Nothing lost, nothing run, nothing hung": each failed before the
# fix (a payload ran, a file was lost, a run hung or ended in a traceback).
BROKEN_ENVS = '''
import math
import gymnasium as gym


class Broken(gym.Wrapper):
    """Pendulum that fails as told: an exception in reset or at step 300, or a NaN reward
    in test episodes (reset with a seed of 1 000 000 or more)."""

    def __init__(self, env, fault):
        super().__init__(env)
        self.fault, self.steps, self.testing = fault, 0, False

    def reset(self, *, seed=None, options=None):
        if self.fault == "reset":
            raise RuntimeError("reset broke")
        self.testing = seed is not None and seed >= 1_000_000
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.fault == "step" and self.steps == 300:
            raise RuntimeError("step broke")
        if self.fault == "test-nan" and self.testing:
            reward = math.nan
        return obs, reward, terminated, truncated, info


for fault, name in (("reset", "BrokenReset"), ("step", "BrokenStep"), ("test-nan", "TestNaN")):
    gym.register(
        f"{name}Pendulum-v0",
        entry_point=lambda fault=fault: Broken(gym.make("Pendulum-v1"), fault),
        max_episode_steps=200,
    )
gym.register(
    "EndlessPendulum-v0", entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv"
)
'''


@pytest.fixture
def broken_envs(tmp_path, monkeypatch):
    """``broken_envs:<id>`` env ids, importable by this process's ``train_agent``."""
    (tmp_path / "broken_envs.py").write_text(BROKEN_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "broken_envs:"


RESUME = [*TINY, "--steps", "400", "--eval-every", "200", "--resume"]


# --------------------------------------------------------------------------- 1 code in files
def test_1_sb3_checkpoints_are_data_and_earlier_pickles_never_load(
    tmp_path, finished_runs, train_agent
):
    """SB3's own zip (cloudpickle in its ``data``) and a pickled replay buffer of an earlier
    version are never unpickled; the sb3 engine's checkpoint is data."""
    run_dir = copy_run(finished_runs, "vadam-sb3", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    marker = tmp_path / "executed"
    payload = base64.b64encode(cloudpickle.dumps(_WritesAFile(marker))).decode()
    legacy = checkpoint.with_name("latest.zip")
    with zipfile.ZipFile(legacy, "w") as archive:  # what SB3's load would unpickle
        archive.writestr("data", json.dumps({"policy_class": {":serialized:": payload}}))
        archive.writestr("policy.pth", b"")
    checkpoint.with_name("replay_buffer.pkl").write_bytes(pickle.dumps(_WritesAFile(marker)))
    good = checkpoint.read_bytes()
    checkpoint.unlink()
    before = snapshot(run_dir)
    line = error_line(train_agent(*RESUME, "--engine", "sb3", cwd=tmp_path))
    assert str(legacy.relative_to(tmp_path)) in line and "earlier version" in line, line
    assert not marker.exists() and snapshot(run_dir) == before

    checkpoint.write_bytes(good)  # a checkpoint of this version beside the old pickle
    state = torch.load(checkpoint, weights_only=True)  # tensors and plain data only
    assert state["engine"] == "sb3" and "buffer" not in state  # the run kept no buffer
    resumed = train_agent(*RESUME, "--engine", "sb3", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert not marker.exists()  # the pickled buffer was not loaded
    assert torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"] == 400


# --------------------------------------------------------------------------- 2 one writer
def test_2_a_run_directory_has_one_writer(tmp_path, finished_runs, train_agent):
    line = error_line(train_agent(*TINY, "--steps", "200", "--seeds", "3,3", "--workers", "2",
                                  cwd=tmp_path))  # fmt: skip
    assert "names run directory out/Pendulum-v1/vadam/seed3 more than once" in line, line
    assert not (tmp_path / "out").exists()  # refused before anything started

    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    before = snapshot(run_dir)
    # The lock as another process holds it: flock is per open file, not per process.
    with run_dir_lock(run_dir):
        line = error_line(train_agent(*RESUME, cwd=tmp_path))
    assert f"{run_dir.relative_to(tmp_path)} is being written by another train_agent (pid " in line
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_planted_lock_link_is_refused_and_nothing_is_written_through_it(
    tmp_path, finished_runs, train_agent, link
):
    """A shared or cloned runs directory can carry a ``.lock`` that is a link to a file
    elsewhere; taking the lock must never write the holder's PID into that file."""
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = run_dir / LOCK_FILE
    if link == "symbolic":
        lock.symlink_to(victim)
    else:
        os.link(victim, lock)
    before = snapshot(run_dir)
    line = error_line(train_agent(*RESUME, cwd=tmp_path))
    assert f"{lock.relative_to(tmp_path)} is a {link} link" in line, line
    assert "not a lock file" in line and "remove it" in line
    assert victim.read_text() == "precious\n"
    assert snapshot(run_dir) == before and lock.exists()  # the lock is left to its owner


# --------------------------------------------------------------------------- 3-5 resume checks
def test_3_resume_keeps_the_settings_the_checkpoint_was_trained_with(
    tmp_path, finished_runs, train_agent
):
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    (run_dir / "config.yaml").unlink()
    before = snapshot(run_dir)
    line = error_line(train_agent(*RESUME, "--set", "optimizer_kwargs.lr=0.01", cwd=tmp_path))
    assert "cannot resume" in line and "'lr': 0.0001" in line and "'lr': 0.01" in line, line
    assert "those of its checkpoint" in line
    assert snapshot(run_dir) == before

    resumed = train_agent(*RESUME, cwd=tmp_path)  # the same settings: config.yaml rebuilt
    assert resumed.returncode == 0, resumed.stderr
    assert "config.yaml was missing; written again from the checkpoint's settings" in resumed.stdout
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["optimizer_kwargs"]["lr"] == 1e-4


def test_4_a_missing_checkpoint_stops_the_resume(tmp_path, finished_runs, train_agent):
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    checkpoint.unlink()
    before = snapshot(run_dir)
    line = error_line(train_agent(*RESUME, cwd=tmp_path))
    assert f"its checkpoint {checkpoint.relative_to(tmp_path)} is missing" in line, line
    assert "restore the checkpoint" in line
    assert snapshot(run_dir) == before  # not restarted at step 0: nothing rewritten


def test_5_a_missing_eval_csv_is_rebuilt_and_no_event_file_is_deleted(
    tmp_path, finished_runs, train_agent
):
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    first = read_eval_csv(run_dir / "eval.csv")
    (run_dir / "eval.csv").unlink()
    events = {p: p.read_bytes() for p in run_dir.glob("events.out.tfevents.*")}
    resumed = train_agent(*RESUME, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "eval.csv was missing; rebuilt from the TensorBoard events" in resumed.stdout
    assert all(path.read_bytes() == data for path, data in events.items())
    rows = read_eval_csv(run_dir / "eval.csv")
    assert [r["step"] for r in rows] == [200, 400]
    assert rows[0]["mean_return"] == pytest.approx(first[0]["mean_return"], rel=1e-6)
    assert_no_step_twice(run_dir)


# --------------------------------------------------------------------------- 6 evaluations
def test_6_non_finite_evaluations_blame_the_right_thing_and_are_never_checkpointed(
    tmp_path, broken_envs, train_agent
):
    env_id = f"{broken_envs}TestNaNPendulum-v0"
    line = error_line(train_agent(*TINY, "--env", env_id, "--steps", "400", "--eval-every", "200",
                                  cwd=tmp_path))  # fmt: skip
    assert "non-finite reward (nan) from TestNaNPendulum-v0 in evaluation episode 0, in the " \
           "evaluation at step 200" in line, line  # fmt: skip
    run_dir = tmp_path / "out" / env_id / "vadam" / "seed0"
    assert read_eval_csv(run_dir / "eval.csv") == []  # no nan row
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 0  # never a step whose test was not written

    # A learning rate that makes the weights overflow: the actor is to blame, not the env,
    # and the state whose actions are NaN is not checkpointed as a good one.
    line = error_line(train_agent(*TINY, "--steps", "400", "--eval-every", "200", "--set",
                                  "optimizer_kwargs.lr=1e30", cwd=tmp_path))  # fmt: skip
    assert "non-finite action ([nan]) from the actor at step 66" in line, line
    assert "non-finite reward" not in line and "holds step 0" in line
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    actor = DDPG("Pendulum-v1", hidden_sizes=[32, 32])
    actor.load_state_dict(state)
    assert np.isfinite(actor.predict(np.zeros((5, 3), np.float32))).all()


# --------------------------------------------------------------------------- 7 resume exactly
@pytest.mark.parametrize("engine", ["native", pytest.param("sb3", marks=pytest.mark.slow)])
def test_7_resume_is_exact_with_the_replay_buffer_and_says_so_without(
    tmp_path, train_agent, engine
):
    args = [*TINY, "--engine", engine, "--eval-every", "200"]
    name = "vadam" if engine == "native" else "vadam-sb3"

    def run(logdir: str, steps: str, *extra: str) -> str:
        result = train_agent(*args, "--logdir", logdir, "--steps", steps, *extra, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def returns(logdir: str) -> list[float]:
        rows = read_eval_csv(tmp_path / logdir / "Pendulum-v1" / name / "seed0" / "eval.csv")
        return [row["mean_return"] for row in rows]

    buffer = ["--set", "save_replay_buffer=true"]
    run("whole", "600", *buffer)
    run("resumed", "400", *buffer)
    assert "without the replay buffer" not in run("resumed", "600", *buffer, "--resume")
    assert returns("resumed") == returns("whole")  # bit for bit
    run("without", "400")
    said = run("without", "600", "--resume")
    assert "resuming at step 400 without the replay buffer" in said
    assert "another trajectory" in said
    whole, without = returns("whole"), returns("without")
    assert without[:2] == whole[:2] and without[2] != whole[2]


# --------------------------------------------------------------------------- 8 signals
def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(paths: Callable[[], list[Path]], count: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while len(paths()) < count:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def test_8_ctrl_c_stops_a_grid_of_populations_with_every_member_checkpointed(tmp_path):
    """Ctrl-C on a grid whose runs train as populations (two workers, a population of four
    each): every member stops with a checkpoint of its own, exit 130 at once, and the same
    command continues every member from its checkpoint."""
    exe = str(Path(sys.executable).with_name("train_agent"))
    args = [exe, *TINY, "--opt", "vadam,adam-plain", "--seeds", "4", "--workers", "2",
            "--steps", "100000", "--eval-every", "50000"]  # fmt: skip
    grid = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=default_sigint,
    )  # fmt: skip
    env_dir = tmp_path / "out" / "Pendulum-v1"
    wait_for(lambda: list(env_dir.glob("*/seed*/events.out.tfevents.*")), 8, grid)
    time.sleep(2)  # training
    interrupted = time.monotonic()
    os.killpg(grid.pid, signal.SIGINT)
    _, stderr = grid.communicate(timeout=120)
    assert grid.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert time.monotonic() - interrupted < 15
    steps = {}
    for run_dir in sorted(env_dir.glob("*/seed*")):
        state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
        steps[run_dir] = state["counters"]["num_timesteps"]
    assert len(steps) == 8 and min(steps.values()) > 0, steps
    # A population's members stop together: one step for all of each strategy's.
    assert {steps[d] for d in steps if d.parent.name == "vadam"} == {
        steps[env_dir / "vadam" / "seed0"]
    }


def test_8_ctrl_c_stops_a_grid_and_sigterm_checkpoints(tmp_path):
    """Ctrl-C (SIGINT to the process group) on a grid with workers: the running runs stop
    with a checkpoint, the queued ones never start, exit 130 at once. SIGTERM on a single
    run: a checkpoint, exit 143. (The children get SIGINT's default action: a background
    job starts with it ignored.)"""
    exe = str(Path(sys.executable).with_name("train_agent"))
    args = [exe, *TINY, "--opt", "vadam,adam-plain", "--seeds", "4", "--workers", "2",
            "--steps", "100000", "--eval-every", "50000", "--no-population"]  # fmt: skip
    grid = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=default_sigint,
    )  # fmt: skip
    env_dir = tmp_path / "out" / "Pendulum-v1"
    wait_for(lambda: list(env_dir.glob("*/seed*/events.out.tfevents.*")), 2, grid)
    time.sleep(2)  # training
    interrupted = time.monotonic()
    os.killpg(grid.pid, signal.SIGINT)
    stdout, stderr = grid.communicate(timeout=120)
    took = time.monotonic() - interrupted
    assert grid.returncode == 130, stderr
    assert "Traceback" not in stderr and "queued runs not started" in stderr
    # A stop the user asked for: each running run says so, none failed; the same command
    # continues the grid.
    assert "FAILED" not in stdout
    assert stdout.count(": stopped (checkpoint written)") == 2, stdout
    assert stderr.strip().splitlines()[-1] == (
        "train_agent: stopped (interrupted): running runs checkpointed, queued runs not "
        f"started; to continue, run the same command: {shlex.join(['train_agent', *args[1:]])}"
    )
    started = sorted(env_dir.glob("*/seed*"))
    assert len(started) == 2, started  # 6 of 8 never started
    for run_dir in started:
        state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
        assert state["counters"]["num_timesteps"] > 0
    assert took < 15, took  # the workers' checkpoints and exit, not the queued runs

    single = subprocess.Popen([exe, *TINY, "--logdir", "term", "--steps", "100000",
                               "--eval-every", "50000"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    run_dir = tmp_path / "term" / "Pendulum-v1" / "vadam" / "seed0"
    wait_for(lambda: list(run_dir.glob("events.out.tfevents.*")), 1, single)
    time.sleep(2)
    single.send_signal(signal.SIGTERM)
    _, stderr = single.communicate(timeout=120)
    assert single.returncode == 143, stderr
    assert "stopped (terminated), checkpoint written; to continue: train_agent " in stderr
    assert stderr.rstrip().endswith(" --resume")
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] > 0


# --------------------------------------------------------------------------- 9 time limit
def test_9_an_env_without_a_time_limit_needs_one(tmp_path, broken_envs, train_agent):
    env_id = f"{broken_envs}EndlessPendulum-v0"
    line = error_line(train_agent(*TINY, "--env", env_id, "--steps", "100", cwd=tmp_path))
    assert "has no time limit" in line and "--set max_episode_steps=N" in line, line
    result = train_agent(*TINY, "--env", env_id, "--steps", "100", "--eval-every", "100",
                         "--set", "max_episode_steps=50", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "step 100: eval return" in result.stdout  # the evaluation returned


# --------------------------------------------------------------------------- 10 memory
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("batch_size=100000000", "one update (batch_size=100000000) "),
        ("buffer_size=100000000000", "replay buffer (buffer_size=100000000000) "),
        ("batch_size=99999999999999999999", "batch_size is too large: 99999999999999999999"),
        ("buffer_size=10", "buffer_size (10) must exceed learning_starts (64)"),
    ],
)
def test_10_settings_that_cannot_fit_or_never_train_are_refused(
    tmp_path, train_agent, setting, message
):
    line = error_line(train_agent(*TINY, "--steps", "200", "--set", setting, cwd=tmp_path))
    assert message in line, line
    if "size=1000" in setting:  # the estimate, and what to lower
        assert "need at least" in line and "of memory" in line and "available on cpu" in line
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- 11 OS errors
@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nothing can be written to: a read-only tmpfs for root (whom permissions
    do not stop), else one without write permission."""
    path = tmp_path / "ro"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)],
                             capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip("root without the right to mount a read-only file system")
    yield path
    subprocess.run(["umount", str(path)], check=True)


@pytest.mark.parametrize("where", ["read-only", "a file", "the null device", "run dir a file"])
def test_11_an_unusable_logdir_gives_one_line(tmp_path, train_agent, where, request):
    logdir = {
        "read-only": lambda: str(request.getfixturevalue("read_only_dir")),
        "a file": lambda: str(tmp_path / "file"),
        "the null device": lambda: os.devnull,
        "run dir a file": lambda: "out",
    }[where]()
    (tmp_path / "file").write_text("x")
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    if where == "run dir a file":
        run_dir.parent.mkdir(parents=True)
        run_dir.write_text("x")
    expected = {
        "read-only": ("read-only file system", "permission denied"),
        "a file": ("not a directory",),
        "the null device": ("not a directory",),
        "run dir a file": ("is a file, not a run directory",),
    }[where]
    line = error_line(train_agent(*TINY, "--steps", "200", "--logdir", logdir, cwd=tmp_path))
    assert any(reason in line for reason in expected), line


# --------------------------------------------------------------------------- 12 full disk
def test_12_a_full_disk_says_so_and_keeps_the_last_checkpoint(tmp_path, finished_runs, train_agent):
    """The disk is full where the checkpoint is written: ``/dev/full``, which fails every
    write with ENOSPC, in place of the file the checkpoint is first written to."""
    line = None
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "tmp-latest.pt").symlink_to("/dev/full")
    line = error_line(train_agent(*TINY, "--steps", "200", cwd=tmp_path))
    assert "cannot write checkpoint" in line and "no space left on device" in line, line
    assert "nothing was trained" in line and not (run_dir / "config.yaml").exists()

    shutil.rmtree(tmp_path / "out")
    run_dir = copy_run(finished_runs, "vadam", tmp_path)  # a first checkpoint, then full
    (run_dir / "checkpoints" / "tmp-latest.pt").symlink_to("/dev/full")
    line = error_line(train_agent(*RESUME, cwd=tmp_path))
    assert "no space left on device; the checkpoint of step 200 there is intact" in line, line
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 200


# --------------------------------------------------------------------------- 13 one line
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "seed must be an integer in [0, 4294967295], got -1"),
        (["--seed", str(2**70)], f"seed is too large: {2**70}"),
        (["--env", "no_such_module:Env-v0"], "cannot import the module of environment"),
        (["--opt", "vadam,adam-plain", "--backend", "ray", "--address", "127.0.0.1:1"],
         "cannot reach the Ray cluster at 127.0.0.1:1"),
    ],
    ids=["seed -1", "seed 2**70", "env module", "ray address"],
)  # fmt: skip
def test_13_bad_seeds_modules_and_addresses_give_one_line(tmp_path, train_agent, args, message):
    if "ray" in args:
        pytest.importorskip("ray", reason="Ray is the optional 'ray' extra; CI installs it")
    line = error_line(train_agent(*TINY, "--steps", "200", *args, cwd=tmp_path))
    assert message in line, line


def test_13_an_env_failing_in_reset_or_step_gives_one_line(tmp_path, broken_envs, train_agent):
    env_id = f"{broken_envs}BrokenResetPendulum-v0"
    for _ in range(2):  # nothing half-written: the same command fails the same way again
        line = error_line(train_agent(*TINY, "--env", env_id, "--steps", "200", cwd=tmp_path))
        assert "raised RuntimeError: reset broke in reset" in line, line
        assert "nothing was trained" in line
        assert not (tmp_path / "out" / env_id / "vadam").exists()

    env_id = f"{broken_envs}BrokenStepPendulum-v0"
    line = error_line(train_agent(*TINY, "--env", env_id, "--steps", "400", "--eval-every",
                                  "200", cwd=tmp_path))  # fmt: skip
    assert "raised RuntimeError: step broke at step 300" in line, line
    assert "checkpoint of the last good state (step 299)" in line
    checkpoint = tmp_path / "out" / env_id / "vadam" / "seed0" / "checkpoints" / "latest.pt"
    assert torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"] == 299


# --------------------------------------------------------------------------- 14 damaged files
DAMAGED_TEXT = {
    "binary": lambda path: path.write_bytes(random.Random(1).randbytes(300)),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
}


@pytest.mark.parametrize("damage", list(DAMAGED_TEXT))
def test_14_damaged_run_files_give_one_line(tmp_path, finished_runs, train_agent, damage):
    """(Damaged checkpoints: test_damaged_or_foreign_checkpoint_gives_one_line_...)"""
    run_dir = copy_run(finished_runs, "vadam", tmp_path)
    eval_csv = run_dir / "eval.csv"
    DAMAGED_TEXT[damage](eval_csv)
    before = snapshot(run_dir)
    line = error_line(train_agent(*RESUME, cwd=tmp_path))
    assert f"cannot resume: {eval_csv.relative_to(tmp_path)} " in line, line
    reason = {"binary": "is damaged: it is not text", "truncated": "lacks evaluations"}[damage]
    assert reason in line
    assert "remove it to have it rebuilt from the TensorBoard events" in line
    assert snapshot(run_dir) == before

    config = tmp_path / "config.yaml"  # a --config file; the run's own is rebuilt
    config.write_bytes(random.Random(2).randbytes(300))
    line = error_line(train_agent(*RESUME, "--config", "config.yaml", cwd=tmp_path))
    assert "cannot parse config file config.yaml: it is not text" in line, line
    eval_csv.unlink()
    DAMAGED_TEXT[damage](run_dir / "config.yaml")
    resumed = train_agent(*RESUME, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    # Binary: it cannot be parsed; truncated: it parses to a cut value (which one depends
    # on the file's length), refused by the settings' own checks.
    assert "config.yaml was damaged (" in resumed.stdout


# --------------------------------------------------------------------------- bounded YAML
def laughs(levels: int, flow: bool = False) -> str:
    """A "billion laughs": ``levels`` anchors, each a list of nine aliases of the one
    before (9**levels strings in all), as a config file or a ``--set`` value (``flow``)."""
    anchors = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    anchors += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "{" + ", ".join(anchors) + "}" if flow else "env_kwargs:\n  " + "\n  ".join(anchors)


def test_a_billion_laughs_config_is_refused_at_once(tmp_path):
    """Nine levels of nine aliases: the run grew by ~70 MB/s without a word. A process with
    a time limit: what failed was that the call never returned."""
    (tmp_path / "laughs.yaml").write_text(laughs(9))
    result = train_agent_process(*TINY, "--steps", "200", "--config", "laughs.yaml",
                                 cwd=tmp_path, timeout=60)  # fmt: skip
    line = error_line(result)
    assert "cannot parse config file laughs.yaml: through its aliases it stands for more " \
           "than 100,000 values" in line, line  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (f"env_kwargs={laughs(6, flow=True)}", "stands for more than 100,000 values"),
        ("hidden_sizes=&a [32, *a]", "holds an alias of itself"),
        ("hidden_sizes=" + "[" * 5000 + "]" * 5000, "nested more than 64 levels deep"),
    ],
    ids=["aliases", "itself", "deep"],
)
def test_yaml_beyond_any_config_is_refused_in_one_line(tmp_path, train_agent, setting, message):
    """The same bounds for ``--set`` values and ``--config`` files, and for compare_runs'
    ``config.yaml`` (test_compare_faults); every shipped config is far inside them."""
    line = error_line(train_agent(*TINY, "--steps", "200", "--set", setting, cwd=tmp_path))
    assert message in line and f"--set {setting.partition('=')[0]}" in line, line
    (tmp_path / "config.yaml").write_text(setting.replace("=", ": ", 1))
    line = error_line(train_agent(*TINY, "--steps", "200", "--config", "config.yaml",
                                  cwd=tmp_path))  # fmt: skip
    assert message in line and "config file config.yaml" in line, line
    assert not (tmp_path / "out").exists()
    for preset in (Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"):
        text = preset.read_text()
        assert load_yaml_text(text, str(preset)) == yaml.safe_load(text)


# =========================================================================== new surfaces
# "The new surfaces as safe as the old": the curiosity bonus and TRPO refuse, stop and
# check as the DDPG agent does. Each test failed before the fix (a run trained nothing and
# exited 0, an allocator's traceback, a tampered state trusted and saved again).
VIME_RUN = ["--bonus", "vime", "--set", "bonus.fit_every=100", "--set", "bonus.min_pool_size=100",
            "--set", "bonus.updates_per_step=1"]  # fmt: skip
TRPO_RUN = ["--engine", "sb3", "--algo", "trpo", "--set", "trpo.n_steps=100",
            "--set", "hidden_sizes=[16,16]"]  # fmt: skip
BONUS_RUNS = {  # engine → its arguments and run directory's name (TRPO saves its pool always)
    "native": (
        ["--opt", "vadam", *SMALL_NET, "--set", "save_replay_buffer=true"],
        "vadam+vime-bbb",
    ),
    "trpo": (TRPO_RUN, "trpo+vime-bbb-sb3"),
}


def bonus_run(engine: str, *extra: str) -> list[str]:
    args, _ = BONUS_RUNS[engine]
    return ["--env", "Pendulum-v1", "--eval-episodes", "1", "--logdir", "out", "--no-progress",
            *args, *VIME_RUN, "--set", "checkpoint_every=100", *extra]  # fmt: skip


@pytest.mark.parametrize("engine", ["native", "trpo"])
def test_b1_a_bonus_that_cannot_be_finite_is_refused_and_one_that_overflows_stops(
    tmp_path, train_agent, engine
):
    """η = 1e300 made the float32 bonus inf: every update was skipped, exit 0. Such
    settings are refused; a finite η whose bonus still overflows (η · gain over a small
    mean of batch medians) stops the run as a non-finite reward does."""
    too_large = ["--set", "bonus.eta=1e300"]
    line = error_line(train_agent(*bonus_run(engine, "--steps", "300", "--eval-every", "300",
                                             *too_large), cwd=tmp_path))  # fmt: skip
    assert "bonus.eta × bonus.max_information_gain (1e+300 × 1000) must be at most 3.4e+38" in line
    assert not (tmp_path / "out").exists()

    # η · max_information_gain = 3e38 is a float32, but the gains are ~1e-3 and their
    # medians ~1e-4: the first scored batch overflows.
    overflow = ["--set", "bonus.eta=3e38", "--set", "bonus.max_information_gain=1"]
    line = error_line(train_agent(*bonus_run(engine, "--steps", "300", "--eval-every", "300",
                                             *overflow), cwd=tmp_path))  # fmt: skip
    assert "non-finite curiosity bonus (inf): η (3e+38) · information gain" in line, line
    assert "is beyond float32 (lower bonus.eta)" in line and "training stopped" in line
    run_dir = tmp_path / "out" / "Pendulum-v1" / BONUS_RUNS[engine][1] / "seed0"
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 100  # the last good state
    assert state["bonus"]["num_fits"] == 1
    if engine == "native":  # the model fitted at step 100, then the update scored a batch
        assert "in the update at step 100" in line
        assert "checkpoint of the last good state (step 100)" in line
    else:  # the rollout is scored at its end, before TRPO's update: a boundary's checkpoint
        assert "in the rollout of steps 101-200" in line
        assert "not checkpointed mid-rollout" in line and "holds step 100" in line


LAYERS = "[" + ",".join(["1"] * 50_000) + "]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bonus", "vime", "--set", "bonus.pool_size=1e15", "--set", "bonus.min_pool_size=1",
          "--set", "bonus.fit_every=100"],
         "VIME's transition pool (bonus.pool_size=1000000000000000) "),
        (["--bonus", "vime", "--set", "bonus.hidden_sizes=[1000000,1000000]",
          "--set", "bonus.fit_every=100", "--set", "bonus.min_pool_size=100"],
         "VIME's dynamics model and its bbb posterior (bonus.hidden_sizes=[1000000, 1000000]) "),
        ([*TRPO_RUN, "--set", "trpo.n_steps=1000000000000"],
         "rollout buffer and its copy for the update (trpo.n_steps=1000000000000) "),
        ([*TRPO_RUN, "--set", "hidden_sizes=[1000000,1000000]"],
         "networks (hidden_sizes=[1000000, 1000000]) "),
        # TRPO scores a whole rollout: bbb's noise per unit, K = 10⁵ per transition
        ([*TRPO_RUN, "--set", "trpo.n_steps=10000000", "--bonus", "vime",
          "--set", "bonus.num_samples=100000"],
         "VIME's information gain of 10000000 transitions "),
        (["--set", f"hidden_sizes={LAYERS}"], "hidden_sizes has 50000 hidden layers, more than"),
        (["--bonus", "vime", "--set", f"bonus.hidden_sizes={LAYERS}"],
         "bonus.hidden_sizes has 50000 hidden layers, more than the 100"),
    ],
    ids=["pool", "dynamics", "rollout", "trpo networks", "rollout gain", "layers",
         "bonus layers"],
)  # fmt: skip
def test_b2_what_the_bonus_and_trpo_allocate_is_checked_before_allocating(
    tmp_path, train_agent, args, message
):
    """Each ended in an allocator's traceback (or, 50 000 layers of one unit, ran for
    minutes per step); every allocation a setting controls is in the one estimate."""
    line = error_line(train_agent(*TINY, "--steps", "200", *args, cwd=tmp_path))
    assert message in line, line
    if "layers" not in message:
        assert "need at least" in line and "available on cpu" in line and "; lower " in line
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def finished_bonus_runs(tmp_path_factory) -> Path:
    """A finished 200-step VIME run of each engine that takes a bonus, its model fitted."""
    root = tmp_path_factory.mktemp("bonus-runs")
    for engine in BONUS_RUNS:
        args = ["--steps", "200", "--eval-every", "200", "--logdir", str(root / "out")]
        assert main(bonus_run(engine, *args)) == 0
    return root


TAMPER = {
    "NaN weights": (
        lambda bonus: bonus["dynamics"]["network"]["0.weight"].fill_(float("nan")),
        "bonus.dynamics.network.0.weight not finite",
    ),
    "moments a string": (
        lambda bonus: bonus.update(moments="hello"),
        "bonus.moments must be 4 float tensors of shapes",
    ),
    "fits negative": (
        lambda bonus: bonus.update(num_fits=-5),
        "bonus.num_fits must be an integer >= 0, at most the 200 steps saved, got -5",
    ),
    "steps since fit negative": (
        lambda bonus: bonus.update(steps_since_fit=-1e12),
        "bonus.steps_since_fit must be an integer >= 0, at most the 200 steps saved, "
        "got -1000000000000.0",
    ),
    "steps since fit in the future": (  # the next fit would take 10¹² updates
        lambda bonus: bonus.update(steps_since_fit=10**12),
        "bonus.steps_since_fit must be an integer >= 0, at most the 200 steps saved",
    ),
    "median NaN": (
        lambda bonus: bonus["medians"].append(float("nan")),
        "bonus.medians must be at most 10 numbers in [0, 1000]",
    ),
    "σ zero": (
        lambda bonus: bonus["dynamics"]["optimizer"]["state"][0]["rho"].fill_(-1e4),
        "the posterior's σ (bonus.dynamics.optimizer) is not positive and finite",
    ),
    "pool NaN": (
        lambda bonus: bonus["pool"]["obs"][7].fill_(float("nan")),
        "bonus.pool.obs not finite",
    ),
}


@pytest.mark.parametrize(
    ("engine", "case"),
    [*(("native", case) for case in TAMPER), ("trpo", "NaN weights"), ("trpo", "fits negative")],
)
def test_b3_a_tampered_bonus_state_is_refused(
    tmp_path, finished_bonus_runs, train_agent, engine, case
):
    """A finished run's bonus state was loaded as it came: NaN weights trained on and were
    saved again, a string for the moments was a traceback, negative counters meant the
    model never fitted again. Checked on load, one line naming the checkpoint."""
    name = BONUS_RUNS[engine][1]
    run_dir = tmp_path / "out" / "Pendulum-v1" / name / "seed0"
    shutil.copytree(finished_bonus_runs / "out" / "Pendulum-v1" / name / "seed0", run_dir)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    state = torch.load(checkpoint, weights_only=True)
    tamper, message = TAMPER[case]
    tamper(state["bonus"])
    torch.save(state, checkpoint)
    before = snapshot(run_dir)
    resume = bonus_run(engine, "--steps", "400", "--eval-every", "200", "--resume")
    line = error_line(train_agent(*resume, cwd=tmp_path))
    assert f"checkpoint {checkpoint.relative_to(tmp_path)} refused: its curiosity bonus" in line
    assert message in line, line
    assert snapshot(run_dir) == before


def test_b3_a_non_finite_bonus_state_is_never_saved(tmp_path):
    env = make_env("Pendulum-v1")
    settings = {"hidden_sizes": [8], "min_pool_size": 50, "fit_every": 50}
    bonus = make_vime_bonus(settings, env.observation_space, env.action_space, seed=0)
    agent = DDPG(env, hidden_sizes=[16, 16], seed=0, device="cpu", bonus=bonus)
    agent.learn(60)
    path = tmp_path / "latest.pt"
    agent.save(path)
    with torch.no_grad():
        bonus.dynamics.network[0].weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteDataError, match=r"bonus\.dynamics\.network\.0\.weight"):
        agent.save(path)
    saved = torch.load(path, weights_only=True)  # the last good state stays
    assert torch.isfinite(saved["bonus"]["dynamics"]["network"]["0.weight"]).all()


# =========================================================================== round 6
# Fault round 6 (issue 53): settings finite in float64 but not in float32, a posterior's own
# rule, device strings, runs that never train. Each was approved by ``--check`` and then
# failed with a traceback (or ran and trained nothing, exit 0) before the fix.
IVON_POSTERIOR = [*VIME_RUN, "--set", "bonus.posterior=ivon"]


def refused_alike(train_agent, tmp_path: Path, *args: str) -> str:
    """The one line ``--check`` and the run both give for ``args`` (the same line: one
    path), with nothing written."""
    command = [*TINY, "--steps", "300", "--eval-every", "300", *args]
    checked = error_line(train_agent(*command, "--check", cwd=tmp_path))
    assert error_line(train_agent(*command, cwd=tmp_path)) == checked
    assert not (tmp_path / "out").exists()
    return checked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--opt", "ivon", "--set", "optimizer_kwargs.hess_init=1e300"],
         "hess_init must be a finite number > 0 in [1.2e-38, 3.4e+38] (float32"),
        (["--opt", "vadam", "--set", "optimizer_kwargs.sample_constant=1e-300"],
         "sample_constant must be a finite number >= 0: 0 or in [1.2e-38, 3.4e+38]"),
        ([*IVON_POSTERIOR, "--set", "bonus.optimizer_kwargs.hess_init=1e300"],
         "bonus: hess_init must be a finite number > 0 in [1.2e-38, 3.4e+38]"),
        # h₀ = δ = 1/(N prior_std²) = 2e58: derived, named with what it derives from
        ([*IVON_POSTERIOR, "--set", "bonus.prior_std=1e-30"],
         "got 2e+58: the value IVON's posterior derives from bonus.prior_std = 1e-30 and N = 50"),
        ([*IVON_POSTERIOR, "--set", "bonus.lr=1e300"],
         "bonus.lr must be a finite number > 0 in [1.2e-38, 3.4e+38]"),
        (["--set", "critic_lr=1e300"],
         "critic_lr must be a finite number > 0 in [1.2e-38, 3.4e+38] (float32"),
    ],
    ids=["ivon hess_init", "vadam underflow", "posterior hess_init", "posterior prior_std",
         "posterior lr", "critic_lr"],
)  # fmt: skip
def test_r6_1_settings_beyond_float32_are_refused_in_one_line(tmp_path, train_agent, args, message):
    """``hess_init=1e300`` passed ``--check`` and ended in a 46-line overflow traceback
    after a step-0 checkpoint (the posterior's derived h₀ in 55 lines)."""
    assert message in refused_alike(train_agent, tmp_path, *args)


@pytest.mark.parametrize(
    ("posterior", "setting", "message"),
    [
        ("ivon", "weight_decay", "weight_decay must be > 0 for IVON's posterior (its prior is "
         "N(0, 1/(ess·weight_decay))"),
        ("noisy-adam", "kl_weight", "kl_weight must be > 0 for NoisyAdam's posterior (with "
         "kl_weight = 0 it optimises"),
        ("noisy-kfac", "kl_weight", "kl_weight must be > 0 for NoisyKFAC's posterior"),
    ],
)  # fmt: skip
def test_r6_2_a_posteriors_own_rule_is_checked_before_the_run(
    tmp_path, train_agent, posterior, setting, message
):
    """``weight_decay=0`` for IVON's posterior passed ``--check`` (only >= 0 was checked)
    and failed at the first fit in a 35-line traceback."""
    args = [*VIME_RUN, "--set", f"bonus.posterior={posterior}",
            "--set", f"bonus.optimizer_kwargs.{setting}=0"]  # fmt: skip
    if posterior == "noisy-adam":  # VO with kl_weight = 0 needs a precision of its own
        args += ["--set", "bonus.optimizer_kwargs.initial_precision=1"]
    line = refused_alike(train_agent, tmp_path, *args)
    assert f"bonus: {message}" in line, line


@pytest.mark.parametrize("device", ["cuda:x", "cuda:-1", "cuda:01", "gpu"])
def test_r6_4_a_device_torch_does_not_parse_is_one_line(tmp_path, train_agent, device):
    """``cuda:x`` passed the settings (any ``cuda:`` prefix did) and ended in torch's
    13-line ``Invalid device string``, with or without ``--check``."""
    line = refused_alike(train_agent, tmp_path, "--set", f"device={device}")
    assert f"device must be auto, cpu, cuda or cuda:N (N a GPU's index), got '{device}'" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_r6_4_a_device_this_machine_does_not_have_is_one_line(tmp_path, train_agent):
    line = refused_alike(train_agent, tmp_path, "--set", "device=cuda:1")
    assert "device cuda:1 was requested but no CUDA device is available" in line


@pytest.mark.parametrize("engine", ["native", "trpo"])
def test_r6_7_a_dynamics_model_that_diverges_in_its_fit_stops_the_run(
    tmp_path, train_agent, engine
):
    """VIME's IVON posterior with a step size beyond its range diverged at the first fit;
    training went on (every gain 0) to the last step, whose checkpoint alone said ``not
    saved … not finite``. The fit that diverges now stops the run, naming its step."""
    args = bonus_run(engine, "--steps", "300", "--eval-every", "300",
                     "--set", "bonus.posterior=ivon", "--set", "bonus.lr=3e38")  # fmt: skip
    line = error_line(train_agent(*args, cwd=tmp_path))
    assert "VIME's dynamics model diverged: bonus.dynamics." in line, line
    assert "not finite after 100 updates of its ivon posterior (lower bonus.lr)" in line
    where = "at step 100" if engine == "native" else "after the rollout of steps 1-100"
    assert f"in its fit {where}; training stopped" in line, line
    assert "stays" in line and "latest.pt holds step 0" in line
    run_dir = tmp_path / "out" / "Pendulum-v1" / BONUS_RUNS[engine][1].replace("bbb", "ivon")
    state = torch.load(run_dir / "seed0" / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 0
