"""Whole runs, side by side: what a user waits for, this project against Stable-Baselines3.

Wall time of one complete ``--steps`` run on HalfCheetah-v4 with the paper's protocol (20
test episodes every 10 k steps), start to finish: building the agent, compiling, training,
evaluating, logging and checkpointing.

- this project: ``train_agent``'s own code path (:func:`agents.train`) with default
  settings — the released initialisation, compiled updates, batched evaluation — for
  ``adam-plain`` and ``vadam``;
- SB3: ``stable_baselines3.DDPG`` with the same hyperparameters (400-300 MLPs, buffer 1e6,
  batch 64, τ = 1e-3, γ = 0.99, one update per step after 64 transitions) and
  ``EvalCallback(n_eval_episodes=20, eval_freq=10_000)``.

Every run is its own process (a cold TorchInductor in-memory cache, as for a user's run;
the on-disk cache is whatever the machine holds), runs take turns per thread count, and
each process is limited to ``--threads`` torch threads. The time spent evaluating is
reported beside the total: this project's from the run's own ``time/eval_seconds``
scalars, SB3's by timing its EvalCallback.

    python benchmarks/whole_run.py [--steps 30000] [--threads 1 2] [--json FILE]
                                   [--eval-every 10000] [--eval-episodes 20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

ENV = "HalfCheetah-v4"
STRATEGIES = ("adam-plain", "vadam")


def run_native(
    strategy: str, steps: int, threads: int, protocol: tuple[int, int]
) -> dict[str, float]:
    import torch
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from agents import resolve_settings, train

    eval_every, eval_episodes = protocol
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as logdir:
        start = time.perf_counter()
        config = resolve_settings(
            strategy=strategy, env=ENV, total_steps=steps, eval_every=eval_every,
            eval_episodes=eval_episodes, logdir=logdir,
        )  # fmt: skip
        run_dir = train(config, progress=False)
        seconds = time.perf_counter() - start
        events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        events.Reload()
        eval_seconds = sum(e.value for e in events.Scalars("time/eval_seconds"))
    return {"seconds": seconds, "eval_seconds": eval_seconds}


def run_sb3(steps: int, threads: int, protocol: tuple[int, int]) -> dict[str, float]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DDPG
    from stable_baselines3.common.callbacks import EvalCallback

    class TimedEvalCallback(EvalCallback):
        """SB3's EvalCallback, with the time its evaluations take."""

        seconds = 0.0

        def _on_step(self) -> bool:
            start = time.perf_counter()
            result = super()._on_step()
            self.seconds += time.perf_counter() - start
            return result

    eval_every, eval_episodes = protocol
    torch.set_num_threads(threads)
    start = time.perf_counter()
    model = DDPG(
        "MlpPolicy", gym.make(ENV), policy_kwargs=dict(net_arch=[400, 300]),
        buffer_size=1_000_000, learning_starts=64, batch_size=64, tau=1e-3, gamma=0.99,
        learning_rate=1e-3, train_freq=1, gradient_steps=1, device="cpu", seed=0,
    )  # fmt: skip
    callback = TimedEvalCallback(
        gym.make(ENV), n_eval_episodes=eval_episodes, eval_freq=eval_every, verbose=0
    )
    model.learn(steps, callback=callback)
    return {"seconds": time.perf_counter() - start, "eval_seconds": callback.seconds}


def in_process(name: str, steps: int, threads: int, protocol: tuple[int, int]) -> dict[str, float]:
    """One run in a fresh process, so that no run inherits another's warm caches."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        if name == "sb3 ddpg":
            return pool.apply(run_sb3, (steps, threads, protocol))
        return pool.apply(run_native, (name.removeprefix("native "), steps, threads, protocol))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--eval-every", type=int, default=10_000, help="the paper's: 10 k")
    parser.add_argument("--eval-episodes", type=int, default=20, help="the paper's: 20")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()

    names = ["sb3 ddpg", *(f"native {s}" for s in STRATEGIES)]
    protocol = (args.eval_every, args.eval_episodes)
    results: dict = {"env": ENV, "steps": args.steps, "eval_every": args.eval_every,
                     "eval_episodes": args.eval_episodes, "threads": {}}  # fmt: skip
    for threads in args.threads:
        runs = {name: in_process(name, args.steps, threads, protocol) for name in names}
        sb3_seconds = runs["sb3 ddpg"]["seconds"]
        ratios = {n: sb3_seconds / r["seconds"] for n, r in runs.items() if n != "sb3 ddpg"}
        results["threads"][threads] = {"runs": runs, "speed ratio to sb3": ratios}
        print(f"--- {threads} thread(s), {args.steps} steps, {args.eval_episodes} test episodes "
              f"every {args.eval_every} steps")  # fmt: skip
        for name, run in runs.items():
            share = run["eval_seconds"] / run["seconds"]
            ratio = f"   {ratios[name]:.2f}x SB3" if name in ratios else ""
            print(f"  {name:18s} {run['seconds']:7.1f} s   evaluation {share:5.1%}{ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
