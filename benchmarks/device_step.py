"""A population's training step where its envs step: seed-steps per second and the
host↔device transfers of one step.

One population of N members is built on ``--device`` with the settings a user's run gets —
resolved as ``train_agent`` resolves them (:func:`agents.settings.resolve.resolve_runs`:
the strategy's preset over ``configs/ddpg.yaml``, the task's study file, then
:data:`SET_OPTIONS`), so the update is compiled as the preset says (``compile``, on for the
native engine unless a file says otherwise); ``--eager`` times the uncompiled update too,
after it. ``--task halfcheetah``: HalfCheetah-v4 with Khan et al.'s 400-300 networks;
``--task sparse``: SparseMountainCar-v0 with ``configs/sparse-study.yaml`` (64-64 networks,
normalised actions, 50 updates every 100 steps); ``--strategy`` (``vadam``) picks the preset;
``--cuda-graph`` times the compiled update and the members' batched acting replayed from CUDA
graphs too (:mod:`agents.ddpg.captured_call`: whether it pays decides whether it becomes a
setting).
Each member's callback works every ``--boundary`` steps (100: a run's progress boundary, the
most frequent of its own), so where the envs step on the device the host reads the steps'
rewards and flags there only (:mod:`agents.ddpg.device_rows`); ``--every-step`` times the
same population with callbacks called every step (SB3's contract), which reads every step,
after it: the ratio is what reading at boundaries pays.
Its envs come from ``make_vector_env`` as a population run's do (``auto``: on a CUDA device
MuJoCo Warp where it is installed, the car as torch code; on the CPU one ``mujoco.batch``,
the numpy car; ``--backend`` picks). It is warmed for ``--warmup`` steps past
``learning_starts`` (its first updates, and with them the compile), then timed for
``--steps`` steps of training, both rounded up to whole rounds of ``train_every`` steps (no
test episodes: ``benchmarks/timed_train.py`` times whole runs). It prints, for each N of
``--members`` and each path:

- seed-steps/s (N × steps / seconds, the device synchronised at both ends);
- the engine's crossings per step (``Engine.crossings``: the envs' and the step's one packed
  copy of rewards and flags; :mod:`agents.common.tensor_envs`);
- on a CUDA device, every copy between host and device per step as the CUDA profiler records
  it (``Memcpy HtoD``/``DtoH`` events over 50 steps, or a round: the crossings above plus the
  update's own).

    python benchmarks/device_step.py [--device cpu|cuda] [--members 1 10 100]
                                     [--steps 500] [--backend auto|warp|torch|batch]
                                     [--task halfcheetah|sparse] [--strategy vadam]
                                     [--eager] [--cuda-graph] [--every-step]
                                     [--boundary 100]

The CPU dry run (what CI's machines can do) is ``--device cpu --backend warp`` with Warp's CPU
backend (its kernels compile once, minutes, then are cached); ``benchmarks/gpu_check.sh``
runs it on a GPU.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections import Counter

import torch

from agents.common.callbacks import Callback
from agents.common.vector_envs import make_vector_env
from agents.ddpg.engine import Engine
from agents.ddpg.population import build_members
from agents.runs.agent_factory import make_task_env
from agents.settings import RunSettings
from agents.settings.resolve import resolve_runs
from agents.tasks import with_task_report

#: over the presets: a 100 k buffer (1 000 members' fit a GPU's memory; 1e6 each would take
#: 168 GB), as the large population of ``gpu_check.sh`` sets it
SET_OPTIONS = ["buffer_size=100000"]
#: each task: its env and the study file a user's run of it names (None: the presets alone)
TASKS = {
    "halfcheetah": ("HalfCheetah-v4", None),
    "sparse": ("SparseMountainCar-v0", "configs/sparse-study.yaml"),
}


def settings(
    task: str, strategy: str, members: int, device: str, compile: bool | None
) -> list[RunSettings]:
    """The members' settings as ``train_agent --opt STRATEGY --seeds N`` resolves them
    (``compile`` None: the preset's)."""
    env, config_file = TASKS[task]
    return resolve_runs(
        [strategy],
        list(range(members)),
        config_file,
        SET_OPTIONS,
        env=env,
        device=device,
        compile=compile,
    )


def population(configs: list[RunSettings], backend: str) -> Engine:
    """The members of ``configs`` and their envs, built as a population run builds them
    (:mod:`agents.runs.population_run`), on ``backend``'s vector env."""
    first = configs[0]
    built = build_members(
        [make_task_env(config) for config in configs],
        [config.learner for config in configs],
        [config.seed for config in configs],
        first.device,
    )
    envs = make_vector_env(
        first.env,
        len(configs),
        first.env_kwargs,
        first.max_episode_steps,
        backend=backend,
        normalize_actions=first.normalize_actions,
        wrap=with_task_report,
        device=first.device,
    )
    return Engine(built.agents, envs, built.state)


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def copies_per_step(engine: Engine, steps: int, callbacks: list[Callback]) -> Counter:
    """The CUDA profiler's host↔device copies of ``steps`` steps, per step."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        engine.learn(steps, callbacks)
        torch.cuda.synchronize()
    counts: Counter = Counter()
    for event in prof.events():
        for kind in ("HtoD", "DtoH"):
            if "Memcpy" in event.name and kind in event.name:
                counts[kind] += 1
    return Counter({kind: n / steps for kind, n in counts.items()})


class Boundaries(Callback):
    """A run's callback as the engine sees it: work every ``every`` steps, none between."""

    def __init__(self, every: int) -> None:
        self.every = every

    def next_call(self, agent) -> tuple[int, bool]:
        return (agent.num_timesteps // self.every + 1) * self.every, False


def whole_rounds(steps: int, every: int) -> int:
    """``steps`` rounded up to whole rounds of ``every`` steps."""
    return -(-steps // every) * every


def timed(
    configs: list[RunSettings],
    args: argparse.Namespace,
    captured: bool = False,
    every_step: bool = False,
) -> str:
    """One population's line: its seed-steps/s over ``args.steps`` timed steps after its
    warm-up, crossings and (on CUDA) the profiler's copies per step; ``captured``: its update
    replayed from a CUDA graph; ``every_step``: its callbacks called every step."""
    engine = population(configs, args.backend)
    if captured and not engine.capture_update():
        return f"  N = {len(configs):4d}: an eager update, nothing to capture"
    # (False for one member, which acts through its own predict)
    acting_captured = captured and engine.capture_acting()
    members, learner = len(configs), configs[0].learner
    if every_step:
        callbacks = [Callback() for _ in range(members)]
    else:
        callbacks = [Boundaries(args.boundary) for _ in range(members)]
    # whole rounds of updates (the sparse study's 50 every 100 steps) from a round's start
    warmup = whole_rounds(learner.learning_starts + args.warmup, learner.train_every)
    steps = whole_rounds(args.steps, learner.train_every)
    engine.learn(warmup, callbacks)
    gc.collect()  # the last population's garbage is not this one's time
    synchronize(args.device)
    before = engine.crossings
    start = time.perf_counter()
    engine.learn(steps, callbacks)
    synchronize(args.device)
    seconds = time.perf_counter() - start
    crossings = (engine.crossings - before) / steps
    path = "captured" if captured else "compiled" if learner.compile else "eager"
    if acting_captured:
        path += "+acting"
    reads = "every step" if not engine.reads_at_boundaries() else f"every {args.boundary} steps"
    line = (f"  N = {members:4d} {path:>15}: {members * steps / seconds:9.0f} seed-steps/s "
            f"({steps} steps), {type(engine.envs).__name__}, rows read {reads}, "
            f"{crossings:.2f} crossings/step")  # fmt: skip
    if torch.device(args.device).type == "cuda":
        copies = copies_per_step(engine, whole_rounds(50, learner.train_every), callbacks)
        line += f", CUDA copies/step: HtoD {copies['HtoD']:.2f}, DtoH {copies['DtoH']:.2f}"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--members", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--backend", default="auto", choices=["auto", "warp", "torch", "batch"])
    parser.add_argument("--task", default="halfcheetah", choices=sorted(TASKS))
    parser.add_argument("--strategy", default="vadam", help="the preset (default vadam)")
    parser.add_argument(
        "--eager", action="store_true", help="also the eager update, after the preset's"
    )
    parser.add_argument(
        "--cuda-graph",
        action="store_true",
        help="also the compiled update replayed from a CUDA graph, after the preset's",
    )
    parser.add_argument(
        "--every-step",
        action="store_true",
        help="also the callbacks called every step (the rows read every step), after",
    )
    parser.add_argument(
        "--boundary", type=int, default=100, help="steps between the callbacks' calls (100)"
    )
    args = parser.parse_args()
    # (compile, captured, every step) of each timed path
    paths: list[tuple[bool | None, bool, bool]] = [(None, False, False)]
    paths += [(None, False, True)] if args.every_step else []
    paths += [(True, True, False)] if args.cuda_graph else []
    paths += [(False, False, False)] if args.eager else []
    first = settings(args.task, args.strategy, 1, args.device, None)[0]
    networks = "-".join(map(str, first.learner.hidden_sizes))
    compiled = "compiled" if first.learner.compile else "eager"
    print(f"{first.env} {networks} {args.strategy} (the preset's update: {compiled}) on "
          f"{args.device} ({args.backend} envs); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip
    for members in args.members:
        for compile, captured, every_step in paths:
            configs = settings(args.task, args.strategy, members, args.device, compile)
            print(timed(configs, args, captured, every_step), flush=True)


if __name__ == "__main__":
    main()
