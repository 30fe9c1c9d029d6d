"""gymnasium's ``HalfCheetah-v4`` and ``Hopper-v4`` for N copies in MuJoCo Warp: the vector env
that keeps a MuJoCo task's step on the device of a run on a GPU (the simulator:
:class:`~.warp_batch.WarpBatchEnv`; on a CUDA device the physics of a step is one CUDA graph).

Each copy computes what ``gymnasium/envs/mujoco/{half_cheetah,hopper}_v4.py`` computes with the
single env's settings (as :mod:`.locomotion_batch`, whose module docstring lists them), in
float32, to MuJoCo Warp's tolerance (:mod:`.warp_batch`). These tasks observe qpos and qvel
only, so a start needs no forward stage. Start states come from the env's ``torch.Generator``
on the device (:mod:`.device_vector_env`); they are not the ``mujoco.batch`` env's draws.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.mujoco.half_cheetah_v4 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v4 import HopperEnv

from .warp_batch import WarpBatchEnv


class WarpLocomotion(WarpBatchEnv):
    """N copies of ``HalfCheetah-v4`` or ``Hopper-v4`` in one MuJoCo Warp ``Data`` on ``device``
    (a Warp device name: ``cuda``, ``cuda:1``, ``cpu``)."""

    def __init__(
        self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
    ) -> None:
        super().__init__(single_env, num_envs, max_episode_steps, device)
        env = single_env.unwrapped
        self.task = type(env)
        self.forward_weight = env._forward_reward_weight
        self.ctrl_weight = env._ctrl_cost_weight
        self.noise = env._reset_noise_scale
        self.first = 1 if env._exclude_current_positions_from_observation else 0
        if self.task is HopperEnv:
            self.healthy_reward = float(env._healthy_reward)
            self.terminate_when_unhealthy = env._terminate_when_unhealthy
            self.z_range, self.angle_range = env._healthy_z_range, env._healthy_angle_range
            self.state_range = env._healthy_state_range
        self.entry_dtypes = {
            "x_position": np.float64,
            "x_velocity": np.float64,
            **(
                {"reward_run": np.float64, "reward_ctrl": self.single_action_space.dtype}
                if self.task is HalfCheetahEnv
                else {}
            ),
        }

    # -------------------------------------------------------------------- the task
    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        x_before = self.qpos[:, 0].clone()
        self.simulate(actions)
        x_after = self.qpos[:, 0].clone()
        x_velocity = (x_after - x_before) / self.dt
        ctrl_cost = self.ctrl_weight * actions.to(torch.float32).square().sum(dim=1)
        forward_reward = self.forward_weight * x_velocity
        entries = {"x_position": x_after, "x_velocity": x_velocity}
        if self.task is HalfCheetahEnv:
            rewards = forward_reward - ctrl_cost
            terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            entries |= {"reward_run": forward_reward, "reward_ctrl": -ctrl_cost}
        else:
            healthy = self._healthy()
            rewards = forward_reward - ctrl_cost
            rewards += (healthy | self.terminate_when_unhealthy) * self.healthy_reward
            terminated = ~healthy if self.terminate_when_unhealthy else torch.zeros_like(healthy)
        return rewards, terminated, entries

    def _start(self, mask: torch.Tensor) -> None:
        """``MujocoEnv.reset`` for the copies in ``mask``: start states drawn for every copy
        (one draw, no host sync) and kept in the masked rows."""
        shape = (self.num_envs, self.init_qpos.shape[0])
        noise = self.noise * (2 * torch.rand(shape, generator=self.generator, **self._f32) - 1)
        qpos = self.init_qpos + noise
        shape = (self.num_envs, self.init_qvel.shape[0])
        if self.task is HalfCheetahEnv:
            draw = torch.randn(shape, generator=self.generator, **self._f32)
        else:
            draw = 2 * torch.rand(shape, generator=self.generator, **self._f32) - 1
        self.set_state(mask, qpos, self.init_qvel + self.noise * draw)

    def _observe(self) -> torch.Tensor:
        velocity = self.qvel if self.task is HalfCheetahEnv else self.qvel.clip(-10, 10)
        return torch.cat([self.qpos[:, self.first :], velocity], dim=1)

    # ------------------------------------------------------------------------ internals
    def _healthy(self) -> torch.Tensor:
        """Hopper's ``is_healthy``: z, angle and the state strictly inside their ranges."""
        z, angle = self.qpos[:, 1], self.qpos[:, 2]
        low, high = self.state_range
        state = torch.cat([self.qpos, self.qvel], dim=1)[:, 2:]
        healthy = ((low < state) & (state < high)).all(dim=1)
        healthy &= (self.z_range[0] < z) & (z < self.z_range[1])
        return healthy & (self.angle_range[0] < angle) & (angle < self.angle_range[1])


def warp_locomotion(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
) -> WarpLocomotion | None:
    """The Warp env for a single ``HalfCheetah-v4`` or ``Hopper-v4``, or None for one it does
    not model (a render mode, or a subclass with its own rules)."""
    env = single_env.unwrapped
    if type(env) not in (HalfCheetahEnv, HopperEnv) or env.render_mode is not None:
        return None
    return WarpLocomotion(single_env, num_envs, max_episode_steps, device)
