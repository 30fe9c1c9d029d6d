"""The sparse MuJoCo tasks for N copies in one MuJoCo batch: ``SparseHalfCheetah-v5``,
``SparseCartpoleSwingup-v0`` and ``SparseDoublePendulum-v0``.

Each copy computes what its single env computes (:mod:`.half_cheetah`,
:mod:`.cartpole_swingup`, :mod:`.double_pendulum`, whose constants these use): the reward,
the termination, the observation, success and coverage; the two models of rllab's Box2D
systems apply Box2D's rotation limit after every substep
(:meth:`.box2d.RotationLimit.limit_rows`), the half-cheetah computes its centre of mass at
the new state (rllab's forward pass after stepping).

Start states, one draw for the copies that start, as the single envs draw them per copy:
the half-cheetah's positions ``init_qpos + N(0, 0.01²)`` then velocities
``init_qvel + N(0, 0.1²)``; the cart-pole's (x, x', angle, angle') ~ U([−1, −2, π−1, −3],
[1, 2, π+1, 3]); the double pendulum's (a1, a2, w1, w2) ~ N(0, [0.1, 0.1, 0.01, 0.01]²).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from . import cartpole_swingup, double_pendulum, half_cheetah
from .batched import form_for
from .mujoco_batch import MujocoBatchEnv


class BatchedSparseHalfCheetah(MujocoBatchEnv):
    """Reward 1 while a copy's centre of mass is past x = 5."""

    coverage = half_cheetah.COVERAGE

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None):
        super().__init__(single_env, num_envs, max_episode_steps)
        self.subtree_com = self.batch.bind("subtree_com")
        self.torso = single_env.unwrapped._torso

    def _start(self, ids: np.ndarray) -> None:
        qpos = self.init_qpos + self.np_random.normal(0.0, 0.01, (len(ids), self.model.nq))
        qvel = self.init_qvel + self.np_random.normal(0.0, 0.1, (len(ids), self.model.nv))
        self.set_state(ids, qpos, qvel)

    def _observe(self) -> np.ndarray:
        com = self.subtree_com[:, self.torso]
        return np.concatenate([self.qpos[:, 1:], self.qvel, com], axis=1)

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        self.simulate(actions, stage=mujoco.mjtStage.mjSTAGE_POS)
        x = self.subtree_com[:, self.torso, 0].copy()
        goal = x > half_cheetah.GOAL_X
        entries = {"x_position": x, **self.report.record(goal, x=x)}
        return goal.astype(float), np.zeros(self.num_envs, dtype=bool), entries


class BatchedBox2DModelTask(MujocoBatchEnv):
    """A task on a MuJoCo model of an rllab Box2D system: its rotation limit after every
    substep, as :class:`.box2d.Box2DModelTask` applies it."""

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None):
        super().__init__(single_env, num_envs, max_episode_steps)
        self.substep = single_env.unwrapped.rotation_limit.limit_rows


class BatchedSparseCartpoleSwingup(BatchedBox2DModelTask):
    """Reward 1 while a copy's pole is near upright with its cart on the track."""

    coverage = cartpole_swingup.COVERAGE

    def _start(self, ids: np.ndarray) -> None:
        x, velocity, angle, angular_velocity = self.np_random.uniform(
            [-1.0, -2.0, np.pi - 1.0, -3.0], [1.0, 2.0, np.pi + 1.0, 3.0], (len(ids), 4)
        ).T
        self.set_state(ids, np.stack([x, angle], 1), np.stack([velocity, angular_velocity], 1))

    def _observe(self) -> np.ndarray:
        return np.stack([self.qpos[:, 0], self.qvel[:, 0], self.qpos[:, 1], self.qvel[:, 1]], 1)

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        self.simulate(actions)
        x, angle = self.qpos[:, 0], self.qpos[:, 1]
        terminated = np.abs(x) > cartpole_swingup.MAX_CART_POSITION
        height = np.cos(angle)
        upright = ~terminated & (height > cartpole_swingup.UPRIGHT_COS)
        entries = self.report.record(upright, pole_height=height, cart_distance=np.abs(x))
        return upright.astype(float), terminated, entries


class BatchedSparseDoublePendulum(BatchedBox2DModelTask):
    """Reward 1 while a copy's tip point is within 1 of the upright tip position."""

    coverage = double_pendulum.COVERAGE

    def _start(self, ids: np.ndarray) -> None:
        a1, a2, w1, w2 = self.np_random.normal(0.0, [0.1, 0.1, 0.01, 0.01], (len(ids), 4)).T
        self.set_state(ids, np.stack([a1, a2 - a1], 1), np.stack([w1, w2 - w1], 1))

    def _angles(self) -> tuple[np.ndarray, np.ndarray]:
        """Both links' absolute angles and angular velocities, (N, 2) each."""
        shoulder, elbow = self.qpos[:, 0], self.qpos[:, 1]
        shoulder_speed, elbow_speed = self.qvel[:, 0], self.qvel[:, 1]
        angles = np.stack([shoulder, shoulder + elbow], 1)
        return angles, np.stack([shoulder_speed, shoulder_speed + elbow_speed], 1)

    def _observe(self) -> np.ndarray:
        (a1, a2), (w1, w2) = (v.T for v in self._angles())
        return np.stack([np.sin(a1), np.cos(a1), w1, np.sin(a2), np.cos(a2), w2], 1)

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        self.simulate(actions)
        (a1, a2), _ = (v.T for v in self._angles())
        length = double_pendulum.LINK_LENGTH
        tip = np.stack(
            [length * np.sin(a1) - length * np.sin(a2), -length * np.cos(a1) - length * np.cos(a2)],
            1,
        )
        distance = np.linalg.norm(tip - double_pendulum.TARGET, axis=1)
        near = distance < double_pendulum.GOAL_RADIUS
        entries = self.report.record(near, tip_height=tip[:, 1], goal_distance=distance)
        return near.astype(float), np.zeros(self.num_envs, dtype=bool), entries


#: each sparse MuJoCo task's env class → its batched form
BATCHED_FORMS: dict[type, type] = {
    half_cheetah.SparseHalfCheetahEnv: BatchedSparseHalfCheetah,
    cartpole_swingup.SparseCartpoleSwingupEnv: BatchedSparseCartpoleSwingup,
    double_pendulum.SparseDoublePendulumEnv: BatchedSparseDoublePendulum,
}


def batched_sparse_mujoco(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None
) -> MujocoBatchEnv | None:
    """The batched form of a sparse MuJoCo task, or None for one it does not model (a
    render mode; a half-cheetah's ``frame_skip`` is read)."""
    form = form_for(single_env, BATCHED_FORMS)
    return None if form is None else form(single_env, num_envs, max_episode_steps)
