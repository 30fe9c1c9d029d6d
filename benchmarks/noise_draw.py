"""What one draw of the actor's weight noise costs, drawn in different ways.

Every weight-noise strategy draws a fresh ε for all actor weights at every environment
step (the paper's per-step sampling). This measures the cost per step of that draw for the
paper's HalfCheetah actor (17-400-300-6, ~130 k numbers) — the way the optimizers do it
(one ``normal_`` per parameter tensor from a ``torch.Generator``) against the ways that
could be cheaper while sampling exactly the same distribution:

- one ``normal_`` into a single flat buffer per step (one call instead of six);
- blocks: one ``normal_`` for ``--block`` steps at once into a preallocated buffer;
- NumPy's PCG64 generator (``standard_normal``, float32, ziggurat), per step;
- as a reference, a memory copy of the same size (the least any draw must cost).

    python benchmarks/noise_draw.py [--threads 1] [--repeats 2000] [--block 100]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from agents.ddpg.networks import Actor


def per_step_seconds(draw: Callable[[], None], repeats: int, steps_per_call: int = 1) -> float:
    for _ in range(20):
        draw()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats // steps_per_call):
            draw()
        samples.append((time.perf_counter() - start) / (repeats // steps_per_call))
    return statistics.median(samples) / steps_per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    actor = Actor(17, -np.ones(6), np.ones(6), (400, 300))
    shapes = [p.shape for p in actor.parameters()]
    size = sum(p.numel() for p in actor.parameters())
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.empty(s) for s in shapes]
    flat = torch.empty(size)
    block = torch.empty(args.block, size)
    copy_source = torch.randn(size)
    numpy_generator = np.random.Generator(np.random.PCG64(0))
    numpy_out = np.empty(size, dtype=np.float32)

    def per_tensor() -> None:
        for t in tensors:
            t.normal_(generator=generator)

    ways = {
        "per tensor (as the optimizers)": (per_tensor, 1),
        "one flat buffer": (lambda: flat.normal_(generator=generator), 1),
        f"blocks of {args.block} steps": (lambda: block.normal_(generator=generator), args.block),
        "numpy PCG64 float32": (
            lambda: numpy_generator.standard_normal(dtype=np.float32, out=numpy_out),
            1,
        ),
        "memory copy (lower bound)": (lambda: flat.copy_(copy_source), 1),
    }
    print(f"actor with {size} weights, {args.threads} thread(s); per environment step:")
    baseline = None
    for name, (draw, steps) in ways.items():
        seconds = per_step_seconds(draw, args.repeats, steps)
        baseline = baseline or seconds
        print(
            f"  {name:32s} {seconds * 1e6:7.1f} µs  {seconds / size * 1e9:5.2f} ns/number"
            f"  {seconds / baseline:5.2f}x"
        )


if __name__ == "__main__":
    main()
