"""DDPG speed, side by side in one run: this project's engine against Stable-Baselines3.

Measures steady-state environment steps/s (after a warm-up, learning on, evaluation off)
of the native DDPG with ``adam-plain`` and with ``vadam`` and of SB3's DDPG with the same
settings (HalfCheetah-v4, 400-300 MLPs, batch 64, one update per step, buffer 1e6), for 1
and 2 torch threads; and the cost of one update (``train_step``) of ``vadam`` relative to
``adam-plain``. Engines are measured in alternating rounds so that drift of this shared
machine hits all of them alike; medians are reported. Ratios, not absolute numbers, are
the result: absolute speed drifts ±20 % between runs here.

    python benchmarks/ddpg_speed.py [--steps 3000] [--rounds 3] [--threads 1 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import torch
from stable_baselines3 import DDPG as SB3DDPG

from agents import DDPG

ENV = "HalfCheetah-v4"
WARMUP = 1000


def native(optimizer: str) -> Callable[[int], None]:
    agent = DDPG(ENV, optimizer=optimizer, seed=0, device="cpu")
    agent.learn(WARMUP)
    return agent.learn


def sb3() -> Callable[[int], None]:
    model = SB3DDPG(
        "MlpPolicy", gym.make(ENV), policy_kwargs=dict(net_arch=[400, 300]),
        buffer_size=1_000_000, learning_starts=64, batch_size=64, tau=1e-3, gamma=0.99,
        learning_rate=1e-3, train_freq=1, gradient_steps=1, device="cpu", seed=0,
    )  # fmt: skip
    model.learn(WARMUP)
    return lambda steps: model.learn(steps, reset_num_timesteps=False)


def timed(run: Callable[[int], None], steps: int) -> float:
    start = time.perf_counter()
    run(steps)
    return steps / (time.perf_counter() - start)


def update_cost(optimizer: str, updates: int) -> float:
    """Seconds per ``train_step`` (one critic + actor + target update), buffer warmed up."""
    agent = DDPG(ENV, optimizer=optimizer, seed=0, device="cpu")
    agent.learn(WARMUP)
    agent.actor_optimizer.resample_noise(agent.generator)
    for _ in range(50):
        agent.train_step()
    start = time.perf_counter()
    for _ in range(updates):
        agent.train_step()
    return (time.perf_counter() - start) / updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()

    results: dict = {"env": ENV, "steps_per_round": args.steps, "threads": {}}
    for threads in args.threads:
        torch.set_num_threads(threads)
        engines = {
            "native adam-plain": native("adam-plain"),
            "native vadam": native("vadam"),
            "sb3 ddpg": sb3(),
        }
        speeds: dict[str, list[float]] = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, run in engines.items():
                speeds[name].append(timed(run, args.steps))
        medians = {name: statistics.median(v) for name, v in speeds.items()}
        per_update = {
            opt: statistics.median(update_cost(opt, 300) for _ in range(args.rounds))
            for opt in ("adam-plain", "vadam")
        }
        entry = {
            "steps_per_s": medians,
            "rounds": speeds,
            "adam-plain / sb3": medians["native adam-plain"] / medians["sb3 ddpg"],
            "vadam / sb3": medians["native vadam"] / medians["sb3 ddpg"],
            "update_ms": {k: v * 1e3 for k, v in per_update.items()},
            "vadam / adam-plain per update": per_update["vadam"] / per_update["adam-plain"],
        }
        results["threads"][threads] = entry
        print(f"--- {threads} thread(s)")
        for name, value in medians.items():
            print(f"  {name:18s} {value:7.1f} steps/s   rounds {[round(s) for s in speeds[name]]}")
        print(f"  native adam-plain / SB3: {entry['adam-plain / sb3']:.2f}x")
        print(f"  native vadam / SB3:      {entry['vadam / sb3']:.2f}x")
        print(
            f"  per update: adam-plain {entry['update_ms']['adam-plain']:.2f} ms, "
            f"vadam {entry['update_ms']['vadam']:.2f} ms, "
            f"ratio {entry['vadam / adam-plain per update']:.3f}"
        )
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
