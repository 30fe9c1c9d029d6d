"""Slow: the agent must learn — Vadam-DDPG swings up Pendulum-v1 within 10 k steps, in
most seeds.

Setting: Vadam exploration, 64-64 networks, actor lr 1e-3, τ = 5e-3, mean-reduced actor
gradient, 200 warm-up transitions; evaluation every 1 k steps over 10 fixed-seed episodes.
One seed's curve is no test: CPUs round differently and a seeded run amplifies the last
bits into another trajectory (seed 0 here: best −326 with this machine's kernels, −988
with ``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``). So the test runs seeds 0-5 and
asserts on how many swing up (best evaluation above −600; untrained about −1300 to −1450).

Measured, seeds 0-5, this machine's kernels (AMD EPYC, AVX2): best −225, −228, −463, −173,
−702, −182, that is 5 of 6 above −600. The test asks for 3 of 6: two more seeds may fall to
another CPU's trajectory (as seed 0 did above) before it fails, and a policy that never
swings up fails it.

Reproduce the curves with ``python -m pytest -m slow tests/test_learning.py -s``.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from agents import DDPG, evaluate

pytestmark = [pytest.mark.slow, pytest.mark.trains]

SEEDS = range(6)
#: Best evaluation of a swung-up pendulum, and how many of SEEDS must reach it.
THRESHOLD, REQUIRED = -600.0, 3


def best_evaluation(seed: int) -> tuple[float, float]:
    """The untrained policy's evaluation and the best of ten during 10 k steps."""
    agent = DDPG(
        "Pendulum-v1",
        seed=seed,
        device="cpu",
        strategy="vadam",
        optimizer_kwargs={"lr": 1e-3},
        hidden_sizes=[64, 64],
        tau=5e-3,
        actor_grad_reduction="mean",
        learning_starts=200,
    )
    env = gym.make("Pendulum-v1")
    initial, _ = evaluate(agent, env, 10, seed=1000)
    curve = []
    for _ in range(10):
        agent.learn(1000)
        curve.append(evaluate(agent, env, 10, seed=1000)[0])
    print(f"seed {seed}: initial {initial:.0f}, curve {[round(c) for c in curve]}")
    return initial, max(curve)


def test_vadam_ddpg_swings_up_the_pendulum_in_most_seeds():
    results = [best_evaluation(seed) for seed in SEEDS]
    assert all(initial < -1000 for initial, _ in results)
    bests = [best for _, best in results]
    assert sum(best > THRESHOLD for best in bests) >= REQUIRED, bests
