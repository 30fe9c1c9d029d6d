"""SparseHalfCheetah: VIME's sparse half-cheetah on gymnasium's HalfCheetah model.

As released (``openai/vime`` ``envs/half_cheetah_env_x.py``, on rllab's ``MujocoEnv``):
reward 1 while the cheetah's centre of mass is past x = 5, else 0 (l.46-49); never
terminates (l.45); observes its joint positions without the root's x, all velocities and
its centre of mass (l.22-27); one simulator step of 0.01 s per action (rllab's
``frame_skip`` default); starts at rest plus N(0, 0.01²) on positions and N(0, 0.1²) on
velocities (rllab ``mujoco_env.py`` l.109-116). gymnasium's ``half_cheetah.xml`` is rllab's
model (the same bodies, joints, gears and options; it adds a camera). Departures and
anchors: ``docs/decisions.md#sparse-half-cheetah``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.spaces import Box

from .report import Coverage

#: VIME's goal: the centre of mass past x = 5 m (``half_cheetah_env_x.py`` l.46).
GOAL_X = 5.0

#: The centre of mass's furthest x either way per window.
COVERAGE = Coverage(("x",), ("x",), "x_max", GOAL_X, ">")


class SparseHalfCheetahEnv(MujocoEnv, utils.EzPickle):
    """Reward 1 while the centre of mass is past x = 5; success once it has been."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "rgb_array", "depth_array"]}

    def __init__(self, frame_skip: int = 1, render_mode: str | None = None) -> None:
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"frame_skip must be a positive integer, got {frame_skip!r}")
        utils.EzPickle.__init__(self, frame_skip, render_mode)
        MujocoEnv.__init__(
            self,
            "half_cheetah.xml",  # gymnasium's copy of rllab's model
            frame_skip,
            observation_space=Box(-np.inf, np.inf, shape=(20,), dtype=np.float64),
            render_mode=render_mode,
            default_camera_config={"distance": 4.0, "trackbodyid": 1},
        )
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self.dt)}
        self._torso = self.model.body("torso").id
        self.report = COVERAGE.new_report()

    @property
    def center_of_mass(self) -> np.ndarray:
        """The cheetah's centre of mass (x, y, z): rllab's ``get_body_com("torso")``, the
        subtree centre of mass of the root body."""
        return self.data.subtree_com[self._torso]

    def _step_mujoco_simulation(self, ctrl: np.ndarray, n_frames: int) -> None:
        self.data.ctrl[:] = ctrl
        mujoco.mj_step(self.model, self.data, nstep=n_frames)
        # rllab runs a forward pass after stepping (mujoco_env.py l.188), so the reward and
        # the observation see the new state's centre of mass; mj_step leaves the previous one.
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.do_simulation(action, self.frame_skip)
        x = float(self.center_of_mass[0])
        reward = 1.0 if x > GOAL_X else 0.0
        info = {"x_position": x, **self.report.record(reward > 0, x=x)}
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), reward, False, False, info

    def _get_obs(self) -> np.ndarray:
        return np.concatenate([self.data.qpos[1:], self.data.qvel, self.center_of_mass])

    def reset_model(self) -> np.ndarray:
        self.report.start_episode()
        qpos = self.init_qpos + self.np_random.normal(0.0, 0.01, self.model.nq)
        qvel = self.init_qvel + self.np_random.normal(0.0, 0.1, self.model.nv)
        self.set_state(qpos, qvel)
        return self._get_obs()

    def pop_coverage(self) -> dict[str, float]:
        return self.report.pop_coverage()
