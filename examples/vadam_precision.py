"""How far Vadam's σ has moved: the precision s of every actor weight, per layer.

    python examples/vadam_precision.py runs/HalfCheetah-v4/vadam/seed0/checkpoints/latest.pt

Vadam samples θ = μ + ε/√(s + λ + c) with the raw second moment s and the sampling constant
c = 1e4 (docs/decisions.md#vadam). While s stays small against c, σ stays at its initial
1/√c = 0.01 and Vadam acts as Adam with a fixed weight noise, which the ``fixed-noise``
strategy isolates (docs/decisions.md#fixed-noise). The checkpoint is read as data only.
"""

from __future__ import annotations

import argparse
import math

import torch

from agents.common.checkpoints import read_checkpoint


def _parameter_names(actor: dict, states: list[dict]) -> list[str]:
    """The actor's parameter names in the optimizer's order: its state dict holds them in
    ``parameters()`` order, with buffers (the action bounds) in between, which no optimizer
    slot's shape follows."""
    names, entries = [], iter(actor.items())
    for state in states:
        name, tensor = next(entries)
        while tensor.shape != state["exp_avg_sq"].shape:
            name, tensor = next(entries)
        names.append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a native run's checkpoints/latest.pt")
    args = parser.parse_args()
    state = read_checkpoint(args.checkpoint)
    optimizer = state["actor_optimizer"]
    (group,) = optimizer["param_groups"]
    offset = group["prior_precision"] + group["sample_constant"]
    names = _parameter_names(state["actor"], [optimizer["state"][i] for i in group["params"]])
    print(f"step {state['counters']['num_timesteps']}, c + λ = {offset:g}")
    print(f"{'parameter':<16}{'weights':>9}{'median s':>12}{'max s':>12}{'min σ':>10}")
    every = []
    for index, name in zip(group["params"], names):
        s = optimizer["state"][index]["exp_avg_sq"].flatten().double()
        every.append(s)
        print(
            f"{name:<16}{s.numel():>9}{s.median().item():>12.4g}{s.max().item():>12.4g}"
            f"{1 / math.sqrt(s.max().item() + offset):>10.5f}"
        )
    s = torch.cat(every)
    print(f"{'all':<16}{s.numel():>9}{s.median().item():>12.4g}{s.max().item():>12.4g}"
          f"{1 / math.sqrt(s.max().item() + offset):>10.5f}")  # fmt: skip


if __name__ == "__main__":
    main()
