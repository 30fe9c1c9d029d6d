"""The paths a run takes on a GPU, on each device (``--device cuda`` and the CPU): single runs
(the native DDPG eager and compiled, and the CLI), a MuJoCo task's vector env in MuJoCo Warp,
populations whose step stays on their device.

Every test is parametrized by device (``tests/conftest.py``'s ``DEVICES`` and
``warp_device``): its CPU case runs on every CI, the same code with the same checks, so that
the GPU's test code cannot rot between lent GPUs; its CUDA case skips without a CUDA device,
and ``benchmarks/gpu_check.sh`` runs the CUDA cases (and the population's in
``test_population.py``) on a machine that has one. A Warp path's CPU case is on Warp's CPU
backend (``slow`` and ``warp``: CI's Warp pass). A CUDA graph's test runs, on the CPU, the
kernels the graph would capture, against the same expected values. A test heavy on the CPU
runs a smaller size there. On the GPU the update's matrix products may use other kernels
than on the CPU, so a GPU run is compared with the CPU run of the same injected data to a
tolerance, never bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import DDPG
from agents.common.envs import make_env
from agents.common.vector_envs import make_vector_env
from agents.ddpg.replay_buffer import Batch

from conftest import DEVICES, WARP_TOLERANCE

#: test_compiled_update.py's sizes: on the CPU the compiled update is then the graph the
#: suite compiles there already, loaded from TorchInductor's cache (seconds, not a cold build)
SMALL = dict(hidden_sizes=[32, 24], learning_starts=64, batch_size=16)


def injected_batch(device: str, obs_dim: int, action_dim: int) -> Batch:
    rng = np.random.default_rng(0)
    arrays = (
        rng.normal(size=(16, obs_dim)),
        rng.uniform(-1, 1, size=(16, action_dim)),
        rng.normal(size=(16, 1)),
        rng.normal(size=(16, obs_dim)),
        np.zeros((16, 1)),
    )
    return Batch(*(torch.as_tensor(a, dtype=torch.float32, device=device) for a in arrays))


def on_the_host(device: str) -> bool:
    """Whether ``device`` is the CPU (where a test's heavy parts run smaller)."""
    return torch.device(device).type == "cpu"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("compile", [False, True])
def test_an_update_on_the_device_is_the_cpu_update(compile, device):
    """The same networks, batch and weight noise on the CPU (the eager update, the
    reference) and on ``device`` (eager or compiled) give the same update."""
    sides = [
        DDPG("Pendulum-v1", seed=0, device=side, strategy="vadam", compile=compiled, **SMALL)
        for side, compiled in (("cpu", False), (device, compile))
    ]
    for agent in sides:
        for p in agent.actor.parameters():
            agent.actor_optimizer.state[p]["noise"] = torch.ones_like(p)
        agent.update(injected_batch(agent.device, 3, 1))
    cpu, other = sides
    assert other.compiled == compile and other.critic.obs_layer.weight.device.type == device
    for p, q in zip(cpu.critic.parameters(), other.critic.parameters(), strict=True):
        torch.testing.assert_close(p, q.cpu(), rtol=1e-3, atol=1e-4)
    for p, q in zip(cpu.actor.parameters(), other.actor.parameters(), strict=True):
        torch.testing.assert_close(p, q.cpu(), rtol=1e-3, atol=1e-4)
    fresh = DDPG("Pendulum-v1", seed=0, device="cpu", strategy="vadam", **SMALL)
    assert not torch.equal(fresh.critic.obs_layer.weight, cpu.critic.obs_layer.weight)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("compile", [False, True])
def test_a_run_learns_on_its_device(compile, device):
    agent = DDPG("Pendulum-v1", seed=0, device=device, strategy="vadam", compile=compile, **SMALL)
    agent.learn(100)
    assert agent.num_updates > 0 and agent.compiled == compile
    assert all(p.device.type == device for p in agent.actor.parameters())
    assert agent.buffer.obs.device.type == device


#: How each kind of run on a device resumes: on a GPU its generators' states come back from a
#: checkpoint loaded onto the device and must go back to the CPU (the first GPU run found this).
RESUMED_RUNS = {
    "native": ([], "vadam"),
    "sb3": (["--engine", "sb3"], "vadam-sb3"),
    "vime": (["--bonus", "vime", "--set", "bonus.fit_every=100", "--set",
              "bonus.min_pool_size=100", "--set", "bonus.updates_per_step=1"], "vadam+vime-bbb"),
}  # fmt: skip


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", RESUMED_RUNS)
def test_train_agent_on_its_device_writes_and_resumes(tmp_path, train_agent, kind, device):
    extra, name = RESUMED_RUNS[kind]
    every = 100 if on_the_host(device) else 200  # on the CPU, half the steps
    if on_the_host(device):
        extra = [*extra, "--no-compile"]

    def run(steps: int, *more: str):
        return train_agent("--env", "Pendulum-v1", "--device", device, "--steps", str(steps),
                           "--eval-every", str(every), "--eval-episodes", "2",
                           "--set", "hidden_sizes=[16,16]", "--no-progress", *extra, *more,
                           cwd=tmp_path)  # fmt: skip

    first = run(2 * every)
    assert first.returncode == 0, first.stderr
    evaluations = tmp_path / "runs" / "Pendulum-v1" / name / "seed0" / "eval.csv"
    assert [row.split(",")[0] for row in evaluations.read_text().splitlines()[1:]] == [
        str(every), str(2 * every),
    ]  # fmt: skip
    again = run(4 * every, "--resume")
    assert again.returncode == 0, again.stderr
    steps = [row.split(",")[0] for row in evaluations.read_text().splitlines()[1:]]
    assert steps == [str(k * every) for k in range(1, 5)]


def warp_backend(device: str) -> str:
    """The backend that steps a MuJoCo task in MuJoCo Warp on ``device``: ``auto`` on a CUDA
    device (what a run gets there); asked for by name on the CPU (``auto`` is the host's
    batch there)."""
    return "warp" if on_the_host(device) else "auto"


def test_a_mujoco_task_steps_in_mujoco_warp_on_its_device(warp_device):
    """HalfCheetah in MuJoCo Warp (on a CUDA device, ``auto``'s): its tensors are Warp's
    memory on the device, ``step_tensors`` keeps every result there, and a copy equals its
    gymnasium env from the same state (qpos, qvel, warm start) to ``WARP_TOLERANCE``
    (``tests/test_vector_envs.py`` says why), through a time limit; ``step`` gives the
    contract's float64 arrays on the host."""
    device = warp_device
    n, limit = (8 if on_the_host(device) else 64), 10
    vector = make_vector_env(
        "HalfCheetah-v4", n, max_episode_steps=limit, backend=warp_backend(device), device=device
    )
    assert type(vector).__name__ == "WarpLocomotion" and vector.device.type == device
    assert vector.qpos.device.type == device and vector.qpos.data_ptr() == vector.data.qpos.ptr
    vector.reset(seed=0)
    singles = [make_env("HalfCheetah-v4").unwrapped for _ in range(4)]
    rng = np.random.default_rng(0)
    for t in range(2 * limit):
        state = (vector.qpos, vector.qvel, vector.qacc_warmstart)
        qpos, qvel, warm = (x.cpu().numpy().astype(np.float64) for x in state)
        actions = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
        step = vector.step_tensors(torch.as_tensor(actions, device=device))
        assert all(x.device.type == device for x in step[:5])
        assert bool(step.truncated.all()) == (t % limit == limit - 1)
        for i, env in enumerate(singles):
            env.set_state(qpos[i], qvel[i])
            env.data.qacc_warmstart[:] = warm[i]
            obs, reward, *_ = env.step(actions[i])
            got = step.final_obs[i].cpu().numpy()
            np.testing.assert_allclose(got, obs, rtol=WARP_TOLERANCE, atol=WARP_TOLERANCE)
            assert step.rewards[i].item() == pytest.approx(
                reward, rel=WARP_TOLERANCE, abs=WARP_TOLERANCE
            )
    obs, rewards, terminated, truncated, _ = vector.step(np.zeros((n, 6), dtype=np.float32))
    assert obs.dtype == rewards.dtype == np.float64 and obs.shape == (n, 17)
    assert not terminated.any() and not truncated.any()


def test_a_warp_env_step_replayed_as_a_graph_is_the_step_launched_kernel_by_kernel(warp_device):
    """The physics of a step captured as a CUDA graph (the default on a GPU) gives the state
    the same kernels launched one by one give, from the same state and actions, step after
    step (to float32 rounding: MuJoCo Warp's atomics make neither path bitwise repeatable).
    On the CPU (no graphs there) the default path launches the kernels the graph holds."""
    device = warp_device
    n, steps = (8, 10) if on_the_host(device) else (32, 30)
    graph, eager = (
        make_vector_env("HalfCheetah-v4", n, backend=warp_backend(device), device=device)
        for _ in range(2)
    )
    assert graph.use_graph == (not on_the_host(device))
    eager.use_graph = False
    graph.reset(seed=1)
    eager.reset(seed=1)
    torch.testing.assert_close(graph.qpos, eager.qpos, rtol=0, atol=0)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        actions = torch.as_tensor(rng.uniform(-1, 1, (n, 6)), dtype=torch.float32, device=device)
        got, want = graph.step_tensors(actions), eager.step_tensors(actions)
        for a, b in zip(got[:5], want[:5], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        for x in ("qpos", "qvel", "qacc_warmstart"):  # in step: the next one starts equal
            getattr(eager, x).copy_(getattr(graph, x))
    assert graph._graphs.keys() == ({"step"} if graph.use_graph else set()) and not eager._graphs


def test_a_population_on_mujoco_warp_keeps_its_step_on_its_device(warp_device):
    """Four HalfCheetah members step their envs in MuJoCo Warp on their device
    (``step_tensors``): the observations, the buffer, the statistics and the update stay on
    the device, the host gets one packed copy a step (the rewards and flags: its
    bookkeeping), and the members' test episodes run on Warp's envs on the device too."""
    from agents.common.callbacks import Callback
    from agents.common.tensor_envs import DeviceEnvs
    from agents.ddpg.engine import Engine
    from agents.ddpg.population import SharedTestEpisodes, build_members
    from agents.settings import DDPGSettings

    device, env, seeds = warp_device, "HalfCheetah-v4", [0, 1, 2, 3]
    steps, episode = (40, 20) if on_the_host(device) else (100, 50)  # the CPU's smaller
    config = DDPGSettings.from_values(
        {"strategy": "vadam", "normalize_observations": True, "compile": False, **SMALL,
         "learning_starts": steps // 2}
    )  # fmt: skip

    def cheetahs(n: int, **limit):
        return make_vector_env(env, n, backend=warp_backend(device), device=device, **limit)

    members = build_members([make_env(env) for _ in seeds], [config] * 4, seeds, device)
    population = Engine(members.agents, cheetahs(4), members.state)
    assert isinstance(population.envs, DeviceEnvs)
    population.learn(steps, [Callback() for _ in range(4)])
    assert population.crossings == steps
    assert population.buffer.storage["obs"].device.type == device
    assert population.state.obs_statistics.sum.device.type == device
    assert all(m.num_updates > 0 for m in population.members)

    tests = SharedTestEpisodes(
        population, lambda n: cheetahs(n, max_episode_steps=episode), episodes=2
    )
    runs = [tests.of(member, seed=10) for member in population.members]
    mean, _ = runs[0](population.members[0], 10, [])
    assert np.isfinite(mean) and isinstance(tests._envs, DeviceEnvs)


@pytest.mark.parametrize("device", DEVICES)
def test_a_sparse_population_keeps_its_step_on_its_device(device):
    """Three members of the sparse study's car step the car as torch code on their device
    (``auto`` on a GPU; asked for on the CPU), its actions normalised on the device: one
    packed copy a step, the buffer and the statistics on the device, the test episodes'
    success reported from the device envs."""
    from agents.common.callbacks import Callback
    from agents.common.tensor_envs import DeviceEnvs
    from agents.ddpg.engine import Engine
    from agents.ddpg.population import SharedTestEpisodes, build_members
    from agents.settings import DDPGSettings
    from agents.tasks.torch_mountain_car import TorchMountainCar

    config = DDPGSettings.from_values(
        {"strategy": "vadam", "normalize_observations": True, "compile": False, **SMALL}
    )
    env, backend = "SparseMountainCar-v0", "torch" if on_the_host(device) else "auto"
    envs = make_vector_env(
        env, 3, max_episode_steps=80, normalize_actions=True, backend=backend, device=device
    )
    assert isinstance(envs.unwrapped, TorchMountainCar)
    members = build_members(
        [make_env(env, max_episode_steps=80) for _ in range(3)], [config] * 3, [0, 1, 2], device
    )
    population = Engine(members.agents, envs, members.state)
    assert isinstance(population.envs, DeviceEnvs)
    population.learn(200, [Callback() for _ in range(3)])
    assert population.crossings == 200
    assert population.buffer.storage["obs"].device.type == device
    assert all(m.num_updates > 0 and m.num_episodes == 2 for m in population.members)
    tests = SharedTestEpisodes(
        population,
        lambda n: make_vector_env(env, n, max_episode_steps=80, backend=backend, device=device),
        episodes=2,
    )
    finals: list = []
    mean, _ = tests.of(population.members[0], seed=10)(population.members[0], 10, finals)
    assert [set(final) for final in finals] == [{"is_success"}] * 2
    assert mean == np.mean([final["is_success"] for final in finals])  # 1 at the goal
    assert isinstance(tests._envs, DeviceEnvs)


@pytest.mark.parametrize("env_id", ["SparseCartpoleSwingup-v0", "SparseHalfCheetah-v5"])
def test_a_sparse_mujoco_task_replayed_as_graphs_is_its_kernels(env_id, warp_device):
    """A Box2D model's step — one graph a MuJoCo step, its rotation limit (torch) between —
    and the sparse half-cheetah's — the step's graph, then its positions' stage — replayed
    as CUDA graphs give what their kernels launched one by one give (to float32 rounding).
    On the CPU (no graphs there) the default path launches the kernels the graphs hold."""
    device = warp_device
    n, steps = (4, 8) if on_the_host(device) else (16, 20)
    graph, eager = (
        make_vector_env(env_id, n, backend=warp_backend(device), device=device) for _ in range(2)
    )
    assert graph.use_graph == (not on_the_host(device))
    eager.use_graph = False
    graph.reset(seed=1)
    eager.reset(seed=1)
    width = graph.single_action_space.shape[0]
    rng = np.random.default_rng(1)
    for _ in range(steps):
        actions = torch.as_tensor(rng.uniform(-1, 1, (n, width)), dtype=torch.float32,
                                  device=device)  # fmt: skip
        got, want = graph.step_tensors(actions), eager.step_tensors(actions)
        for a, b in zip(got[:5], want[:5], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        for x in ("qpos", "qvel", "qacc_warmstart"):
            getattr(eager, x).copy_(getattr(graph, x))
    assert bool(graph._graphs) == graph.use_graph and not eager._graphs
