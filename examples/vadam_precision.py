"""How far Vadam's σ has moved: the precision s of every actor weight, per layer.

    python examples/vadam_precision.py runs/HalfCheetah-v4/vadam/seed0/checkpoints/latest.pt

Vadam samples θ = μ + ε/√(N s + λ + c) with the raw second moment s, N = ``num_data`` and
the sampling constant c = 1e4 (docs/decisions.md#vadam). While N s stays small against c, σ
stays at its initial 1/√c = 0.01 and Vadam acts as Adam with a fixed weight noise, which the
``fixed-noise`` strategy isolates (docs/decisions.md#fixed-noise). The checkpoint is read as
data only. Besides the largest s (the smallest σ), each row gives the share of the layer's
weights whose σ has fallen by more than 10 % and by more than half from σ₀ = 1/√(λ + c):
which layers the adaptation reaches, not only how far its extreme went.
"""

from __future__ import annotations

import argparse
import math

import torch

from agents.common.checkpoints import read_checkpoint


def row(name: str, s: torch.Tensor, num_data: float, offset: float) -> str:
    """One line of the table for the weights whose second moments are ``s``."""
    shrink = torch.sqrt(offset / (num_data * s + offset))  # σ/σ₀ per weight
    return (f"{name:<16}{s.numel():>9}{s.median().item():>12.4g}{s.max().item():>12.4g}"
            f"{1 / math.sqrt(num_data * s.max().item() + offset):>10.5f}"
            f"{(shrink < 0.9).double().mean().item():>10.2%}"
            f"{(shrink < 0.5).double().mean().item():>10.2%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a native run's checkpoints/latest.pt")
    args = parser.parse_args()
    state = read_checkpoint(args.checkpoint)
    optimizer = state["actor_optimizer"]
    # Parameters Vadam never perturbs (a layer-normalised actor's gains and biases) sit in a
    # group of their own with ``perturb`` false; their s shapes no σ.
    groups = [g for g in optimizer["param_groups"] if g.get("perturb", True)]
    print(f"step {state['counters']['num_timesteps']}")
    print(f"{'parameter':<16}{'weights':>9}{'median s':>12}{'max s':>12}{'min σ':>10}"
          f"{'σ<0.9σ₀':>10}{'σ<σ₀/2':>10}")  # fmt: skip
    every, offsets = [], set()
    for group in groups:
        num_data = group["num_data"]
        offset = group["prior_precision"] + group["sample_constant"]
        offsets.add((num_data, offset))
        for index, name in zip(group["params"], group["param_names"]):
            s = optimizer["state"][index]["exp_avg_sq"].flatten().double()
            every.append(s)
            print(row(name, s, num_data, offset))
    ((num_data, offset),) = offsets
    print(row("all", torch.cat(every), num_data, offset))
    print(f"σ = 1/√(N s + λ + c), N = {num_data:g}, λ + c = {offset:g}")


if __name__ == "__main__":
    main()
