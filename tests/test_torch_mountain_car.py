"""The mountain car as torch code on a device (``agents/tasks/torch_mountain_car.py``): its step
against the numpy car's (which equals gymnasium's single env bit for bit, tests/
test_vector_envs.py), the vector contract of both its faces, and a population stepping it on
its device exactly as it steps it through the host."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.common.envs import from_unit_range
from agents.common.errors import ConfigError
from agents.common.tensor_envs import DeviceEnvs, HostEnvs, tensor_envs
from agents.common.vector_envs import NormalizedDeviceActions, make_vector_env
from agents.settings import DDPGSettings
from agents.tasks.mountain_car_batch import BatchedMountainCar
from agents.tasks.torch_mountain_car import TorchMountainCar

from conftest import DEVICES, NumpyFace, populations_both_ways

CARS = ["SparseMountainCar-v0", "MountainCarContinuous-v0"]


def set_states(numpy_car: BatchedMountainCar, torch_car: TorchMountainCar, pos, vel) -> None:
    """Both cars in the same float32 states (a step's states: not a reset's float64)."""
    numpy_car.position[:], numpy_car.velocity[:] = pos, vel
    numpy_car.fresh[:] = False
    device = torch_car.device
    torch_car.position = torch.tensor(pos, device=device)
    torch_car.velocity = torch.tensor(vel, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", CARS)
def test_a_step_from_the_same_state_is_the_numpy_cars(env_id, device):
    """From the same float32 states and actions (inside and beyond ±1: a clipped force's
    change is float64 arithmetic), across the whole state space — the left wall, the speed
    limit, the goal's edge — the torch car's step gives the numpy car's observations,
    rewards, terminations and success. Equal to the bit here; allowed: a float32 ulp in a
    few numbers (the slope's float64 cosine, rounded, is another library's on another
    machine, or a GPU's), never a different termination or reward."""
    n, rng = 4096, np.random.default_rng(0)
    numpy_car = make_vector_env(env_id, n)
    torch_car = make_vector_env(env_id, n, backend="torch", device=device)
    assert isinstance(numpy_car, BatchedMountainCar) and isinstance(torch_car, TorchMountainCar)
    numpy_car.reset(seed=0)
    torch_car.reset(seed=0)
    numbers = differing = ends = 0
    for _ in range(20):
        pos = rng.uniform(-1.25, 0.65, n).astype(np.float32)
        vel = rng.uniform(-0.08, 0.08, n).astype(np.float32)
        pos[:64] = np.float32(0.45) - rng.uniform(0, 0.002, 64).astype(np.float32)
        set_states(numpy_car, torch_car, pos, vel)
        actions = rng.uniform(-1.5, 1.5, (n, 1)).astype(np.float32)
        want_obs, want_rewards, want_terminated, _, want_infos = numpy_car.step(actions)
        obs, rewards, terminated, truncated, infos = torch_car.step(actions)
        np.testing.assert_array_equal(terminated, want_terminated)
        np.testing.assert_array_equal(rewards, want_rewards)
        assert not truncated.any()
        assert set(infos) == set(want_infos)
        np.testing.assert_array_equal(infos["is_success"], want_infos["is_success"])
        ended = want_terminated  # their next episodes start from different draws
        if ended.any():
            np.testing.assert_array_equal(
                infos["final_info"]["is_success"], want_infos["final_info"]["is_success"]
            )
            mine = np.stack([infos["final_obs"][k] for k in np.flatnonzero(ended)])
            theirs = np.stack([want_infos["final_obs"][k] for k in np.flatnonzero(ended)])
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1.2e-7)
        np.testing.assert_allclose(obs[~ended], want_obs[~ended], rtol=0, atol=1.2e-7)
        numbers += obs[~ended].size
        differing += int(np.count_nonzero(obs[~ended] != want_obs[~ended]))
        ends += int(ended.sum())
    assert ends > 100  # the goal reached, both ways
    assert differing <= numbers // 10_000


def test_the_torch_car_keeps_the_vector_contract():
    """Both faces of the torch car keep :mod:`agents.common.vector_envs`'s contract: the
    single env's dtypes, the time limit, SAME_STEP autoreset with the finished episode's last
    observation and success in ``final_info``, seeded resets that repeat, a masked reset of
    some rows only, each copy's coverage; the device face gives the numpy face's numbers."""
    n, limit = 3, 5
    cars = [make_vector_env(CARS[0], n, max_episode_steps=limit, backend="torch") for _ in "ab"]
    first = cars[0].reset(seed=[4, 5, 6])[0]
    assert first.dtype == np.float32 and first.shape == (n, 2)
    np.testing.assert_array_equal(cars[1].reset_tensors([4, 5, 6]).numpy(), first)
    assert ((first[:, 0] >= -0.6) & (first[:, 0] <= -0.4)).all() and not first[:, 1].any()
    assert len(set(first[:, 0])) == n  # each copy its own start
    for t in range(limit):
        actions = np.full((n, 1), 1.0, dtype=np.float32)
        obs, rewards, terminated, truncated, infos = cars[0].step(actions)
        step = cars[1].step_tensors(torch.tensor(actions))
        assert obs.dtype == np.float32 and rewards.dtype == np.float64
        np.testing.assert_array_equal(step.obs.numpy(), obs)
        np.testing.assert_array_equal(step.rewards.numpy(), rewards)
        assert not terminated.any()
        assert truncated.tolist() == [t == limit - 1] * n
    assert infos["_final_obs"].all() and infos["final_info"]["_is_success"].all()
    assert not infos["final_info"]["is_success"].any()
    np.testing.assert_array_equal(step.final_obs.numpy(), np.stack(infos["final_obs"]))
    assert not np.array_equal(np.stack(infos["final_obs"]), obs)  # the next episode's first
    coverage = cars[0].pop_coverage()
    assert [sorted(row) for row in coverage] == [["position_max", "position_min"]] * n
    assert cars[0].pop_coverage() == [{}] * n  # no step since
    again = cars[0].reset(seed=[4, 5, 6])[0]
    np.testing.assert_array_equal(again, first)
    moved = cars[0].step(np.ones((n, 1), np.float32))[0]
    partly = cars[0].reset(options={"reset_mask": np.array([False, True, False])})[0]
    np.testing.assert_array_equal(partly[[0, 2]], moved[[0, 2]])
    assert partly[1, 1] == 0.0 and partly[1, 0] != moved[1, 0]


def test_the_backends_choose_the_torch_car_where_it_is_asked_for():
    """``auto`` on a CPU keeps the numpy car (its single env's bit for bit); ``torch`` builds
    the torch car on the run's device; an id without one is one line."""
    assert isinstance(make_vector_env(CARS[0], 2, device="cpu"), BatchedMountainCar)
    car = make_vector_env(CARS[1], 2, backend="torch", device="cpu")
    assert isinstance(car, TorchMountainCar) and car.device == torch.device("cpu")
    assert isinstance(tensor_envs(car, "cpu"), DeviceEnvs)
    with pytest.raises(ConfigError, match="HalfCheetah-v4 has no torch implementation"):
        make_vector_env("HalfCheetah-v4", 2, backend="torch")


def test_an_ended_episodes_success_crosses_with_the_device_step():
    """Through :class:`DeviceEnvs` the host's view of a step carries each ended episode's
    success (the packed copy's one more column), laid out as through the host."""
    envs = [make_vector_env(CARS[0], 3, max_episode_steps=50, backend="torch") for _ in "ab"]
    seen = [DeviceEnvs(envs[0], torch.device("cpu")), HostEnvs(NumpyFace(envs[1]), "cpu")]
    for car, view in zip(envs, seen, strict=True):
        view.reset([1, 2, 3])
        car.position = torch.tensor([0.449, 0.2, 0.449])  # two copies at the goal's edge
        car.velocity = torch.tensor([0.05, 0.0, 0.05])
    answers = [view.step(torch.tensor([[1.0], [1.0], [-1.0]])) for view in seen]
    (device_step, device_host), (host_step, host_host) = answers
    assert device_host.terminated.tolist() == [True, False, True]
    for name in ("rewards", "terminated", "truncated", "finite"):
        np.testing.assert_array_equal(getattr(device_host, name), getattr(host_host, name))
    assert device_host.all_finite is host_host.all_finite is True
    mine, theirs = device_step.infos["final_info"], host_step.infos["final_info"]
    assert mine["is_success"].tolist() == theirs["is_success"].tolist() == [True, False, True]
    assert mine["_is_success"].tolist() == theirs["_is_success"].tolist()
    assert seen[0].crossings == 1 and seen[1].crossings == 3
    # a row's action not finite: said alike, the step's common answer no longer holds
    hosts = [view.step(torch.tensor([[1.0], [float("nan")], [1.0]]))[1] for view in seen]
    for host in hosts:
        assert host.finite_actions.tolist() == [True, False, True] and host.all_finite is False


SMALL = {"hidden_sizes": [16, 16], "learning_starts": 40, "batch_size": 16, "compile": False}


def test_normalized_actions_reach_a_device_env_as_through_numpy():
    """``normalize_actions`` on a device env maps the learner's [−1, 1] into the env's bounds
    on the device, to the bit as :func:`from_unit_range` maps them on the host (bounds
    other than the car's, given to its space here), clipped, in the space's dtype."""
    car = make_vector_env(CARS[0], 4, backend="torch")
    car.single_action_space = gym.spaces.Box(-2.0, 3.0, (1,), np.float32)
    wrapped = NormalizedDeviceActions(car)
    assert isinstance(tensor_envs(wrapped, "cpu"), DeviceEnvs)
    reached = []
    step_tensors = car.step_tensors
    car.step_tensors = lambda actions: step_tensors(reached.append(actions) or actions)
    actions = np.array([[-1.5], [-1.0], [0.3], [1.7]], np.float32)
    wrapped.reset_tensors(0)
    wrapped.step_tensors(torch.tensor(actions))
    assert reached[0].dtype == torch.float32
    np.testing.assert_array_equal(
        reached[0].numpy(), from_unit_range(actions, car.single_action_space)
    )
    assert reached[0][:, 0].tolist() == [-2.0, -2.0, pytest.approx(1.25), 3.0]
    made = make_vector_env(CARS[0], 2, normalize_actions=True, backend="torch")
    assert isinstance(made, NormalizedDeviceActions)
    assert not isinstance(make_vector_env(CARS[0], 2, normalize_actions=True),
                          NormalizedDeviceActions)  # fmt: skip


@pytest.mark.parametrize(("strategy", "normalize"), [("vadam", False), ("ou-action", True)])
def test_a_population_of_the_torch_car_steps_on_its_device_as_through_the_host(strategy, normalize):
    """Three members on the torch car: stepped on its device (one packed copy a step) and
    through the host (the same car's numpy face), the same transitions, updates, weights
    and test episodes, success included, bit for bit — with one crossing a step against two
    (``ou-action``'s noise on the device too); with the sparse study's ``normalize_actions``."""
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL})

    def cars(n: int):
        return make_vector_env(CARS[0], n, max_episode_steps=60, backend="torch",
                               normalize_actions=normalize)  # fmt: skip

    means, finals = populations_both_ways(cars, CARS[0], 60, config, steps=130)
    assert all(final == [{"is_success": False}] * 2 for final in finals)
    assert means == [(0.0, 0.0)] * 3  # no success yet: every return 0
