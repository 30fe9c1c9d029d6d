"""The envs as the engine sees them (``agents/common/tensor_envs.py``): a vector env of the
numpy contract through the host, MuJoCo Warp's on its device, both as SAME_STEP lays out a
step; and the engine on MuJoCo Warp's device path equal, bit for bit, to the same engine
through the host — the device path is the same computation with fewer crossings."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.common.callbacks import Callback
from agents.common.envs import make_env
from agents.common.tensor_envs import DeviceEnvs, HostEnvs, tensor_envs
from agents.common.vector_envs import make_vector_env
from agents.ddpg.engine import Engine
from agents.ddpg.population import SharedTestEpisodes, build_members
from agents.settings import DDPGSettings


@pytest.mark.parametrize("packed", [False, True])
def test_a_host_vector_env_is_stepped_as_tensors_with_its_answer_laid_out_as_same_step(packed):
    """Through the host the engine gets the vector env's own numbers (float64 exactly, an
    ended episode's last observation as s', the next episode's first to act on), on the
    engine's device, and the host's view of them; two crossings a step (the actions out,
    the answer back). A row whose action is not finite, or that is not stepping, steps with
    the space's rest action, and says which. ``packed`` is the answer's one copy to a GPU
    (every array in one float64 block, split there), taken here on the CPU."""
    n, limit = 3, 7
    mine = make_vector_env("HalfCheetah-v4", n, max_episode_steps=limit)
    theirs = make_vector_env("HalfCheetah-v4", n, max_episode_steps=limit)
    envs = tensor_envs(mine, "cpu")
    assert isinstance(envs, HostEnvs) and not envs._packed
    envs = HostEnvs(mine, torch.device("cpu"), packed=packed)
    obs = envs.reset([1, 2, 3])
    np.testing.assert_array_equal(obs.numpy(), theirs.reset(seed=[1, 2, 3])[0])
    rng = np.random.default_rng(0)
    ends, steps = 0, 2 * limit + 1
    for t in range(steps):
        actions = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
        given = torch.tensor(actions)
        stepping = None
        if t == 3:  # row 1 not finite, row 2 not stepping: both step with zeros
            given[1, 2] = float("nan")
            stepping = np.array([True, True, False])
            actions[1:] = 0.0
        step, host = envs.step(given, stepping)
        want_obs, rewards, terminated, truncated, infos = theirs.step(actions)
        assert step.obs.dtype == step.rewards.dtype == torch.float64
        assert step.terminated.dtype == torch.bool
        np.testing.assert_array_equal(step.obs.numpy(), want_obs)
        np.testing.assert_array_equal(step.rewards.numpy(), rewards)
        np.testing.assert_array_equal(host.rewards, rewards)
        np.testing.assert_array_equal(step.terminated.numpy(), terminated)
        np.testing.assert_array_equal(host.terminated, terminated)
        np.testing.assert_array_equal(host.truncated, truncated)
        assert host.finite.all()
        assert host.finite_actions.tolist() == [True, t != 3, True]
        last = np.array(want_obs)
        for k in np.flatnonzero(infos.get("_final_obs", np.zeros(n, dtype=bool))):
            last[k] = infos["final_obs"][k]
            ends += 1
        np.testing.assert_array_equal(step.next_obs.numpy(), last)
    assert ends == 2 * n  # two time limits of every copy
    assert envs.crossings == 1 + 2 * steps


SMALL = {"hidden_sizes": [16, 16], "learning_starts": 40, "batch_size": 16, "compile": False}
SEEDS = [3, 5, 7]


@pytest.fixture(scope="module")
def warp_envs(warp_cpu):
    """Two Warp HalfCheetah envs of three copies on Warp's CPU backend, a 30-step limit."""
    return [
        make_vector_env("HalfCheetah-v4", 3, max_episode_steps=30, backend="warp", device="cpu")
        for _ in range(2)
    ]


class NumpyFace(gym.vector.VectorWrapper):
    """The Warp env seen only through its numpy contract (no ``step_tensors``)."""


@pytest.mark.slow
@pytest.mark.warp
@pytest.mark.parametrize("strategy", ["vadam", "ou-action"])
def test_a_population_on_mujoco_warp_steps_on_the_device_as_it_steps_through_the_host(
    warp_envs, strategy
):
    """Three members on Warp's CPU backend: stepped on the device (``step_tensors``: the
    observations, rewards and flags never leave it; the host gets one packed copy a step)
    and through the host (the same env's numpy face: the actions out, the answer back)
    they make the same transitions, the same updates and the same weights, bit for bit —
    with one crossing a step against two. ``ou-action``'s action noise is its members'
    own processes on the host: two crossings more a step, counted."""
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL})
    engines = []
    for envs in (warp_envs[0], NumpyFace(warp_envs[1])):
        members = build_members(
            [make_env("HalfCheetah-v4", max_episode_steps=30) for _ in SEEDS],
            [config] * 3, SEEDS, "cpu",
        )  # fmt: skip
        engines.append(Engine(members.agents, envs, members.state))
    device, host = engines
    assert isinstance(device.envs, DeviceEnvs) and isinstance(host.envs, HostEnvs)
    steps = 70
    for engine in engines:
        engine.learn(steps, [Callback() for _ in SEEDS])
    for mine, theirs in zip(device.members, host.members, strict=True):
        assert mine.num_updates == theirs.num_updates > 0
        assert mine.num_episodes == theirs.num_episodes == 2
        for p, q in zip(mine.actor.parameters(), theirs.actor.parameters(), strict=True):
            assert torch.equal(p, q)
        for p, q in zip(mine.critic.parameters(), theirs.critic.parameters(), strict=True):
            assert torch.equal(p, q)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated"):
        assert torch.equal(device.buffer.storage[name], host.buffer.storage[name])
    noise = 2 if strategy == "ou-action" else 0
    assert device.crossings == steps * (1 + noise)
    assert host.crossings == 1 + steps * (2 + noise)

    # the members' test episodes (μ, two episodes each, a 30-step limit), both ways
    results = []
    for engine, face in ((device, lambda envs: envs), (host, NumpyFace)):
        tests = SharedTestEpisodes(
            engine,
            lambda n, face=face: face(make_vector_env(
                "HalfCheetah-v4", n, max_episode_steps=30, backend="warp", device="cpu"
            )),
            episodes=2,
        )  # fmt: skip
        runs = [tests.of(member, seed=100) for member in engine.members]
        results.append([run(member, 100, []) for run, member in zip(runs, engine.members)])
        assert isinstance(tests._envs, DeviceEnvs if engine is device else HostEnvs)
    assert results[0] == results[1]
    assert len({mean for mean, _ in results[0]}) == 3  # each member's own policy
