"""SparseMountainCarRllab: VIME's sparse mountain car on rllab's own car, simulated in Box2D.

The car VIME ran (``openai/vime`` ``envs/mountain_car_env_x.py``, on rllab's
``rllab/envs/box2d/models/mountain_car.xml.mako``, ``rll/rllab`` at ba78e4c) is another system
than gymnasium's ``MountainCarContinuous`` that ``SparseMountainCar-v0`` wraps: a 0.4 × 0.2 m
box of density 5 (0.4 kg; mako l.11-12) on a static chain of 201 points y = 1 + sin((x/2 −
0.5)π), x ∈ [−2, 2] (``xml_box2d.py`` l.175-184, mako l.14-15): a valley 2 m deep from trough
to crest, the goal x ≥ 0.6 only 0.41 m up; friction 0.0005 on the box and Box2D's default 0.2
on the track, mixed by Box2D to 0.01. One action is a force of at most 1 N at the box's
centre along the box's own x axis, i.e. along the track (mako l.19, ``box2d_env.py``
l.123-133), then one 0.05 s Box2D step with 8 velocity and 3 position iterations (mako l.10,
``xml_box2d.py`` l.54-56, ``box2d_env.py`` l.147-151); gravity is pybox2d's default 10 m/s²
(the model sets none, ``xml_box2d.py`` l.67-68). The car starts at rllab's initial body
state, x = 0, with an x-velocity ~ U(−1, 1) (``mountain_car_env_x.py`` l.43-53); the
observation is rllab's ``get_current_obs``: the box's x and x-velocity (mako l.17-18,
``box2d_env.py`` l.237-321). Reward 1 at the step that ends the episode, at x ≥ 0.6 or
|x| ≥ 2 (``mountain_car_env_x.py`` l.26, l.33-40), else 0.

**Simulated in Box2D, rllab's engine**, not in a MuJoCo model (:mod:`.box2d`) nor by
integrating a car on the curve: what the task is made of is Box2D's contact of a flat box
with a polyline. The box rides the valley on its two bottom corners, rocking from one to the
other, and Box2D's inelastic contacts take more than half the work of a pumping push
(measured). A point mass on the same curve with the same friction is another task: OU action
noise (σ = 0.6, θ = 0.15, dt = 1) reaches its goal in 78 % of 500-step episodes, and in none
of 300 on this one (``examples/mountain_car_by_chance.py``,
``docs/decisions.md#sparse-mountain-car-rllab``).

The action is the physical force in newtons, [−1, 1] as rllab's env exposes it (VIME wraps
every task in rllab's ``NormalizedEnv``, whose range here is the same). Departure: a fresh
Box2D world at every reset (rllab keeps one across episodes, carrying the contact cache over),
so that a seed alone fixes an episode.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import utils
from gymnasium.spaces import Box

from .report import Coverage

if TYPE_CHECKING:
    import Box2D

#: The episode ends with reward 1 once the car's centre is at x >= 0.6 (goal_cart_pos, l.20)
#: or |x| >= 2, the track's ends (max_cart_pos, l.26).
GOAL_POSITION = 0.6
TRACK_END = 2.0
#: The largest push, in newtons (the control's ctrllimit, mako l.19).
MAX_FORCE = 1.0
#: rllab's Box2D step: one per action (frame_skip 1), 8 velocity and 3 position iterations.
TIME_STEP = 0.05
VELOCITY_ITERATIONS = 8
POSITION_ITERATIONS = 3
GRAVITY = 10.0
#: The car: a box of half-extents 0.2 × 0.1 m at density 5, its centre at (0, 0.05) at the
#: start (mako l.11-12; the start leaves its corners inside the track, and the first step's
#: position correction lifts it onto its two corners, as in rllab).
CART_HALF_EXTENTS = (0.2, 0.1)
CART_DENSITY = 5.0
CART_FRICTION = 0.0005
CART_START = (0.0, 0.05)
#: The track: 201 points of 1 + sin((x/2 - 0.5) pi) over its 4 m width, as a Box2D chain on a
#: static body at (0, 1); its friction is Box2D's default 0.2 (the model sets none).
TRACK_WIDTH = 4.0
TRACK_HALF_POINTS = 100
TRACK_FRICTION = 0.2
#: The start's x-velocity is uniform on this range (mountain_car_env_x.py l.46-51).
START_SPEED = 1.0

#: The range of the car's positions a window of training steps covered; the goal is x >= 0.6.
#: The left end also pays, but a car cannot get there before it has passed the goal
#: (``docs/decisions.md#sparse-mountain-car-rllab``), so the goal is stated on the right.
COVERAGE = Coverage(("position",), ("position",), "position_max", GOAL_POSITION, ">=")


def track_points() -> list[tuple[float, float]]:
    """The chain's points in the track body's frame (``xml_box2d.py`` l.178-182)."""
    n = TRACK_HALF_POINTS
    return [
        (0.5 * TRACK_WIDTH * i / n, math.sin((i / n - 0.5) * math.pi)) for i in range(-n, n + 1)
    ]


def build_world() -> tuple[Box2D.b2World, Box2D.b2Body]:
    """rllab's mountain-car world as its model builds it; returns the world and the car.

    Box2D is imported here, the task's only use of it, so that ``import agents`` (and the
    reports that read :data:`COVERAGE`) works where only the other tasks are needed.
    """
    import Box2D

    world = Box2D.b2World(gravity=(0.0, -GRAVITY))
    world.warmStarting, world.continuousPhysics, world.subStepping = True, True, False
    cart = world.CreateDynamicBody(position=CART_START)
    cart.CreatePolygonFixture(box=CART_HALF_EXTENTS, density=CART_DENSITY, friction=CART_FRICTION)
    track = world.CreateStaticBody(position=(0.0, 1.0))
    track.CreateChainFixture(vertices_chain=track_points(), friction=TRACK_FRICTION)
    return world, cart


class SparseMountainCarRllabEnv(gym.Env, utils.EzPickle):
    """Reward 1 when the car reaches x >= 0.6 or runs off either end, where the episode ends.

    ``world`` and ``cart`` are the current episode's Box2D world and car body (a new world
    at every reset).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "render_fps": round(1 / TIME_STEP)}

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"SparseMountainCarRllab-v0 does not render, got {render_mode!r}")
        utils.EzPickle.__init__(self, render_mode)
        self.render_mode = render_mode
        self.action_space = Box(-MAX_FORCE, MAX_FORCE, shape=(1,), dtype=np.float32)
        self.observation_space = Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.report = COVERAGE.new_report()
        self.world: Box2D.b2World | None = None
        self.cart: Box2D.b2Body | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.report.start_episode()
        self.world, self.cart = build_world()
        speed = float(self.np_random.uniform(-START_SPEED, START_SPEED))
        self.cart.linearVelocity = (speed, 0.0)
        return self._get_obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.world is None:
            raise RuntimeError("call reset() before step()")
        # rllab clips to the control's range (box2d_env.py l.123-124) and pushes along the
        # car's own axis at its centre; waking it every step keeps it from ever sleeping.
        push = np.asarray(action, dtype=np.float64).reshape(-1)[0]
        force = float(np.clip(push, -MAX_FORCE, MAX_FORCE))
        cart = self.cart
        cart.ApplyForce(cart.GetWorldVector((force, 0.0)), cart.position, True)
        self.world.Step(TIME_STEP, VELOCITY_ITERATIONS, POSITION_ITERATIONS)
        obs = self._get_obs()
        terminated = bool(obs[0] >= GOAL_POSITION or abs(obs[0]) >= TRACK_END)
        info = self.report.record(terminated, position=obs[0])
        return obs, 1.0 if terminated else 0.0, terminated, False, info

    def _get_obs(self) -> np.ndarray:
        return np.array([self.cart.position[0], self.cart.linearVelocity[0]], dtype=np.float64)

    def pop_coverage(self) -> dict[str, float]:
        return self.report.pop_coverage()

    def close(self) -> None:
        self.world = self.cart = None
