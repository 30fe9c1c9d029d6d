"""How the weight noise moved in training, in ``compare_runs``: σ and the action distance.

A weight-noise strategy's σ is the toolkit's subject, and whether it adapts is the first
thing to read off a run: Vadam's σ = 1/√(N s + λ + c) stays at its start, 1/√c, unless
N s grows to the size of c. Runs log σ's 10th, 50th and 90th percentiles over the actor's
weights, each layer's median σ, and the action distance the noise causes (parameter
noise's measure, on a replay minibatch; :meth:`agents.ddpg.agent.DDPG.action_distance`)
into ``explore.csv``. For every strategy whose runs have them:

* ``sigma.csv``: per task, strategy and logged step, the median over seeds of each of
  those columns;
* ``sigma.png``: per task, the median σ against steps with its 10th–90th percentile band
  (each the median over seeds), on a log axis when the σ drawn span a decade and a linear
  one otherwise (:func:`sigma_scale`), and the action distance below;
* a section of ``comparison.md``: per task and strategy, σ at the first and the last
  logged step (10th, 50th and 90th percentile), how far the median moved, the layer whose
  median σ fell most, and the action distance at the first and last step.

Runs are aligned on the logged steps every seed has; a strategy some of whose seeds lack
the columns (runs logged before they existed) is left out with a note. Read from
committed files only.
"""

from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from ..runs.explore_log import EXPLORE_CSV, read_explore_csv
from .run_files import compared_runs
from .ticks import few_ticks, step_ticks

SIGMA_FILES = ("sigma.csv", "sigma.png")
#: The columns every run of a reported strategy has (``param_explore``'s SIGMA_QUANTILES).
QUANTILES = ("sigma_q10", "sigma_median", "sigma_q90")
DISTANCE = "action_distance"
_LAYER = "sigma_median/"


@dataclass
class SigmaCurves:
    """One strategy's σ columns on one task: ``values[column]`` is (seeds, steps)."""

    env: str
    strategy: str
    steps: np.ndarray
    values: dict[str, np.ndarray]

    def median(self, column: str) -> np.ndarray:
        """The median over seeds of ``column`` at every step."""
        return np.median(self.values[column], axis=0)

    @property
    def layers(self) -> list[str]:
        return [c[len(_LAYER) :] for c in self.values if c.startswith(_LAYER)]


def _strategy_curves(
    env: str, strategy: str, tables: list[list[dict]], notes: list[str], where: Path
) -> SigmaCurves | None:
    if not all(tables) or not all(QUANTILES[1] in t[0] for t in tables):
        if any(t and QUANTILES[1] in t[0] for t in tables):
            notes.append(f"{where}: not every seed logged σ's quantiles, so the σ report "
                         "leaves it out")  # fmt: skip
        return None
    columns = [c for c in tables[0][0] if c in (*QUANTILES, DISTANCE) or c.startswith(_LAYER)]
    columns = [c for c in columns if all(c in t[0] for t in tables)]
    by_step = [
        {row["step"]: row for row in table if all(row.get(c) is not None for c in QUANTILES)}
        for table in tables
    ]
    steps = sorted(set.intersection(*(set(rows) for rows in by_step)))
    if not steps:
        notes.append(f"{where}: its seeds share no logged step of σ; left out of the σ report")
        return None
    values = {
        column: np.array([
            [np.nan if rows[s].get(column) is None else rows[s][column] for s in steps]
            for rows in by_step
        ])
        for column in columns
    }  # fmt: skip
    empty = [column for column, v in values.items() if np.isnan(v).all()]
    if empty:
        notes.append(f"{where}: no seed logged a value of {', '.join(empty)} at any shared "
                     "step; left blank in the σ report")  # fmt: skip
    return SigmaCurves(env, strategy, np.array(steps), values)


def _over_seeds(values: np.ndarray) -> np.ndarray:
    """The median over seeds (axis 0) of the values logged; NaN (blank in the report) where
    no seed logged one: the action distance before the buffer holds a minibatch, a column
    no seed has (:func:`_strategy_curves` notes that), not a warning of numpy's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "All-NaN slice encountered", RuntimeWarning)
        return np.nanmedian(values, axis=0)


def sigma_curves(
    runs_dirs: list[tuple[Path, str | None]], strategies: set[str] | None, notes: list[str]
) -> list[SigmaCurves]:
    """Every reported strategy's σ columns per task (``(runs_dir, label)`` pairs)."""
    grouped: dict[tuple[str, str], list[Path]] = {}
    for run in compared_runs(runs_dirs, strategies):
        grouped.setdefault((run.env, run.strategy), []).append(run.seed_dir)
    found = []
    for (env, strategy), seed_dirs in grouped.items():
        paths = [d / EXPLORE_CSV for d in seed_dirs]
        tables = [read_explore_csv(p) if p.exists() else [] for p in paths]
        curves = _strategy_curves(env, strategy, tables, notes, seed_dirs[0].parent)
        if curves is not None:
            found.append(curves)
    return found


def _k(step: float) -> str:
    return f"{step / 1000:g} k"


def sigma_rows(curves: list[SigmaCurves]) -> list[dict[str, object]]:
    """``sigma.csv``'s rows: per task, strategy and step, the medians over seeds."""
    rows = []
    for c in curves:
        columns = list(c.values)
        medians = {column: _over_seeds(c.values[column]) for column in columns}
        for i, step in enumerate(c.steps):
            row: dict[str, object] = {"env": c.env, "strategy": c.strategy, "step": int(step)}
            row["seeds"] = c.values[QUANTILES[1]].shape[0]
            row.update({
                column: "" if np.isnan(medians[column][i]) else f"{medians[column][i]:.6g}"
                for column in columns
            })  # fmt: skip
            rows.append(row)
    return rows


#: σ is drawn on a log axis when the values on it span at least this ratio (a decade).
LOG_SPAN = 10.0


def sigma_scale(ax: Axes, values: np.ndarray) -> str:
    """Give ``ax`` the scale, limits and tick labels that show the σ ``values`` drawn on
    it, and return the scale (``log`` or ``linear``).

    A sweep over σ₀ spreads the strategies' σ over decades (1/√c for c from 10 to 10⁴):
    on a log axis each line stands apart. One strategy's σ often moves by less than one
    per cent (Vadam's N·s small beside c): a log axis draws that as a flat line on its top
    edge, the band invisible, the ticks 9.999×10⁻³. So a log axis only when the values span
    a decade or more; otherwise a linear one, whose ticks are plain decimals with the
    digits that tell them apart (no offset to add in one's head). Either way a margin
    keeps the lines off the edges, and a σ that never moved gets a band of ±5 % around it.
    """
    finite = values[np.isfinite(values) & (values > 0)]
    if finite.size == 0:
        return ax.get_yscale()
    low, high = float(finite.min()), float(finite.max())
    if high / low >= LOG_SPAN:
        ax.set_yscale("log")
        ax.margins(y=0.06)
        return "log"
    ax.set_yscale("linear")
    if high == low:
        ax.set_ylim(low * 0.95, high * 1.05)
    else:
        pad = 0.08 * (high - low)
        ax.set_ylim(low - pad, high + pad)
    few_ticks(ax.yaxis, nbins=5)
    ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))
    return "linear"


def plot_sigma(curves: list[SigmaCurves], colors: dict[str, str]) -> Figure:
    """Median σ (10th–90th percentile band) and the action distance, a column per task.

    The y-axis titles stand at the left column only, aligned, in two short lines (one
    title per row is enough to read, and long ones ran into each other); σ's axis is
    chosen by :func:`sigma_scale`; the legend lists each strategy drawn, in any column.
    """
    envs = list(dict.fromkeys(c.env for c in curves))
    fig, axes = plt.subplots(
        2, len(envs), figsize=(max(6.5 * len(envs), 7.5), 8.0), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    legend: dict[str, Artist] = {}
    for column, env in enumerate(envs):
        top, bottom = axes[0][column], axes[1][column]
        drawn = []
        for c in (c for c in curves if c.env == env):
            color = colors.get(c.strategy, "C0")
            low, median, high = (c.median(q) for q in QUANTILES)
            (line,) = top.plot(c.steps, median, color=color, label=c.strategy)
            legend.setdefault(c.strategy, line)
            top.fill_between(c.steps, low, high, color=color, alpha=0.2, linewidth=0)
            drawn += [low, median, high]
            if DISTANCE in c.values:
                bottom.plot(c.steps, _over_seeds(c.values[DISTANCE]), color=color)
        sigma_scale(top, np.concatenate(drawn))
        top.set_title(env, fontsize="medium")
        bottom.set_xlabel("environment steps")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            step_ticks(ax.xaxis)
    axes[0][0].set_ylabel("σ of the actor's weights\n(median; band: 10th–90th percentile)")
    axes[1][0].set_ylabel("action distance\n(units of half the action range)")
    fig.align_ylabels(axes[:, 0])
    fig.legend(list(legend.values()), list(legend), fontsize="small", loc="outside lower center",
               ncols=min(len(legend), 4))  # fmt: skip
    return fig


def _shrunk_most(c: SigmaCurves) -> str:
    """The layer whose median σ (over seeds) fell most from the first logged step to the
    last, with its ratio; '–' without layer columns or when none fell."""
    ratios = {
        layer: float(_over_seeds(c.values[_LAYER + layer][:, -1]
                                 / c.values[_LAYER + layer][:, 0]))
        for layer in c.layers
    }  # fmt: skip
    ratios = {layer: ratio for layer, ratio in ratios.items() if not np.isnan(ratio)}
    if not ratios or min(ratios.values()) >= 1.0:
        return "–"
    layer = min(ratios, key=ratios.__getitem__)
    return f"`{layer}` ×{ratios[layer]:.3g}"


def sigma_section(curves: list[SigmaCurves]) -> str:
    """The markdown section of ``comparison.md`` (see the module docstring)."""
    lines = ["", "## σ of the weight noise in training", ""]
    for env in dict.fromkeys(c.env for c in curves):
        lines += [
            f"**{env}**",
            "",
            "| strategy | seeds | σ at first log (10th / 50th / 90th pct.) | σ at last log | "
            "median σ last / first | layer shrunk most | action distance first → last |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in (c for c in curves if c.env == env):
            first, last = int(c.steps[0]), int(c.steps[-1])
            at = {i: " / ".join(f"{c.median(q)[i]:.3g}" for q in QUANTILES) for i in (0, -1)}
            ratio = np.median(c.values[QUANTILES[1]][:, -1] / c.values[QUANTILES[1]][:, 0])
            distance = "–"
            if DISTANCE in c.values:
                d = _over_seeds(c.values[DISTANCE])
                distance = f"{d[0]:.3g} → {d[-1]:.3g}"
            lines.append(
                f"| {c.strategy} | {c.values[QUANTILES[1]].shape[0]} | {at[0]} ({_k(first)}) | "
                f"{at[-1]} ({_k(last)}) | {ratio:.3g} | {_shrunk_most(c)} | {distance} |"
            )
        lines.append("")
    lines.append(
        "From each run's `explore.csv`: σ's percentiles over the actor's weights at a logged "
        "step, each the median over seeds; the ratio and the layer's are medians over seeds "
        "of each run's last / first; the action distance (√ of the mean squared difference "
        "between the actions at μ and at a fresh sample of the weights, on a replay "
        "minibatch, in units of half the action range) is the median over seeds, empty "
        "before the buffer holds a minibatch. `sigma.csv` has every logged step and layer; "
        "`sigma.png` draws them."
    )
    return "\n".join(lines) + "\n"


def write_sigma_report(
    runs_dirs: list[tuple[Path, str | None]],
    strategies: set[str] | None,
    out_dir: Path,
    colors: dict[str, str],
    notes: list[str],
) -> str:
    """``sigma.csv`` and ``sigma.png`` in ``out_dir``; returns the markdown section (empty,
    and nothing written, when no compared run logged σ's quantiles)."""
    curves = sigma_curves(runs_dirs, strategies, notes)
    if not curves:
        return ""
    rows = sigma_rows(curves)
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with open(out_dir / "sigma.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    fig = plot_sigma(curves, colors)
    fig.savefig(out_dir / "sigma.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return sigma_section(curves)
