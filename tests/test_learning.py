"""The agent must learn: Pendulum-v1 swung up within 10 k steps.

Setting (also the one measured): Vadam exploration, 64-64 networks, actor lr 1e-3,
τ = 5e-3, mean-reduced actor gradient, 200 warm-up transitions; evaluation every 1 k steps
over 10 fixed-seed episodes. Measured on this machine, best evaluation within 10 k steps for
seeds 0-5: -225, -228, -463, -173, -702, -182; an untrained policy scores about -1300 to
-1450. The test runs seed 0 (CPU runs are bitwise reproducible; its curve ends -388, -225,
-407); the threshold -600 leaves a wide margin to it and fails a policy that never swings up.
Reproduce a curve with ``python -m pytest tests/test_learning.py -s``.
"""

from __future__ import annotations

import gymnasium as gym

from agents import DDPG, evaluate

THRESHOLD = -600.0


def test_vadam_ddpg_swings_up_the_pendulum():
    agent = DDPG(
        "Pendulum-v1",
        seed=0,
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
    print("initial", round(initial), "curve", [round(c) for c in curve])
    assert initial < -1000
    assert max(curve) > THRESHOLD, curve
