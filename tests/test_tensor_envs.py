"""The envs as the engine sees them (``agents/common/tensor_envs.py``): a vector env of the
numpy contract through the host, MuJoCo Warp's on its device, both as SAME_STEP lays out a
step; and the engine on MuJoCo Warp's device path equal, bit for bit, to the same engine
through the host — the device path is the same computation with fewer crossings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.common.tensor_envs import HostEnvs, tensor_envs
from agents.common.vector_envs import make_vector_env
from agents.settings import DDPGSettings

from conftest import populations_both_ways


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
        assert host.all_finite is (t != 3)  # nothing to check row by row but at t = 3
        last = np.array(want_obs)
        for k in np.flatnonzero(infos.get("_final_obs", np.zeros(n, dtype=bool))):
            last[k] = infos["final_obs"][k]
            ends += 1
        np.testing.assert_array_equal(step.next_obs.numpy(), last)
    assert ends == 2 * n  # two time limits of every copy
    assert envs.crossings == 1 + 2 * steps


SMALL = {"hidden_sizes": [16, 16], "learning_starts": 40, "batch_size": 16, "compile": False}


@pytest.mark.slow
@pytest.mark.warp
@pytest.mark.parametrize("strategy", ["vadam", "ou-action"])
def test_a_population_on_mujoco_warp_steps_on_the_device_as_it_steps_through_the_host(
    warp_cpu, strategy
):
    """Three members on Warp's CPU backend: stepped on the device (``step_tensors``: the
    observations, rewards and flags never leave it; the host gets one packed copy a step)
    and through the host (the same env's numpy face: the actions out, the answer back)
    they make the same transitions, the same updates, the same weights and the same test
    episodes, bit for bit — with one crossing a step against two; ``ou-action``'s action
    noise on the device too (its processes' restarts counted)."""
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL})

    def cheetahs(n: int):
        return make_vector_env(
            "HalfCheetah-v4", n, max_episode_steps=30, backend="warp", device="cpu"
        )

    means, _ = populations_both_ways(cheetahs, "HalfCheetah-v4", 30, config, steps=70)
    assert len({mean for mean, _ in means}) == 3  # each member's own policy
