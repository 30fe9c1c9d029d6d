"""gymnasium's continuous mountain car for N copies at once, in NumPy: ``SparseMountainCar-v0``
and ``MountainCarContinuous-v0`` (with the report :class:`.MountainCarGoalReport` adds).

The single env (``gymnasium/envs/classic_control/continuous_mountain_car.py``, ``step``)
computes with Python and NumPy scalars, so its precision changes with the step: the state
a reset sets is float64, every later one float32; the force is the action's dtype unless
clipped to ±1 (then a Python float); NumPy 2 casts a Python float to the other operand's
float32 (NEP 50). The arrays here follow the same rule row by row — each quantity is
computed in float64 and in float32 and the row takes the one its single env would — so
that a copy's trajectory is its single env's to the bit, not merely to float32 rounding:
a near miss of the goal stays a miss.

Start states: position ~ U(−0.6, −0.4), velocity 0 (the single env's ``reset``), one
``uniform`` call for the copies that start.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv

from .batched import BatchedEnv
from .mountain_car import COVERAGE, SparseMountainCarEnv

F32 = np.float32
#: The single env's reset range of the position (``reset``: ``uniform(-0.6, -0.4)``).
START_LOW, START_HIGH = -0.6, -0.4
#: The slope's pull per step, 0.0025·cos(3·position) (``step``).
GRAVITY = 0.0025


class BatchedMountainCar(BatchedEnv):
    """N copies of the car: the sparse task (reward 1 at the goal) or gymnasium's own
    (100 at the goal minus 0.1·action²), both reporting success and coverage."""

    coverage = COVERAGE

    def __init__(self, single_env: gym.Env, num_envs: int, max_episode_steps: int | None):
        super().__init__(single_env, num_envs, max_episode_steps)
        car = single_env.unwrapped
        self.sparse = isinstance(car, SparseMountainCarEnv)
        self.power, self.max_speed = car.power, car.max_speed
        self.min_position, self.max_position = car.min_position, car.max_position
        self.goal_position, self.goal_velocity = car.goal_position, car.goal_velocity
        self.position = np.zeros(num_envs)
        self.velocity = np.zeros(num_envs)
        #: rows whose state a reset set (float64); the others hold a step's float32 state
        self.fresh = np.ones(num_envs, dtype=bool)
        self._clip_compares_alike = clip_compares_alike(car)

    def _start(self, ids: np.ndarray) -> None:
        self.position[ids] = self.np_random.uniform(START_LOW, START_HIGH, len(ids))
        self.velocity[ids] = 0.0
        self.fresh[ids] = True

    def _observe(self) -> np.ndarray:
        obs = np.empty((self.num_envs, 2), dtype=F32)
        obs[:, 0], obs[:, 1] = self.position, self.velocity
        return obs

    def _advance(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        action = actions[:, 0]
        if action.dtype == F32 and not np.count_nonzero(self.fresh) and self._clip_compares_alike:
            position, velocity, terminated = self._float32_step(action)
        else:
            position, velocity, terminated = self._any_step(action)
        position = position.astype(F32)  # the single env's state and observation
        self.position = position.astype(float)
        self.velocity = velocity.astype(F32).astype(float)
        self.fresh[:] = False
        if self.sparse:
            rewards = terminated.astype(float)
        else:
            rewards = 100.0 * terminated - action.astype(float) ** 2 * 0.1
        entries = self.report.record(terminated, position=position)
        return rewards, terminated, entries

    def _float32_step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step of rows that all hold a step's float32 state, under float32 actions:
        the single env's arithmetic is float32 throughout, but for a force clipped to ±1
        (a Python float: its change is computed in float64, then added in float32)."""
        position, velocity = self.position.astype(F32), self.velocity.astype(F32)
        slope = GRAVITY * np.cos((F32(3) * position).astype(float))
        delta = action * F32(self.power) - slope.astype(F32)
        clipped = np.abs(action) > 1
        if np.count_nonzero(clipped):
            wide = np.clip(action, -1, 1).astype(float) * self.power - slope
            delta = np.where(clipped, wide.astype(F32), delta)
        top = F32(self.max_speed)
        velocity = np.minimum(np.maximum(velocity + delta, -top), top)
        position = np.minimum(position + velocity, F32(self.max_position))
        at_left = position <= F32(self.min_position)
        position = np.maximum(position, F32(self.min_position))
        velocity = np.where(at_left & (velocity < 0), F32(0), velocity)
        terminated = (position >= F32(self.goal_position)) & (velocity >= F32(self.goal_velocity))
        return position, velocity, terminated

    def _any_step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step of any rows under any float actions, each row in its single env's
        precision (module docstring); the new state, not yet rounded to float32."""
        wide = action.dtype != F32  # a float64 action makes the single env's step float64
        clipped = (action < -1.0) | (action > 1.0)  # min(max(a, -1.0), 1.0): a Python float
        force = np.clip(action.astype(np.float64), -1.0, 1.0)
        # 3·position in the position's precision, its cosine in float64 (math.cos)
        pos32 = self.position.astype(F32)
        three_position = np.where(self.fresh, 3.0 * self.position, (F32(3) * pos32).astype(float))
        slope = GRAVITY * np.cos(three_position)
        # force·power − slope: in float32 for an unclipped float32 action, else float64
        narrow_delta = (force.astype(F32) * F32(self.power) - slope.astype(F32)).astype(float)
        delta = np.where(clipped | wide, force * self.power - slope, narrow_delta)
        # rows whose velocity adds in float32: a float32 velocity and a float32 or Python
        # float change (a float64 one, from a float64 action, makes it float64)
        in32 = ~self.fresh & (~wide | clipped)
        velocity = np.where(
            in32,
            (self.velocity.astype(F32) + delta.astype(F32)).astype(float),
            self.velocity + delta,
        )
        top = np.where(in32, F32(self.max_speed), self.max_speed)
        high, low = velocity > top, velocity < -top
        velocity = np.where(high, self.max_speed, np.where(low, -self.max_speed, velocity))
        # the position adds in float32 where it is float32 and the velocity is float32 or
        # a Python float (the clipped speed); a float64 velocity makes it float64
        narrow = in32 | (~self.fresh & (high | low))
        position = np.where(
            narrow,
            (pos32 + velocity.astype(F32)).astype(float),
            self.position + velocity,
        )
        right = np.where(narrow, F32(self.max_position), self.max_position)
        left = np.where(narrow, F32(self.min_position), self.min_position)
        position = np.where(position > right, self.max_position, position)
        at_left = position <= left
        position = np.where(at_left, self.min_position, position)
        velocity = np.where(at_left & (velocity < 0), 0.0, velocity)
        goal_position = np.where(narrow, F32(self.goal_position), self.goal_position)
        # the velocity compares in float32 where it is a float32 number (not clipped)
        goal_velocity = np.where(in32 & ~(high | low), F32(self.goal_velocity), self.goal_velocity)
        terminated = (position >= goal_position) & (velocity >= goal_velocity)
        return position, velocity, terminated


def clip_compares_alike(car: Continuous_MountainCarEnv) -> bool:
    """Whether the clipped speed (a Python float) meets the car's goal velocity as its
    float32 does, so that a float32 step may compare it in float32 (true but for a goal
    velocity between the two)."""
    speed, goal = float(car.max_speed), float(car.goal_velocity)
    return all((s >= goal) == (F32(s) >= F32(goal)) for s in (speed, -speed))


def batched_mountain_car(
    single_env: gym.Env, num_envs: int, max_episode_steps: int | None
) -> BatchedMountainCar | None:
    """The batched car for a single env of either id, or None for one it does not model
    (a render mode, or another class than gymnasium's car)."""
    car = single_env.unwrapped
    if not isinstance(car, Continuous_MountainCarEnv) or car.render_mode is not None:
        return None
    if not math.isfinite(float(car.goal_velocity)):
        return None
    return BatchedMountainCar(single_env, num_envs, max_episode_steps)
