"""Saturation and curvature through training, per arm of the IVON study (its README,
"Diagnostics"; the answer in docs/sigma.md).

Why: a σ study reads σ and the return, but two things decide what weight noise *can* do and
what an optimizer *can* read about curvature, and no σ study here reported them:

- **saturation**: the share of the actor's action components at |a| > 0.99 of their range
  (π = scale·tanh(·) + offset). Weight noise on a saturated tanh moves few actions, and the
  loss's curvature through a saturated output is flattened;
- **the actor loss's curvature**: the exact diagonal of the Hessian of the actor's loss
  −Q(s, π_θ(s)) at the mean μ, for a sample of weights, by autograd (one second derivative per
  weight) on a replay minibatch, in the loss's own reduction (sum or mean over the minibatch,
  as the run trains it) — beside what the optimizer keeps for it: IVON's h, Vadam's s.

Each arm trains one seed with the study's settings (the same resolution as its grids:
``resolve_settings`` over the same presets, files and ``--set`` values) with the native DDPG,
and is measured at each checkpoint step. Rows are appended to ``runs-diagnostics/<task>.csv``
(the measurements, committed as the runs are); an arm whose rows are there is skipped, so the
script resumes arm by arm. The report, ``diagnostics.md``, is made from those CSVs alone.

    python studies/ivon/diagnostics.py                      # HalfCheetah-v4 and Hopper-v4
    python studies/ivon/diagnostics.py --tasks Hopper-v4 --steps 5000 20000
    python studies/ivon/diagnostics.py --report             # diagnostics.md from the CSVs
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from agents.runs.agent_factory import make_agent
from agents.settings.resolve import resolve_settings

HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parents[1] / "configs"

#: The arms, as the study's grids set them (reproduce.sh), at σ₀ = 0.1, seed 0.
ARMS: dict[str, tuple[str, list[Path], list[str]]] = {
    "ivon@ess=100 (first preset)": ("ivon", [CONFIGS / "ivon-wide-prior.yaml"],
                                    ["optimizer_kwargs.ess=100"]),
    "ivon@weight_decay=5e-05": ("ivon", [], ["optimizer_kwargs.weight_decay=5e-5"]),
    "vadam@sample_constant=100": ("vadam", [], ["optimizer_kwargs.sample_constant=100"]),
    "fixed-noise@initial_precision=100": ("fixed-noise", [],
                                          ["optimizer_kwargs.initial_precision=100"]),
    "adam-plain": ("adam-plain", [], []),
}  # fmt: skip

#: What each optimizer keeps for the curvature its σ follows (state key), where it has one.
CURVATURE_STATE = {"ivon": "hess", "vadam": "exp_avg_sq"}

FIELDS = ["arm", "step", "saturated_mean", "saturated_sample", "hessian_median",
          "hessian_negative_share", "hessian_abs_median", "optimizer_curvature_median",
          "sigma_median", "weights", "states"]  # fmt: skip


def saturated_share(agent, obs: torch.Tensor, sample: bool) -> float:
    """The share of action components at |a| > 0.99 of their half-range, at μ or at the
    current sample θ, on ``obs`` (raw observations)."""
    actions = agent.predict(obs.cpu().numpy(), deterministic=not sample)
    low, high = agent.env.action_space.low, agent.env.action_space.high
    unit = (actions - (high + low) / 2) / ((high - low) / 2)
    return float(np.mean(np.abs(unit) > 0.99))


def diagonal_hessian(agent, obs: torch.Tensor, picks: list[tuple[str, int]]) -> np.ndarray:
    """∂²L/∂θᵢ² at θ = μ for the picked (parameter, flat index) weights, L the actor's loss
    −Q(s, π_θ(s)) over ``obs`` in the run's reduction, the critic as it is."""
    params = {name: p.detach().clone().requires_grad_(True)
              for name, p in agent.actor.named_parameters()}  # fmt: skip
    inputs = obs if agent.obs_statistics is None else agent.obs_statistics.normalize(obs)
    q = agent.critic(inputs, agent.actor(inputs, params))
    loss = -(q.sum() if agent.config.actor_grad_reduction == "sum" else q.mean())
    grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()), create_graph=True)))
    values = []
    for name, index in picks:
        (second,) = torch.autograd.grad(grads[name].flatten()[index], params[name],
                                        retain_graph=True)  # fmt: skip
        values.append(float(second.flatten()[index]))
    return np.array(values)


def pick_weights(agent, count: int, generator: np.random.Generator) -> list[tuple[str, int]]:
    """``count`` weights drawn uniformly over the actor's perturbed parameters."""
    named = [(n, p.numel()) for n, p in agent.actor.named_parameters() if "norm" not in n]
    sizes = np.array([size for _, size in named])
    flat = generator.choice(int(sizes.sum()), size=min(count, int(sizes.sum())), replace=False)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    picks = []
    for i in np.sort(flat):
        layer = int(np.searchsorted(starts, i, side="right") - 1)
        picks.append((named[layer][0], int(i - starts[layer])))
    return picks


def optimizer_curvature(agent, picks: list[tuple[str, int]]) -> float:
    """The median over the picked weights of IVON's h or Vadam's s; nan for the others."""
    key = CURVATURE_STATE.get(agent.config.strategy.optimizer)
    if key is None:
        return float("nan")
    params = dict(agent.actor.named_parameters())
    opt = agent.actor_optimizer
    values = [float(opt.state[params[name]][key].flatten()[index]) for name, index in picks]
    return float(np.median(values))


def measure(agent, step: int, arm: str, weights: int, states: int, seed: int) -> dict:
    generator = np.random.default_rng(seed + step)
    batch = agent.buffer.sample(states, torch.Generator(device=agent.device).manual_seed(step))
    picks = pick_weights(agent, weights, generator)
    hessian = diagonal_hessian(agent, batch.obs, picks)
    sigma = torch.cat([s.flatten() for s in agent.actor_optimizer.sampling_std()])
    return dict(
        arm=arm, step=step,
        saturated_mean=saturated_share(agent, batch.obs, sample=False),
        saturated_sample=saturated_share(agent, batch.obs, sample=True),
        hessian_median=float(np.median(hessian)),
        hessian_negative_share=float(np.mean(hessian < 0)),
        hessian_abs_median=float(np.median(np.abs(hessian))),
        optimizer_curvature_median=optimizer_curvature(agent, picks),
        sigma_median=float(sigma[sigma > 0].median()) if bool((sigma > 0).any()) else 0.0,
        weights=len(picks), states=states,
    )  # fmt: skip


def done_arms(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {row["arm"] for row in csv.DictReader(f)}


def arm_settings(task: str, arm: str, extra: Sequence[str] = (), **flags):
    """``arm``'s run settings on ``task``, as the study's grids resolve them."""
    strategy, files, options = ARMS[arm]
    return resolve_settings(
        strategy, files, [*options, "buffer_size=100000", *extra], env=task, **flags
    )


def run_arm(task: str, arm: str, steps: Sequence[int], args: argparse.Namespace) -> list[dict]:
    settings = arm_settings(task, arm, args.set, seed=args.seed, total_steps=max(steps),
                            compile=not args.no_compile)  # fmt: skip
    torch.manual_seed(args.seed)
    agent = make_agent(settings)
    rows, done = [], 0
    for step in sorted(steps):
        agent.learn(step - done)
        done = step
        rows.append(measure(agent, step, arm, args.weights, args.states, args.seed))
        print(
            f"{task} {arm} step {step}: "
            + ", ".join(f"{k} {v:.3g}" for k, v in rows[-1].items() if isinstance(v, float)),
            flush=True,
        )
    return rows


def scale_note(task: str, rows: list[dict]) -> str:
    """Which loss each arm's curvature is of. It is measured in the arm's own reduction, and
    a mean over the states is 1/states of their sum: unsaid, a mean-loss arm's curvature
    reads 64× smaller than it is on the other arms' scale."""
    arms = list(dict.fromkeys(row["arm"] for row in rows))
    reduction = {arm: arm_settings(task, arm).learner.actor_grad_reduction for arm in arms}
    states = "/".join(sorted({row["states"] for row in rows}))
    groups = [f"their {kind} for {', '.join(a for a in arms if reduction[a] == kind)}"
              for kind in ("sum", "mean") if kind in reduction.values()]  # fmt: skip
    note = (f"−Q's curvature is that of each arm's own loss over the {states} replayed "
            f"states: {'; '.join(groups)}.")  # fmt: skip
    if len(set(reduction.values())) > 1:
        note += f" A mean's curvature is 1/{states} of the sum's (× {states}: the sum's scale)."
    return note


def write_report(out: Path, report: Path) -> None:
    """``report``: one table per task from its CSV in ``out`` (medians as measured)."""
    lines = ["# Saturation and curvature (generated by `python studies/ivon/diagnostics.py "
             "--report`)", ""]  # fmt: skip
    for path in sorted(out.glob("*.csv")):
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        lines += [f"## {path.stem}", "", scale_note(path.stem, rows), "",
                  "| arm | step | saturated at μ | at θ | −Q's curvature: median | share < 0 | "
                  "median abs | optimizer's h or s: median | σ median |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for row in rows:
            cells = [row["arm"], row["step"]] + [f"{float(row[k]):.3g}" for k in FIELDS[2:9]]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    report.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah-v4", "Hopper-v4"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--steps", nargs="+", type=int, default=[5000, 20000, 50000, 100000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", type=int, default=200, help="weights whose curvature is read")
    parser.add_argument("--states", type=int, default=64, help="replayed states (a minibatch)")
    parser.add_argument("--set", action="append", default=[], help="a setting for every arm")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "runs-diagnostics", help="the CSVs")
    parser.add_argument("--report-file", type=Path, default=HERE / "diagnostics.md")
    parser.add_argument("--report", action="store_true", help="only the report from the CSVs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        for task in args.tasks:
            path = args.out / f"{task}.csv"
            for arm in args.arms:
                if arm in done_arms(path):
                    continue
                rows = run_arm(task, arm, args.steps, args)
                new = not path.exists()
                with path.open("a", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=FIELDS)
                    if new:
                        writer.writeheader()
                    writer.writerows(rows)
    write_report(args.out, args.report_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
