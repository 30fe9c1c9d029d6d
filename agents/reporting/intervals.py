"""Interval estimates of Agarwal et al. (2021), *Deep RL at the Edge of the Statistical
Precipice*, computed with their library ``rliable``.

Scores are arrays of shape (runs, tasks), one per method (a strategy, or a strategy of one
set of runs). Every interval is a 95 % percentile interval of rliable's stratified
bootstrap: each method's runs are resampled with replacement within each task, and each
method independently of the others (``rliable.library.get_interval_estimates`` given the
methods as a list, i.e. its ``StratifiedIndependentBootstrap``), so methods may have
different numbers of runs. What is estimated:

* :func:`aggregate_intervals`: the interquartile mean (IQM: the mean of the middle 50 % of
  all runs × tasks scores, 25 % cut at each end, Sec. 4.3), the mean of the per-task means,
  and the optimality gap (how far the mean score falls short of 1, scores above 1 counting
  as 1; for normalised scores only);
* :func:`improvement_matrix`: P(X > Y), the probability that a run of X scores above a run
  of Y on a task drawn at random, ties counting one half (the Mann-Whitney U statistic
  divided by n_X n_Y, averaged over tasks; Sec. 4.3);
* :func:`performance_profiles`: the fraction of runs × tasks scoring above each τ (score
  distributions, Sec. 4.2);
* :func:`mean_band`: the interval of the mean over seeds at each step of a curve.

A method with one run per task has no interval: its one run, resampled, is that run every
time, so the bootstrap's "interval" would have zero width and say nothing of the spread
between seeds. Its intervals, and those of P(X > Y) with it on either side (which would
leave its spread out), have NaN ends (:attr:`Interval.estimated` is False).

Point estimates are rliable's own metrics. Inside the bootstrap the same statistics are
evaluated in vectorised NumPy (:data:`STATISTICS`, tested equal to rliable's metrics):
rliable's ``probability_of_improvement`` calls SciPy's Mann-Whitney test, ~6 ms per call
here, which makes 55 pairs × 2000 replicates take minutes (``docs/decisions.md#intervals``).
rliable draws its resamples from NumPy's *global* generator (``np.random.choice``; its
``random_state`` argument is not used by the resampling), so each estimate seeds that
generator and restores its state afterwards: the same inputs and ``seed`` give the same
intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from rliable import library, metrics

CONFIDENCE = 0.95
#: Bootstrap replicates: with 5 seeds an interval's ends moved by ≤ 1.4 % of its width
#: between bootstrap seeds at 10 000, by up to 9 % at 2000 (docs/decisions.md#intervals).
DEFAULT_REPS = 10_000
#: At most this many: 10 times the default, whose interval ends move by ≤ 1.4 % of the
#: width between bootstrap seeds (≈ 0.45 % here); more only costs time and memory
#: (rliable keeps every replicate: 10¹² asked for terabytes), never precision, which the
#: seeds bound. A small comparison takes ~30 s at 100 000.
MAX_REPS = 100_000
DEFAULT_SEED = 0

Scores = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Interval:
    """A point estimate and its 95 % bootstrap interval (NaN ends: none, one run)."""

    point: float
    lower: float
    upper: float

    @property
    def estimated(self) -> bool:
        return not (math.isnan(self.lower) or math.isnan(self.upper))

    def __str__(self) -> str:
        return self.format("{:.0f}")

    def format(self, number: str, none: str = "no interval: one seed") -> str:
        if not self.estimated:
            return f"{number.format(self.point)} ({none})"
        return f"{number.format(self.point)} [{number.format(self.lower)}, " + (
            f"{number.format(self.upper)}]"
        )


def _point_only(point: float) -> Interval:
    return Interval(point, math.nan, math.nan)


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean of all values: rliable's ``aggregate_iqm`` (SciPy's trimmed
    mean cutting int(0.25 n) values at each end)."""
    values = np.sort(scores, axis=None)
    cut = int(0.25 * values.size)
    return float(values[cut : values.size - cut].mean())


def mean(scores: np.ndarray) -> float:
    """Mean over tasks of the mean over runs: rliable's ``aggregate_mean``."""
    return float(scores.mean(axis=0).mean())


def optimality_gap(scores: np.ndarray) -> float:
    """1 − the mean of min(score, 1): rliable's ``aggregate_optimality_gap``."""
    return float(1.0 - np.minimum(scores, 1.0).mean())


def improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) averaged over tasks, ties one half: rliable's ``probability_of_improvement``
    (which gives 0.5 for identical arrays, as this does)."""
    greater = (x[:, None, :] > y[None, :, :]).mean(axis=(0, 1))
    ties = (x[:, None, :] == y[None, :, :]).mean(axis=(0, 1))
    return float((greater + 0.5 * ties).mean())


#: The statistics by name, for bootstrap replicates; ``RLIABLE`` gives the point estimates.
STATISTICS: dict[str, Callable[[np.ndarray], float]] = {
    "iqm": iqm,
    "mean": mean,
    "optimality_gap": optimality_gap,
}
RLIABLE: dict[str, Callable[[np.ndarray], float]] = {
    "iqm": metrics.aggregate_iqm,
    "mean": metrics.aggregate_mean,
    "optimality_gap": metrics.aggregate_optimality_gap,
}


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _bootstrap(
    arrays: list[np.ndarray], replicate: Callable[..., np.ndarray], reps: int, seed: int
) -> np.ndarray:
    """rliable's independent stratified bootstrap of ``replicate(*arrays)``: (2, K)."""
    with _seeded(seed):
        _, intervals = library.get_interval_estimates(
            {"all": arrays}, replicate, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return np.asarray(intervals["all"], dtype=float).reshape(2, -1)


def _as_arrays(scores: Scores) -> list[np.ndarray]:
    arrays = [np.asarray(scores[name], dtype=float) for name in scores]
    for name, array in zip(scores, arrays):
        if array.ndim != 2 or array.shape[0] == 0:
            raise ValueError(f"scores of {name!r} must be (runs, tasks), got {array.shape}")
    return arrays


def aggregate_intervals(
    scores: Scores,
    statistics: Sequence[str] = ("iqm", "mean"),
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
) -> dict[str, dict[str, Interval]]:
    """{method: {statistic: Interval}} for ``statistics`` of :data:`STATISTICS`."""
    arrays = _as_arrays(scores)

    def replicate(*resampled: np.ndarray) -> np.ndarray:
        return np.array([STATISTICS[s](x) for x in resampled for s in statistics])

    bounds = _bootstrap(arrays, replicate, reps, seed)
    result: dict[str, dict[str, Interval]] = {}
    column = 0
    for name, array in zip(scores, arrays):
        result[name] = {}
        for statistic in statistics:
            point = float(RLIABLE[statistic](array))
            lower, upper = bounds[:, column]
            one = len(array) < 2
            result[name][statistic] = (
                _point_only(point) if one else Interval(point, float(lower), float(upper))
            )
            column += 1
    return result


def improvement_matrix(
    scores: Scores, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED
) -> dict[tuple[str, str], Interval]:
    """P(X > Y) for every ordered pair of methods (X, Y), X ≠ Y, over their common tasks.

    Only pairs X before Y are bootstrapped: P(Y > X) = 1 − P(X > Y) exactly (ties count
    one half), and so are its interval's ends.
    """
    names = list(scores)
    arrays = _as_arrays(scores)
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    if not pairs:
        return {}

    rows, columns = (np.array(index) for index in zip(*pairs))
    same_shape = len({array.shape for array in arrays}) == 1

    def replicate(*resampled: np.ndarray) -> np.ndarray:
        if not same_shape:
            return np.array([improvement(resampled[i], resampled[j]) for i, j in pairs])
        x = np.stack(resampled)  # (methods, runs, tasks): every pair at once
        greater = (x[:, None, :, None] > x[None, :, None, :]).mean(axis=(2, 3))
        ties = (x[:, None, :, None] == x[None, :, None, :]).mean(axis=(2, 3))
        return (greater + 0.5 * ties).mean(axis=-1)[rows, columns]

    bounds = _bootstrap(arrays, replicate, reps, seed)
    result: dict[tuple[str, str], Interval] = {}
    for k, (i, j) in enumerate(pairs):
        point = float(metrics.probability_of_improvement(arrays[i], arrays[j]))
        lower, upper = float(bounds[0, k]), float(bounds[1, k])
        if len(arrays[i]) < 2 or len(arrays[j]) < 2:
            lower = upper = math.nan
        result[names[i], names[j]] = Interval(point, lower, upper)
        result[names[j], names[i]] = Interval(1.0 - point, 1.0 - upper, 1.0 - lower)
    return result


@dataclass(frozen=True)
class Profile:
    """A performance profile: at each τ, the fraction of scores above τ and its interval."""

    taus: np.ndarray
    fraction: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def performance_profiles(
    scores: Scores, taus: np.ndarray, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED
) -> dict[str, Profile]:
    """Score distributions (rliable's ``create_performance_profile`` with its default
    ``use_score_distribution=True``) at thresholds ``taus``, with intervals."""
    taus = np.asarray(taus, dtype=float)
    arrays = _as_arrays(scores)

    def replicate(*resampled: np.ndarray) -> np.ndarray:
        return np.concatenate([(x.reshape(-1, 1) > taus).mean(axis=0) for x in resampled])

    bounds = _bootstrap(arrays, replicate, reps, seed).reshape(2, len(arrays), len(taus))
    for m, array in enumerate(arrays):
        if len(array) < 2:
            bounds[:, m] = math.nan
    return {
        name: Profile(taus, np.asarray(library.score_distributions(array, taus)), *bounds[:, m])
        for m, (name, array) in enumerate(zip(scores, arrays))
    }


def mean_band(
    values: np.ndarray, reps: int = DEFAULT_REPS, seed: int = DEFAULT_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the mean over seeds at each step of ``values`` (seeds, steps):
    rliable's stratified bootstrap with the steps as strata (each step's seeds resampled
    on their own), the intervals of a curve's mean drawn as a band."""
    values = np.asarray(values, dtype=float)
    with _seeded(seed):
        _, intervals = library.get_interval_estimates(
            {"curve": values},
            lambda x: x.mean(axis=0),
            reps=reps,
            confidence_interval_size=CONFIDENCE,
        )
    lower, upper = np.asarray(intervals["curve"], dtype=float)
    return lower, upper
