"""Overhead of ParamExplorePolicy (vadam) over SB3's stock MlpPolicy (Adam), same run.

Both are SB3's DDPG with the paper's settings (HalfCheetah-v4, 400-300 MLPs, batch 64, one
update per step). Steady-state env steps/s is measured after a warm-up, alternating the two
policies over several rounds so that machine drift hits both alike; the ratio of medians is
printed (and written as JSON with ``--json``).

    python benchmarks/sb3_policy_overhead.py [--steps 2000] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym
import torch
from stable_baselines3 import DDPG

from agents.sb3.policy import ParamExplorePolicy

SETTINGS = dict(
    buffer_size=100_000, learning_starts=100, batch_size=64, tau=1e-3, gamma=0.99,
    train_freq=1, gradient_steps=1, learning_rate=1e-3, device="cpu", seed=0,
)  # fmt: skip


def make(policy: str) -> DDPG:
    env = gym.make("HalfCheetah-v4")
    if policy == "MlpPolicy":
        return DDPG("MlpPolicy", env, policy_kwargs=dict(net_arch=[400, 300]), **SETTINGS)
    kwargs = dict(strategy="vadam", net_arch=[400, 300], actor_grad_scale=64.0)
    return DDPG(ParamExplorePolicy, env, policy_kwargs=kwargs, **SETTINGS)


def steps_per_second(model: DDPG, steps: int) -> float:
    start = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    models = {name: make(name) for name in ("MlpPolicy", "ParamExplorePolicy")}
    for model in models.values():
        model.learn(500)  # warm-up: fills past learning_starts, first updates
    speeds: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            speeds[name].append(steps_per_second(model, args.steps))
    medians = {name: statistics.median(v) for name, v in speeds.items()}
    ratio = medians["MlpPolicy"] / medians["ParamExplorePolicy"]
    for name, values in speeds.items():
        print(f"{name:20s} {medians[name]:7.1f} steps/s  (rounds: {[round(v) for v in values]})")
    print(f"time ratio ParamExplorePolicy(vadam) / MlpPolicy(Adam): {ratio:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "steps_per_s": medians, "ratio": ratio}, f)


if __name__ == "__main__":
    main()
