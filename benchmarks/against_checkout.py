"""This tree against other checkouts of the project, the same commands side by side.

Why: a redesign is judged against the design it replaces (the engine before it was one, the
grid before populations), and a checkout is the honest form of "before": its own code, run
by the same Python, torch and machine, in the same session, one after the other.

Two measurements, each in this tree and in every ``--against`` checkout (``git worktree add
DIR COMMIT``), each command in a fresh process whose imports come from its tree
(``PYTHONPATH``):

- ``single``: a single run's steady env steps per second, one torch thread, learning on,
  evaluation off, after a warm-up that compiles (``DDPG.learn``; the best of ``--rounds``
  rounds): HalfCheetah-v4 with Khan et al.'s 400-300 networks (``adam-plain`` and ``vadam``,
  compiled) and SparseMountainCar-v0 with the sparse study's networks, critic and schedule
  (64-64, observation normalisation, the critic's LayerNorm and L2 penalty, τ, 50 updates
  every 100 steps; ``vadam``, compiled) — the smallest networks, where per-step overhead
  shows most;
- ``grid``: seconds of ``train_agent --seeds 10 --workers 2`` after a 300-step warm-up of the
  same command: SparseMountainCar-v0 with ``configs/sparse-study.yaml``, 20 k steps, and
  HalfCheetah-v4, 5 k steps with ``--eval-every 10000`` (evaluated at its end only, as a
  checkout before the short-run schedule evaluated a 5 k-step run; without it a run of this
  tree is evaluated ten times).

    python benchmarks/against_checkout.py --against ../before [../older ...]
                                          [--only single grid] [--rounds 3]

Run it on an otherwise idle machine: the commands run one after the other, and another
process on the cores skews them. Each line printed says the load average after it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name → (env, the run's settings) of the single-run measurement
SINGLE = {
    "HalfCheetah-v4 adam-plain": ("HalfCheetah-v4", {"strategy": "adam-plain"}),
    "HalfCheetah-v4 vadam": ("HalfCheetah-v4", {"strategy": "vadam"}),
    "SparseMountainCar-v0 vadam 64-64": (
        "SparseMountainCar-v0",
        {
            "strategy": "vadam",
            "hidden_sizes": [64, 64],
            "normalize_observations": True,
            "critic_layer_norm": True,
            "critic_l2_reg": 0.01,
            "tau": 0.01,
            "train_every": 100,
            "gradient_steps": 50,
        },
    ),
}

#: What a fresh process of one tree runs for the single-run measurement (argv: env, the
#: settings as JSON, steps per round, rounds); it prints the best round's steps/s.
SINGLE_RUN = """
import json, sys, time, torch
torch.set_num_threads(1)
import agents.tasks  # registers the sparse tasks
from agents.ddpg import DDPG
from agents.settings import DDPGSettings
env, values, steps, rounds = sys.argv[1], json.loads(sys.argv[2]), *map(int, sys.argv[3:5])
agent = DDPG(env, DDPGSettings.from_values({**values, "compile": True}), seed=0, device="cpu")
agent.learn(1200)  # past learning_starts: the update compiled
best = 0.0
for _ in range(rounds):
    start = time.perf_counter()
    agent.learn(steps)
    best = max(best, steps / (time.perf_counter() - start))
print(best)
"""

#: name → (env, steps, extra train_agent arguments, relative to a tree) of the grid measurement
GRID = {
    "SparseMountainCar-v0, sparse study, 20 k": (
        "SparseMountainCar-v0",
        20_000,
        ["--config", "configs/sparse-study.yaml"],
    ),
    "HalfCheetah-v4, 400-300, 5 k": ("HalfCheetah-v4", 5_000, ["--eval-every", "10000"]),
}


def in_tree(tree: Path, command: list[str]) -> subprocess.CompletedProcess:
    """``command`` in a fresh process whose ``agents`` and ``param_explore`` are ``tree``'s."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}
    return subprocess.run(command, cwd=tree, env=env, check=True, capture_output=True, text=True)


def single_run(tree: Path, env: str, values: dict, steps: int, rounds: int) -> float:
    command = [sys.executable, "-c", SINGLE_RUN, env, json.dumps(values), str(steps), str(rounds)]
    return float(in_tree(tree, command).stdout.split()[-1])


def grid(tree: Path, env: str, steps: int, extra: list[str]) -> float:
    """Seconds of the grid command in ``tree`` (after the same command for 300 steps)."""

    def run(total: int) -> float:
        with tempfile.TemporaryDirectory() as logdir:
            command = [
                sys.executable, "-m", "agents.cli", "--env", env, "--opt", "vadam",
                "--seeds", "10", "--workers", "2", "--steps", str(total), "--logdir", logdir,
                "--no-progress", *extra,
            ]  # fmt: skip
            start = time.perf_counter()
            in_tree(tree, command)
            return time.perf_counter() - start

    run(300)
    return run(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", nargs="+", type=Path, required=True, metavar="CHECKOUT")
    parser.add_argument("--only", nargs="+", choices=["single", "grid"], default=["single", "grid"])
    parser.add_argument("--rounds", type=int, default=3, help="single: rounds of each run")
    parser.add_argument("--single-steps", type=int, default=4000, help="single: steps a round")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    trees = [ROOT, *(tree.resolve() for tree in args.against)]
    results: dict = {"trees": [str(t) for t in trees], "load_before": os.getloadavg()[0]}
    print(f"load average before: {results['load_before']:.2f} on {os.cpu_count()} cores")

    if "single" in args.only:
        results["single steps/s"] = {}
        for name, (env, values) in SINGLE.items():
            steps = args.single_steps * (5 if env.startswith("Sparse") else 1)
            speeds = [single_run(t, env, values, steps, args.rounds) for t in trees]
            results["single steps/s"][name] = speeds
            ratios = ", ".join(
                f"{speeds[0] / s:.2f}× {t.name}" for s, t in zip(speeds[1:], trees[1:])
            )
            print(f"single run, {name}: {[round(s) for s in speeds]} steps/s; this tree {ratios}"
                  f" (load {os.getloadavg()[0]:.2f})")  # fmt: skip

    if "grid" in args.only:
        results["grid seconds"] = {}
        for name, (env, steps, extra) in GRID.items():
            seconds = [grid(t, env, steps, extra) for t in trees]
            results["grid seconds"][name] = seconds
            ratios = ", ".join(
                f"{s / seconds[0]:.2f}× {t.name}" for s, t in zip(seconds[1:], trees[1:])
            )
            print(f"--seeds 10 --workers 2, {name}: {[round(s, 1) for s in seconds]} s; this tree "
                  f"{ratios} (load {os.getloadavg()[0]:.2f})")  # fmt: skip

    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
