"""Evaluation curves across seeds: one strategy's test return at common steps.

A :class:`Curve` holds one row per seed. Measured curves are read from run directories
by :mod:`agents.reporting.run_files`; the published ones ship with the package
(:mod:`agents.reporting.references`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Curve:
    """One strategy's evaluation curve across seeds, on one task.

    ``label`` tells apart curves of the same strategy from different sets of runs (an
    ablation); :attr:`name` is what tables and legends show. ``env`` is the task the runs
    trained on; ``success`` the per-seed success rate in [0, 1] at the same steps, for
    tasks whose evaluations record one (``success_rate`` in ``eval.csv``).
    """

    strategy: str
    steps: np.ndarray  # (T,)
    returns: np.ndarray  # (seeds, T)
    label: str | None = None
    env: str | None = None
    success: np.ndarray | None = None  # (seeds, T)

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
        return stderr(self.returns)

    def auc_per_seed(self, values: np.ndarray | None = None) -> np.ndarray:
        """Average of ``values`` (default: the returns) over the curve, per seed: the
        trapezoid area divided by the step span (one step: the value there)."""
        values = self.returns if values is None else values
        if len(self.steps) < 2:
            return values[:, 0]
        span = self.steps[-1] - self.steps[0]
        widths = np.diff(self.steps)
        areas = ((values[:, 1:] + values[:, :-1]) / 2 * widths).sum(axis=1)
        return areas / span

    def nearest_step(self, step: int) -> int:
        """The curve's step closest to ``step`` (the earlier one on a tie)."""
        return int(self.steps[np.argmin(np.abs(self.steps - step))])

    def between(self, first: int, last: int) -> Curve:
        """The part of the curve from step ``first`` to ``last``, both included."""
        keep = (self.steps >= first) & (self.steps <= last)
        success = None if self.success is None else self.success[:, keep]
        return Curve(
            self.strategy, self.steps[keep], self.returns[:, keep], self.label, self.env, success
        )


def stderr(values: np.ndarray) -> np.ndarray:
    """Standard error of the mean over axis 0 (std with ddof 1 / √n; 0 for one row)."""
    if values.shape[0] < 2:
        return np.zeros(values.shape[1:])
    return values.std(axis=0, ddof=1) / math.sqrt(values.shape[0])


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
