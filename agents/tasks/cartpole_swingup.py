"""SparseCartpoleSwingup: VIME's sparse cart-pole swing-up on a MuJoCo model of rllab's.

As released (``openai/vime`` ``envs/cartpole_swingup_env_x.py``, on rllab's Box2D
``cartpole.xml.mako``): the pole starts hanging down, the cart at x ~ U(-1, 1) with
velocity ~ U(-2, 2), the pole's angle ~ U(pi - 1, pi + 1) from upright with angular
velocity ~ U(-3, 3) (l.29-42); reward 1 while cos(angle) > 0.8 with the cart on the
track, else 0 (l.44-58); the episode ends when |x| > 3 (l.60-62), with reward 0; the
observation is (x, x', angle, angle'), the angle not wrapped. The model
(``assets/cartpole_swingup.xml``) has rllab's masses, lengths and force limit. Departures:
``docs/decisions.md#sparse-cartpole-swingup``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .box2d import Box2DModelTask, RotationLimit
from .report import Coverage

#: The track's half-length: the episode ends past it (``cartpole_swingup_env_x.py`` l.22, l.62).
MAX_CART_POSITION = 3.0
#: Rewarded while the pole is within arccos(0.8) = 36.9 degrees of upright (l.53-55).
UPRIGHT_COS = 0.8
#: rllab's Box2D step (one per action): its rotation limit keeps the pole under 31.4 rad/s.
BOX2D_STEP = 0.05

#: The pole's highest point and the cart's furthest excursion per window; the goal is the
#: reward's upright cone (reached with the cart still on the track).
COVERAGE = Coverage(("pole_height", "cart_distance"), (), "pole_height_max", UPRIGHT_COS, ">")


class SparseCartpoleSwingupEnv(Box2DModelTask):
    """Reward 1 while the pole is near upright; success once it has been."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(
            "cartpole_swingup.xml",
            5,  # five 0.01 s steps: one action per 0.05 s, the Box2D step of rllab's model
            observation_size=4,
            rotation_limit=RotationLimit(BOX2D_STEP, [[0.0, 1.0]]),  # the pole's hinge
            report=COVERAGE.new_report(),
            camera={"distance": 9.0, "lookat": np.array([0.0, 0.0, 0.5])},
            render_mode=render_mode,
        )

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.do_simulation(action, self.frame_skip)
        x, angle = self.data.qpos
        terminated = bool(abs(x) > MAX_CART_POSITION)
        height = float(np.cos(angle))  # of the pole's tip over its hinge, in pole lengths
        reward = 1.0 if not terminated and height > UPRIGHT_COS else 0.0
        info = self.report.record(reward > 0, pole_height=height, cart_distance=abs(x))
        if self.render_mode == "human":
            self.render()
        return self._get_obs(), reward, terminated, False, info

    def _get_obs(self) -> np.ndarray:
        (x, angle), (velocity, angular_velocity) = self.data.qpos, self.data.qvel
        return np.array([x, velocity, angle, angular_velocity])

    def reset_model(self) -> np.ndarray:
        self.report.start_episode()
        x, velocity, angle, angular_velocity = self.np_random.uniform(
            [-1.0, -2.0, np.pi - 1.0, -3.0], [1.0, 2.0, np.pi + 1.0, 3.0]
        )
        self.set_state(np.array([x, angle]), np.array([velocity, angular_velocity]))
        return self._get_obs()
