"""``compare_runs``: the paper's comparison (Figures 5-6) from directories of runs.

    compare_runs runs/HalfCheetah-v4 [--out DIR] [--at 50000,100000] [--reference khan2018]
    compare_runs A/HalfCheetah-v4 B/HalfCheetah-v4 --labels a,b [--strategies vadam]

reads ``<RUNS_DIR>/<strategy>/seed<k>/eval.csv`` and writes to DIR (default: the first
RUNS_DIR):

* ``comparison.png``: mean ± standard error over seeds of the test return against
  environment steps, one curve per strategy (and per RUNS_DIR when several are given);
* ``comparison.md`` and ``comparison.csv``: per strategy the number of seeds, the final
  and the best mean return, the return at the ``--at`` steps and the area under the
  curve (the curve's average return over its steps, trapezoid rule), each mean ± standard
  error.

With ``--reference khan2018`` the published curves (:mod:`agents.reporting.curves`) are drawn dashed
in each strategy's colour over the measured steps, and the tables give the published
value beside each measured one, at the nearest published step (named in the table), and
the published curve's average over the same span. A strategy's curve covers the
evaluation steps that all of its seeds have reached. Each RUNS_DIR also gets (again) its
per-strategy TensorBoard aggregates (:mod:`agents.reporting.strategy_aggregates`).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..runs.run_logger import EVAL_CSV
from .curves import REFERENCES, Curve, load_curves, load_reference
from .strategy_aggregates import AGGREGATE_DIR, write_strategy_aggregates

#: The published table's early columns (``docs/decisions.md#published-curves``).
DEFAULT_CHECKPOINTS = (50_000, 100_000, 200_000, 500_000, 1_000_000)

MeanSE = tuple[float, float]


def _mean_se(values: np.ndarray) -> MeanSE:
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(se)


def reference_span(curve: Curve, reference: Curve) -> Curve:
    """The published curve between the published steps nearest the measured ends."""
    first = reference.nearest_step(int(curve.steps[0]))
    last = reference.nearest_step(int(curve.steps[-1]))
    return reference.between(first, last)


def summarize(
    curve: Curve, checkpoints: tuple[int, ...], reference: Curve | None = None
) -> dict[str, object]:
    """One table row: values are (mean, standard error) over seeds.

    With ``reference``, ``published_at_<step>`` is the published value at the published
    step nearest ``step`` (``published_step_at_<step>``), and ``published_auc`` the
    published curve's average over the measured span (:func:`reference_span`).
    """
    best = int(np.argmax(curve.mean))
    row: dict[str, object] = {
        "strategy": curve.name,
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
        if reference is not None:
            published = reference.nearest_step(step)
            column = reference.returns[:, np.flatnonzero(reference.steps == published)[0]]
            row[f"published_at_{step}"] = _mean_se(column)
            row[f"published_step_at_{step}"] = published
    if reference is not None:
        row["published_auc"] = _mean_se(reference_span(curve, reference).auc_per_seed())
    return row


def _columns(checkpoints: tuple[int, ...], with_reference: bool) -> list[tuple[str, str]]:
    """(row key, title stem) of every mean ± s.e. column, in table order."""
    columns = [("final", "final"), ("best", "best")]
    for step in checkpoints:
        columns.append((f"at_{step}", f"{step // 1000} k"))
        if with_reference:
            columns.append((f"published_at_{step}", "published"))
    columns.append(("auc", "AUC"))
    if with_reference:
        columns.append(("published_auc", "published AUC"))
    return columns


def _k(step: int) -> str:
    return f"{step / 1000:g} k"


def plot_comparison(
    curves: list[Curve], references: dict[str, Curve], citation: str | None = None
) -> Figure:
    """Mean ± s.e. per curve; each strategy's published curve dashed in its colour."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    drawn: set[str] = set()
    for curve in curves:
        mean, se = curve.mean, curve.stderr
        (line,) = ax.plot(curve.steps, mean, label=f"{curve.name} ({curve.seeds} seeds)")
        color = line.get_color()
        ax.fill_between(curve.steps, mean - se, mean + se, color=color, alpha=0.2)
        reference = references.get(curve.strategy)
        if reference is None or curve.strategy in drawn:
            continue
        drawn.add(curve.strategy)
        published = reference_span(curve, reference)
        ax.plot(
            published.steps,
            published.mean,
            linestyle="--",
            color=color,
            label=f"{curve.strategy}, published ({published.seeds} seeds)",
        )
        ax.fill_between(
            published.steps,
            published.mean - published.stderr,
            published.mean + published.stderr,
            color=color,
            alpha=0.08,
        )
    ax.set_xlabel("environment steps")
    ax.set_ylabel("test return (mean ± s.e. over seeds)")
    title = "solid: measured" + (f"; dashed: {citation}" if drawn and citation else "")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2 if drawn else 1)
    fig.tight_layout()
    return fig


def write_outputs(
    curves: list[Curve],
    out_dir: Path,
    checkpoints: tuple[int, ...],
    reference: str | None = None,
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    references = load_reference(reference) if reference else {}
    reached = max(int(c.steps[-1]) for c in curves)
    checkpoints = tuple(s for s in checkpoints if s <= reached)
    rows = [summarize(c, checkpoints, references.get(c.strategy)) for c in curves]
    columns = _columns(checkpoints, bool(references))

    with open(out_dir / "comparison.csv", "w", newline="") as f:
        header = ["strategy", "seeds", "final_step", "best_step"]
        for key, _ in columns:
            header += [f"{key}_mean", f"{key}_se"]
        header += [f"published_step_at_{s}" for s in checkpoints if references]
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            line = [row["strategy"], row["seeds"], row["final_step"], row["best_step"]]
            for key, _ in columns:
                line += list(row[key]) if row.get(key) is not None else ["", ""]
            line += [row.get(f"published_step_at_{s}", "") for s in checkpoints if references]
            writer.writerow(line)

    def fmt(value: object) -> str:
        return "–" if value is None else f"{value[0]:.0f} ± {value[1]:.0f}"

    titles = []
    for key, title in columns:
        if key.startswith("published_at_"):
            step = int(key.removeprefix("published_at_"))
            published_steps = {r.get(f"published_step_at_{step}") for r in rows} - {None}
            where = ", ".join(_k(s) for s in sorted(published_steps))
            title = f"published ({where})"
        titles.append(title)
    lines = [
        "| strategy | seeds | " + " | ".join(titles) + " |",
        "|---|---|" + "---|" * len(titles),
    ]
    for row in rows:
        cells = [fmt(row.get(key)) for key, _ in columns]
        lines.append(f"| {row['strategy']} | {row['seeds']} | " + " | ".join(cells) + " |")
    note = (
        "\nMean ± standard error over seeds of the evaluation return (test episodes with "
        "the mean weights). final: at the last step all seeds reached; best: the step with "
        "the highest mean; AUC: average return over the curve (trapezoid rule)."
    )
    if references:
        note += (
            f" published: {REFERENCES[reference][1]}, at the published step nearest the "
            "column's (named in the header); published AUC: the published curve's average "
            "between the published steps nearest the measured curve's first and last."
        )
    (out_dir / "comparison.md").write_text("\n".join(lines) + "\n" + note + "\n")

    citation = REFERENCES[reference][1] if reference else None
    fig = plot_comparison(curves, references, citation)
    fig.savefig(out_dir / "comparison.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare_runs",
        description="Figure and table of eval curves per strategy (mean ± s.e. over seeds).",
    )
    parser.add_argument("runs_dirs", nargs="+", metavar="RUNS_DIR", help="e.g. runs/Hopper-v4")
    parser.add_argument("--out", help="output directory (default: the first RUNS_DIR)")
    parser.add_argument(
        "--at",
        help="comma-separated steps for the early-checkpoint columns "
        "(default 50000,100000,200000,500000,1000000, those reached)",
    )
    parser.add_argument(
        "--reference",
        choices=sorted(REFERENCES),
        help="overlay published curves and tabulate them beside the measured ones",
    )
    parser.add_argument(
        "--labels",
        help="comma-separated names of the RUNS_DIRs, shown after each strategy "
        "(default: the directories' paths when there are several)",
    )
    parser.add_argument("--strategies", help="comma-separated strategies to keep (default all)")
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
    if args.labels is not None:
        labels: list[str | None] = [label.strip() for label in args.labels.split(",")]
        if len(labels) != len(runs_dirs):
            fail(f"--labels names {len(labels)} directories, {len(runs_dirs)} were given")
    else:
        labels = [str(d) if len(runs_dirs) > 1 else None for d in runs_dirs]
    curves = [c for d, label in zip(runs_dirs, labels) for c in load_curves(d, label)]
    if args.strategies:
        keep = {s.strip() for s in args.strategies.split(",")}
        curves = [c for c in curves if c.strategy in keep]
    if not curves:
        fail(f"no <strategy>/seed*/{EVAL_CSV} under {', '.join(map(str, runs_dirs))}")
    out_dir = Path(args.out) if args.out else runs_dirs[0]
    write_outputs(curves, out_dir, checkpoints, args.reference)
    print((out_dir / "comparison.md").read_text())
    print(f"wrote {out_dir / 'comparison.png'}, comparison.md, comparison.csv")
    for runs_dir in runs_dirs:
        if write_strategy_aggregates(runs_dir):
            print(f"wrote strategy means ± s.e. for TensorBoard under {runs_dir / AGGREGATE_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
