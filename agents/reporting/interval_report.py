"""The interval estimates of a comparison as tables and figures (``compare_runs``).

Computes, with :mod:`agents.reporting.intervals`, for every task (:mod:`.tasks`) and for
the final score and the score over the curve: each method's IQM and mean with 95 %
intervals, and P(X > Y) between every two methods; across tasks, on normalised scores, the
aggregate IQM, mean and optimality gap, and the performance profiles. Writes
``intervals.csv`` and ``probability_of_improvement.csv`` (one row per number), the figures
``intervals.png``, ``probability_of_improvement.png`` and ``performance_profile.png``, and
returns the Markdown section that ``comparison.md`` ends with.

Every method of a task is scored at the task's common step (:attr:`Task.end`), and a
note says so when some ran further. A method with one seed gets point estimates only: the
tables say "no interval", the CSV files leave the ends empty, and a note names it. Under
:data:`FEW_SEEDS` seeds, the figure's title and the task's table say that the intervals
are rough (:func:`few_seeds_caution`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .intervals import (
    CONFIDENCE,
    Interval,
    Profile,
    aggregate_intervals,
    improvement_matrix,
    performance_profiles,
)
from .task_scores import SCORES, SUCCESS_UNIT, Across, Task, across_tasks
from .ticks import few_ticks

ACROSS = "across tasks"
#: Below this many seeds per method, intervals are flagged as rough (:func:`few_seeds_caution`).
FEW_SEEDS = 5
#: Thresholds of a performance profile: this many, evenly spaced over the scores' range.
PROFILE_POINTS = 101
_STATISTIC_TITLES = {"iqm": "IQM", "mean": "mean", "optimality_gap": "optimality gap"}


@dataclass
class Estimates:
    """Everything computed for one scope (a task, or all tasks on one scale)."""

    scope: str
    unit: str
    runs: dict[str, int]
    #: score → method → statistic → Interval
    intervals: dict[str, dict[str, dict[str, Interval]]]
    #: score → (X, Y) → P(X > Y)
    improvement: dict[str, dict[tuple[str, str], Interval]]


def _number(unit: str) -> str:
    return "{:.0f}" if unit == "return" else "{:.2f}"


def task_estimates(task: Task, reps: int, seed: int) -> Estimates:
    intervals, improvement = {}, {}
    for score in SCORES:
        scores = {name: values[:, None] for name, values in task.scores(score).items()}
        intervals[score] = aggregate_intervals(scores, ("iqm", "mean"), reps, seed)
        improvement[score] = improvement_matrix(scores, reps, seed)
    runs = {curve.name: curve.seeds for curve in task.curves}
    return Estimates(task.env, task.unit, runs, intervals, improvement)


def across_estimates(
    across: dict[str, Across], reps: int, seed: int, with_improvement: bool
) -> Estimates:
    intervals, improvement = {}, {}
    for score, scale in across.items():
        statistics = ("iqm", "mean", "optimality_gap") if scale.normalised else ("iqm", "mean")
        intervals[score] = aggregate_intervals(scale.scores, statistics, reps, seed)
        if with_improvement:
            improvement[score] = improvement_matrix(scale.scores, reps, seed)
    first = next(iter(across.values()))
    unit = "normalised score" if first.normalised else "return"
    runs = {name: int(values.size) for name, values in first.scores.items()}
    return Estimates(ACROSS, unit, runs, intervals, improvement)


def _write_csvs(estimates: list[Estimates], out_dir: Path) -> None:
    with open(out_dir / "intervals.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["scope", "unit", "score", "method", "runs", "statistic", "point", "lower", "upper"]
        )
        for e in estimates:
            for score, methods in e.intervals.items():
                for method, statistics in methods.items():
                    for statistic, i in statistics.items():
                        writer.writerow(
                            [e.scope, e.unit, score, method, e.runs[method], statistic,
                             i.point, *_ends(i)]
                        )  # fmt: skip
    with open(out_dir / "probability_of_improvement.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["scope", "score", "x", "y", "p_x_above_y", "lower", "upper"])
        for e in estimates:
            for score, pairs in e.improvement.items():
                for (x, y), i in pairs.items():
                    writer.writerow([e.scope, score, x, y, i.point, *_ends(i)])


def _ends(interval: Interval) -> list[float | str]:
    """The interval's ends for a CSV file: empty where there is none (one seed)."""
    return [interval.lower, interval.upper] if interval.estimated else ["", ""]


def _markdown(estimates: list[Estimates], reps: int, seed: int, descriptions: list[str]) -> str:
    percent = f"{CONFIDENCE:.0%}"
    lines = [
        "",
        "## Interval estimates",
        "",
        f"Point estimate [{percent} interval]: rliable's stratified bootstrap over runs "
        f"(seeds), percentile intervals, {reps} replicates, bootstrap seed {seed}. IQM: the "
        "mean of the middle 50 % of the runs' scores (25 % cut at each end); mean: over "
        "runs. final: the score at the last step every seed of every method of the task "
        "reached; over the curve: its average over the evaluation steps up to there (the AUC "
        "above, over the same span). A method with one seed has no interval. P(X > Y): the "
        "probability that a run of the row's method scores above a run of the column's "
        "(ties count one half), averaged over tasks.",
    ]
    for e in estimates:
        number = _number(e.unit)
        statistics = list(next(iter(e.intervals.values()))[next(iter(e.runs))])
        title = e.scope if e.scope != ACROSS else f"All tasks on one scale ({e.unit})"
        lines += ["", f"### {title}", ""]
        if e.scope == ACROSS:
            lines += [f"Normalisation: {d}." for d in descriptions] + [""]
        else:
            caution = few_seeds_caution(e.runs)
            lines += [f"Scores: {e.unit}." + (f" **Caution: {caution}.**" if caution else ""), ""]
        header = [f"{SCORES[s]} {_STATISTIC_TITLES[t]}" for s in e.intervals for t in statistics]
        runs = "runs × tasks" if e.scope == ACROSS else "runs"
        lines += [
            f"| method | {runs} | " + " | ".join(header) + " |",
            "|---|---|" + "---|" * len(header),
        ]
        for method in e.runs:
            cells = [
                e.intervals[s][method][t].format(number) for s in e.intervals for t in statistics
            ]
            lines.append(f"| {method} | {e.runs[method]} | " + " | ".join(cells) + " |")
        for score, pairs in e.improvement.items():
            methods = list(e.runs)
            lines += [
                "",
                f"P(row > column), {SCORES[score]} score, {e.scope}:",
                "",
                "| X \\ Y | " + " | ".join(methods) + " |",
                "|---|" + "---|" * len(methods),
            ]
            for x in methods:
                cells = [
                    "–" if x == y else pairs[x, y].format("{:.2f}", "no interval") for y in methods
                ]
                lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: A success rate's axis: the whole of [0, 1] and a margin, as success.png's (a rate's
#: scale is known; one fitted to the values drew a panel of all-zero rates from −1 to 1).
RATE_LIMITS = (-0.03, 1.03)


def _interval_panel(
    ax: Axes, methods: dict[str, Interval], colors: dict[str, str], title: str, unit: str
) -> None:
    for row, (method, i) in enumerate(methods.items()):
        if i.estimated:  # one seed: the point alone
            width, left = i.upper - i.lower, i.lower
            ax.barh(row, width, left=left, height=0.6, color=colors[method], alpha=0.7)
        ax.vlines(i.point, row - 0.3, row + 0.3, color="k")
    ax.set_yticks(range(len(methods)), list(methods))
    ax.invert_yaxis()
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3, axis="x")
    # a bar's base sticks to the axis' edge (matplotlib's sticky edges): a margin by hand
    ends = [x for i in methods.values() for x in (i.point, i.lower, i.upper) if np.isfinite(x)]
    low, high = min(ends), max(ends)
    pad = 0.08 * (high - low) or 0.05 * abs(low) or 1.0
    ax.set_xlim(RATE_LIMITS if unit == SUCCESS_UNIT else (low - pad, high + pad))
    few_ticks(ax.xaxis)


def few_seeds_caution(runs: dict[str, int]) -> str | None:
    """A caution for estimates that rest on fewer than :data:`FEW_SEEDS` seeds per method
    (``runs``: method → seeds), e.g. "n = 2 seeds: the 95 % intervals are rough"; None
    when every method with an interval has enough. A stratified bootstrap over two or three
    runs resamples little more than their range: its interval reads as precise and is
    not. Methods with one seed have no interval at all (:func:`task_notes` says so)."""
    methods = [m for m, n in runs.items() if 1 < n < FEW_SEEDS]
    if not methods:
        return None
    few = sorted({runs[m] for m in methods})
    n = str(few[0]) if len(few) == 1 else f"{few[0]}–{few[-1]}"
    which = "" if len(methods) == sum(n > 1 for n in runs.values()) else f" ({', '.join(methods)})"
    return (f"n = {n} seeds{which}: the {CONFIDENCE:.0%} intervals are rough (fewer than "
            f"{FEW_SEEDS} seeds per method)")  # fmt: skip


def plot_intervals(estimates: list[Estimates], colors: dict[str, str]) -> plt.Figure:
    """One row per scope: IQM and mean of the final score and of the score over the curve.

    The row across tasks is drawn only when there are several tasks (of one task it
    repeats that task's row on a normalised scale); each panel is titled in two lines
    (a task's name beside the statistic ran into the next panel), its axis takes a few
    round ticks (:mod:`.ticks`) and a margin keeps the bars off its edges; the figure's
    title cautions when the intervals rest on few seeds (:func:`few_seeds_caution`).
    """
    columns = [(s, t) for s in SCORES for t in ("iqm", "mean")]
    tasks = [e for e in estimates if e.scope != ACROSS]
    shown = estimates if len(tasks) > 1 else tasks
    height = max(len(e.runs) for e in shown) * 0.35 + 1.6
    fig, axes = plt.subplots(
        len(shown), len(columns), figsize=(14, height * len(shown)), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    for r, e in enumerate(shown):
        for c, (score, statistic) in enumerate(columns):
            ax = axes[r, c]
            methods = {m: e.intervals[score][m][statistic] for m in e.runs}
            title = f"{e.scope}\n{SCORES[score]} {_STATISTIC_TITLES[statistic]}"
            _interval_panel(ax, methods, colors, title, e.unit)
            ax.set_xlabel(e.unit)
            if c:
                ax.set_yticklabels([])
    title = f"point estimate (black) and {CONFIDENCE:.0%} bootstrap interval (bar)"
    cautions = {few_seeds_caution(e.runs) for e in tasks} - {None}
    if cautions:
        title += "\n" + "; ".join(sorted(cautions))
    fig.suptitle(title, color="firebrick" if cautions else "black")
    return fig


def plot_improvement(e: Estimates) -> plt.Figure:
    """P(row > column) as a matrix per score, with each interval in its cell."""
    methods = list(e.runs)
    size = max(5.0, 0.9 * len(methods) + 2)
    fig, axes = plt.subplots(1, len(e.improvement), figsize=(2 * size + 1, size), squeeze=False)
    for ax, (score, pairs) in zip(axes[0], e.improvement.items()):
        matrix = np.full((len(methods), len(methods)), np.nan)
        for (x, y), i in pairs.items():
            matrix[methods.index(x), methods.index(y)] = i.point
        image = ax.imshow(matrix, cmap="RdBu", vmin=0, vmax=1)
        for (x, y), i in pairs.items():
            text = f"{i.point:.2f}\n" + (
                f"[{i.lower:.2f}, {i.upper:.2f}]" if i.estimated else "(no interval)"
            )
            ink = "white" if abs(i.point - 0.5) > 0.3 else "black"  # readable on dark cells
            ax.text(methods.index(y), methods.index(x), text, ha="center", va="center",
                    fontsize="x-small", color=ink)  # fmt: skip
        ax.set_xticks(range(len(methods)), methods, rotation=45, ha="right")
        ax.set_yticks(range(len(methods)), methods)
        ax.set_xlabel("Y")
        ax.set_ylabel("X")
        ax.set_title(f"P(X > Y), {SCORES[score]} score, {e.scope}")
        fig.colorbar(image, ax=ax, shrink=0.7)
    fig.tight_layout()
    return fig


def plot_profiles(
    profiles: dict[str, dict[str, Profile]], unit: str, colors: dict[str, str]
) -> plt.Figure:
    fig, axes = plt.subplots(1, len(profiles), figsize=(12, 4.5), squeeze=False)
    for ax, (score, by_method) in zip(axes[0], profiles.items()):
        for method, p in by_method.items():
            ax.plot(p.taus, p.fraction, color=colors[method], label=method)
            ax.fill_between(p.taus, p.lower, p.upper, color=colors[method], alpha=0.08)
        ax.set_xlabel(f"{unit} τ ({SCORES[score]})")
        ax.set_ylabel("fraction of runs with score > τ")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0, -1].legend(fontsize="small")
    fig.suptitle(f"performance profiles, {CONFIDENCE:.0%} bootstrap bands")
    fig.tight_layout()
    return fig


def _k(step: int) -> str:
    return f"{step / 1000:g} k"


def task_notes(task: Task) -> list[str]:
    """What a reader of the task's estimates must know: the step the methods are compared
    at when their runs differ in length, and the methods without intervals."""
    notes = []
    lasts = {curve.name: int(curve.steps[-1]) for curve in task.curves}
    end = task.end
    if end is None:
        spans = ", ".join(f"{c.name}: {_k(c.steps[0])}–{_k(c.steps[-1])}" for c in task.curves)
        notes.append(
            f"{task.env}: the methods' evaluations share no span ({spans}), so each is "
            "scored at its own last step"
        )
    elif len(set(lasts.values())) > 1:
        longer = ", ".join(f"{n} ran to {_k(last)}" for n, last in lasts.items() if last > end)
        finals = {c.name: int(task.compared(c).steps[-1]) for c in task.curves}
        at = ""
        if any(step != end for step in finals.values()):
            at = "; final scores at " + ", ".join(f"{n} {_k(s)}" for n, s in finals.items())
        notes.append(
            f"{task.env}: the interval estimates and P(X > Y) compare every method at "
            f"{_k(end)}, the last step all reached ({longer}{at})"
        )
    one = [curve.name for curve in task.curves if curve.seeds == 1]
    if one:
        names = " and ".join([", ".join(one[:-1]), one[-1]] if len(one) > 1 else one)
        has, its, it = ("have", "their", "them") if len(one) > 1 else ("has", "its", "it")
        notes.append(
            f"{task.env}: {names} {has} one seed: no standard error and no 95 % interval, "
            f"of {its} scores or of P(X > Y) with {it}"
        )
    return notes


def write_interval_report(
    tasks: list[Task], out_dir: Path, colors: dict[str, str], reps: int, seed: int
) -> tuple[str, list[str]]:
    """Compute and write everything; returns (the Markdown section, notes)."""
    estimates = [task_estimates(task, reps, seed) for task in tasks]
    across = {score: across_tasks(tasks, score) for score in SCORES}
    notes = [note for task in tasks for note in task_notes(task)]
    notes += sorted({note for a in across.values() if a is not None for note in a.notes})
    descriptions: list[str] = []
    profiles: dict[str, dict[str, Profile]] = {}
    unit = "return"
    if all(a is not None and a.scores for a in across.values()):
        several = len(next(iter(across.values())).tasks) > 1
        overall = across_estimates(across, reps, seed, with_improvement=several)
        estimates.append(overall)
        unit = overall.unit
        descriptions = [across["final"].description]
        for score, scale in across.items():
            values = np.concatenate([v.ravel() for v in scale.scores.values()])
            taus = np.linspace(values.min(), values.max(), PROFILE_POINTS)
            profiles[score] = performance_profiles(scale.scores, taus, reps, seed)
    else:
        notes.append("no aggregate across tasks: no task has a reference return to normalise")
    _write_csvs(estimates, out_dir)
    figures = {"intervals.png": plot_intervals(estimates, colors)}
    main = estimates[-1] if estimates[-1].improvement else estimates[0]
    figures["probability_of_improvement.png"] = plot_improvement(main)
    if profiles:
        figures["performance_profile.png"] = plot_profiles(profiles, unit, colors)
    for name, fig in figures.items():
        fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
    return _markdown(estimates, reps, seed, descriptions), notes
