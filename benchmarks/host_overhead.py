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

``--single`` counts a single run's host work instead, where a small network's step is
mostly acting, the env and the store: ``train_agent --config configs/sparse-study.yaml
--env SparseCartpoleSwingup-v0`` (64-64 networks, 50 updates every 100 steps, updates from
step 200) for ``--steps``, in this process, the Python calls of each of its last
``--window`` steps counted (from one env ``step`` of the run's env to the next), acting
steps and update steps (a step with its round of updates) apart, and the builtin (C
function) calls beside them; ``--functions K`` lists the K functions called most per step
of each kind. Only ``agents.cli`` is imported from the tree, so the same script counts
another checkout's run (``PYTHONPATH=../d1f21b0``: the tree whose ``agents`` is imported
is the one measured):

    python benchmarks/host_overhead.py --single [--steps 1200] [--window 800] [--functions K]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

#: updates start past this many steps: a run of --steps must go further
LEARNING_STARTS = 64
#: tiny networks and an update every step from the first: the host's work is what is left
SETTINGS = [
    "hidden_sizes=[8,8]",
    f"learning_starts={LEARNING_STARTS}",
    "batch_size=64",
    "buffer_size=5000",
]


#: --single: the sparse study's config (64-64 networks, observation normalisation, the
#: critic's LayerNorm, 50 updates every 100 steps) on this task, updates from this step
SINGLE_ENV = "SparseCartpoleSwingup-v0"
SINGLE_LEARNING_STARTS = 200
SINGLE_TRAIN_EVERY = 100


def configs(members: int, steps: int, logdir: Path, compile: bool) -> list:
    from agents.settings.resolve import resolve_runs

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
        from agents.ddpg.engine import Engine

        self.at: float | None = None
        self._engine = Engine
        self._learn = Engine.learn

    def __enter__(self) -> _FirstStep:
        first = self

        def learn(engine, total: int, callbacks: list, **kwargs):
            if first.at is None:
                first.at = time.perf_counter()
            return first._learn(engine, total, callbacks, **kwargs)

        self._engine.learn = learn
        return self

    def __exit__(self, *exc: object) -> None:
        self._engine.learn = self._learn


def run(members: int, steps: int, compile: bool, profile: bool) -> tuple[float, int, float]:
    """Seconds, Python calls (0 unprofiled) and seconds to the first step of one
    population trained for ``steps`` in a fresh directory."""
    from agents.runs.population_run import train_population

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


def single_calls(steps: int, window: int, strategy: str) -> dict:
    """Python calls of each of the last ``window`` environment steps of one single run of the
    sparse study's config (``train_agent`` in this process, its imports from ``PYTHONPATH``'s
    tree), split into acting steps and update steps (those that end with a round of
    ``gradient_steps`` updates): the calls of a step are those from its env's ``step`` to the
    next step's (the store, updates and callbacks of one step, the acting of the next).
    Returns each kind's calls a step (mean and median) and, per acting step, the functions
    they went to (``module:qualname`` → calls a step)."""
    import gymnasium as gym

    import agents
    from agents.cli import main as train_agent

    module, name = gym.spec(SINGLE_ENV).entry_point.split(":")
    target = getattr(importlib.import_module(module), name).step.__code__
    tree = Path(agents.__file__).resolve().parents[1]
    first = steps - window
    marks: list[int] = []  # the call count at each training step's env.step
    by_code: dict[tuple[int, object], int] = {}  # (step, code) → calls, in the window
    builtin_marks: list[int] = []  # the builtin (C function) calls at the same moments
    calls = builtins = 0

    def count(frame, event, arg) -> None:
        nonlocal calls, builtins
        if event == "c_call":
            builtins += 1
            return
        if event != "call":
            return
        calls += 1
        code = frame.f_code
        if code is target:
            marks.append(calls)
            builtin_marks.append(builtins)
        n = len(marks)
        if first <= n < steps:
            key = (n, code)
            by_code[key] = by_code.get(key, 0) + 1

    with tempfile.TemporaryDirectory() as logdir:
        argv = [
            "--config", str(tree / "configs" / "sparse-study.yaml"), "--env", SINGLE_ENV,
            "--opt", strategy, "--seed", "0", "--steps", str(steps),
            "--set", f"learning_starts={SINGLE_LEARNING_STARTS}", "--eval-every", str(10 * steps),
            "--eval-episodes", "1", "--no-progress", "--logdir", logdir,
        ]  # fmt: skip
        sys.setprofile(count)
        try:
            status = train_agent(argv)
        finally:
            sys.setprofile(None)
    if status:
        raise SystemExit(f"train_agent exited {status}")
    per_step = np.diff(np.array(marks[first - 1 : steps]))  # steps first .. steps-1
    builtin_per_step = np.diff(np.array(builtin_marks[first - 1 : steps]))
    numbers = np.arange(first, steps)
    updating = numbers % SINGLE_TRAIN_EVERY == 0
    result = {}
    for kind, rows in (("acting", ~updating), ("update", updating)):
        kind_steps = set(numbers[rows].tolist())
        functions: dict[str, float] = {}
        for (n, code), c in by_code.items():
            if n in kind_steps:
                where = f"{Path(code.co_filename).name}:{code.co_firstlineno}:{code.co_qualname}"
                functions[where] = functions.get(where, 0) + c / len(kind_steps)
        result[kind] = {
            "steps": int(rows.sum()),
            "mean": float(per_step[rows].mean()),
            "median": float(np.median(per_step[rows])),
            "builtins": float(builtin_per_step[rows].mean()),
            "functions": functions,
        }
    return result


def single_main(args: argparse.Namespace) -> None:
    result = single_calls(args.steps, args.window, args.strategy)
    print(f"single run, {SINGLE_ENV}, sparse study, {args.strategy}: Python calls per step, "
          f"the last {args.window} of {args.steps} steps")  # fmt: skip
    for kind, what in (("acting", "acting step"), ("update", "update step (with its updates)")):
        r = result[kind]
        print(f"  {what}: mean {r['mean']:.1f}, median {r['median']:.0f} ({r['steps']} steps); "
              f"builtin calls {r['builtins']:.1f}")  # fmt: skip
    for kind in ("acting", "update") if args.functions else ():
        print(f"  per {kind} step, by function:")
        ranked = sorted(result[kind]["functions"].items(), key=lambda item: -item[1])
        for where, c in ranked[: args.functions]:
            print(f"  {c:8.2f}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--steps", type=int, help="steps of a run (200; --single: 1200)")
    parser.add_argument("--compile", action="store_true", help="the update compiled")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--single",
        action="store_true",
        help="a single run of the sparse study's config instead (module docstring)",
    )
    parser.add_argument("--window", type=int, default=800, help="--single: the steps counted")
    parser.add_argument("--strategy", default="vadam", help="--single: the run's --opt")
    parser.add_argument(
        "--functions",
        type=int,
        default=0,
        metavar="K",
        help="--single: the K functions called most per step of each kind",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.single:
        args.steps = args.steps or 1200
        if args.window >= args.steps - SINGLE_LEARNING_STARTS:
            parser.error(f"--window must start past learning_starts ({SINGLE_LEARNING_STARTS})")
        return single_main(args)
    args.steps = args.steps or 200
    if args.steps <= LEARNING_STARTS:
        parser.error(f"--steps must be more than learning_starts ({LEARNING_STARTS})")
    short, long = args.steps, 2 * args.steps
    rows = []
    for members in args.members:
        # Imports, caches, its compile: a graph new to Inductor's cache is built in the first
        # run and loaded from the disk cache in the second, a one-time cost (~36 k calls at
        # N = 10) that would otherwise fall into the first counted run.
        for _ in range(2 if args.compile else 1):
            run(members, short, args.compile, profile=False)
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
