"""What the exploring policies reached in training, in ``compare_runs``: coverage and goal.

The success rate says whether a *test* policy reaches the goal; when it never does, the
first question is whether the *exploring* policy ever did — whether the reward reached the
replay buffer at all. For every run of a task that reports coverage
(:data:`agents.tasks.COVERAGE`) and has an ``explore.csv`` (:mod:`agents.runs.explore_log`):

* ``coverage.csv``: per task, strategy and seed, each coverage quantity's extreme over all
  of training (the highest ``<name>_max``, the lowest ``<name>_min``) and ``goal_step``,
  the first logged step whose window reached the task's goal (empty if none did);
* a section of ``comparison.md``: per task, per strategy the seeds whose exploration
  reached the goal and when, and every seed's extremes.

A window reaches the goal when its extreme of the goal's quantity passes the goal's
threshold, the reward's own comparison (:class:`agents.tasks.report.Coverage`), so the
step is exact to a logging window (``log_every`` steps). Read from committed files only:
a run without ``explore.csv`` is left out with a note.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..runs.explore_log import EXPLORE_CSV, read_explore_csv
from ..tasks import COVERAGE
from .run_files import compared_runs

COVERAGE_FILES = ("coverage.csv",)


def run_coverage(path: Path, env: str) -> dict[str, object] | None:
    """Extremes over training and the first step at the goal of one run's ``explore.csv``
    (None if its task reports no coverage, or the run logged none of it)."""
    coverage = COVERAGE.get(env)
    if coverage is None:
        return None
    rows = read_explore_csv(path)  # a damaged file raises, naming it
    if not rows or not set(coverage.scalars) & rows[0].keys():
        return None  # a learner that logs no coverage (e.g. SB3's algorithms)
    result: dict[str, object] = {"last_step": rows[-1]["step"]}
    goal_step = None
    for name in coverage.scalars:
        values = [(row["step"], row.get(name)) for row in rows if row.get(name) is not None]
        if not values:
            result[name] = None
            continue
        pick = max if name.endswith("_max") else min
        result[name] = pick(value for _, value in values)
        if name == coverage.goal:
            goal_step = next((s for s, v in values if coverage.goal_reached(v)), None)
    result["goal_step"] = goal_step
    return result


def coverage_rows(
    runs_dirs: list[tuple[Path, str | None]], strategies: set[str] | None, notes: list[str]
) -> list[dict[str, object]]:
    """One row per run (``(runs_dir, label)`` pairs; ``strategies`` to keep, or all)."""
    rows = []
    missing: dict[Path, list[str]] = {}
    for run in compared_runs(runs_dirs, strategies):
        if run.env not in COVERAGE:
            continue
        path = run.seed_dir / EXPLORE_CSV
        if not path.exists():
            missing.setdefault(run.seed_dir.parent, []).append(run.seed_dir.name)
            continue
        found = run_coverage(path, run.env)
        if found is not None:
            rows.append({"env": run.env, "strategy": run.strategy, "seed": run.seed_dir.name,
                         **found})  # fmt: skip
    for strategy_dir, seeds in missing.items():
        notes.append(
            f"{strategy_dir}: {', '.join(seeds)} have no {EXPLORE_CSV}, so the coverage "
            "report leaves them out"
        )
    return rows


def _value(value: object) -> str:
    return "–" if value is None else f"{value:.2f}"


def _k(step: object) -> str:
    return f"{int(step) / 1000:g} k"  # type: ignore[call-overload]


def coverage_section(rows: list[dict[str, object]]) -> str:
    """The markdown section of ``comparison.md`` (see the module docstring)."""
    lines = ["", "## Coverage in training", ""]
    for env in dict.fromkeys(str(row["env"]) for row in rows):
        coverage = COVERAGE[env]
        task_rows = [row for row in rows if row["env"] == env]
        lines += [
            f"**{env}**: the goal is `{coverage.goal}` {coverage.reached_when} "
            f"{coverage.threshold:g}.",
            "",
            "| strategy | goal reached while exploring (first at) | "
            + " | ".join(f"`{name}` per seed" for name in coverage.scalars)
            + " |",
            "|---|---|" + "---|" * len(coverage.scalars),
        ]
        for strategy in dict.fromkeys(str(row["strategy"]) for row in task_rows):
            seeds = [row for row in task_rows if row["strategy"] == strategy]
            reached = [row for row in seeds if row["goal_step"] is not None]
            when = ", ".join(f"{row['seed']} at {_k(row['goal_step'])}" for row in reached)
            goal = f"{len(reached)}/{len(seeds)}" + (f" ({when})" if when else "")
            extremes = [", ".join(_value(row[name]) for row in seeds) for name in coverage.scalars]
            lines.append(f"| {strategy} | {goal} | " + " | ".join(extremes) + " |")
        lines.append("")
    lines.append(
        "From each run's `explore.csv` (the `explore/` scalars of its training, one row per "
        "logging window): per seed in seed order, each quantity's extreme over training, "
        "and the seeds whose exploring policy reached the goal in some window, with the "
        "step of the first such window. `coverage.csv` has the same per run."
    )
    return "\n".join(lines) + "\n"


def write_coverage_report(
    runs_dirs: list[tuple[Path, str | None]],
    strategies: set[str] | None,
    out_dir: Path,
    notes: list[str],
) -> str:
    """``coverage.csv`` in ``out_dir``; returns the markdown section (empty, and nothing
    written, when no run of a task that reports coverage has an ``explore.csv``)."""
    rows = coverage_rows(runs_dirs, strategies, notes)
    if not rows:
        return ""
    fields = ["env", "strategy", "seed", "last_step", "goal_step"]
    for env in dict.fromkeys(str(row["env"]) for row in rows):
        fields += [name for name in COVERAGE[env].scalars if name not in fields]
    with open(out_dir / "coverage.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return coverage_section(rows)
