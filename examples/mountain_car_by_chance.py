"""How often chance finds the goal on the two sparse mountain cars, without learning.

``SparseMountainCar-v0`` (gymnasium's car) and ``SparseMountainCarRllab-v0`` (rllab's car,
the one VIME and Zhang et al. 2018 ran) have the same reward and 500-step episodes but
different systems; this script measures how much exploration each asks for. Per task and
explorer it runs episodes from seeds 0, 1, ... and prints the fraction that reached the goal
(``info["is_success"]``) and the mean step of reaching it. Explorers, in [−1, 1] units of
the action range, clipped to it (the scale a policy's tanh output has):

* ``pump``: push the way the car moves (the scripted controller of ``tests/test_tasks.py``);
* ``gaussian``: i.i.d. N(0, σ²) actions, σ = 1;
* ``ou``: an Ornstein-Uhlenbeck process, σ = 0.6, θ = 0.15, reset at every episode start,
  with dt = 1 (the ``ou-action`` strategy's default) and dt = 0.01 (``configs/sparse-study.yaml``,
  Plappert et al.'s released setting).

``--point-mass`` adds a third system, not a task of the project: a point mass on rllab's
track (0.4 kg, the push along the track, Coulomb friction 0.01, integrated by RK4), the
idealisation of rllab's car that Box2D's box is not (``docs/decisions.md
#sparse-mountain-car-rllab``).

    python examples/mountain_car_by_chance.py                 # 100 episodes each
    python examples/mountain_car_by_chance.py --episodes 300 --env SparseMountainCarRllab-v0
    python examples/mountain_car_by_chance.py --point-mass
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np

from agents.tasks import HORIZON

TASKS = ("SparseMountainCarRllab-v0", "SparseMountainCar-v0")
POINT_MASS = "point mass on rllab's track"


class PointMassOnRllabTrack:
    """A 0.4 kg point on y = 1 - cos(pi x / 2), pushed along the track by at most 1 N, with
    Coulomb friction 0.01 of the normal force, g = 10; start, goal and ends as rllab's car.

    Lagrange's equation in x, with h the track and F the force along it:
    m (1 + h'^2) x'' + m h' h'' x'^2 + m g h' = (F + friction) sqrt(1 + h'^2).
    """

    mass, gravity, friction, step_time, substeps = 0.4, 10.0, 0.01, 0.05, 10

    def reset(self, seed: int) -> tuple[np.ndarray, dict]:
        # the draw gymnasium's seeding gives rllab's car: the same start per seed
        self.x, self.v = 0.0, np.random.default_rng(seed).uniform(-1.0, 1.0)
        self.succeeded = False
        return np.array([self.x, self.v]), {}

    def acceleration(self, x: float, v: float, force: float) -> float:
        slope = np.pi / 2 * np.sin(np.pi * x / 2)
        bend = (np.pi / 2) ** 2 * np.cos(np.pi * x / 2)
        stretch = np.sqrt(1 + slope**2)
        along = v * stretch  # the speed along the track
        normal = self.mass * (self.gravity / stretch + bend / stretch**3 * along**2)
        force -= np.sign(along) * self.friction * max(normal, 0.0)
        pull = force * stretch / self.mass - bend * slope * v**2 - self.gravity * slope
        return pull / (1 + slope**2)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        force, dt = float(np.clip(action[0], -1.0, 1.0)), self.step_time / self.substeps
        x, v = self.x, self.v
        for _ in range(self.substeps):  # classical RK4
            k1 = (v, self.acceleration(x, v, force))
            k2 = (
                v + dt / 2 * k1[1],
                self.acceleration(x + dt / 2 * k1[0], v + dt / 2 * k1[1], force),
            )
            k3 = (
                v + dt / 2 * k2[1],
                self.acceleration(x + dt / 2 * k2[0], v + dt / 2 * k2[1], force),
            )
            k4 = (v + dt * k3[1], self.acceleration(x + dt * k3[0], v + dt * k3[1], force))
            x += dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            v += dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        self.x, self.v = x, v
        terminated = bool(x >= 0.6 or abs(x) >= 2.0)
        self.succeeded |= terminated
        return (
            np.array([x, v]),
            float(terminated),
            terminated,
            False,
            {"is_success": self.succeeded},
        )

    def close(self) -> None:
        pass


#: An explorer: given a seeded generator, a function of the observation giving an action.
Explorer = Callable[[np.random.Generator], Callable[[np.ndarray], float]]


def pump(rng: np.random.Generator) -> Callable[[np.ndarray], float]:
    return lambda obs: 1.0 if obs[1] >= 0 else -1.0


def gaussian(sigma: float) -> Explorer:
    return lambda rng: lambda obs: sigma * rng.standard_normal()


def ornstein_uhlenbeck(sigma: float, theta: float, dt: float) -> Explorer:
    """x ← x − θ x dt + σ √dt N(0, 1), from x = 0 (as ``OrnsteinUhlenbeckActionNoise``)."""

    def explorer(rng: np.random.Generator) -> Callable[[np.ndarray], float]:
        def process() -> Iterator[float]:
            x = 0.0
            while True:
                x += -theta * x * dt + sigma * np.sqrt(dt) * rng.standard_normal()
                yield x

        steps = process()
        return lambda obs: next(steps)

    return explorer


EXPLORERS: dict[str, Explorer] = {
    "pump": pump,
    "gaussian σ=1": gaussian(1.0),
    "ou σ=0.6 dt=1": ornstein_uhlenbeck(0.6, 0.15, 1.0),
    "ou σ=0.6 dt=0.01": ornstein_uhlenbeck(0.6, 0.15, 0.01),
}


def reach(system: str, explorer: Explorer, episodes: int) -> tuple[float, float | None]:
    """The fraction of ``episodes`` that reached the goal, and their mean step of reaching it."""
    env = PointMassOnRllabTrack() if system == POINT_MASS else gym.make(system)
    high = 1.0 if system == POINT_MASS else float(env.action_space.high[0])
    steps = []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        policy = explorer(np.random.default_rng((1, seed)))  # a stream apart from the env's
        for step in range(1, HORIZON + 1):
            action = np.clip(policy(obs), -1.0, 1.0) * high
            obs, _, terminated, truncated, info = env.step(np.array([action], np.float32))
            if info["is_success"]:
                steps.append(step)
                break
            if terminated or truncated:
                break
    env.close()
    return len(steps) / episodes, (float(np.mean(steps)) if steps else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--env", choices=TASKS, action="append", help="default: both")
    parser.add_argument("--point-mass", action="store_true", help="add the point mass")
    args = parser.parse_args()
    systems = [*(args.env or TASKS), *([POINT_MASS] if args.point_mass else [])]
    print("| system | explorer | reached the goal | mean step |")
    print("|---|---|---|---|")
    for system in systems:
        for name, explorer in EXPLORERS.items():
            fraction, step = reach(system, explorer, args.episodes)
            when = "" if step is None else f"{step:.0f}"
            reached = f"{round(fraction * args.episodes)}/{args.episodes} ({100 * fraction:.0f} %)"
            print(f"| {system} | {name} | {reached} | {when} |", flush=True)


if __name__ == "__main__":
    main()
