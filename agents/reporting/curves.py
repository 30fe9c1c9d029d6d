"""Evaluation curves across seeds: measured runs, and published ones to compare against.

A :class:`Curve` is one strategy's test return at common steps, one row per seed. Measured
curves come from ``<runs_dir>/<strategy>/seed<k>/eval.csv``; published curves ship with
the package (``agents/data``). ``khan2018`` is every test point of Khan et al. (2018),
Appendix K, HalfCheetah-v1, 5 seeds per strategy, computed from the result files released
with the authors' code; its tests ran after 1 k, 11 k, 21 k, … steps
(``docs/decisions.md#published-curves``).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..runs.run_logger import EVAL_CSV, read_eval_csv

#: Published curves by name: (file in ``agents/data``, how to cite it in a figure).
REFERENCES = {
    "khan2018": ("khan2018_halfcheetah_v1_curves.csv", "Khan et al. 2018, HalfCheetah-v1"),
}


@dataclass
class Curve:
    """One strategy's evaluation curve across seeds.

    ``label`` tells apart curves of the same strategy from different sets of runs (an
    ablation); :attr:`name` is what tables and legends show.
    """

    strategy: str
    steps: np.ndarray  # (T,)
    returns: np.ndarray  # (seeds, T)
    label: str | None = None

    @property
    def name(self) -> str:
        return self.strategy if self.label is None else f"{self.strategy} ({self.label})"

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

    def nearest_step(self, step: int) -> int:
        """The curve's step closest to ``step`` (the earlier one on a tie)."""
        return int(self.steps[np.argmin(np.abs(self.steps - step))])

    def between(self, first: int, last: int) -> Curve:
        """The part of the curve from step ``first`` to ``last``, both included."""
        keep = (self.steps >= first) & (self.steps <= last)
        return Curve(self.strategy, self.steps[keep], self.returns[:, keep], self.label)


def aligned_curve(
    strategy: str, per_seed: list[dict[int, float]], label: str | None = None
) -> Curve | None:
    """Seeds' {step: value} maps on the steps every seed has reached (None if none)."""
    if not per_seed:
        return None
    common = sorted(set.intersection(*(set(seed) for seed in per_seed)))
    if not common:
        return None
    returns = np.array([[seed[s] for s in common] for seed in per_seed])
    return Curve(strategy, np.array(common), returns, label)


def load_curves(runs_dir: str | Path, label: str | None = None) -> list[Curve]:
    """Every ``<strategy>/seed*/eval.csv`` under ``runs_dir``, aligned on common steps."""
    curves = []
    for strategy_dir in sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()):
        per_seed = []
        for csv_path in sorted(strategy_dir.glob(f"seed*/{EVAL_CSV}")):
            rows = read_eval_csv(csv_path)
            if rows:
                per_seed.append({int(r["step"]): r["mean_return"] for r in rows})
        curve = aligned_curve(strategy_dir.name, per_seed, label)
        if curve is not None:
            curves.append(curve)
    return curves


def load_reference(name: str) -> dict[str, Curve]:
    """The published curves ``name`` (a key of :data:`REFERENCES`), by strategy."""
    if name not in REFERENCES:
        raise ValueError(f"unknown reference {name!r}; choose from {', '.join(REFERENCES)}")
    filename, citation = REFERENCES[name]
    by_seed: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    with resources.files("agents.reporting").joinpath("data", filename).open(newline="") as f:
        for row in csv.DictReader(f):
            by_seed[row["strategy"]][int(row["seed"])][int(row["step"])] = float(row["mean_return"])
    curves = {}
    for strategy, seeds in sorted(by_seed.items()):
        curve = aligned_curve(strategy, [seeds[s] for s in sorted(seeds)], citation)
        if curve is not None:
            curves[strategy] = curve
    return curves
