"""gymnasium's continuous mountain car for N copies as torch code on a device:
``SparseMountainCar-v0`` and ``MountainCarContinuous-v0`` where a run's step stays on its GPU.

Why a second form of :mod:`.mountain_car_batch`'s car: a population of the sparse car on a GPU
would otherwise send its actions to the host and its answer back every step; as tensors on the
device its step is :class:`~.device_vector_env.DeviceVectorEnv`'s, with no copy (success and
coverage reported there too).

Its arithmetic is the single env's step from a float32 state (``continuous_mountain_car.py``
``step``, every step of an episode but its first): float32 throughout — the slope's cosine
taken in float64 of the float32 ``3·position`` (``math.cos``) and rounded, the change of a
force clipped to ±1 (a Python float) computed in float64 — so that from the same state and
action a copy's step is :class:`~.mountain_car_batch.BatchedMountainCar`'s to the bit but
for the cosine's last bit on a device whose ``cos`` is not the host's
(``tests/test_torch_mountain_car.py`` compares them). Where it departs: the state a start
sets is float32 (the single env's is float64 until its first step), so an episode's first
step differs by float32 rounding; the start states come from the device's
``torch.Generator`` (:mod:`.device_vector_env`), not numpy's.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv

from .device_vector_env import DeviceVectorEnv
from .mountain_car import COVERAGE, SparseMountainCarEnv
from .mountain_car_batch import GRAVITY, START_HIGH, START_LOW, clip_compares_alike

F32 = np.float32


class TorchMountainCar(DeviceVectorEnv):
    """N copies of the car on ``device``: the sparse task (reward 1 at the goal) or
    gymnasium's own (100 at the goal minus 0.1·action²), both reporting success and coverage."""

    coverage = COVERAGE
    entry_dtypes = {"is_success": np.bool_}  # noqa: RUF012 (read only)

    def __init__(
        self,
        single_env: gym.Env,
        num_envs: int,
        max_episode_steps: int | None,
        device: torch.device | str,
    ) -> None:
        super().__init__(single_env, num_envs, max_episode_steps, torch.device(device))
        car = single_env.unwrapped
        self.sparse = isinstance(car, SparseMountainCarEnv)
        #: the single env's constants: as float32 numbers where its step is float32, and the
        #: power as the Python float a clipped force multiplies
        self.power, self.power32 = float(car.power), float(F32(car.power))
        self.top = float(F32(car.max_speed))
        self.min_position, self.max_position = (
            float(F32(car.min_position)),
            float(F32(car.max_position)),
        )
        self.goal_position = float(F32(car.goal_position))
        self.goal_velocity = float(F32(car.goal_velocity))
        self.position = torch.zeros(num_envs, **self._f32)
        self.velocity = torch.zeros(num_envs, **self._f32)

    def _start(self, mask: torch.Tensor) -> None:
        """The single env's ``reset``: position ~ U(−0.6, −0.4) (drawn in float64, kept as
        float32), velocity 0."""
        draw = torch.rand(self.num_envs, generator=self.generator, dtype=torch.float64,
                          device=self.device)  # fmt: skip
        start = (START_LOW + (START_HIGH - START_LOW) * draw).to(torch.float32)
        self.position = torch.where(mask, start, self.position)
        self.velocity = self.velocity.masked_fill(mask, 0.0)

    def _observe(self) -> torch.Tensor:
        return torch.stack([self.position, self.velocity], dim=1)

    def _advance(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        action = actions[:, 0].to(torch.float32)
        slope = GRAVITY * torch.cos((3 * self.position).to(torch.float64))
        delta = action * self.power32 - slope.to(torch.float32)
        # a force clipped to ±1 is a Python float: its change is computed in float64
        wide = action.clamp(-1.0, 1.0).to(torch.float64) * self.power - slope
        delta = torch.where(action.abs() > 1, wide.to(torch.float32), delta)
        velocity = (self.velocity + delta).clamp(-self.top, self.top)
        position = (self.position + velocity).clamp(max=self.max_position)
        at_left = position <= self.min_position
        position = position.clamp(min=self.min_position)
        velocity = velocity.masked_fill(at_left & (velocity < 0), 0.0)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        self.position, self.velocity = position, velocity
        if self.sparse:
            rewards = terminated.to(torch.float64)
        else:
            rewards = 100.0 * terminated.to(torch.float64) - action.to(torch.float64) ** 2 * 0.1
        return rewards, terminated, self.report.record(terminated, position=position)


def torch_mountain_car(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None, device: str
) -> TorchMountainCar | None:
    """The torch car for a single env of either id, or None for one it does not model (a
    render mode, another class than gymnasium's car, or a goal velocity its float32 step
    would compare otherwise than the single env's)."""
    car = single_env.unwrapped
    if not isinstance(car, Continuous_MountainCarEnv) or car.render_mode is not None:
        return None
    if not np.isfinite(float(car.goal_velocity)) or not clip_compares_alike(car):
        return None
    return TorchMountainCar(single_env, num_envs, max_episode_steps, device)
