"""How far the initial weight noise moves the actions, per initialisation scheme.

Every weight-noise strategy starts from the absolute σ₀ = 0.01 (1/√1e4). What that does
to the actions depends on the scale of the weights it perturbs, i.e. on the ``init``
setting. This script collects states of the environment under uniformly random actions,
builds the actor of each scheme (several seeds) and prints, in RMS over states and action
dimensions (actions in units of half the action range):

* the mean policy's initial actions, π_μ(s);
* how far noise of std σ₀ on every weight moves them, π_{μ+σ₀ε}(s) − π_μ(s).

    python examples/initial_action_noise.py                 # HalfCheetah-v4, 2000 states
    python examples/initial_action_noise.py --env Hopper-v4 --states 5000 --seeds 10
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch

from agents.common.initialisation import INIT_SCHEMES
from agents.ddpg.networks import Actor


def collect_states(env_id: str, count: int, seed: int) -> torch.Tensor:
    """``count`` states visited by uniformly random actions (episodes restarted as needed)."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    states = []
    obs, _ = env.reset(seed=seed)
    while len(states) < count:
        states.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return torch.as_tensor(np.array(states), dtype=torch.float32)


@torch.no_grad()
def action_statistics(
    states: torch.Tensor, action_dim: int, scheme: str, sigma: float, seed: int
) -> tuple[float, float]:
    """RMS of the initial mean actions and of the change noise of std ``sigma`` makes."""
    torch.manual_seed(seed)
    ones = np.ones(action_dim, dtype=np.float32)
    actor = Actor(states.shape[1], -ones, ones, (400, 300), init=scheme)
    mean_actions = actor(states)
    noisy = [p + sigma * torch.randn_like(p) for p in actor.parameters()]
    moved = actor(states, noisy) - mean_actions
    rms = lambda x: x.pow(2).mean().sqrt().item()  # noqa: E731
    return rms(mean_actions), rms(moved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--states", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5, help="actors per scheme")
    parser.add_argument("--sigma", type=float, default=0.01, help="weight-noise std")
    args = parser.parse_args()

    states = collect_states(args.env, args.states, seed=0)
    action_dim = gym.make(args.env).action_space.shape[0]
    print(f"{args.env}: {args.states} states, σ = {args.sigma}, {args.seeds} actors per scheme")
    print("| init | mean action (RMS) | moved by the noise (RMS) |")
    print("|---|---|---|")
    for scheme in INIT_SCHEMES:
        stats = np.array(
            [
                action_statistics(states, action_dim, scheme, args.sigma, seed)
                for seed in range(args.seeds)
            ]
        )
        mean, moved = stats.mean(axis=0)
        print(f"| `{scheme}` | {mean:.3f} | {moved:.3f} |")


if __name__ == "__main__":
    main()
