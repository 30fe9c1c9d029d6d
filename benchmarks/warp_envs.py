"""Vector envs that step on a device — MuJoCo Warp's, and the mountain car as torch code
(``--env SparseMountainCar-v0``) —: env-steps per second for N worlds, on the device and
through numpy, beside the project's numpy form of the env on the host.

For each N of ``--worlds``, ``make_vector_env(ENV, N, backend="warp" or "torch",
device=DEVICE)``, reset, warmed up (the first steps compile Warp's kernels for the device, or
load them from Warp's kernel cache), then ``--steps`` steps timed, each with uniform random
actions in [−1, 1] made on the device before the clock starts:

- ``tensors``: ``step_tensors`` — torch in, torch out, every result left on the device
  (what an engine that keeps the step on the device calls);
- ``numpy``: ``step`` — the vector-env contract for today's engine: the actions' copy to the
  device, the results' one copy back, float64 and the infos;
- ``numpy-batch``: the env's numpy form (``backend="batch"``: ``mujoco.batch``, the numpy car)
  on the host, the same actions: what a CPU run steps;
- for MuJoCo Warp on a CUDA device also the physics alone (the ``frame_skip`` ``mjw.step``
  calls of one env step, no reward, reset or torch work) two ways: ``physics`` launched
  kernel by kernel, and ``physics-graph`` captured once as a CUDA graph (``wp.ScopedCapture``)
  and replayed: whether a graph pays for the step's many small launches.

The clock stops after ``torch.cuda.synchronize()`` (on a CUDA device). Results are printed
and, with ``--json``, written as ``{"device": …, "env": …, "results": [{"worlds", "path",
"steps", "seconds", "env_steps_per_s"}]}``. ``benchmarks/gpu_check.sh`` runs it on a GPU;
on a CPU (``--device cpu``: Warp's CPU backend) it is a dry run, not a measurement.

    python benchmarks/warp_envs.py [--env HalfCheetah-v4|SparseMountainCar-v0]
                                   [--worlds 100 1000] [--steps 200]
                                   [--device cuda] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

import torch

from agents.common.vector_envs import WARP, make_vector_env

WARMUP = 5


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(env_id: str, worlds: int, path: str, calls: list, device: torch.device) -> dict:
    """``calls`` (each one env step of every world) timed, printed and returned as a row."""
    _sync(device)
    start = time.perf_counter()
    for call in calls:
        call()
    _sync(device)
    seconds = time.perf_counter() - start
    rate = worlds * len(calls) / seconds
    print(f"{env_id} {worlds:5d} worlds {path:13s} {rate:12.0f} env-steps/s", flush=True)
    return {"worlds": worlds, "path": path, "steps": len(calls), "seconds": seconds,
            "env_steps_per_s": rate}  # fmt: skip


def measure(env_id: str, worlds: int, steps: int, device: str) -> list[dict]:
    """Every path's env-steps/s for ``worlds`` copies of ``env_id``."""
    warp = env_id in WARP
    vector = make_vector_env(env_id, worlds, backend="warp" if warp else "torch", device=device)
    vector.reset(seed=0)
    shape = vector.action_space.shape
    actions = [2 * torch.rand(shape, device=vector.device) - 1 for _ in range(steps)]
    host = [a.cpu().numpy() for a in actions]
    for a in actions[:WARMUP]:
        vector.step_tensors(a)
    tensors = [partial(vector.step_tensors, a) for a in actions]
    results = [
        _timed(env_id, worlds, "tensors", tensors, vector.device),
        _timed(env_id, worlds, "numpy", [partial(vector.step, a) for a in host], vector.device),
    ]
    batch = make_vector_env(env_id, worlds, backend="batch")
    batch.reset(seed=0)
    calls = [partial(batch.step, a) for a in host]
    results.append(_timed(env_id, worlds, "numpy-batch", calls, torch.device("cpu")))
    if warp and vector.device.type == "cuda":
        results += _physics(vector, worlds, steps, env_id)
    vector.close()
    return results


def _physics(vector, worlds: int, steps: int, env_id: str) -> list[dict]:
    """The env step's physics alone (``WarpBatchEnv._physics``), kernel by kernel and as
    its replayed CUDA graph."""
    results = []
    for path, graph in (("physics", False), ("physics-graph", True)):
        vector.use_graph = graph
        vector._physics()  # the graph is captured at its first call
        calls = [vector._physics] * steps
        results.append(_timed(env_id, worlds, path, calls, vector.device))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--worlds", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = [r for n in args.worlds for r in measure(args.env, n, args.steps, args.device)]
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    record = {"device": name, "env": args.env, "results": results}
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
