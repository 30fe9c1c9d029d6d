"""gymnasium's v4 locomotion tasks for N copies in one MuJoCo batch: ``HalfCheetah-v4``,
``Hopper-v4``, ``Walker2d-v4`` and ``Ant-v4``.

Each copy computes what ``gymnasium/envs/mujoco/<task>_v4.py`` computes, with the settings
of the single env it was made from (``forward_reward_weight``, ``ctrl_cost_weight``,
``healthy_reward``, the healthy ranges, ``terminate_when_unhealthy``, ``reset_noise_scale``,
``exclude_current_positions_from_observation``; ``frame_skip`` and the model from the env):
the forward reward is the root's x displacement over ``dt``, the control cost
``ctrl_cost_weight·Σ action²`` in the action's dtype (float32 for a float32 action, as the
single env's ``np.sum``), Hopper and Walker2d observe velocities clipped to ±10 and end when
unhealthy, and the info entries are the single env's, with its dtypes. The ant moves by its
torso's position as ``mj_step`` leaves it (computed before the last substep, which is what
the single env's ``get_body_com`` reads after stepping); its contact forces
(``use_contact_forces``) are not modelled, so such an env falls back to the loop.

Start states, one draw for the copies that start: positions ``init_qpos + U(−s, s)``, then
velocities ``init_qvel + s·N(0, 1)`` (HalfCheetah, Ant) or ``init_qvel + U(−s, s)`` (Hopper,
Walker2d), s the reset noise scale.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.ant_v4 import AntEnv
from gymnasium.envs.mujoco.half_cheetah_v4 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv
from gymnasium.envs.mujoco.walker2d_v4 import Walker2dEnv

from .mujoco_batch import MujocoBatchEnv


class BatchedLocomotion(MujocoBatchEnv):
    """N copies of a v4 planar runner: HalfCheetah (never ends), Hopper or Walker2d."""

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None):
        super().__init__(single_env, num_envs, max_episode_steps)
        env = single_env.unwrapped
        self.task = type(env)
        self.forward_weight = getattr(env, "_forward_reward_weight", 1.0)  # the ant's is 1
        self.ctrl_weight = env._ctrl_cost_weight
        self.noise = env._reset_noise_scale
        self.exclude_position = env._exclude_current_positions_from_observation
        if self.task is not HalfCheetahEnv:
            self.healthy_reward = env._healthy_reward
            self.terminate_when_unhealthy = env._terminate_when_unhealthy
            self.z_range = env._healthy_z_range
        if self.task in (HopperEnv, Walker2dEnv):
            self.angle_range = env._healthy_angle_range
            self.state_range = getattr(env, "_healthy_state_range", None)  # Hopper's

    def _start(self, ids: np.ndarray) -> None:
        shape = (len(ids),)
        qpos = self.init_qpos + self.np_random.uniform(
            -self.noise, self.noise, shape + self.init_qpos.shape
        )
        if self.task in (HalfCheetahEnv, AntEnv):
            qvel = self.init_qvel + self.noise * self.np_random.standard_normal(
                shape + self.init_qvel.shape
            )
        else:
            qvel = self.init_qvel + self.np_random.uniform(
                -self.noise, self.noise, shape + self.init_qvel.shape
            )
        self.set_state(ids, qpos, qvel)

    def _observe(self) -> np.ndarray:
        velocity = self.qvel if self.task is HalfCheetahEnv else np.clip(self.qvel, -10, 10)
        first = 1 if self.exclude_position else 0
        return np.concatenate([self.qpos[:, first:], velocity], axis=1)

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        x_before = self.qpos[:, 0].copy()
        self.simulate(actions)
        x_after = self.qpos[:, 0].copy()
        x_velocity = (x_after - x_before) / self.dt
        ctrl_cost = self.ctrl_weight * np.sum(np.square(actions), axis=1)
        forward_reward = self.forward_weight * x_velocity
        if self.task is HalfCheetahEnv:
            entries = {
                "x_position": x_after,
                "x_velocity": x_velocity,
                "reward_run": forward_reward,
                "reward_ctrl": -ctrl_cost,
            }
            return forward_reward - ctrl_cost, np.zeros(self.num_envs, dtype=bool), entries
        healthy = self._healthy()
        healthy_reward = (healthy | self.terminate_when_unhealthy) * float(self.healthy_reward)
        rewards = forward_reward + healthy_reward - ctrl_cost
        terminated = ~healthy if self.terminate_when_unhealthy else np.zeros_like(healthy)
        return rewards, terminated, {"x_position": x_after, "x_velocity": x_velocity}

    def _healthy(self) -> np.ndarray:
        """Hopper's and Walker2d's ``is_healthy``: z and angle (and Hopper's state) strictly
        inside their ranges."""
        z, angle = self.qpos[:, 1], self.qpos[:, 2]
        healthy = (self.z_range[0] < z) & (z < self.z_range[1])
        healthy &= (self.angle_range[0] < angle) & (angle < self.angle_range[1])
        if self.state_range is not None:
            state = np.concatenate([self.qpos, self.qvel], axis=1)[:, 2:]
            low, high = self.state_range
            healthy &= ((low < state) & (state < high)).all(axis=1)
        return healthy


class BatchedAnt(BatchedLocomotion):
    """N copies of ``Ant-v4`` without contact forces: moves in x and y, ends when unhealthy
    (a non-finite state, or the torso's height outside ``healthy_z_range``)."""

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None):
        super().__init__(single_env, num_envs, max_episode_steps)
        self.xpos = self.batch.bind("xpos")
        self.torso = self.model.body("torso").id

    def _observe(self) -> np.ndarray:
        first = 2 if self.exclude_position else 0
        return np.concatenate([self.qpos[:, first:], self.qvel], axis=1)

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        xy_before = self.xpos[:, self.torso, :2].copy()
        self.simulate(actions)
        xy_after = self.xpos[:, self.torso, :2].copy()
        x_velocity, y_velocity = ((xy_after - xy_before) / self.dt).T
        healthy = self._healthy()
        healthy_reward = (healthy | self.terminate_when_unhealthy) * float(self.healthy_reward)
        ctrl_cost = self.ctrl_weight * np.sum(np.square(actions), axis=1)
        terminated = ~healthy if self.terminate_when_unhealthy else np.zeros_like(healthy)
        entries = {
            "reward_forward": x_velocity,
            "reward_ctrl": -ctrl_cost,
            "reward_survive": healthy_reward,
            "x_position": xy_after[:, 0],
            "y_position": xy_after[:, 1],
            "distance_from_origin": np.linalg.norm(xy_after, ord=2, axis=1),
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "forward_reward": x_velocity,
        }
        return x_velocity + healthy_reward - ctrl_cost, terminated, entries

    def _healthy(self) -> np.ndarray:
        state = np.concatenate([self.qpos, self.qvel], axis=1)
        z = self.qpos[:, 2]
        return np.isfinite(state).all(axis=1) & (self.z_range[0] <= z) & (z <= self.z_range[1])


def batched_locomotion(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None
) -> BatchedLocomotion | None:
    """The batched task for a single v4 runner, or None for one it does not model (a
    render mode, or a subclass with its own rules)."""
    env = single_env.unwrapped
    if type(env) not in (HalfCheetahEnv, HopperEnv, Walker2dEnv, AntEnv):
        return None
    if env.render_mode is not None or getattr(env, "_use_contact_forces", False):
        return None
    batched = BatchedAnt if type(env) is AntEnv else BatchedLocomotion
    return batched(single_env, num_envs, max_episode_steps)
