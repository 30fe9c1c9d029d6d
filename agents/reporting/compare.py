"""``compare_runs``: the paper's comparison (Figures 5-6) from directories of runs, with
interval estimates that hold up over few seeds.

    compare_runs runs/HalfCheetah-v4 [--out DIR] [--at 50000,100000] [--reference khan2018]
    compare_runs A/HalfCheetah-v4 B/HalfCheetah-v4 --labels a,b [--strategies vadam]
    compare_runs runs/HalfCheetah-v4 runs/Hopper-v4          # two tasks

reads ``<RUNS_DIR>/<strategy>/seed<k>/eval.csv`` (:mod:`agents.reporting.run_files`) and
writes to DIR (default: the first RUNS_DIR):

* ``comparison.png``: mean ± standard error over seeds of the test return against
  environment steps, one curve per strategy (and per RUNS_DIR of one env), one panel per
  task; with ``--figure median-iqr`` the median over seeds and its interquartile range
  (Zhang et al. 2018's Fig. 3: a few seeds that reach a sparse goal move a mean, not a
  median);
* ``comparison.md`` and ``comparison.csv``: per strategy the number of seeds, the final
  and the best mean return, the return at the ``--at`` steps and the area under the
  curve (the curve's average return over its steps, trapezoid rule), each mean ± standard
  error; ``comparison.md`` goes on with the interval estimates
  (:mod:`agents.reporting.interval_report`: ``intervals.{csv,png}``,
  ``probability_of_improvement.{csv,png}``, ``performance_profile.png``);
* for tasks scored by success rate (sparse rewards), ``success.{png,csv}`` and a section
  of ``comparison.md``: the success-rate curves, and per strategy and task the final
  success rate and how many seeds ever reached the goal
  (:mod:`agents.reporting.success_report`);
* from the runs' ``explore.csv``: ``coverage.csv`` (what the exploring policies of a
  sparse task reached, :mod:`agents.reporting.coverage`) and ``sigma.{csv,png}`` (how a
  weight-noise strategy's σ and its action distance moved, :mod:`agents.reporting.
  sigma_report`), each with a section of ``comparison.md``.

Tasks: a task is an env, read from each run's ``config.yaml``. Several RUNS_DIRs of
different envs are several tasks, compared per task and aggregated across tasks; several
RUNS_DIRs of one env are an ablation, their curves told apart by ``--labels`` (default:
the directories' paths). Runs of different envs are never averaged together.

With ``--reference khan2018`` (``:1``, ``:2`` or ``:pooled`` for one of the released
runs) the published curves (:mod:`agents.reporting.references`) are drawn in each
strategy's colour beside the HalfCheetah task, and the table gives each published value
beside the measured one, at the nearest published step (named in the table), and the
published curve's average over the same span. Each RUNS_DIR also gets (again) its
per-strategy TensorBoard aggregates (:mod:`agents.reporting.strategy_aggregates`), unless
it is not writable: a comparison of runs one may only read is still made, with a note.

The files are written whole or not at all: into a directory of their own inside DIR,
moved into DIR once every one is written, so a comparison that fails (a full disk, an
error) leaves DIR as it was, an earlier comparison's files included.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..common.checks import require_known
from ..common.errors import ConfigError, os_error_message
from ..runs.run_logger import EVAL_CSV
from .coverage import COVERAGE_FILES, write_coverage_report
from .curves import Curve, stderr
from .intervals import DEFAULT_REPS, DEFAULT_SEED, MAX_REPS
from .references import (
    REFERENCES,
    RUN_TITLES,
    parse_reference,
    published_column,
    reference_span,
)
from .run_files import SHORT_RUNS, load_runs
from .sigma_report import SIGMA_FILES, write_sigma_report
from .strategy_aggregates import AGGREGATE_DIR, BANDS, tensorboard_view, write_strategy_aggregates
from .success_report import SUCCESS_FILES, write_success_report
from .task_scores import Task, group_tasks
from .ticks import step_ticks

#: The published table's early columns (``docs/decisions.md#published-curves``).
DEFAULT_CHECKPOINTS = (50_000, 100_000, 200_000, 500_000, 1_000_000)
#: How each published run is drawn; the pool of 10 also gets its ± s.e. band.
_RUN_STYLES = {"1": "--", "2": ":", "pooled": "-."}
_RUN_KEYS = {"1": "run1", "2": "run2", "pooled": "pooled"}
#: The files a comparison writes.
OUTPUTS = {
    "comparison.png",
    "comparison.md",
    "comparison.csv",
    "intervals.csv",
    "intervals.png",
    "probability_of_improvement.csv",
    "probability_of_improvement.png",
    "performance_profile.png",
    *SUCCESS_FILES,
    *COVERAGE_FILES,
    *SIGMA_FILES,
}

#: The forms of ``comparison.png``: its line and band over seeds, and its y-axis title.
FIGURES = {
    "mean-se": "mean ± s.e. over seeds",
    "median-iqr": "median and interquartile range over seeds",
}

#: mean and standard error over seeds (None with one seed, which has none)
MeanSE = tuple[float, float | None]
#: run (``1``, ``2``, ``pooled``) → the published curve of one strategy
Published = dict[str, Curve]


def _mean_se(values: np.ndarray) -> MeanSE:
    se = float(stderr(values[:, None])[0]) if len(values) > 1 else None
    return float(values.mean()), se


def summarize(
    curve: Curve, checkpoints: tuple[int, ...], published: Published | None = None
) -> dict[str, object]:
    """One table row: values are (mean, standard error) over seeds.

    For each published run r, ``<r>_at_<step>`` is the published value at the published
    step nearest ``step`` (``published_step_at_<step>``), and ``<r>_auc`` the published
    curve's average over the measured span (:func:`reference_span`).
    """
    best = int(np.argmax(curve.mean))
    row: dict[str, object] = {
        "strategy": curve.name,
        "env": curve.env,
        "seeds": curve.seeds,
        "final_step": int(curve.steps[-1]),
        "final": _mean_se(curve.returns[:, -1]),
        "best": _mean_se(curve.returns[:, best]),
        "best_step": int(curve.steps[best]),
        "auc": _mean_se(curve.auc_per_seed()),
    }
    for step in checkpoints:
        index = np.flatnonzero(curve.steps == step)
        row[f"at_{step}"] = _mean_se(curve.returns[:, index[0]]) if len(index) else None
        for run, reference in (published or {}).items():
            at, column = published_column(reference, step)
            row[f"{_RUN_KEYS[run]}_at_{step}"] = _mean_se(column)
            row[f"published_step_at_{step}"] = at
    for run, reference in (published or {}).items():
        row[f"{_RUN_KEYS[run]}_auc"] = _mean_se(reference_span(curve, reference).auc_per_seed())
    return row


def _columns(checkpoints: tuple[int, ...], runs: tuple[str, ...]) -> list[tuple[str, str]]:
    """(row key, title stem) of every mean ± s.e. column, in table order."""
    columns = [("final", "final"), ("best", "best")]
    for step in checkpoints:
        columns.append((f"at_{step}", f"{step // 1000} k"))
        columns += [(f"{_RUN_KEYS[r]}_at_{step}", RUN_TITLES[r]) for r in runs]
    columns.append(("auc", "AUC"))
    columns += [(f"{_RUN_KEYS[r]}_auc", f"{RUN_TITLES[r]} AUC") for r in runs]
    return columns


def _k(step: int) -> str:
    return f"{step / 1000:g} k"


#: Twenty colours, each told apart from the others: matplotlib's ten (``C0``-``C9``, the
#: first ten methods') and ten of Trubetskoy's "20 distinct colours" that are none of their
#: hues (navy, maroon, lime, magenta, yellow, teal, lavender, mint, apricot) and black. The
#: closest two, olive and lime, differ as much as matplotlib's own closest (brown, grey):
#: ``--opt all`` (13 strategies) and its variants each get a colour of their own.
METHOD_COLORS = (
    *(f"C{i}" for i in range(10)),
    "#000075", "#800000", "#bfef45", "#f032e6", "#ffe119",
    "#469990", "#dcbeff", "#aaffc3", "#ffd8b1", "#000000",
)  # fmt: skip


def method_colors(curves: list[Curve]) -> dict[str, str]:
    """One colour per method name, the same in every figure and panel (past
    ``len(METHOD_COLORS)`` methods the colours repeat)."""
    names = list(dict.fromkeys(curve.name for curve in curves))
    return {name: METHOD_COLORS[i % len(METHOD_COLORS)] for i, name in enumerate(names)}


def center_and_band(curve: Curve, figure: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The line and the band's ends of ``curve`` drawn in the form ``figure``
    (:data:`FIGURES`): mean ± s.e., or the median between the 25th and 75th percentiles
    (NumPy's default, linear, interpolation between seeds)."""
    if figure == "median-iqr":
        low, median, high = np.percentile(curve.returns, [25, 50, 75], axis=0)
        return median, low, high
    mean, se = curve.mean, curve.stderr
    return mean, mean - se, mean + se


def plot_comparison(
    tasks: list[Task],
    published: dict[str, Published],
    colors: dict[str, str],
    citation: str | None = None,
    figure: str = "mean-se",
) -> Figure:
    """A line and band per curve in the form ``figure`` (:data:`FIGURES`), a panel per
    task; each strategy's published runs in its colour, mean ± s.e. as released
    (``published``: strategy → run → curve, for the tasks it belongs to), over the
    measured span. A published run with fewer than two tests in that span (runs shorter
    than its test interval) is not drawn, so a panel's legend lists only the lines on
    it, and its title names the line styles only when a published run is drawn."""
    fig, axes = plt.subplots(1, len(tasks), figsize=(11.5 * len(tasks), 5.5), squeeze=False)
    drawn_any = False
    for ax, task in zip(axes[0], tasks):
        drawn: set[str] = set()
        for curve in task.curves:
            line, low, high = center_and_band(curve, figure)
            color = colors[curve.name]
            label = f"{curve.name} ({curve.seeds} seeds)"
            ax.plot(curve.steps, line, color=color, label=label)
            ax.fill_between(curve.steps, low, high, color=color, alpha=0.2)
            runs = published.get(curve.strategy) if curve.env == task.env else None
            if not runs or curve.strategy in drawn:
                continue
            for run, reference in runs.items():
                span = reference_span(curve, reference)
                if len(span.steps) < 2:  # a point, not a curve: the table gives it
                    continue
                drawn.add(curve.strategy)
                ax.plot(
                    span.steps,
                    span.mean,
                    linestyle=_RUN_STYLES[run],
                    color=color,
                    label=f"{curve.strategy}, {RUN_TITLES[run]} ({span.seeds} seeds)",
                )
                if run == "pooled" or len(runs) == 1:
                    low, high = span.mean - span.stderr, span.mean + span.stderr
                    ax.fill_between(span.steps, low, high, color=color, alpha=0.08)
        drawn_any |= bool(drawn)
        ax.set_xlabel("environment steps")
        step_ticks(ax.xaxis)
        ax.set_ylabel(f"test return ({FIGURES[figure]})")
        title = task.env
        if drawn and citation:
            styles = "; ".join(f"{_RUN_STYLES[r]} {RUN_TITLES[r]}" for r in next(iter(
                published.values())))  # fmt: skip
            title += f" — solid: measured\n{citation}: {styles}"
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def _undrawn_references(
    tasks: list[Task], envs: set[str], published: dict[str, Published], name: str
) -> list[str]:
    """Notes on the published curves :func:`plot_comparison` leaves out beside ``envs``:
    those with fewer than two published tests within the measured runs' span."""
    notes = []
    for task in (t for t in tasks if t.env in envs):
        short = sorted({
            c.strategy for c in task.curves for r in published.get(c.strategy, {}).values()
            if len(reference_span(c, r).steps) < 2
        })  # fmt: skip
        if short:
            notes.append(
                f"{name}'s published curves of {', '.join(short)} are not drawn beside "
                f"{task.env}: the measured runs span fewer than two of its tests (the table "
                "gives the published values nearest the --at steps)"
            )
    return notes


def checkpoint_notes(curves: list[Curve], checkpoints: tuple[int, ...]) -> list[str]:
    """One note per ``--at`` step the table cannot give as asked: beyond every run (no
    column: the table keeps the steps some run reached), or reached without an
    evaluation at that step by some curve (a '–' in its row)."""
    reached = max(int(c.steps[-1]) for c in curves)
    notes = []
    for step in checkpoints:
        if step > reached:
            notes.append(f"--at {step}: no run reached it (the longest ends at step "
                         f"{reached}), so the table has no column for it")  # fmt: skip
            continue
        missing = [c.name for c in curves if step not in c.steps]
        if missing:
            notes.append(f"--at {step}: no evaluation at that step by {', '.join(missing)} "
                         "('–' in the table)")  # fmt: skip
    return notes


def _tables(rows: list[dict], columns: list[tuple[str, str]], checkpoints, runs, out_dir: Path):
    several = len({row["env"] for row in rows}) > 1
    with open(out_dir / "comparison.csv", "w", newline="") as f:
        header = ["strategy", "env", "seeds", "final_step", "best_step"]
        for key, _ in columns:
            header += [f"{key}_mean", f"{key}_se"]
        header += [f"published_step_at_{s}" for s in checkpoints if runs]
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            line = [row[k] for k in ("strategy", "env", "seeds", "final_step", "best_step")]
            for key, _ in columns:
                line += list(row[key]) if row.get(key) is not None else ["", ""]
            line += [row.get(f"published_step_at_{s}", "") for s in checkpoints if runs]
            writer.writerow(line)

    def fmt(value: object, digits: int) -> str:
        if value is None:
            return "–"
        if value[1] is None:
            return f"{value[0]:.{digits}f} (one seed)"
        return f"{value[0]:.{digits}f} ± {value[1]:.{digits}f}"

    def digits(row: dict) -> int:
        """Whole numbers for returns in the hundreds (HalfCheetah's), two decimals for
        returns near 1 (a sparse task's reward of 1 at the goal)."""
        means = [abs(row[key][0]) for key, _ in columns if row.get(key) is not None]
        return 0 if max(means, default=0.0) >= 100 else 2

    titles = []
    for key, title in columns:
        if "_at_" in key and not key.startswith("at_"):
            step = int(key.rsplit("_", 1)[1])
            steps = {r.get(f"published_step_at_{step}") for r in rows} - {None}
            title = f"{title} ({', '.join(_k(s) for s in sorted(steps))})"
        titles.append(title)
    first = "| strategy | env | seeds | " if several else "| strategy | seeds | "
    lines = [first + " | ".join(titles) + " |", "|---|---|" + "---|" * (len(titles) + several)]
    for row in rows:
        cells = [fmt(row.get(key), digits(row)) for key, _ in columns]
        env = f"{row['env']} | " if several else ""
        lines.append(f"| {row['strategy']} | {env}{row['seeds']} | " + " | ".join(cells) + " |")
    return lines


def write_outputs(
    curves: list[Curve],
    out_dir: Path,
    checkpoints: tuple[int, ...],
    reference: str | None = None,
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    appendix: str = "",
    figure: str = "mean-se",
) -> list[str]:
    """Figures and tables of ``curves`` in ``out_dir``; returns notes for the user.
    ``appendix`` (markdown) ends ``comparison.md``; ``figure`` is the form of
    ``comparison.png`` (:data:`FIGURES`)."""
    from .interval_report import write_interval_report  # imports rliable: ~seconds
    from .references import load_reference

    tasks = group_tasks(curves)
    notes: list[str] = []
    name, runs = parse_reference(reference) if reference else (None, ())
    published_by_strategy: dict[str, Published] = {}
    tasks_with_reference: set[str] = set()
    citation = None
    if name is not None:
        spec = REFERENCES[name]
        citation = spec.citation
        beside = [task.env for task in tasks if task.env in spec.envs]
        if not beside:
            compared = ", ".join(task.env for task in tasks)
            raise ConfigError(
                f"--reference {name} is {spec.citation}, shown beside "
                f"{' or '.join(spec.envs)} only; compared here: {compared}"
            )
        others = [task.env for task in tasks if task.env not in spec.envs]
        if others:
            notes.append(
                f"{name} is shown beside {', '.join(beside)} only, not {', '.join(others)}"
            )
        loaded = load_reference(name, runs)
        for run, by_strategy in loaded.items():
            for strategy, curve in by_strategy.items():
                published_by_strategy.setdefault(strategy, {})[run] = curve
        tasks_with_reference = set(beside)
        notes += _undrawn_references(tasks, tasks_with_reference, published_by_strategy, name)
    reached = max(int(c.steps[-1]) for c in curves)
    checkpoints = tuple(s for s in checkpoints if s <= reached)
    rows = []
    for task in tasks:
        for curve in task.curves:
            refs = None
            if name is not None and task.env in tasks_with_reference:
                refs = published_by_strategy.get(curve.strategy)
            rows.append(summarize(curve, checkpoints, refs))
    columns = _columns(checkpoints, runs)
    lines = _tables(rows, columns, checkpoints, runs, out_dir)
    note = (
        "\nMean ± standard error over seeds of the evaluation return (test episodes with "
        "the mean weights). final: at the last step all seeds reached; best: the step with "
        "the highest mean; AUC: average return over the curve (trapezoid rule)."
    )
    if figure != "mean-se":
        note += f" comparison.png draws the {FIGURES[figure]}."

    if runs:
        note += (
            f" {', '.join(RUN_TITLES[r] for r in runs)}: {citation} (run 1: the published "
            "figure; run 2: the authors' second run of the same code and seeds; pooled 10: "
            "both), at the published step nearest the column's (named in the header); their "
            "AUC: the published curve's average between the published steps nearest the "
            "measured curve's first and last."
        )
    colors = method_colors(curves)
    section, interval_notes = write_interval_report(tasks, out_dir, colors, reps, seed)
    notes += interval_notes
    section += write_success_report(tasks, out_dir, colors)
    (out_dir / "comparison.md").write_text(
        "\n".join(lines) + "\n" + note + "\n" + section + appendix
    )

    published = published_by_strategy if name is not None else {}
    fig = plot_comparison(tasks, published, colors, citation, figure)
    fig.savefig(out_dir / "comparison.png", dpi=120)
    plt.close(fig)
    return notes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compare_runs",
        description=(
            "Figures and tables of eval curves per strategy: mean ± s.e. over seeds, and "
            "rliable's interval estimates (IQM, mean, P(X > Y), performance profiles)."
        ),
        epilog=(
            "Tasks: each run's env comes from its config.yaml. RUN_DIRs of different envs "
            "are different tasks (compared per task, then aggregated on normalised scores); "
            "RUN_DIRs of the same env are an ablation, told apart by --labels. Seeds of one "
            "strategy directory must share one env."
        ),
    )
    parser.add_argument(
        "runs_dirs", nargs="+", metavar="RUNS_DIR", help="e.g. runs/Hopper-v4 (one per task)"
    )
    parser.add_argument("--out", help="output directory (default: the first RUNS_DIR)")
    parser.add_argument(
        "--at",
        help="comma-separated steps for the early-checkpoint columns "
        "(default 50000,100000,200000,500000,1000000, those reached)",
    )
    parser.add_argument(
        "--reference",
        metavar="NAME[:RUN]",
        help="overlay published curves beside their task and tabulate them: khan2018 (run 1 "
        "= published, run 2 and their pool of 10), or khan2018:1, :2 or :pooled alone",
    )
    parser.add_argument(
        "--labels",
        help="comma-separated names of the RUNS_DIRs, shown after each strategy (default: "
        "the directories' paths when several share an env)",
    )
    parser.add_argument("--strategies", help="comma-separated strategies to keep (default all)")
    parser.add_argument(
        "--short-runs",
        choices=SHORT_RUNS,
        default="truncate",
        help="a seed that stopped before its strategy's others (a failed run): truncate = "
        "its strategy's curve, and the task's scores, end where it ends (default); exclude "
        "= left out; zero = scored 0 at the others' later evaluations. Each names the seeds",
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=DEFAULT_REPS,
        help=f"bootstrap replicates of every interval (default {DEFAULT_REPS}, at most {MAX_REPS})",
    )
    parser.add_argument(
        "--bootstrap-seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed of the bootstrap resampling (default {DEFAULT_SEED})",
    )
    parser.add_argument(
        "--figure",
        choices=FIGURES,
        default="mean-se",
        help="the line and band of comparison.png: mean-se = mean ± one standard error "
        "(default), median-iqr = median and interquartile range (Zhang et al. 2018's Fig. 3)",
    )
    parser.add_argument(
        "--band",
        choices=BANDS,
        default="ci",
        help="band of the TensorBoard strategy aggregates: ci = 95%% bootstrap interval of "
        "the mean, 2000 replicates (default; grids write the same), se = ± one standard error",
    )
    return parser


def _kept_strategies(args: argparse.Namespace) -> set[str] | None:
    return {s.strip() for s in args.strategies.split(",")} if args.strategies else None


def _check_kept(keep: set[str] | None, runs_dirs: list[Path]) -> None:
    """When ``--strategies`` kept no run: the names it gives, if the directories hold runs
    of other strategies (a typo, not runs missing), as one ConfigError naming each with the
    nearest strategy there is. (Where some names match, the others are a note.)"""
    held = {path.parts[-3] for d in runs_dirs for path in d.glob(f"*/seed*/{EVAL_CSV}")}
    if keep and held:
        require_known("strategy (--strategies):", sorted(keep), sorted(held))


def _load(
    args: argparse.Namespace, runs_dirs: list[Path], keep: set[str] | None
) -> tuple[list[Curve], list[str | None], list[str]]:
    """Every RUNS_DIR's curves (of the strategies in ``keep``, or all), each RUNS_DIR's
    label, and the notes."""
    loaded = [load_runs(d, None, keep, short_runs=args.short_runs) for d in runs_dirs]
    notes = [note for _, dir_notes in loaded for note in dir_notes]
    if args.labels is not None:
        labels: list[str | None] = [label.strip() for label in args.labels.split(",")]
        if len(labels) != len(runs_dirs):
            raise ConfigError(
                f"--labels names {len(labels)} directories, {len(runs_dirs)} were given"
            )
    else:
        envs = [{c.env for c in curves} for curves, _ in loaded]
        shared = any(envs[i] & envs[j] for i in range(len(envs)) for j in range(i))
        labels = [str(d) if shared else None for d in runs_dirs]
    curves = []
    for (dir_curves, _), label in zip(loaded, labels):
        for curve in dir_curves:
            curve.label = label
            curves.append(curve)
    return curves, labels, notes


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    def fail(message: str) -> None:
        parser.exit(2, f"compare_runs: error: {message}\n")

    runs_dirs = [Path(d) for d in args.runs_dirs]
    for runs_dir in runs_dirs:
        if not runs_dir.is_dir():
            fail(f"{runs_dir} is not a directory")
    try:
        checkpoints = tuple(int(s) for s in args.at.split(",")) if args.at else DEFAULT_CHECKPOINTS
    except ValueError:
        fail(f"--at expects integers, got {args.at!r}")
    if not 1 <= args.reps <= MAX_REPS:
        fail(f"--reps must be between 1 and {MAX_REPS}, got {args.reps} (more replicates "
             "take time and memory, not precision: the seeds bound it)")  # fmt: skip
    if args.reference:
        try:
            parse_reference(args.reference)
        except ValueError as err:
            fail(f"--reference: {err}")
    out_dir = Path(args.out) if args.out else runs_dirs[0]
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file, not a directory")
    for name in sorted(OUTPUTS):
        if (out_dir / name).is_dir():
            fail(f"--out {out_dir} holds a directory {name}, a file the comparison writes")
    try:
        keep = _kept_strategies(args)
        curves, labels, notes = _load(args, runs_dirs, keep)
        if not curves:
            _check_kept(keep, runs_dirs)
            fail(f"no <strategy>/seed*/{EVAL_CSV} with evaluations under "
                 f"{', '.join(map(str, runs_dirs))}")  # fmt: skip
        if args.at:
            notes += checkpoint_notes(curves, checkpoints)
        with _staged(out_dir) as staging:
            compared = list(zip(runs_dirs, labels))
            appendix = write_coverage_report(compared, keep, staging, notes)
            appendix += write_sigma_report(compared, keep, staging, method_colors(curves), notes)
            notes += write_outputs(curves, staging, checkpoints, args.reference, args.reps,
                                   args.bootstrap_seed, appendix, args.figure)  # fmt: skip
            written = sorted(p.name for p in staging.iterdir())
    except ConfigError as err:
        fail(str(err))
    except OSError as err:
        fail(f"{err.filename or out_dir}: {err.strerror or err}")
    for runs_dir in runs_dirs:
        notes += _write_aggregates(runs_dir, args.band)
    # A name that matches no run (a typo, or an arm not trained yet) leaves the report without
    # it: said here, not in the report, whose files stay those of the runs that are there.
    for name in sorted((keep or set()) - {curve.strategy for curve in curves}):
        notes.append(f"--strategies names {name}, which no directory given holds: left out")
    for note in notes:
        print(f"compare_runs: note: {note}", file=sys.stderr)
    print((out_dir / "comparison.md").read_text())
    print(f"wrote in {out_dir}: {', '.join(written)}")
    return 0


@contextmanager
def _staged(out_dir: Path) -> Iterator[Path]:
    """A directory inside ``out_dir`` to write the comparison in, whose files replace
    ``out_dir``'s once the block ends without error; on an error it is removed, with the
    directories made for it, and ``out_dir`` is as it was."""
    made = [d for d in (out_dir, *out_dir.parents) if not d.exists()]
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".compare_runs-", dir=out_dir))
    try:
        yield staging
        for path in sorted(staging.iterdir()):
            path.replace(out_dir / path.name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in made:
            try:
                directory.rmdir()
            except OSError:
                break
        raise
    staging.rmdir()


def _write_aggregates(runs_dir: Path, band: str) -> list[str]:
    """``runs_dir``'s TensorBoard strategy aggregates (grids write them too: they are a
    view, not the comparison); notes on what was skipped. A runs directory one may only
    read is skipped before anything is written, and an error while writing is a note:
    the comparison is complete by then."""
    aggregates = runs_dir / AGGREGATE_DIR
    targets = [runs_dir, aggregates, *(aggregates.iterdir() if aggregates.is_dir() else ())]
    if not all(os.access(d, os.W_OK) for d in targets if d.is_dir()):
        return [f"{runs_dir} is not writable, so its TensorBoard strategy aggregates "
                f"({AGGREGATE_DIR}/) were not written"]  # fmt: skip
    try:
        if write_strategy_aggregates(runs_dir, band):
            print(
                f"wrote strategy aggregates ({band}) for TensorBoard under {aggregates}; one "
                f"curve per strategy: {tensorboard_view(runs_dir)}"
            )
    except (OSError, ConfigError) as err:  # e.g. a damaged run of a strategy not compared
        reason = os_error_message(err, "cannot write") if isinstance(err, OSError) else err
        return [f"{runs_dir}: its TensorBoard strategy aggregates ({AGGREGATE_DIR}/) were not "
                f"all written: {reason}"]  # fmt: skip
    return []


if __name__ == "__main__":
    sys.exit(main())
