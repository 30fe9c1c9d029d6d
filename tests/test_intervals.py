"""The rliable layer (``agents.reporting.intervals``) against rliable called directly on
the same arrays, and against hand computations on tiny cases.

rliable resamples with NumPy's global generator, so rliable called directly after
``np.random.seed(seed)`` draws the same replicates as the layer with ``seed``: the
intervals must agree exactly when both evaluate rliable's own metrics on them, and within
bootstrap noise against rliable's usual one-method-at-a-time call. Few replicates
(seeded) keep this fast.
"""

from __future__ import annotations

import numpy as np
import pytest
from rliable import library as rly
from rliable import metrics

from agents.reporting import intervals

REPS = 200


def rliable_direct(arrays: list[np.ndarray], func, reps: int = REPS, seed: int = 0):
    state = np.random.get_state()
    np.random.seed(seed)
    points, bounds = rly.get_interval_estimates({"all": arrays}, func, reps=reps)
    np.random.set_state(state)
    return np.asarray(points["all"]), np.asarray(bounds["all"]).reshape(2, -1)


@pytest.fixture
def scores() -> dict[str, np.ndarray]:
    """Three methods, 5 or 4 runs, 2 tasks; rounded so that ties occur."""
    rng = np.random.default_rng(3)
    return {
        "a": rng.normal(1.0, 1.0, (5, 2)).round(),
        "b": rng.normal(0.0, 1.0, (5, 2)).round(),
        "c": rng.normal(0.5, 1.0, (4, 2)).round(),
    }


def test_iqm_and_improvement_by_hand():
    scores = np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])
    # IQM of 5 values: int(0.25 × 5) = 1 cut at each end → mean(2, 3, 4).
    assert intervals.iqm(scores) == 3.0
    assert metrics.aggregate_iqm(scores) == pytest.approx(3.0)
    result = intervals.aggregate_intervals({"x": scores}, ("iqm", "mean"), reps=REPS)
    assert result["x"]["iqm"].point == pytest.approx(3.0)
    assert result["x"]["mean"].point == pytest.approx(22.0)
    # P(X > Y), x = (2, 3), y = (2, 1): 2 vs 2 ties (½), 2 > 1, 3 > 2, 3 > 1 → 3.5 / 4.
    x, y = np.array([[2.0], [3.0]]), np.array([[2.0], [1.0]])
    assert intervals.improvement(x, y) == 0.875
    assert metrics.probability_of_improvement(x, y) == pytest.approx(0.875)
    matrix = intervals.improvement_matrix({"x": x, "y": y}, reps=REPS)
    assert matrix["x", "y"].point == pytest.approx(0.875)
    assert matrix["y", "x"].point == pytest.approx(0.125)
    # Two tasks: P averages the tasks' probabilities, (1 + 0) / 2.
    x2, y2 = np.array([[5.0, 0.0]]), np.array([[1.0, 3.0]])
    assert intervals.improvement(x2, y2) == 0.5


def test_vectorised_statistics_are_rliables_metrics(scores):
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.normal(size=(int(rng.integers(1, 9)), int(rng.integers(1, 4)))).round(1)
        y = rng.normal(size=(int(rng.integers(1, 9)), x.shape[1])).round(1)
        assert intervals.iqm(x) == pytest.approx(metrics.aggregate_iqm(x))
        assert intervals.mean(x) == pytest.approx(metrics.aggregate_mean(x))
        assert intervals.optimality_gap(x) == pytest.approx(metrics.aggregate_optimality_gap(x))
        assert intervals.improvement(x, y) == pytest.approx(
            metrics.probability_of_improvement(x, y)
        )
    assert intervals.improvement(scores["a"], scores["a"]) == 0.5  # rliable's equal-arrays case


def test_aggregate_intervals_equal_rliable_called_directly(scores):
    statistics = ("iqm", "mean", "optimality_gap")
    result = intervals.aggregate_intervals(scores, statistics, reps=REPS, seed=7)
    arrays = list(scores.values())

    def func(*resampled):
        return np.array([
            f(x) for x in resampled for f in (metrics.aggregate_iqm, metrics.aggregate_mean,
                                              metrics.aggregate_optimality_gap)
        ])  # fmt: skip

    points, bounds = rliable_direct(arrays, func, seed=7)
    ours = [result[m][s] for m in scores for s in statistics]
    np.testing.assert_allclose([i.point for i in ours], points)
    np.testing.assert_allclose([i.lower for i in ours], bounds[0])
    np.testing.assert_allclose([i.upper for i in ours], bounds[1])


def test_aggregate_intervals_agree_with_rliables_one_method_call(scores):
    """The usual rliable call, one method at a time (its own resamples): the same
    intervals up to bootstrap noise, measured here as under 0.15 of the data's range."""
    result = intervals.aggregate_intervals(scores, ("iqm",), reps=2000, seed=1)
    np.random.seed(2)
    _, bounds = rly.get_interval_estimates(
        scores, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=2000
    )
    spread = np.ptp(np.concatenate([s.ravel() for s in scores.values()]))
    for method in scores:
        ours = result[method]["iqm"]
        assert abs(ours.lower - bounds[method][0, 0]) < 0.15 * spread
        assert abs(ours.upper - bounds[method][1, 0]) < 0.15 * spread


def test_improvement_matrix_equals_rliable_called_directly(scores):
    result = intervals.improvement_matrix(scores, reps=REPS, seed=5)
    names = list(scores)
    pairs = [(i, j) for i in range(3) for j in range(i + 1, 3)]

    def func(*resampled):
        return np.array([metrics.probability_of_improvement(resampled[i], resampled[j])
                         for i, j in pairs])  # fmt: skip

    points, bounds = rliable_direct(list(scores.values()), func, seed=5)
    for k, (i, j) in enumerate(pairs):
        forward, backward = result[names[i], names[j]], result[names[j], names[i]]
        assert forward.point == pytest.approx(points[k])
        assert (forward.lower, forward.upper) == pytest.approx(tuple(bounds[:, k]))
        assert backward.point == pytest.approx(1 - points[k])
        assert (backward.lower, backward.upper) == pytest.approx(
            (1 - bounds[1, k], 1 - bounds[0, k])
        )
    # Equal shapes take the stacked path: the same numbers as pair by pair.
    same = {name: scores[name] for name in ("a", "b")}
    stacked = intervals.improvement_matrix(same, reps=REPS, seed=5)
    points, bounds = rliable_direct(list(same.values()), func=lambda x, y: np.array(
        [metrics.probability_of_improvement(x, y)]), seed=5)  # fmt: skip
    assert stacked["a", "b"].point == pytest.approx(points[0])
    assert (stacked["a", "b"].lower, stacked["a", "b"].upper) == pytest.approx(tuple(bounds[:, 0]))


def test_performance_profiles_and_mean_band_equal_rliable(scores):
    taus = np.linspace(-2, 3, 11)
    profiles = intervals.performance_profiles(scores, taus, reps=REPS, seed=4)
    points, _ = rly.create_performance_profile(scores, taus, reps=10)
    for method in scores:
        np.testing.assert_allclose(profiles[method].fraction, points[method])

    def func(*resampled):
        return np.concatenate([rly.score_distributions(x, taus) for x in resampled])

    _, bounds = rliable_direct(list(scores.values()), func, seed=4)
    bounds = bounds.reshape(2, 3, len(taus))
    for m, method in enumerate(scores):
        np.testing.assert_allclose(profiles[method].lower, bounds[0, m])
        np.testing.assert_allclose(profiles[method].upper, bounds[1, m])

    values = np.random.default_rng(1).normal(size=(5, 7))
    lower, upper = intervals.mean_band(values, reps=REPS, seed=9)
    np.random.seed(9)
    _, expected = rly.get_interval_estimates(
        {"c": values}, lambda x: np.array([metrics.aggregate_mean(x[:, [t]]) for t in range(7)]),
        reps=REPS,
    )  # fmt: skip
    np.testing.assert_allclose(lower, expected["c"][0])
    np.testing.assert_allclose(upper, expected["c"][1])
    assert np.all(lower <= values.mean(axis=0)) and np.all(values.mean(axis=0) <= upper)


def test_seeded_and_leaves_numpys_generator_alone(scores):
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = intervals.aggregate_intervals(scores, reps=REPS, seed=11)
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    assert intervals.aggregate_intervals(scores, reps=REPS, seed=11) == first
    assert intervals.aggregate_intervals(scores, reps=REPS, seed=12) != first
