"""The host's work per environment step as a population grows: Python calls and seconds.

Why: on a device the env's step and the members' update are batched, so what grows with the
number of members N is the host's own work — Python per member per step (counters,
records, callbacks, lines). This measures it exactly on any machine: the arithmetic is made
small (8-8 networks, the sparse mountain car, ``vadam``), so what is left is the engine's
and the runs' bookkeeping.

Each N trains a population as a grid's worker does (:func:`agents.runs.grid.run_task` →
:func:`~agents.runs.population_run.train_population`, every member an ordinary run directory
with its callback, logger and checkpoints, status lines as a grid prints them) twice, for
``--steps`` and for twice as many steps; the difference between the two is the steady
state's, without the build (an evaluation only at each run's end, as ``--eval-every`` past
the run), after a first run of each N that pays its imports and its compile. It prints, for each N:

- Python function calls per environment step (``sys.setprofile``'s Python ``call`` events
  of the process, builtins not counted), and their ratio to the first N's;
- seconds per step (a second pair of runs without the profiler), and seed-steps/s;
- the seconds from the call to the population's first step (building N members and their
  envs, opening N run directories).

    python benchmarks/host_overhead.py [--members 10 200] [--steps 200] [--compile]

The acceptance figure of a population's host work is the calls' ratio between N = 200 and
N = 10 (docs/speed.md, "Host work per member"); timings are the machine's and its load's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from agents.common.callbacks import Callback
from agents.ddpg.engine import Engine
from agents.runs.population_run import train_population
from agents.settings.resolve import resolve_runs

#: updates start past this many steps: a run of --steps must go further
LEARNING_STARTS = 64
#: tiny networks and an update every step from the first: the host's work is what is left
SETTINGS = [
    "hidden_sizes=[8,8]",
    f"learning_starts={LEARNING_STARTS}",
    "batch_size=64",
    "buffer_size=5000",
]


def configs(members: int, steps: int, logdir: Path, compile: bool) -> list:
    return resolve_runs(
        ["vadam"],
        list(range(members)),
        set_options=SETTINGS,
        env="SparseMountainCar-v0",
        total_steps=steps,
        eval_every=10 * steps,
        eval_episodes=1,
        logdir=str(logdir),
        device="cpu",
        compile=compile,
    )


class _FirstStep:
    """The wall-clock time of the population's first step (an Engine's first call of
    ``learn``, which starts with its members' callbacks' ``on_training_start``)."""

    def __init__(self) -> None:
        self.at: float | None = None
        self._learn = Engine.learn

    def __enter__(self) -> _FirstStep:
        first = self

        def learn(engine: Engine, total: int, callbacks: list[Callback], **kwargs):
            if first.at is None:
                first.at = time.perf_counter()
            return first._learn(engine, total, callbacks, **kwargs)

        Engine.learn = learn
        return self

    def __exit__(self, *exc: object) -> None:
        Engine.learn = self._learn


def run(members: int, steps: int, compile: bool, profile: bool) -> tuple[float, int, float]:
    """Seconds, Python calls (0 unprofiled) and seconds to the first step of one
    population trained for ``steps`` in a fresh directory."""
    calls = 0

    def count(frame, event, arg) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    with tempfile.TemporaryDirectory() as logdir:
        runs = configs(members, steps, Path(logdir), compile)
        with _FirstStep() as first:
            started = time.perf_counter()
            if profile:
                sys.setprofile(count)
            try:
                outcomes = train_population(runs, progress="lines")
            finally:
                sys.setprofile(None)
            seconds = time.perf_counter() - started
        failed = [o for o in outcomes if o.error is not None]
        if failed:
            raise SystemExit(f"{len(failed)} member(s) failed: {failed[0].error}")
    return seconds, calls, (first.at or started) - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--compile", action="store_true", help="the update compiled")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.steps <= LEARNING_STARTS:
        parser.error(f"--steps must be more than learning_starts ({LEARNING_STARTS})")
    torch.set_num_threads(args.threads)
    short, long = args.steps, 2 * args.steps
    rows = []
    for members in args.members:
        run(members, short, args.compile, profile=False)  # imports, caches, its compile
        _, calls_short, _ = run(members, short, args.compile, profile=True)
        _, calls_long, _ = run(members, long, args.compile, profile=True)
        seconds_short, _, to_first = run(members, short, args.compile, profile=False)
        seconds_long, _, _ = run(members, long, args.compile, profile=False)
        per_step = (calls_long - calls_short) / (long - short)
        step_seconds = (seconds_long - seconds_short) / (long - short)
        rows.append((members, per_step, step_seconds, to_first))
    base = rows[0][1]
    print(
        f"{'members':>8} {'calls/step':>11} {'× first':>8} {'ms/step':>9} "
        f"{'seed-steps/s':>13} {'to 1st step s':>14}"
    )
    for members, per_step, step_seconds, to_first in rows:
        rate = members / step_seconds if step_seconds > 0 else float("inf")
        print(
            f"{members:>8} {per_step:>11.0f} {per_step / base:>8.2f} {1e3 * step_seconds:>9.2f} "
            f"{rate:>13.0f} {to_first:>14.1f}"
        )


if __name__ == "__main__":
    main()
