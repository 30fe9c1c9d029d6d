"""SparseDoublePendulum: VIME's sparse double pendulum on a MuJoCo model of rllab's.

As released (``openai/vime`` ``envs/double_pendulum_env_x.py``, on rllab's Box2D
``double_pendulum.xml.mako``): two links of length 1 hang from a fixed pivot, a torque of
at most 50 N m at the elbow swings them; they start hanging down with angles ~ N(0, 0.1²)
and angular velocities ~ N(0, 0.01²) (l.31-41); reward 1 while the code's tip point is
within 1 of the upright tip position (0, 2), else 0 (l.43-62); never terminates (l.64-65);
one action per two 0.01 s Box2D steps (l.15-16); the observation is (sin, cos, angular
velocity) of each link's absolute angle (the model's ``state`` lines). The model
(``assets/double_pendulum.xml``) has rllab's masses, lengths and torque limit. Departures:
``docs/decisions.md#sparse-double-pendulum``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .box2d import Box2DModelTask, RotationLimit
from .report import Coverage

LINK_LENGTH = 1.0
#: The tip's upright position (``double_pendulum_env_x.py`` l.55) and the reward radius (l.58).
TARGET = np.array([0.0, 2 * LINK_LENGTH])
GOAL_RADIUS = 1.0
#: rllab's Box2D step (two per action): its rotation limit keeps each link under 157 rad/s.
BOX2D_STEP = 0.01

#: The tip's highest point and its closest approach to the target per window.
COVERAGE = Coverage(("tip_height",), ("goal_distance",), "goal_distance_min", GOAL_RADIUS, "<")


class SparseDoublePendulumEnv(Box2DModelTask):
    """Reward 1 while the tip point is near upright; success once it has been."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(
            "double_pendulum.xml",
            8,  # eight 0.0025 s steps: one action per 0.02 s, two Box2D steps of 0.01 s
            observation_size=6,
            # both links' absolute angular velocities from the joints' (shoulder, elbow)
            rotation_limit=RotationLimit(BOX2D_STEP, [[1.0, 0.0], [1.0, 1.0]]),
            report=COVERAGE.new_report(),
            camera={"distance": 7.0, "lookat": np.zeros(3)},
            render_mode=render_mode,
        )

    def link_angles(self) -> tuple[np.ndarray, np.ndarray]:
        """Absolute angles and angular velocities of both links (0: hanging down)."""
        (shoulder, elbow), (shoulder_speed, elbow_speed) = self.data.qpos, self.data.qvel
        angles = np.array([shoulder, shoulder + elbow])
        return angles, np.array([shoulder_speed, shoulder_speed + elbow_speed])

    def tip_point(self) -> np.ndarray:
        """The point the released reward measures (``get_tip_pos``, l.43-50): the elbow
        minus the second link's x offset, i.e. the tip mirrored in x about the elbow (the
        tip itself is elbow + (L sin a2, -L cos a2)). Its height is the tip's."""
        (a1, a2), _ = self.link_angles()
        elbow = LINK_LENGTH * np.array([np.sin(a1), -np.cos(a1)])
        return elbow + LINK_LENGTH * np.array([-np.sin(a2), -np.cos(a2)])

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.do_simulation(action, self.frame_skip)
        tip = self.tip_point()
        distance = float(np.linalg.norm(tip - TARGET))
        reward = 1.0 if distance < GOAL_RADIUS else 0.0
        info = self.report.record(reward > 0, tip_height=tip[1], goal_distance=distance)
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), reward, False, False, info

    def _get_obs(self) -> np.ndarray:
        (a1, a2), (w1, w2) = self.link_angles()
        return np.array([np.sin(a1), np.cos(a1), w1, np.sin(a2), np.cos(a2), w2])

    def reset_model(self) -> np.ndarray:
        self.report.start_episode()
        a1, a2, w1, w2 = self.np_random.normal(0.0, [0.1, 0.1, 0.01, 0.01])
        self.set_state(np.array([a1, a2 - a1]), np.array([w1, w2 - w1]))
        return self._get_obs()
