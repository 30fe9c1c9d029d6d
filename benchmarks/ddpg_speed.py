"""DDPG speed, side by side in one run: this project's engine against Stable-Baselines3.

Measures steady-state environment steps/s (after a warm-up, learning on, evaluation off)
of the native DDPG with ``adam-plain`` and with ``vadam``, eager and compiled
(``compile=True``, compile time excluded), and of SB3's DDPG with the same settings
(HalfCheetah-v4, 400-300 MLPs, batch 64, one update per step, buffer 1e6), for 1 and 2
torch threads; and the cost of one update (``train_step``) of ``vadam`` (and any strategy
given to ``--update-cost``) relative to ``adam-plain`` in the same mode, without and with
the per-step weight-noise draw. Engines are measured in alternating rounds so that drift
of this shared machine hits all of them alike; medians are reported. Ratios, not absolute
numbers, are the result: absolute speed drifts ±20 % between runs here.

    python benchmarks/ddpg_speed.py [--steps 3000] [--rounds 3] [--threads 1 2]
                                    [--update-cost adam-plain vadam noisy-kfac] [--json FILE]
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


def native(optimizer: str, compile: bool) -> Callable[[int], None]:
    agent = DDPG(ENV, strategy=optimizer, seed=0, device="cpu", compile=compile)
    agent.learn(WARMUP)  # compiles at the first update when asked to
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


def update_costs(
    optimizers: list[str],
    rounds: int,
    block: int = 50,
    resample: bool = False,
    compile: bool = False,
) -> dict[str, list[float]]:
    """Seconds per ``train_step`` (critic + actor + target update) of each strategy, per round.

    One warmed-up agent per strategy; the agents take turns, ``block`` updates each, for
    ``rounds`` rounds, so that drift of the machine hits all of them alike — ratios are
    taken round by round. With ``resample``, a fresh weight-noise draw precedes every
    update, as one environment step does in training. With ``compile``, the agents run
    compiled updates (strategies without a traced form run eagerly).
    """
    agents = {}
    for name in optimizers:
        agent = DDPG(ENV, strategy=name, seed=0, device="cpu", compile=compile)
        agent.learn(WARMUP)
        agent.actor_optimizer.resample_noise(agent.generator)
        agents[name] = agent

    def run(agent: DDPG, updates: int) -> None:
        for _ in range(updates):
            if resample:
                agent.actor_optimizer.resample_noise(agent.generator)
            agent.train_step()

    for agent in agents.values():
        run(agent, block)  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in agents}
    for _ in range(rounds):
        for name, agent in agents.items():
            start = time.perf_counter()
            run(agent, block)
            seconds[name].append((time.perf_counter() - start) / block)
    return seconds


def relative_costs(seconds: dict[str, list[float]]) -> dict[str, float]:
    """Median over rounds of each strategy's time per update divided by adam-plain's."""
    base = seconds["adam-plain"]
    return {
        name: statistics.median(t / b for t, b in zip(times, base))
        for name, times in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed env steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--update-cost",
        nargs="+",
        default=["adam-plain", "vadam"],
        metavar="STRATEGY",
        help="strategies whose per-update cost is compared with adam-plain's",
    )
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()

    results: dict = {"env": ENV, "steps_per_round": args.steps, "threads": {}}
    for threads in args.threads:
        torch.set_num_threads(threads)
        engines = {
            "native adam-plain": native("adam-plain", compile=False),
            "native vadam": native("vadam", compile=False),
            "native adam-plain compiled": native("adam-plain", compile=True),
            "native vadam compiled": native("vadam", compile=True),
            "sb3 ddpg": sb3(),
        }
        speeds: dict[str, list[float]] = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, run in engines.items():
                speeds[name].append(timed(run, args.steps))
        medians = {name: statistics.median(v) for name, v in speeds.items()}
        costed = ["adam-plain", *(o for o in args.update_cost if o != "adam-plain")]
        rounds = max(10, 5 * args.rounds)
        entry: dict = {
            "steps_per_s": medians,
            "rounds": speeds,
            "ratio to sb3": {
                name: medians[name] / medians["sb3 ddpg"] for name in engines if name != "sb3 ddpg"
            },
        }
        for mode, compile in (("eager", False), ("compiled", True)):
            per_update = update_costs(costed, rounds, compile=compile)
            with_sampling = update_costs(costed, rounds, resample=True, compile=compile)
            entry[mode] = {
                "update_ms": {k: statistics.median(v) * 1e3 for k, v in per_update.items()},
                "update_with_resample_ms": {
                    k: statistics.median(v) * 1e3 for k, v in with_sampling.items()
                },
                "per update / adam-plain": relative_costs(per_update),
                "per update with resample / adam-plain": relative_costs(with_sampling),
            }
        results["threads"][threads] = entry
        print(f"--- {threads} thread(s)")
        for name, value in medians.items():
            print(f"  {name:28s} {value:7.1f} steps/s   rounds {[round(s) for s in speeds[name]]}")
        for name, ratio in entry["ratio to sb3"].items():
            print(f"  {name + ' / SB3:':36s} {ratio:.2f}x")
        for mode in ("eager", "compiled"):
            costs = entry[mode]
            print(
                f"  per update, {mode} (median ms, median ratio to adam-plain over interleaved"
                " rounds; then with a noise draw per update):"
            )
            for opt in costed:
                print(
                    f"    {opt:14s} {costs['update_ms'][opt]:6.2f} "
                    f"{costs['per update / adam-plain'][opt]:6.3f}x   "
                    f"{costs['update_with_resample_ms'][opt]:6.2f} "
                    f"{costs['per update with resample / adam-plain'][opt]:6.3f}x"
                )
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
