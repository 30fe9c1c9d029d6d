"""Populations against one process per seed: seed-steps per second of whole runs.

N seeds of one strategy, each a whole run with its task's evaluation protocol, timed from
the command's start to its end (starting, compiling, training, evaluating, logging,
checkpointing), three ways on the same machine, one after the other:

- ``population``: ``train_agent --seeds N --workers 2`` — the grid plans the N runs as
  populations, one per worker (N = 1 is a single run: a grid of one run trains it as
  ``train_agent`` does);
- ``grid``: the same command with ``--no-population``: N runs, one after another on each
  of two worker processes, each with one torch thread (what grids did before
  populations);
- ``sb3``: Stable-Baselines3's DDPG, one process per seed, two at a time, each with one
  torch thread, with the task's hyperparameters as SB3 states them (the networks, batch,
  τ, γ, learning rates, update schedule) and SB3's ``EvalCallback`` for the protocol.

Tasks: ``halfcheetah`` is HalfCheetah-v4 with Khan et al.'s protocol (400-300 networks, one
update per step, 20 test episodes every 10 k steps and at the end) and ``vadam``;
``sparse`` is SparseMountainCar-v0 with ``configs/sparse-study.yaml`` (64-64 networks,
observation normalisation, the critic's LayerNorm, 50 updates every 100 steps, 20 test
episodes every 10 k steps) and ``vadam``. For SB3 the sparse settings SB3 lacks
(observation normalisation, the critic's LayerNorm and L2 penalty) are left out: they cost
it little time. The seeds are 0 … N−1; every run writes into a fresh directory, and
TorchInductor's on-disk cache is warmed first by the same command for 300 steps (its
graphs are keyed by the population's size and the thread count, so each N's first run
compiles from scratch, ~20-40 s once per machine; ``--cold`` skips the warm-up): every
timed run then meets the cache a user's second run meets, and its start (imports,
loading the compiled graph, tracing) is counted in every run.

With ``--peak``, it also measures the fp32 matrix-product peak (one CPU thread, a 1024³
``torch.mm``; on ``--device cuda`` the GPU's, 8192³ with TF32 off) and, for each N of
``--members``, the time of a population's compiled update of HalfCheetah's 400-300
networks (163 MFLOP per member), and prints the fraction of the peak it reaches.
``--device cuda`` trains every run on the GPU (``train_agent --device cuda``);
``benchmarks/gpu_check.sh`` is the prepared GPU run.

    python benchmarks/population.py [--tasks sparse halfcheetah] [--members 1 5 10 20]
                                    [--modes population grid sb3] [--steps-sparse 20000]
                                    [--steps-halfcheetah 5000] [--peak] [--cold]
                                    [--device cpu|cuda] [--workers 2] [--json FILE]
                                    [--set KEY=VALUE ...]

Run it on an otherwise idle machine (``uptime``'s load below 0.2 before it starts): the
three ways are timed one after the other, and another process on the cores skews them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATEGY = "vadam"
#: task → (env, train_agent arguments, SB3's DDPG hyperparameters, eval every, episodes)
TASKS = {
    "halfcheetah": (
        "HalfCheetah-v4",
        [],
        dict(net_arch=[400, 300], tau=1e-3, learning_rate=1e-3, train_freq=1, gradient_steps=1),
        10_000,
        20,
    ),
    "sparse": (
        "SparseMountainCar-v0",
        ["--config", str(ROOT / "configs" / "sparse-study.yaml")],
        dict(net_arch=[64, 64], tau=1e-2, learning_rate=1e-3, train_freq=100, gradient_steps=50),
        10_000,
        20,
    ),
}
WORKERS = 2


def time_train_agent(
    task: str,
    members: int,
    steps: int,
    population: bool,
    warm: bool = True,
    device: str = "cpu",
    workers: int = WORKERS,
    settings: tuple[str, ...] = (),
) -> float:
    """Seconds of one ``train_agent`` grid of ``members`` seeds on ``workers`` workers (after
    the same grid for 300 steps, unless not ``warm``)."""
    if warm:
        time_train_agent(task, members, 300, population, False, device, workers, settings)
    env, extra, _, _, _ = TASKS[task]
    with tempfile.TemporaryDirectory() as logdir:
        command = [
            sys.executable, "-m", "agents.cli", "--env", env, "--opt", STRATEGY,
            "--seeds", str(members), "--steps", str(steps), "--workers", str(workers),
            "--logdir", logdir, "--no-progress", "--device", device, *extra,
        ]  # fmt: skip
        for setting in settings:
            command += ["--set", setting]
        if members == 1:  # a single run: train_agent's own path, both cores' threads
            command[command.index("--seeds") : command.index("--seeds") + 2] = ["--seed", "0"]
        if not population:
            command.append("--no-population")
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip
        return time.perf_counter() - start


def sb3_run(task: str, seed: int, steps: int) -> None:
    """One SB3 DDPG run of ``task`` with its evaluation protocol, one torch thread."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DDPG
    from stable_baselines3.common.callbacks import EvalCallback

    import agents.tasks  # noqa: F401  (registers the sparse tasks)

    torch.set_num_threads(1)
    env, _, settings, eval_every, episodes = TASKS[task]
    settings = dict(settings)
    net_arch = settings.pop("net_arch")
    model = DDPG(
        "MlpPolicy", gym.make(env), policy_kwargs=dict(net_arch=net_arch), buffer_size=1_000_000,
        learning_starts=64, batch_size=64, gamma=0.99, device="cpu", seed=seed, **settings,
    )  # fmt: skip
    callback = EvalCallback(gym.make(env), n_eval_episodes=episodes, eval_freq=eval_every,
                            verbose=0)  # fmt: skip
    model.learn(steps, callback=callback)


def time_sb3(task: str, members: int, steps: int) -> float:
    """Seconds of ``members`` SB3 runs, each its own process, two at a time."""
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    with context.Pool(WORKERS, maxtasksperchild=1) as pool:
        pool.starmap(sb3_run, [(task, seed, steps) for seed in range(members)])
    return time.perf_counter() - start


def matmul_peak(device: str = "cpu") -> float:
    """GFLOP/s of an fp32 ``torch.mm``, best of 20: 1024³ on one CPU thread, 8192³ on a GPU
    (TF32 off: the update runs in full fp32)."""
    import torch

    torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 1024 if device == "cpu" else 8192
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    best = float("inf")
    for _ in range(20):
        synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a GPU runs asynchronously to the timer)."""
    import torch

    if device != "cpu":
        torch.cuda.synchronize(device)


def population_update_seconds(members: int, updates: int = 200, device: str = "cpu") -> float:
    """Seconds per compiled update of a population of ``members`` vadam DDPGs with the
    400-300 networks (HalfCheetah-v4), one CPU thread, after a warm-up."""
    import torch

    from agents.ddpg.population import make_population
    from agents.settings import DDPGSettings

    torch.set_num_threads(1)
    # A buffer of the 128 steps it fills (the update samples the rows filled, whatever the
    # capacity): 1 000 members with the default 1 M rows each would not fit a GPU.
    config = DDPGSettings.from_values(
        {"strategy": STRATEGY, "learning_starts": 64, "compile": True, "buffer_size": 128}
    )
    population = make_population("HalfCheetah-v4", [config] * members, list(range(members)), device)
    from agents.common.callbacks import Callback

    population.learn(128, [Callback() for _ in range(members)])  # fills, compiles, updates
    synchronize(device)
    start = time.perf_counter()
    for _ in range(updates):
        population.train_step()
    synchronize(device)
    return (time.perf_counter() - start) / updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--members", type=int, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--modes", nargs="+", choices=["population", "grid", "sb3"],
                        default=["population", "grid", "sb3"])  # fmt: skip
    parser.add_argument("--steps-sparse", type=int, default=20_000)
    parser.add_argument("--steps-halfcheetah", type=int, default=5_000)
    parser.add_argument("--peak", action="store_true", help="also the update's share of peak")
    parser.add_argument("--cold", action="store_true", help="no warm-up run of each command")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where runs train (sb3 mode: always the CPU)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=WORKERS, help=f"default {WORKERS}")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a train_agent --set for every run (e.g. buffer_size=100000)",
    )
    args = parser.parse_args()

    load = os.getloadavg()[0]
    print(f"load average before: {load:.2f} on {os.cpu_count()} cores")
    results: dict = {"load_before": load, "tasks": {}}

    def save() -> None:  # after each measurement: a run cut short keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))

    # The update's share of peak first: it is short, and on a lent device whose time may run
    # out before the whole runs end, it is what says most of how members scale there.
    if args.peak:
        peak = matmul_peak(args.device)
        results["peak"] = {"device": args.device, "gflops": peak}
        for members in args.members:
            update = population_update_seconds(members, device=args.device)
            share = members * 163e6 / update / 1e9 / peak
            print(f"--- fp32 matmul peak ({args.device}): {peak:.0f} GFLOP/s; a population of "
                  f"{members} 400-300 vadam updates in {update * 1e3:.2f} ms: {share:.1%} "
                  "of peak")  # fmt: skip
            results["peak"][f"update_seconds_{members}"] = update
            results["peak"][f"share_{members}"] = share
            save()
    for task in args.tasks:
        steps = args.steps_sparse if task == "sparse" else args.steps_halfcheetah
        print(f"--- {task}: {TASKS[task][0]}, {STRATEGY}, {steps} steps per seed, "
              f"{args.workers} workers, {args.device} (seed-steps per second)")  # fmt: skip
        rows = {}
        for members in args.members:
            seconds = {}
            for mode in args.modes:
                if mode == "sb3":
                    seconds[mode] = time_sb3(task, members, steps)
                else:
                    seconds[mode] = time_train_agent(
                        task, members, steps, mode == "population", not args.cold,
                        args.device, args.workers, tuple(args.set),
                    )  # fmt: skip
            rate = {mode: members * steps / s for mode, s in seconds.items()}
            rows[members] = {"seconds": seconds, "seed_steps_per_second": rate}
            results["tasks"][task] = {"steps": steps, "members": rows}
            save()
            cells = [f"{mode} {rate[mode]:7.0f}" for mode in args.modes]
            if "population" in rate:
                others = [m for m in rate if m != "population"]
                cells += [f"{rate['population'] / rate[m]:.2f}x {m}" for m in others]
            print(f"  N = {members:2d}: " + "   ".join(cells))
    results["load_after"] = os.getloadavg()[0]
    print(f"load average after: {results['load_after']:.2f}")
    save()


if __name__ == "__main__":
    main()
