"""Running ``train_agent`` in tests: as a process, or its ``main()`` in this process.

A process is what a user runs; the tests that need one (kill -9, Ctrl-C, a terminal, the
console script's exit code and its one error line) start it. Every other CLI test calls
the same ``main()`` the console script calls, in this process: it skips a 3-4 s
interpreter start with torch's import per call, and an uncaught exception fails the test
as loudly as a traceback would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# One thread per test process, and per process a test starts: pytest-xdist runs one test
# process per core (pyproject.toml), and the tests' networks are small. Measured on 2 cores
# (86 tests of test_sb3_policy, test_agent, test_baselines, machine otherwise idle): 72.5 s
# serial with torch's 2 threads, 58.6 s with 1, 33.4 s on two processes of one thread each.
# It also makes a test's numbers the same on machines with other core counts.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# No test reaches a network: Weights & Biases (``--track``, the documented W&B snippets, and
# the processes the tests start, which inherit this) runs offline, with no account.
os.environ["WANDB_MODE"] = "offline"

import pytest
import torch

from agents.cli import main

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def train_agent_process(
    *args: str, cwd: Path, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it (``env`` adds to the environment)."""
    exe = Path(sys.executable).with_name("train_agent")
    return subprocess.run(
        [str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {}), **_pythonpath(env)},
    )  # fmt: skip


def train_agent_on_terminal(
    *args: str, cwd: Path, streams: tuple[str, ...] = ("stderr",), timeout: float = 300
) -> tuple[int, str, str, str]:
    """The console script with ``streams`` (of stdout, stderr) on one pseudo-terminal 200
    columns wide, the others piped: (exit code, what the terminal showed, piped stdout,
    piped stderr)."""
    import fcntl
    import pty
    import struct
    import termios

    primary, secondary = pty.openpty()
    # A fresh pseudo-terminal reports 0 columns.
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    pipes = {name: secondary if name in streams else subprocess.PIPE
             for name in ("stdout", "stderr")}  # fmt: skip
    exe = Path(sys.executable).with_name("train_agent")
    proc = subprocess.Popen([str(exe), *args], cwd=cwd, text=True, **pipes)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    stdout, stderr = proc.communicate(timeout=timeout)
    os.close(primary)
    return proc.returncode, shown.decode(errors="replace"), stdout or "", stderr or ""


def _pythonpath(env: dict | None) -> dict:
    """``env``'s PYTHONPATH before this process's own (a worktree's code stays importable)."""
    paths = [(env or {}).get("PYTHONPATH"), os.environ.get("PYTHONPATH")]
    joined = os.pathsep.join(p for p in paths if p)
    return {"PYTHONPATH": joined} if joined else {}


@dataclass
class Result:
    """What a call of ``train_agent`` left: exit code and its two output streams."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def train_agent(capsys, monkeypatch) -> Callable[..., Result]:
    """``train_agent ARGS`` in directory ``cwd``, run by ``agents.cli.main`` in this process."""

    def run(*args: str, cwd: Path) -> Result:
        monkeypatch.chdir(cwd)
        capsys.readouterr()  # only this call's output
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's exit (errors: 2)
            code = exit_.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


#: How far a MuJoCo Warp env's step may be from its gymnasium env's from the same state,
#: relative and absolute (float32 physics): test_vector_envs.py's
#: test_a_warp_task_is_its_gymnasium_env_step_by_step says why.
WARP_TOLERANCE = 5 * 5e-4


def error_line(result: Result | subprocess.CompletedProcess) -> str:
    """The one ``train_agent: error:`` line of a failed call (and no traceback)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("train_agent:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


#: The CUDA case of a test parametrized by device (``DEVICES``, ``warp_device``): it skips
#: without a CUDA device, and its ``cuda`` mark is what ``benchmarks/gpu_check.sh`` selects.
#: Its CPU case runs the same code on every CI, so that the GPU's test code cannot rot
#: between lent GPUs.
CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)
DEVICES = ["cpu", CUDA]


def require_mujoco_warp() -> None:
    """Skips a test of MuJoCo Warp's envs where the ``gpu`` extra is not installed."""
    pytest.importorskip(
        "mujoco_warp", reason="MuJoCo Warp is the optional extra: pip install 'param-explore[gpu]'"
    )


@pytest.fixture(scope="session")
def warp_cpu() -> str:
    """Warp's CPU backend, with every Warp task's kernels compiled: once per session, and
    once per kernel cache (``WARP_CACHE_PATH``) — minutes when it is cold."""
    import numpy as np

    from agents.common import vector_envs

    require_mujoco_warp()
    for env_id in sorted(vector_envs.WARP):
        vector = vector_envs.make_vector_env(env_id, 1, backend="warp", device="cpu")
        vector.reset(seed=0)
        vector.step(np.zeros(vector.action_space.shape, dtype=np.float32))
    return "cpu"


@pytest.fixture(params=[pytest.param("cpu", marks=[pytest.mark.slow, pytest.mark.warp]), CUDA])
def warp_device(request: pytest.FixtureRequest) -> str:
    """The device of a test of MuJoCo Warp's envs: Warp's CPU backend (``warp_cpu``; the
    case is ``slow`` and ``warp``: CI's Warp pass runs it) or a CUDA device."""
    if request.param == "cpu":
        return request.getfixturevalue("warp_cpu")
    require_mujoco_warp()
    return "cuda"


class NumpyFace:
    """A device env (:mod:`agents.tasks.device_vector_env`) seen only through its numpy
    contract: no ``step_tensors``, so the engine steps it through the host."""

    def __new__(cls, envs):
        import gymnasium as gym

        return gym.vector.VectorWrapper(envs)


def populations_both_ways(make_envs: Callable, env_id: str, limit: int, config, steps: int):
    """Two populations of the same three members on the device env ``make_envs(n)`` (a time
    limit of ``limit``): one stepping it on its device, one through its numpy face; both
    trained ``steps`` steps and checked equal bit for bit — counts, weights, the buffer —
    with one crossing a step against two (and, for the Ornstein-Uhlenbeck noise's state,
    one more at each step where episodes start: which rows restart). Returns each way's
    test episodes: every member's (mean, std) and final infos (two episodes each)."""
    from agents.common.action_noise import OrnsteinUhlenbeckActionNoise
    from agents.common.callbacks import Callback
    from agents.common.envs import make_env
    from agents.common.tensor_envs import DeviceEnvs, HostEnvs
    from agents.ddpg.engine import Engine
    from agents.ddpg.population import SharedTestEpisodes, build_members

    seeds = [3, 5, 7]
    ways = ((lambda envs: envs, DeviceEnvs), (NumpyFace, HostEnvs))
    engines = []
    for face, _ in ways:
        members = build_members(
            [make_env(env_id, max_episode_steps=limit) for _ in seeds], [config] * 3, seeds, "cpu"
        )
        engines.append(Engine(members.agents, face(make_envs(3)), members.state))
    device, host = engines
    assert isinstance(device.envs, DeviceEnvs) and isinstance(host.envs, HostEnvs)
    for engine in engines:
        engine.learn(steps, [Callback() for _ in seeds])
    for mine, theirs in zip(device.members, host.members, strict=True):
        assert mine.num_updates == theirs.num_updates > 0
        assert mine.num_episodes == theirs.num_episodes == steps // limit
        for p, q in zip(mine.actor.parameters(), theirs.actor.parameters(), strict=True):
            assert torch.equal(p, q)
        for p, q in zip(mine.critic.parameters(), theirs.critic.parameters(), strict=True):
            assert torch.equal(p, q)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated"):
        assert torch.equal(device.buffer.storage[name], host.buffer.storage[name])
    stateful = config.strategy.noise is OrnsteinUhlenbeckActionNoise
    restarts = -(-steps // limit) if stateful else 0  # the steps where episodes start
    assert device.crossings == steps + restarts
    assert host.crossings == 1 + 2 * steps + restarts

    results = []
    for engine, (face, kind) in zip(engines, ways, strict=True):
        tests = SharedTestEpisodes(engine, lambda n, face=face: face(make_envs(n)), episodes=2)
        finals: list[list] = [[] for _ in engine.members]
        runs = [tests.of(member, seed=100) for member in engine.members]
        means = [run(m, 100, f) for run, m, f in zip(runs, engine.members, finals, strict=True)]
        results.append((means, finals))
        assert isinstance(tests._envs, kind)
    assert results[0] == results[1]
    return results[0]


def python_calls(work: Callable[[], object]) -> int:
    """The Python function calls ``work()`` makes (``sys.setprofile``'s ``call`` events,
    builtins not counted): host work measured exactly, the same on any machine."""
    calls = 0

    def count(frame, event, arg) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls
