"""Vector envs keep one contract (agents/common/vector_envs.py), batched or looped.

The loop is checked against N single envs stepped and reset by hand as SAME_STEP
describes; each batched implementation against its single env step by step from the same
states (the single envs put into the batch's states, both stepped with the same random
actions), resets included (start states inside the single env's bounds, and equal to the
single env's when both draw from the same stream). Nothing here learns.
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
import pytest
import torch

import agents  # noqa: F401  (registers the tasks)
from agents.common import vector_envs
from agents.common.envs import coverage_statistics, make_env, with_action_range
from agents.common.errors import ConfigError
from agents.common.vector_envs import LoopVectorEnv, OneEnv, make_vector_env
from agents.tasks import with_task_report
from agents.tasks.warp_batch import WarpBatchEnv

from conftest import WARP_TOLERANCE


def assert_same_infos(
    got: dict[str, Any], expected: dict[str, Any], where: str, tol: float = 1e-12
) -> None:
    """The same keys, and equal arrays (object arrays element by element) to ``tol``,
    recursively."""
    assert sorted(got) == sorted(expected), where
    for key, value in expected.items():
        if isinstance(value, dict):
            assert_same_infos(got[key], value, f"{where}/{key}", tol)
        elif value.dtype == object:
            for a, b in zip(got[key], value, strict=True):
                assert (a is None) == (b is None), f"{where}/{key}"
                if b is not None:
                    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=where)
        else:
            assert got[key].dtype == value.dtype, f"{where}/{key}"
            np.testing.assert_allclose(got[key], value, rtol=tol, atol=tol, err_msg=where)


def same_step(envs: list[gym.Env], actions: np.ndarray, place=None) -> tuple:
    """What a SAME_STEP vector env of ``envs`` returns: each env stepped, a finished one
    reset at once (its last observation and info under final_obs/final_info), in gymnasium's
    info layout, built here by hand from gymnasium's own ``_add_info``. ``place(i)`` puts a
    reset env ``i`` into the state the batch started its row in, and returns its observation."""
    layout = gym.vector.VectorEnv()
    layout.num_envs = len(envs)
    rows, rewards, terminated, truncated, infos = [], [], [], [], {}
    for i, (env, action) in enumerate(zip(envs, actions, strict=True)):
        obs, reward, term, trunc, info = env.step(action)
        if term or trunc:
            infos = layout._add_info(infos, {"final_obs": obs, "final_info": info}, i)
            obs, info = env.reset()
            if place is not None:
                obs = place(i)
        infos = layout._add_info(infos, info, i)
        rows.append(obs)
        rewards.append(reward)
        terminated.append(term)
        truncated.append(trunc)
    return np.stack(rows), np.array(rewards), np.array(terminated), np.array(truncated), infos


def assert_same_step(got: tuple, want: tuple, where: str, rtol: float = 0.0) -> None:
    """Observations, rewards, terminations, truncations and infos of two vector steps equal
    (to ``rtol``), with the same dtypes and shapes."""
    for a, b in zip(got[:4], want[:4], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=where)
    assert_same_infos(got[4], want[4], where, max(rtol, 1e-12))


# ------------------------------------------------------------------------------ the loop
def test_the_loop_is_n_single_envs_reset_in_the_same_step():
    """Pendulum has no batched implementation: the loop's results are those of N single
    envs seeded as the vector env seeds them, stepped with the same actions, each reset in
    the step that ends its episode (20-step episodes: several resets)."""
    seeds, steps = [3, 5, 8], 65
    vector = make_vector_env("Pendulum-v1", 3, max_episode_steps=20)
    singles = [make_env("Pendulum-v1", max_episode_steps=20) for _ in seeds]
    assert isinstance(vector, LoopVectorEnv)
    assert vector.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP
    obs, _ = vector.reset(seed=seeds)
    expected = np.stack([env.reset(seed=s)[0] for env, s in zip(singles, seeds, strict=True)])
    np.testing.assert_array_equal(obs, expected)
    rng = np.random.default_rng(0)
    for t in range(steps):
        actions = rng.uniform(-2, 2, (3, 1)).astype(np.float32)
        assert_same_step(vector.step(actions), same_step(singles, actions), f"step {t}")


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "SparseMountainCar-v0"])
def test_one_env_is_a_vector_env_of_that_env_reset_in_the_same_step(env_id):
    """A single run's own env as a vector env of one: a single env's results, in gymnasium's
    SAME_STEP layout, through resets (20-step episodes), the observations of its space's
    dtype, and its coverage."""
    vector = OneEnv(with_task_report(make_env(env_id, max_episode_steps=20)))
    single = with_task_report(make_env(env_id, max_episode_steps=20))
    assert vector.num_envs == 1
    assert vector.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP
    obs, _ = vector.reset(seed=[4])
    np.testing.assert_array_equal(obs, single.reset(seed=4)[0][None])
    assert obs.dtype == single.observation_space.dtype
    rng = np.random.default_rng(0)
    low, high = single.action_space.low, single.action_space.high
    for t in range(65):
        actions = rng.uniform(low, high, (1, *low.shape)).astype(np.float32)
        assert_same_step(vector.step(actions), same_step([single], actions), f"step {t}")
    assert vector.pop_coverage() == [coverage_statistics(single)]
    with pytest.raises(ValueError, match="one seed"):
        vector.reset(seed=[1, 2])


def test_the_loop_takes_normalized_actions_and_wraps_its_copies(capsys, monkeypatch):
    """``normalize_actions`` maps [−1, 1] as the single env's wrapper does; ``wrap`` reaches
    every copy (the rllab car's coverage per copy); the fallback is said once."""
    monkeypatch.setattr(vector_envs, "_said", set())  # as in a fresh process
    vector = make_vector_env(
        "SparseMountainCarRllab-v0", 2, max_episode_steps=5, wrap=with_task_report
    )
    make_vector_env("SparseMountainCarRllab-v0", 2, max_episode_steps=5)
    said = capsys.readouterr().err
    assert said.count("SparseMountainCarRllab-v0: no batched implementation") == 1
    vector.reset(seed=0)
    vector.step(np.zeros((2, 1), dtype=np.float32))
    assert [sorted(c) for c in vector.pop_coverage()] == [["position_max", "position_min"]] * 2
    assert vector.pop_coverage() == [{}, {}]

    scaled = make_vector_env("Pendulum-v1", 2, normalize_actions=True)
    single = with_action_range(make_env("Pendulum-v1"), True)
    assert scaled.single_action_space == single.action_space
    scaled.reset(seed=[4, 9])
    single.reset(seed=9)
    action = np.array([[0.3], [-1.7]], dtype=np.float32)
    obs = scaled.step(action)[0]
    np.testing.assert_array_equal(obs[1], single.step(action[1])[0])


@pytest.mark.parametrize("num_envs", [0, -1, True, 2.0])
def test_a_bad_number_of_copies_is_one_config_error(num_envs):
    with pytest.raises(ConfigError, match="num_envs must be a positive integer"):
        make_vector_env("Pendulum-v1", num_envs)


def test_a_setting_a_batched_task_does_not_model_falls_back_to_the_loop():
    vector = make_vector_env("SparseMountainCar-v0", 2, {"render_mode": "rgb_array"})
    assert isinstance(vector, LoopVectorEnv)
    assert vector.envs[0].unwrapped.render_mode == "rgb_array"


def test_a_bad_env_is_make_envs_config_error():
    with pytest.raises(ConfigError, match="unknown environment"):
        make_vector_env("NoSuchEnv-v0", 2)
    with pytest.raises(ConfigError, match="refuses env_kwargs"):
        make_vector_env("SparseMountainCar-v0", 2, {"goal_velocity": "fast"})


# ------------------------------------------------------------------------ the mountain car
@pytest.mark.parametrize("env_id", ["SparseMountainCar-v0", "MountainCarContinuous-v0"])
def test_the_batched_car_is_the_single_car_to_the_bit(env_id):
    """From the batch's start states, stepped with the same actions, each copy gives its
    single env's observations, rewards, ends, success and coverage exactly: pumping actions
    (the goal reached, terminations), actions beyond ±1 (clipped), float64 actions (the
    single env then computes in float64), 130-step episodes (truncations)."""
    n, limit = 5, 130
    vector = make_vector_env(env_id, n, max_episode_steps=limit)
    assert type(vector).__name__ == "BatchedMountainCar"
    singles = [with_task_report(make_env(env_id, max_episode_steps=limit)) for _ in range(n)]

    def place(i: int) -> np.ndarray:
        car = singles[i].unwrapped
        car.state = np.array([vector.position[i], 0.0])  # as the single env's reset sets it
        return np.array(car.state, dtype=np.float32)

    obs, _ = vector.reset(seed=list(range(n)))
    for single in singles:
        single.reset(seed=0)
    np.testing.assert_array_equal(obs, np.stack([place(i) for i in range(n)]))
    rng = np.random.default_rng(1)
    ends = np.zeros(2, dtype=int)
    for t in range(400):
        pump = np.sign(vector.velocity + 1e-9)[:, None] * rng.uniform(0.7, 1.6, (n, 1))
        pump[3:] = rng.uniform(-1.6, 1.6, (n - 3, 1))  # these two rarely reach the goal
        actions = pump.astype(np.float32 if t % 7 else np.float64)
        got = vector.step(actions)
        assert_same_step(got, same_step(singles, actions, place), f"step {t}")
        ends += [got[2].sum(), got[3].sum()]
        if t % 50 == 49:
            assert vector.pop_coverage() == [coverage_statistics(single) for single in singles]
    assert ends.min() >= 3  # goals reached and time limits met, several times


def test_the_batched_cars_start_states_are_one_draw_from_the_single_cars_range():
    """A seeded reset draws every start position in one call of ``default_rng(seeds)``
    (the stream the single car draws its one position from, row after row), all in
    [−0.6, −0.4) at rest; autoresets draw the finished rows' from the same stream."""
    seeds = [11, 12, 13, 14]
    vector = make_vector_env("SparseMountainCar-v0", 4, max_episode_steps=3)
    vector.reset(seed=seeds)
    stream = np.random.default_rng(seeds)
    single = make_env("SparseMountainCar-v0").unwrapped
    for i in range(4):
        single.np_random = stream  # the single car's one uniform draw from the same stream
        single.reset()
        assert vector.position[i] == single.state[0] and vector.velocity[i] == 0.0
    for _ in range(3):
        vector.step(np.zeros((4, 1), dtype=np.float32))
    np.testing.assert_array_equal(vector.position, stream.uniform(-0.6, -0.4, 4))
    vector.reset(seed=seeds)
    first = vector.position.copy()
    vector.reset(seed=seeds)
    np.testing.assert_array_equal(vector.position, first)
    many = make_vector_env("SparseMountainCar-v0", 2000)
    obs, _ = many.reset(seed=0)
    assert obs.dtype == np.float32 and (obs[:, 1] == 0).all()
    assert -0.6 <= many.position.min() < -0.59 and -0.41 < many.position.max() < -0.4


def start_both(
    vector: gym.vector.VectorEnv, singles: list[gym.Env], place, rtol: float = 1e-12
) -> None:
    """Four copies started from seeds, each single env reset, then put at its copy's start
    state (``place(i)`` returns its observation there, which must be the copy's, to
    ``rtol``, relative and absolute)."""
    obs, _ = vector.reset(seed=[7, 8, 9, 10])
    for single in singles:
        single.reset(seed=0)
    np.testing.assert_allclose(obs, np.stack([place(i) for i in range(4)]), rtol=rtol, atol=rtol)


# --------------------------------------------------------------------------------- MuJoCo
MUJOCO = {  # id: (its batched class, episode limit for the test)
    "HalfCheetah-v4": ("BatchedLocomotion", 90),
    "Hopper-v4": ("BatchedLocomotion", 90),
    "Walker2d-v4": ("BatchedLocomotion", 90),
    "Ant-v4": ("BatchedAnt", 90),
    "SparseHalfCheetah-v5": ("BatchedSparseHalfCheetah", 90),
    "SparseCartpoleSwingup-v0": ("BatchedSparseCartpoleSwingup", 90),
    "SparseDoublePendulum-v0": ("BatchedSparseDoublePendulum", 90),
}


#: settings of the single envs the batched ones read instead of assuming the defaults
KWARGS = [
    ("HalfCheetah-v4", {"forward_reward_weight": 2.0, "ctrl_cost_weight": 0.3}),
    ("Hopper-v4", {"terminate_when_unhealthy": False, "healthy_reward": 0.5}),
    ("Walker2d-v4", {"exclude_current_positions_from_observation": False}),
    ("SparseHalfCheetah-v5", {"frame_skip": 3}),
    (
        "Ant-v4",
        {"healthy_z_range": (0.3, 0.8), "exclude_current_positions_from_observation": False},
    ),
]


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"), [(env_id, {}) for env_id in sorted(MUJOCO)] + KWARGS
)
def test_a_batched_mujoco_task_is_its_gymnasium_env_step_by_step(env_id, env_kwargs):
    """Each copy, from the batch's start state copied into its gymnasium env (qpos, qvel),
    stepped with the same random actions (a fifth beyond the bounds: MuJoCo clamps the
    control, the cost takes the action), gives its env's observations, rewards,
    terminations, truncations, infos (success included) and coverage, to float rounding (one
    copy holds the largest action: the double pendulum's rotation limit binds);
    300 steps of 90-step episodes (and the hopper's and walker's falls); with the
    defaults and with other settings of the env."""
    name, limit = MUJOCO[env_id]
    n = 4
    vector = make_vector_env(env_id, n, env_kwargs, max_episode_steps=limit)
    assert type(vector).__name__ == name
    singles = [make_env(env_id, env_kwargs, max_episode_steps=limit) for _ in range(n)]

    def place(i: int) -> np.ndarray:
        env = singles[i].unwrapped
        env.set_state(vector.qpos[i].copy(), vector.qvel[i].copy())
        return env._get_obs()

    start_both(vector, singles, place, rtol=1e-6)  # a centre of mass: float32's
    rng = np.random.default_rng(2)
    high = vector.single_action_space.high
    ends = 0
    for t in range(300):
        actions = (rng.uniform(-1.2, 1.2, (n, *high.shape)) * high).astype(np.float32)
        actions[0] = high  # held: spins the double pendulum into Box2D's rotation limit
        got = vector.step(actions)
        assert_same_step(got, same_step(singles, actions, place), f"step {t}", rtol=1e-12)
        ends += (got[2] | got[3]).sum()
        if t % 100 == 99:
            expected = [coverage_statistics(single) for single in singles]
            got_coverage = vector.pop_coverage()
            assert [sorted(c) for c in got_coverage] == [sorted(c) for c in expected]
            for got_row, want_row in zip(got_coverage, expected, strict=True):
                assert got_row == pytest.approx(want_row, rel=1e-12), f"step {t}"
    assert ends >= 3 * n  # every copy was reset in the same step, at least three times


#: id: (qpos, qvel) half-widths of a uniform start, or None where a normal one draws it
STARTS = {
    "HalfCheetah-v4": (0.1, None),
    "Hopper-v4": (5e-3, 5e-3),
    "Walker2d-v4": (5e-3, 5e-3),
    "Ant-v4": (0.1, None),
    "SparseHalfCheetah-v5": (None, None),
    "SparseCartpoleSwingup-v0": (None, None),
    "SparseDoublePendulum-v0": (None, None),
}


@pytest.mark.parametrize("env_id", sorted(STARTS))
def test_a_batched_mujoco_task_starts_as_its_gymnasium_env(env_id):
    """One copy seeded ``[s]`` starts, and restarts after its episode, where the gymnasium
    env drawing from ``default_rng([s])`` does (the same draws injected); 500 copies start
    within the env's uniform ranges, every copy at its own state."""
    vector = make_vector_env(env_id, 1, max_episode_steps=2)
    single = make_env(env_id).unwrapped
    vector.reset(seed=[21])
    single.np_random = np.random.default_rng([21])
    for _ in range(3):
        single.reset()
        np.testing.assert_array_equal(vector.qpos[0], single.data.qpos)
        np.testing.assert_array_equal(vector.qvel[0], single.data.qvel)
        for _ in range(2):
            vector.step(np.zeros(vector.action_space.shape, dtype=np.float32))
    many = make_vector_env(env_id, 500)
    many.reset(seed=3)
    assert len(np.unique(many.qpos, axis=0)) == 500
    for state, init, width in zip(
        (many.qpos, many.qvel), (single.init_qpos, single.init_qvel), STARTS[env_id], strict=True
    ):
        if width is not None:
            assert np.abs(state - init).max() <= width
            assert np.abs(state - init).max() > 0.95 * width


def test_the_rotation_limit_on_many_rows_is_the_single_rows_correction():
    """Box2D's limit L on both links of the double pendulum's map (shoulder, shoulder +
    elbow), by hand: a shoulder at L + 1 with the elbow straight keeps the elbow straight
    at L; an elbow at L + 3 relative to a still shoulder is brought to L; a row under the
    limit is left as it is."""
    from agents.tasks.box2d import RotationLimit

    limit = RotationLimit(0.01, [[1.0, 0.0], [1.0, 1.0]])
    big = limit.limit
    qvel = np.array([[big + 1, 0.0], [0.0, big + 3], [1.0, 2.0]])
    expected = np.array([[big, 0.0], [0.0, big], [1.0, 2.0]])
    np.testing.assert_allclose(limit.limit_rows(qvel), expected, rtol=1e-14, atol=1e-12)


def test_a_batched_reset_seeds_as_the_loop_does_and_resets_the_masked_rows_only():
    """An int seed s is the list [s, s+1, …]; the same seeds give the same start states;
    ``reset_mask`` restarts the masked rows and leaves the others where they were; a
    task that reports no coverage reports {} per copy."""
    vector = make_vector_env("HalfCheetah-v4", 3)
    first, _ = vector.reset(seed=5)
    again, _ = vector.reset(seed=[5, 6, 7])
    np.testing.assert_array_equal(first, again)
    moved = vector.step(np.ones((3, 6), dtype=np.float32))[0]
    mask = np.array([False, True, False])
    obs, infos = vector.reset(options={"reset_mask": mask})
    assert infos == {}
    np.testing.assert_array_equal(obs[~mask], moved[~mask])
    assert not np.array_equal(obs[1], moved[1]) and not np.array_equal(obs[1], first[1])
    assert vector.pop_coverage() == [{}, {}, {}]


# ---------------------------------------------------------------------- the backend chosen
def test_the_backend_is_chosen_by_name_and_device(monkeypatch):
    """On a CPU, ``auto`` is the batch; ``loop`` and ``batch`` are what they say; an unknown
    backend, ``warp`` for an env without a Warp implementation, and ``warp`` without MuJoCo
    Warp installed (as in a plain install: the module absent) are one ConfigError line each,
    the last naming the extra."""
    assert type(make_vector_env("HalfCheetah-v4", 2)).__name__ == "BatchedLocomotion"
    assert type(make_vector_env("HalfCheetah-v4", 2, backend="batch")).__name__ == (
        "BatchedLocomotion"
    )
    assert isinstance(make_vector_env("HalfCheetah-v4", 2, backend="loop"), LoopVectorEnv)
    with pytest.raises(ConfigError, match="backend must be one of auto, warp, torch, batch, loop"):
        make_vector_env("HalfCheetah-v4", 2, backend="gpu")
    with pytest.raises(ConfigError, match="Pendulum-v1 has no MuJoCo Warp implementation"):
        make_vector_env("Pendulum-v1", 2, backend="warp")
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # what an import then finds: none
    needs = r"^the warp vector env backend needs MuJoCo Warp \(.*mujoco_warp missing\)"
    with pytest.raises(ConfigError, match=needs) as err:
        make_vector_env("HalfCheetah-v4", 2, backend="warp")
    assert str(err.value).endswith("pip install 'param-explore[gpu]'")
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------ MuJoCo Warp


@pytest.mark.slow
@pytest.mark.warp
@pytest.mark.parametrize(
    ("env_id", "env_kwargs"),
    [
        ("HalfCheetah-v4", {}),
        ("Hopper-v4", {}),
        *KWARGS[:2],
        ("SparseHalfCheetah-v5", {}),
        KWARGS[3],
        ("SparseCartpoleSwingup-v0", {}),
        ("SparseDoublePendulum-v0", {}),
    ],
)
def test_a_warp_task_is_its_gymnasium_env_step_by_step(env_id, env_kwargs, warp_cpu):
    """Each copy, with its gymnasium env put into the Warp env's state before every step
    (qpos, qvel and the solver's warm start, float32 values both sides can hold), stepped
    with the same random actions (a fifth beyond the bounds), gives its env's observations,
    rewards, terminations, truncations and infos, with the same dtypes, to
    ``WARP_TOLERANCE`` = 2.5e-3, relative and absolute; 60 steps of 20-step episodes (and
    the hopper's falls), with the defaults and other settings; the sparse tasks' success
    and coverage too, the Box2D models' rotation limit after every MuJoCo step, the
    half-cheetah's centre of mass at the new state (every tenth step the Box2D models' copies
    spin past the limit, so that it binds). A copy that starts again has the start
    ``mj_resetData`` gives: the solver's warm start and the time cleared.

    The tolerance: MuJoCo Warp computes in float32 where MuJoCo computes in float64, which
    its documentation ("Why are numerical results from MJWarp and MuJoCo different?") names
    as the reason its results differ, the constraint solver and collisions the most
    sensitive (it also raises the solver's tolerance to 1e-6 for float32); its own tests
    compare one ``mjw.step`` with one ``mj_step`` from the same state to 5e-4, relative and
    absolute (``mujoco_warp/_src/forward_test.py``: "mostly due to float precision"). One
    action of these tasks is frame_skip = 5 such steps: 5 × 5e-4. Rewards and x velocities
    are velocities (a displacement over dt), bound as MuJoCo Warp's tests bound qvel.
    Measured here on Warp's CPU backend: at most 4.2e-4 (HalfCheetah, in contact), 1.8e-6
    (Hopper); a wrong term (a sign, a cost, the hopper's velocity clip) is off by 1e-1 or
    more."""
    n, limit = 4, 20
    vector = make_vector_env(
        env_id, n, env_kwargs, max_episode_steps=limit, backend="warp", device=warp_cpu
    )
    assert isinstance(vector, WarpBatchEnv)
    singles = [make_env(env_id, env_kwargs, max_episode_steps=limit) for _ in range(n)]

    def place(i: int) -> np.ndarray:
        env = singles[i].unwrapped
        state = (vector.qpos[i], vector.qvel[i], vector.qacc_warmstart[i])
        qpos, qvel, warm = (np.array(x.numpy(), dtype=np.float64) for x in state)
        env.set_state(qpos, qvel)
        env.data.qacc_warmstart[:] = warm
        return env._get_obs()

    start_both(vector, singles, place, rtol=1e-6)  # a centre of mass: float32's
    rng = np.random.default_rng(2)
    high = vector.single_action_space.high
    ends = np.zeros(2, dtype=int)
    limit = getattr(singles[0].unwrapped, "rotation_limit", None)
    hinges = torch.as_tensor(singles[0].unwrapped.model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    for t in range(60):
        if limit is not None and t % 10 == 5:  # spins past Box2D's limit, which must bind
            spin = 3 * limit.limit * torch.randn_like(vector.qvel) * hinges
            vector.qvel.copy_(vector.qvel + spin)
        for i in range(n):
            place(i)
        actions = (rng.uniform(-1.2, 1.2, (n, *high.shape)) * high).astype(np.float32)
        got = vector.step(actions)
        want = same_step(singles, actions, place)
        assert_same_step(got, want, f"step {t}", rtol=WARP_TOLERANCE)
        done = got[2] | got[3]
        assert (vector.qacc_warmstart[done] == 0).all() and (vector.time[done] == 0).all()
        ends += [got[2].sum(), got[3].sum()]
    assert ends.sum() >= 2 * n and ends[1] >= 2  # copies started again, at their time limit
    if env_id == "Hopper-v4" and env_kwargs.get("terminate_when_unhealthy", True):
        assert ends[0] >= 2  # and when hoppers fell
    coverage = vector.pop_coverage()
    for row, single in zip(coverage, singles, strict=True):
        want = coverage_statistics(single)
        assert row.keys() == want.keys()
        for key, value in want.items():
            np.testing.assert_allclose(row[key], value, rtol=WARP_TOLERANCE, atol=WARP_TOLERANCE)


@pytest.mark.slow
@pytest.mark.warp
def test_a_warp_task_starts_and_steps_as_tensors_shared_with_warp(warp_cpu):
    """The same seeds give the same start states, other seeds others, every one within
    HalfCheetah's (qpos: init ± 0.1; qvel: init + 0.1·N(0, 1)); ``reset_mask`` restarts its
    rows only. The tensors are Warp's memory (no copy); ``step_tensors`` keeps everything on
    the device, and ``step`` returns its results, cast to the single env's dtypes."""
    import torch

    n = 200
    vector = make_vector_env("HalfCheetah-v4", n, backend="warp", device=warp_cpu)
    obs, _ = vector.reset(seed=3)
    assert obs.dtype == np.float64 and obs.shape == (n, 17)
    np.testing.assert_array_equal(vector.reset(seed=list(range(3, 3 + n)))[0], obs)
    assert not np.isclose(vector.reset(seed=4)[0], obs).any()
    qpos, qvel = vector.qpos.numpy(), vector.qvel.numpy()
    assert len(np.unique(qpos, axis=0)) == n
    assert np.abs(qpos).max() <= 0.1 and np.abs(qpos).max() > 0.099
    assert 0.095 < qvel.std() < 0.105 and abs(qvel.mean()) < 0.01
    assert vector.qpos.data_ptr() == vector.data.qpos.ptr
    assert vector.qvel.data_ptr() == vector.data.qvel.ptr

    state = [x.clone() for x in (vector.qpos, vector.qvel, vector.qacc_warmstart)]
    generator = vector.generator.get_state()
    actions = np.random.default_rng(0).uniform(-1, 1, (n, 6)).astype(np.float32)
    step = vector.step_tensors(torch.as_tensor(actions))
    assert all(x.device == vector.device for x in step[:5])
    assert step.obs.dtype == torch.float32 and step.terminated.dtype == torch.bool
    torch.testing.assert_close(step.obs, torch.cat([vector.qpos[:, 1:], vector.qvel], dim=1))
    for x, saved in zip((vector.qpos, vector.qvel, vector.qacc_warmstart), state, strict=True):
        x.copy_(saved)
    vector.generator.set_state(generator)
    vector._elapsed.zero_()
    obs, rewards, terminated, truncated, infos = vector.step(actions)
    np.testing.assert_array_equal(obs, step.obs.numpy())
    np.testing.assert_array_equal(rewards, step.rewards.numpy())
    assert rewards.dtype == np.float64 and not terminated.any() and not truncated.any()
    assert infos["reward_ctrl"].dtype == np.float32 and infos["x_position"].dtype == np.float64

    mask = np.zeros(n, dtype=bool)
    mask[[3, 50]] = True
    moved = vector.qpos.numpy().copy()
    vector.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(vector.qpos.numpy()[~mask], moved[~mask])
    assert not np.isclose(vector.qpos.numpy()[mask], moved[mask]).any()
    assert vector.pop_coverage() == [{}] * n
