"""A population's training step where its envs step: seed-steps per second and the
host↔device transfers of one step.

One population of N members (``--task halfcheetah``: HalfCheetah-v4 with Khan et al.'s
400-300 networks; ``--task sparse``: SparseMountainCar-v0 with the sparse study's 64-64
networks and its normalised actions; ``vadam``, one update per step) is built on ``--device``,
its envs from ``make_vector_env`` (``auto``: on a CUDA device MuJoCo Warp where it is installed,
the car as torch code; on the CPU one ``mujoco.batch``, the numpy car; ``--backend`` picks),
warmed for ``--warmup`` steps past ``learning_starts`` (compiling its update), then
timed for ``--steps`` steps of training (no test episodes: ``benchmarks/population.py`` times
whole runs). It prints, for each N of ``--members``:

- seed-steps/s (N × steps / seconds, the device synchronised at both ends);
- the engine's crossings per step (``Engine.crossings``: the envs' and the step's one packed
  copy of rewards and flags; :mod:`agents.common.tensor_envs`);
- on a CUDA device, every copy between host and device per step as the CUDA profiler records
  it (``Memcpy HtoD``/``DtoH`` events over 50 steps: the crossings above plus the update's
  own, e.g. the applied-step flags its next coefficients read).

    python benchmarks/device_step.py [--device cpu|cuda] [--members 1 10 100]
                                     [--steps 500] [--backend auto|warp|torch|batch]
                                     [--task halfcheetah|sparse]

The CPU dry run (what CI's machines can do) is ``--device cpu --backend warp`` with Warp's CPU
backend (its kernels compile once, minutes, then are cached); ``benchmarks/gpu_check.sh``
runs it on a GPU.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

import torch

from agents.common.callbacks import Callback
from agents.common.envs import make_env
from agents.common.vector_envs import make_vector_env
from agents.ddpg.engine import Engine
from agents.ddpg.population import build_members
from agents.settings import DDPGSettings

#: a 100 k buffer: 1 000 members' fit a GPU's memory (1e6 each would take 168 GB)
SETTINGS = {
    "strategy": "vadam",
    "learning_starts": 1000,
    "buffer_size": 100_000,
}
#: each task: its env, its networks, whether the learner acts in [−1, 1]
TASKS = {
    "halfcheetah": ("HalfCheetah-v4", {"hidden_sizes": [400, 300]}, False),
    "sparse": (
        "SparseMountainCar-v0",
        {"hidden_sizes": [64, 64], "layer_norm": True, "normalize_observations": True},
        True,
    ),
}


def population(members: int, device: str, backend: str, task: str) -> Engine:
    env, settings, normalize_actions = TASKS[task]
    config = DDPGSettings.from_values({**SETTINGS, **settings})
    built = build_members(
        [make_env(env) for _ in range(members)], [config] * members, list(range(members)), device
    )
    envs = make_vector_env(
        env, members, backend=backend, device=device, normalize_actions=normalize_actions
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--members", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--backend", default="auto", choices=["auto", "warp", "torch", "batch"])
    parser.add_argument("--task", default="halfcheetah", choices=sorted(TASKS))
    args = parser.parse_args()
    env, settings, _ = TASKS[args.task]
    networks = "-".join(map(str, settings["hidden_sizes"]))
    print(f"{env} {networks} vadam on {args.device} ({args.backend} envs); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip
    for members in args.members:
        engine = population(members, args.device, args.backend, args.task)
        callbacks = [Callback() for _ in range(members)]
        engine.learn(SETTINGS["learning_starts"] + args.warmup, callbacks)
        synchronize(args.device)
        before = engine.crossings
        start = time.perf_counter()
        engine.learn(args.steps, callbacks)
        synchronize(args.device)
        seconds = time.perf_counter() - start
        crossings = (engine.crossings - before) / args.steps
        line = (f"  N = {members:4d}: {members * args.steps / seconds:9.0f} seed-steps/s, "
                f"{type(engine.envs).__name__}, {crossings:.2f} crossings/step")  # fmt: skip
        if torch.device(args.device).type == "cuda":
            copies = copies_per_step(engine, 50, callbacks)
            line += f", CUDA copies/step: HtoD {copies['HtoD']:.2f}, DtoH {copies['DtoH']:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
