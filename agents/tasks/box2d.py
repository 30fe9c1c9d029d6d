"""MuJoCo models of rllab's Box2D systems, with the one Box2D behaviour they reproduce.

Box2D moves a body by at most pi/2 radians per step (``b2_maxRotation``): before
integrating it scales a faster body's angular velocity down to that limit, and the velocity
stays scaled. rllab's cart-pole (0.05 s steps) thus never spins its pole faster than
31.4 rad/s, and its double pendulum (0.01 s steps) no link faster than 157 rad/s. MuJoCo
has no such limit: a policy that holds the double pendulum's elbow torque spins it past
400 rad/s (measured), far outside what the released task could produce. Box2D's
companion limit on translation (2 m per step) is left out: it binds only in states far from
the tasks' (``docs/decisions.md#sparse-tasks``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import numpy as np
import torch
from gymnasium import utils
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.spaces import Box

from .report import TaskReport

ASSETS = Path(__file__).with_name("assets")


class RotationLimit:
    """Box2D's limit on the angular velocity of bodies, applied after every MuJoCo step.

    ``body_rates`` maps the joint velocities to the limited bodies' angular velocities
    (one row per body); a clipped body's joint velocities are corrected by the
    pseudo-inverse, so every other body keeps its own.
    """

    def __init__(self, box2d_step: float, body_rates: np.ndarray) -> None:
        self.limit = 0.5 * math.pi / box2d_step
        self.body_rates = np.asarray(body_rates, dtype=np.float64)
        self._correction = np.linalg.pinv(self.body_rates)

    def step(self, model: mujoco.MjModel, data: mujoco.MjData, n_frames: int) -> None:
        """``n_frames`` MuJoCo steps, each followed by the limit."""
        for _ in range(n_frames):
            mujoco.mj_step(model, data)
            speeds = self.body_rates @ data.qvel
            limited = np.clip(speeds, -self.limit, self.limit)
            if not np.array_equal(limited, speeds):
                data.qvel[:] += self._correction @ (limited - speeds)

    def tensor_rows(self, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
        """:meth:`limit_rows` for (N, nv) float32 tensors on ``device`` (a row within the
        limit gets a zero correction)."""
        rates = torch.as_tensor(self.body_rates, dtype=torch.float32, device=device)
        correction = torch.as_tensor(self._correction, dtype=torch.float32, device=device)

        def limited(qvel: torch.Tensor) -> torch.Tensor:
            speeds = qvel @ rates.T
            excess = speeds.clamp(-self.limit, self.limit) - speeds
            return qvel + excess @ correction.T

        return limited

    def limit_rows(self, qvel: np.ndarray) -> np.ndarray:
        """The limit on N copies' joint velocities at once, (N, nv): the rows :meth:`step`
        would correct, corrected by the same pseudo-inverse."""
        speeds = qvel @ self.body_rates.T
        excess = np.clip(speeds, -self.limit, self.limit) - speeds
        clipped = (excess != 0).any(axis=1)
        corrected = qvel.copy()
        corrected[clipped] += excess[clipped] @ self._correction.T
        return corrected


class Box2DModelTask(MujocoEnv, utils.EzPickle):
    """A task on a MuJoCo model (``assets/<model>``) of one of rllab's Box2D systems.

    Subclasses give the model, the MuJoCo steps per action, the observation's size, the
    rotation limit of their bodies and what their task reports; they take ``render_mode``
    only (the arguments :class:`utils.EzPickle` records).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "rgb_array", "depth_array"]}

    def __init__(
        self,
        model: str,
        frame_skip: int,
        observation_size: int,
        rotation_limit: RotationLimit,
        report: TaskReport,
        camera: dict[str, Any],
        render_mode: str | None = None,
    ) -> None:
        utils.EzPickle.__init__(self, render_mode)
        MujocoEnv.__init__(
            self,
            str(ASSETS / model),
            frame_skip,
            observation_space=Box(-np.inf, np.inf, shape=(observation_size,), dtype=np.float64),
            render_mode=render_mode,
            default_camera_config=camera,
        )
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self.dt)}
        self.rotation_limit = rotation_limit
        self.report = report

    def _step_mujoco_simulation(self, ctrl: np.ndarray, n_frames: int) -> None:
        self.data.ctrl[:] = ctrl
        self.rotation_limit.step(self.model, self.data, n_frames)

    def pop_coverage(self) -> dict[str, float]:
        return self.report.pop_coverage()
