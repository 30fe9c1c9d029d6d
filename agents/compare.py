"""``compare_runs``: the paper's comparison (Figures 5-6) from a directory of runs.

    compare_runs runs/HalfCheetah-v4 [--out DIR] [--at 50000,100000]

reads ``<RUNS_DIR>/<strategy>/seed<k>/eval.csv`` and writes to DIR (default RUNS_DIR):

* ``comparison.png``: mean ± standard error over seeds of the test return against
  environment steps, one curve per strategy;
* ``comparison.md`` and ``comparison.csv``: per strategy the number of seeds, the final
  and the best mean return, the return at early checkpoints and the area under the curve
  (the curve's average return over its steps, trapezoid rule), each mean ± standard error.

A strategy's curve covers the evaluation steps that all of its seeds have reached.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .run_logger import EVAL_CSV, read_eval_csv

#: The published table's early columns (``NOTES.md``).
DEFAULT_CHECKPOINTS = (50_000, 100_000, 200_000, 500_000, 1_000_000)


@dataclass
class Curve:
    """One strategy's evaluation curve across seeds."""

    strategy: str
    steps: np.ndarray  # (T,)
    returns: np.ndarray  # (seeds, T)

    @property
    def seeds(self) -> int:
        return self.returns.shape[0]

    @property
    def mean(self) -> np.ndarray:
        return self.returns.mean(axis=0)

    @property
    def stderr(self) -> np.ndarray:
        if self.seeds < 2:
            return np.zeros(len(self.steps))
        return self.returns.std(axis=0, ddof=1) / math.sqrt(self.seeds)

    def auc_per_seed(self) -> np.ndarray:
        """Average return over the curve (trapezoid area / step span), per seed."""
        if len(self.steps) < 2:
            return self.returns[:, 0]
        span = self.steps[-1] - self.steps[0]
        widths = np.diff(self.steps)
        areas = ((self.returns[:, 1:] + self.returns[:, :-1]) / 2 * widths).sum(axis=1)
        return areas / span


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(se)


def load_curves(runs_dir: str | Path) -> list[Curve]:
    """Every ``<strategy>/seed*/eval.csv`` under ``runs_dir``, aligned on common steps."""
    curves = []
    for strategy_dir in sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()):
        per_seed = []
        for csv_path in sorted(strategy_dir.glob(f"seed*/{EVAL_CSV}")):
            rows = read_eval_csv(csv_path)
            if rows:
                per_seed.append({int(r["step"]): r["mean_return"] for r in rows})
        if not per_seed:
            continue
        common = sorted(set.intersection(*(set(seed) for seed in per_seed)))
        if not common:
            continue
        returns = np.array([[seed[s] for s in common] for seed in per_seed])
        curves.append(Curve(strategy_dir.name, np.array(common), returns))
    return curves


def summarize(curve: Curve, checkpoints: tuple[int, ...]) -> dict[str, object]:
    """One table row: values are (mean, standard error) over seeds."""
    best = int(np.argmax(curve.mean))
    row: dict[str, object] = {
        "strategy": curve.strategy,
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
    return row


def write_outputs(curves: list[Curve], out_dir: Path, checkpoints: tuple[int, ...]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    reached = max(int(c.steps[-1]) for c in curves)
    checkpoints = tuple(s for s in checkpoints if s <= reached)
    rows = [summarize(c, checkpoints) for c in curves]
    pair_columns = ["final", "best", *[f"at_{s}" for s in checkpoints], "auc"]

    with open(out_dir / "comparison.csv", "w", newline="") as f:
        header = ["strategy", "seeds", "final_step", "best_step"]
        for column in pair_columns:
            header += [f"{column}_mean", f"{column}_se"]
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            line = [row["strategy"], row["seeds"], row["final_step"], row["best_step"]]
            for column in pair_columns:
                line += list(row[column]) if row[column] is not None else ["", ""]
            writer.writerow(line)

    def fmt(value: object) -> str:
        return "–" if value is None else f"{value[0]:.1f} ± {value[1]:.1f}"

    titles = ["final", "best", *[f"{s // 1000} k" for s in checkpoints], "AUC"]
    lines = [
        "| strategy | seeds | " + " | ".join(titles) + " |",
        "|---|---|" + "---|" * len(titles),
    ]
    for row in rows:
        cells = [fmt(row[c]) for c in pair_columns]
        lines.append(f"| {row['strategy']} | {row['seeds']} | " + " | ".join(cells) + " |")
    note = (
        "\nMean ± standard error over seeds of the evaluation return (test episodes with "
        "the mean weights). final: at the last step all seeds reached; best: the step with "
        "the highest mean; AUC: average return over the curve.\n"
    )
    (out_dir / "comparison.md").write_text("\n".join(lines) + "\n" + note)

    fig, ax = plt.subplots(figsize=(8, 5))
    for curve in curves:
        mean, se = curve.mean, curve.stderr
        (line,) = ax.plot(curve.steps, mean, label=f"{curve.strategy} ({curve.seeds} seeds)")
        ax.fill_between(curve.steps, mean - se, mean + se, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("test return (mean ± s.e. over seeds)")
    ax.set_title(out_dir.name if out_dir.name else "comparison")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "comparison.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare_runs",
        description="Figure and table of eval curves per strategy (mean ± s.e. over seeds).",
    )
    parser.add_argument("runs_dir", help="e.g. runs/HalfCheetah-v4")
    parser.add_argument("--out", help="output directory (default RUNS_DIR)")
    parser.add_argument(
        "--at",
        help="comma-separated steps for the early-checkpoint columns "
        "(default 50000,100000,200000,500000,1000000, those reached)",
    )
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        parser.exit(2, f"compare_runs: error: {runs_dir} is not a directory\n")
    try:
        checkpoints = tuple(int(s) for s in args.at.split(",")) if args.at else DEFAULT_CHECKPOINTS
    except ValueError:
        parser.exit(2, f"compare_runs: error: --at expects integers, got {args.at!r}\n")
    curves = load_curves(runs_dir)
    if not curves:
        parser.exit(2, f"compare_runs: error: no <strategy>/seed*/{EVAL_CSV} under {runs_dir}\n")
    out_dir = Path(args.out) if args.out else runs_dir
    write_outputs(curves, out_dir, checkpoints)
    print((out_dir / "comparison.md").read_text())
    print(f"wrote {out_dir / 'comparison.png'}, comparison.md, comparison.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
