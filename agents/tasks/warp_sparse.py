"""The sparse MuJoCo tasks for N copies in MuJoCo Warp: ``SparseHalfCheetah-v5``,
``SparseCartpoleSwingup-v0`` and ``SparseDoublePendulum-v0`` on a run's GPU (the simulator:
:class:`~.warp_batch.WarpBatchEnv`).

Each copy computes what its single env computes (:mod:`.half_cheetah`, :mod:`.cartpole_swingup`,
:mod:`.double_pendulum`, whose constants these use) and what :mod:`.sparse_mujoco_batch`'s copies
compute, as torch code on Warp's state, in float32 to MuJoCo Warp's tolerance
(:mod:`.warp_batch`): the reward, the termination, the observation, success and coverage; the
two models of rllab's Box2D systems apply Box2D's rotation limit after every MuJoCo step
(:meth:`.box2d.RotationLimit.tensor_rows`; on a CUDA device one graph a step, the limit between
them), the half-cheetah computes its centre of mass at the new state and at a start (rllab's
forward pass after stepping; its observation holds it).

Start states, one draw for every copy (kept where a copy starts), from the env's
``torch.Generator`` on the device (:mod:`.device_vector_env`), with the single envs'
distributions: the half-cheetah's positions ``init_qpos + N(0, 0.01²)`` then velocities
``init_qvel + N(0, 0.1²)``; the cart-pole's (x, x', angle, angle') ~ U([−1, −2, π−1, −3],
[1, 2, π+1, 3]); the double pendulum's (a1, a2, w1, w2) ~ N(0, [0.1, 0.1, 0.01, 0.01]²).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch

from . import cartpole_swingup, double_pendulum, half_cheetah
from .batched import form_for
from .warp_batch import WarpBatchEnv


class WarpSparseHalfCheetah(WarpBatchEnv):
    """Reward 1 while a copy's centre of mass is past x = 5."""

    coverage = half_cheetah.COVERAGE
    entry_dtypes = {"x_position": np.float64, "is_success": np.bool_}  # noqa: RUF012

    def __init__(
        self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
    ) -> None:
        super().__init__(single_env, num_envs, max_episode_steps, device)
        self.subtree_com = self._wp.to_torch(self.data.subtree_com)
        self.torso = single_env.unwrapped._torso

    def _start(self, mask: torch.Tensor) -> None:
        qpos = self.init_qpos + 0.01 * self._normal(self.init_qpos.shape[0])
        qvel = self.init_qvel + 0.1 * self._normal(self.init_qvel.shape[0])
        self.set_state(mask, qpos, qvel)
        self.positions()  # the observation's centre of mass, at the start

    def _observe(self) -> torch.Tensor:
        com = self.subtree_com[:, self.torso]
        return torch.cat([self.qpos[:, 1:], self.qvel, com], dim=1)

    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        self.simulate(actions)
        self.positions()
        x = self.subtree_com[:, self.torso, 0].clone()
        goal = x > half_cheetah.GOAL_X
        entries = {"x_position": x, **self.report.record(goal, x=x)}
        return goal.to(torch.float64), torch.zeros_like(goal), entries

    def _normal(self, width: int) -> torch.Tensor:
        shape = (self.num_envs, width)
        return torch.randn(shape, generator=self.generator, **self._f32)


class WarpBox2DModelTask(WarpBatchEnv):
    """A task on a MuJoCo model of an rllab Box2D system: its rotation limit after every
    MuJoCo step, as :class:`.box2d.Box2DModelTask` applies it."""

    def __init__(
        self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
    ) -> None:
        super().__init__(single_env, num_envs, max_episode_steps, device)
        self.substep = single_env.unwrapped.rotation_limit.tensor_rows(self.device)


class WarpSparseCartpoleSwingup(WarpBox2DModelTask):
    """Reward 1 while a copy's pole is near upright with its cart on the track."""

    coverage = cartpole_swingup.COVERAGE
    entry_dtypes = {"is_success": np.bool_}  # noqa: RUF012

    def _start(self, mask: torch.Tensor) -> None:
        low = torch.tensor([-1.0, -2.0, math.pi - 1.0, -3.0], **self._f32)
        high = torch.tensor([1.0, 2.0, math.pi + 1.0, 3.0], **self._f32)
        draw = torch.rand((self.num_envs, 4), generator=self.generator, **self._f32)
        x, velocity, angle, angular_velocity = (low + (high - low) * draw).T
        qpos, qvel = torch.stack([x, angle], 1), torch.stack([velocity, angular_velocity], 1)
        self.set_state(mask, qpos, qvel)

    def _observe(self) -> torch.Tensor:
        return torch.stack([self.qpos[:, 0], self.qvel[:, 0], self.qpos[:, 1], self.qvel[:, 1]], 1)

    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        self.simulate(actions)
        x, angle = self.qpos[:, 0], self.qpos[:, 1]
        terminated = x.abs() > cartpole_swingup.MAX_CART_POSITION
        height = torch.cos(angle)
        upright = ~terminated & (height > cartpole_swingup.UPRIGHT_COS)
        entries = self.report.record(upright, pole_height=height, cart_distance=x.abs())
        return upright.to(torch.float64), terminated, entries


class WarpSparseDoublePendulum(WarpBox2DModelTask):
    """Reward 1 while a copy's tip point is within 1 of the upright tip position."""

    coverage = double_pendulum.COVERAGE
    entry_dtypes = {"is_success": np.bool_}  # noqa: RUF012

    def _start(self, mask: torch.Tensor) -> None:
        scale = torch.tensor([0.1, 0.1, 0.01, 0.01], **self._f32)
        draw = torch.randn((self.num_envs, 4), generator=self.generator, **self._f32)
        a1, a2, w1, w2 = (scale * draw).T
        self.set_state(mask, torch.stack([a1, a2 - a1], 1), torch.stack([w1, w2 - w1], 1))

    def _observe(self) -> torch.Tensor:
        # the links' absolute angles and angular velocities (the elbow's joint is relative)
        (a1, a2), (w1, w2) = self.qpos.cumsum(1).T, self.qvel.cumsum(1).T
        return torch.stack([a1.sin(), a1.cos(), w1, a2.sin(), a2.cos(), w2], 1)

    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        self.simulate(actions)
        a1, a2 = self.qpos.cumsum(1).T  # the links' absolute angles (the elbow's is relative)
        # the released reward's point: the elbow, then the second link mirrored in x
        tip = double_pendulum.LINK_LENGTH * torch.stack(
            [a1.sin() - a2.sin(), -(a1.cos() + a2.cos())], 1
        )
        target = torch.as_tensor(double_pendulum.TARGET, **self._f32)
        distance = torch.linalg.vector_norm(tip - target, dim=1)
        near = distance < double_pendulum.GOAL_RADIUS
        entries = self.report.record(near, tip_height=tip[:, 1], goal_distance=distance)
        return near.to(torch.float64), torch.zeros_like(near), entries


#: each sparse MuJoCo task's env class → its MuJoCo Warp form
WARP_FORMS: dict[type, type] = {
    half_cheetah.SparseHalfCheetahEnv: WarpSparseHalfCheetah,
    cartpole_swingup.SparseCartpoleSwingupEnv: WarpSparseCartpoleSwingup,
    double_pendulum.SparseDoublePendulumEnv: WarpSparseDoublePendulum,
}


def warp_sparse_mujoco(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
) -> WarpBatchEnv | None:
    """The Warp form of a sparse MuJoCo task, or None for one it does not model (a render
    mode; a half-cheetah's ``frame_skip`` is read)."""
    form = form_for(single_env, WARP_FORMS)
    return None if form is None else form(single_env, num_envs, max_episode_steps, device)
