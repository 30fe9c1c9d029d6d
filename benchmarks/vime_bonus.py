"""What VIME's bonus costs per environment step, against a DDPG policy update.

For each posterior of the dynamics model (``bbb``, ``noisy-adam``, ``noisy-kfac``) with
VIME's released settings (a 32-unit model, 10 weight samples for bbb, 0.1 training steps
of 10 transitions per environment step), on the transitions of a native DDPG agent:

- **off-policy** (DDPG; every replayed minibatch scored anew, ``docs/vime.md``): per
  environment step, ``intrinsic_rewards`` of one 64-transition minibatch, plus the model's
  training amortised (``updates_per_step`` minibatch steps) and the pool's add;
- **on-policy** (TRPO; VIME's schedule): per environment step, the batched information gain
  of a whole rollout (``--rollout`` transitions) divided by its length, plus the training;

against one native DDPG update (``train_step``: critic, actor, targets; 400-300 networks,
batch 64, ``adam-plain``; eager, or compiled with ``--compile``). bbb is timed once per
information-gain estimator of ``--bbb-gain-noise``: ``unit`` (the released local
reparameterisation, row ``bbb``), ``weight`` (row ``bbb-weight``). The pieces are timed in
alternating rounds so that drift of a shared machine hits all alike; medians of the rounds
are reported, and their ratios to the DDPG update are the result.

    python benchmarks/vime_bonus.py [--env HalfCheetah-v4] [--rounds 5] [--block 50]
                                    [--rollout 2048] [--threads 1] [--compile] [--json FILE]
                                    [--bbb-gain-noise unit weight]
    python benchmarks/vime_bonus.py --tiny      # a few seconds: does it run?
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

from agents import DDPG
from agents.curiosity import POSTERIORS, VimeBonus, resolve_bonus


def seconds_per_call(run: Callable[[], object], block: int) -> float:
    start = time.perf_counter()
    for _ in range(block):
        run()
    return (time.perf_counter() - start) / block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=50, help="calls timed per round")
    parser.add_argument("--rollout", type=int, default=2048, help="on-policy rollout length")
    parser.add_argument("--warmup", type=int, default=2000, help="DDPG steps before timing")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="compiled DDPG updates")
    parser.add_argument("--posteriors", nargs="+", default=list(POSTERIORS))
    parser.add_argument(
        "--bbb-gain-noise", nargs="+", choices=["unit", "weight"], default=["unit"],
        help="bbb's information-gain estimators to time (bonus.bbb_gain_noise)",
    )  # fmt: skip
    parser.add_argument("--tiny", action="store_true", help="a smoke run on Pendulum-v1")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    hidden, vime = [400, 300], {}
    if args.tiny:
        args.env, args.rounds, args.block, args.rollout, args.warmup = "Pendulum-v1", 1, 2, 64, 200
        hidden, vime = [16, 16], {"hidden_sizes": [8], "num_samples": 2}
    torch.set_num_threads(args.threads)

    agent = DDPG(
        args.env, strategy="adam-plain", seed=0, device="cpu", compile=args.compile,
        hidden_sizes=hidden,
    )  # fmt: skip
    agent.learn(args.warmup)
    buffer = agent.buffer
    bonuses, fit_step_updates = {}, {}
    variants = [
        (posterior if noise == "unit" else f"{posterior}-{noise}", posterior, noise)
        for posterior in args.posteriors
        for noise in (args.bbb_gain_noise if posterior == "bbb" else ["unit"])
    ]
    for name, posterior, noise in variants:
        settings = {"kind": "vime", "posterior": posterior, "bbb_gain_noise": noise, **vime}
        config = resolve_bonus(settings)
        bonus = VimeBonus(config, buffer.obs.shape[1], buffer.actions.shape[1], seed=0)
        n = len(buffer)
        bonus.add(buffer.obs[:n], buffer.actions[:n], buffer.next_obs[:n])
        bonus.steps_since_fit = config.min_pool_size  # a first fit of VIME's size
        bonus.fit()
        bonuses[name] = bonus
        fit_step_updates[name] = config.updates_per_step

    def score(bonus: VimeBonus, size: int) -> None:
        """The bonus of a minibatch (normalised, as a learner gets it), or of a rollout."""
        batch = buffer.sample(size, agent.generator)
        transitions = (batch.obs, batch.actions, batch.next_obs)
        if size == 64:
            bonus.intrinsic_rewards(*transitions)
        else:
            bonus.information_gain(*transitions)

    pieces: dict[str, Callable[[], object]] = {"ddpg update": agent.train_step}
    for name, bonus in bonuses.items():
        pieces[f"{name} score 64"] = lambda b=bonus: score(b, 64)
        pieces[f"{name} train step"] = lambda b=bonus: b.train(1)
        pieces[f"{name} score rollout"] = lambda b=bonus: score(b, args.rollout)
    blocks = {name: max(1, args.block // (10 if "rollout" in name else 1)) for name in pieces}
    for run in pieces.values():  # warm-up
        seconds_per_call(run, 1)
    timings: dict[str, list[float]] = {name: [] for name in pieces}
    for _ in range(args.rounds):
        for name, run in pieces.items():
            timings[name].append(seconds_per_call(run, blocks[name]))
    ms = {name: statistics.median(t) * 1e3 for name, t in timings.items()}
    update = ms["ddpg update"]
    results: dict = {"env": args.env, "threads": args.threads, "compile": args.compile, "ms": ms}
    print(f"{args.env}, {args.threads} thread(s); DDPG update {update:.2f} ms (median of rounds)")
    print(f"{'posterior':12s} {'off-policy ms/step':>19s} {'x update':>9s}", end=" ")
    print(f"{'on-policy ms/step':>18s} {'x update':>9s}")
    for name in bonuses:
        training = fit_step_updates[name] * ms[f"{name} train step"]
        off_policy = ms[f"{name} score 64"] + training
        on_policy = ms[f"{name} score rollout"] / args.rollout + training
        results[name] = {
            "off_policy_ms_per_step": off_policy,
            "on_policy_ms_per_step": on_policy,
            "off_policy_per_update": off_policy / update,
            "on_policy_per_update": on_policy / update,
        }
        print(
            f"{name:12s} {off_policy:19.3f} {off_policy / update:9.2f} "
            f"{on_policy:18.3f} {on_policy / update:9.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
