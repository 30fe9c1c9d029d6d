"""The sparse tasks' own measure in ``compare_runs``: how often the goal is reached.

For every task scored by success rate (:attr:`Task.sparse`: its ``eval.csv`` files record
``success_rate``, the fraction of an evaluation's test episodes that reached the goal):

* ``success.png``: the success rate against environment steps, mean ± standard error
  over seeds, one curve per strategy, one panel per sparse task;
* ``success.csv`` and a section of ``comparison.md``: per strategy and task the final
  success rate (mean ± s.e. over seeds), the success rate averaged over the curve, and
  how many seeds reached the goal in at least one test episode of any evaluation — the
  question an exploration study asks first (did the agent ever find the reward?).

The return curves and tables stay in ``comparison.*``; the interval estimates of
:mod:`agents.reporting.interval_report` already score sparse tasks by success rate.
"""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .curves import stderr
from .task_scores import Task

SUCCESS_FILES = ("success.png", "success.csv")


def success_rows(tasks: list[Task]) -> list[dict[str, object]]:
    """One row per curve of a sparse task (see the module docstring)."""
    rows = []
    for task in tasks:
        if not task.sparse:
            continue
        for curve in task.curves:
            success = curve.success
            final = success[:, -1]
            over_curve = curve.auc_per_seed(success)
            rows.append({
                "strategy": curve.name,
                "env": task.env,
                "seeds": curve.seeds,
                "final_step": int(curve.steps[-1]),
                "final_mean": float(final.mean()),
                "final_se": float(stderr(final[:, None])[0]) if curve.seeds > 1 else None,
                "auc_mean": float(over_curve.mean()),
                "auc_se": float(stderr(over_curve[:, None])[0]) if curve.seeds > 1 else None,
                "seeds_reaching_goal": int((success > 0).any(axis=1).sum()),
            })  # fmt: skip
    return rows


def plot_success(tasks: list[Task], colors: dict[str, str]) -> Figure:
    """Success rate (mean ± s.e. over seeds) per curve, a panel per sparse task."""
    sparse = [task for task in tasks if task.sparse]
    fig, axes = plt.subplots(
        1, len(sparse), figsize=(6.5 * len(sparse), 4.8), squeeze=False, layout="constrained"
    )
    for ax, task in zip(axes[0], sparse):
        for curve in task.curves:
            mean, se = curve.success.mean(axis=0), stderr(curve.success)
            color = colors[curve.name]
            ax.plot(curve.steps, mean, color=color, label=f"{curve.name} ({curve.seeds} seeds)")
            ax.fill_between(curve.steps, mean - se, mean + se, color=color, alpha=0.2)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("success rate of the test episodes (mean ± s.e.)")
        ax.set_title(task.env, fontsize="medium")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="x-small", loc="outside lower center", ncols=6)
    return fig


def write_success_report(tasks: list[Task], out_dir: Path, colors: dict[str, str]) -> str:
    """``success.png`` and ``success.csv`` in ``out_dir``; returns the markdown section
    (empty when no task is scored by success rate, and then nothing is written)."""
    rows = success_rows(tasks)
    if not rows:
        return ""
    with open(out_dir / "success.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig = plot_success(tasks, colors)
    fig.savefig(out_dir / "success.png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    envs = list(dict.fromkeys(str(row["env"]) for row in rows))
    strategies = list(dict.fromkeys(str(row["strategy"]) for row in rows))
    by_key = {(row["strategy"], row["env"]): row for row in rows}

    def cell(strategy: str, env: str) -> str:
        row = by_key.get((strategy, env))
        if row is None:
            return "–"
        se = "one seed" if row["final_se"] is None else f"± {row['final_se']:.2f}"
        return f"{row['final_mean']:.2f} {se} ({row['seeds_reaching_goal']}/{row['seeds']})"

    lines = [
        "",
        "## Success rate",
        "",
        "| strategy | " + " | ".join(envs) + " |",
        "|---|" + "---|" * len(envs),
        *(f"| {s} | " + " | ".join(cell(s, env) for env in envs) + " |" for s in strategies),
        "",
        "Final success rate of the test episodes (mean ± standard error over seeds, at the "
        "last step every seed reached); in brackets, the seeds that reached the goal in at "
        "least one test episode of any evaluation. `success.csv` adds the success rate "
        "averaged over the curve; `success.png` draws the curves.",
    ]
    return "\n".join(lines) + "\n"
