"""``compare_runs``: the published runs beside measured ones, and the interval estimates.

The published values are recomputed here with NumPy straight from the shipped CSV (run,
strategy, seed, step, mean_return, ...), independently of ``agents.reporting``; the
interval estimates with rliable called directly on the runs' scores. The measured runs
are eval CSVs written by the project's own ``RunLogger``: compare_runs reads nothing else
of a run.
"""

from __future__ import annotations

import csv
import math
from importlib import resources
from pathlib import Path

import matplotlib.colors
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
from rliable import metrics

from agents.reporting.compare import main, method_colors, plot_comparison
from agents.reporting.curves import Curve
from agents.reporting.interval_report import (
    across_estimates,
    few_seeds_caution,
    plot_intervals,
    task_estimates,
)
from agents.reporting.references import load_reference
from agents.reporting.run_files import load_runs
from agents.reporting.sigma_report import SigmaCurves, plot_sigma, sigma_scale
from agents.reporting.task_scores import SCORES, across_tasks, group_tasks
from agents.runs.run_logger import RunLogger

STEPS = list(range(10_000, 100_001, 10_000))
REPS = ["--reps", "100"]


def published(strategy: str, runs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, returns[seed, step]) of ``strategy`` in the shipped CSV for ``runs`` (seeds
    of several runs stacked: the pool), by NumPy alone."""
    path = resources.files("agents.reporting").joinpath(
        "data", "khan2018_halfcheetah_v1_curves.csv"
    )
    data = np.genfromtxt(str(path), delimiter=",", names=True, dtype=None, encoding="utf-8")
    rows = data[(data["strategy"] == strategy) & np.isin(data["run"], runs)]
    steps = np.unique(rows["step"])
    returns = np.array(
        [[rows[(rows["run"] == r) & (rows["seed"] == s) & (rows["step"] == t)]["mean_return"][0]
          for t in steps]
         for r in runs for s in np.unique(rows[rows["run"] == r]["seed"])]
    )  # fmt: skip
    return steps, returns


def write_runs(root: Path, strategies: dict[str, float], env: str = "HalfCheetah-v4") -> Path:
    """Two seeds per strategy, returns rising linearly from ``offset``."""
    env_dir = root / env
    for strategy, offset in strategies.items():
        for seed in (0, 1):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            for step in STEPS:
                logger.evaluation(step, offset + step / 100 + 50 * seed, 1.0, 20, 0.0)
            logger.close()
    return env_dir


def test_the_shipped_runs_are_the_released_ones():
    """Run 2 is the authors' second run: per-seed values at 101 k (decisions.md)."""
    steps, run2 = published("vadam", (2,))
    at = np.flatnonzero(steps == 101_000)[0]
    np.testing.assert_allclose(run2[:, at].round(), [177, 307, 982, 996, 899], atol=1)
    _, run1 = published("vadam", (1,))
    np.testing.assert_allclose(run1[:, at].round(), [2853, 1089, 786, 2167, 2079], atol=1)
    _, pooled = published("vadam", (1, 2))
    assert pooled.shape == (10, len(steps))


def test_three_published_runs_overlay_and_tables(tmp_path, capsys):
    env_dir = write_runs(tmp_path / "runs", {"vadam": 0.0, "adam-plain": -500.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--reference", "khan2018", "--at", "50000,100000",
                 "--out", str(out), *REPS]) == 0  # fmt: skip
    assert (out / "comparison.png").stat().st_size > 10_000

    with open(out / "comparison.csv", newline="") as f:
        table = {row["strategy"]: row for row in csv.DictReader(f)}
    for strategy in ("vadam", "adam-plain"):
        row = table[strategy]
        for key, runs in (("run1", (1,)), ("run2", (2,)), ("pooled", (1, 2))):
            steps, returns = published(strategy, runs)
            # 51 k is the published step nearest 50 k (41 k and 51 k straddle it), 101 k
            # the one nearest 100 k.
            for at, expected_step in ((50_000, 51_000), (100_000, 101_000)):
                assert int(row[f"published_step_at_{at}"]) == expected_step
                column = returns[:, np.flatnonzero(steps == expected_step)[0]]
                assert float(row[f"{key}_at_{at}_mean"]) == pytest.approx(column.mean())
                se = column.std(ddof=1) / math.sqrt(len(column))
                assert float(row[f"{key}_at_{at}_se"]) == pytest.approx(se)
            # The published average over the measured span: 11 k … 101 k, trapezoid rule.
            span = (steps >= 11_000) & (steps <= 101_000)
            trapezoid = getattr(np, "trapezoid", None) or np.trapz  # NumPy 2 renamed it
            per_seed = trapezoid(returns[:, span], steps[span], axis=1) / 90_000
            assert float(row[f"{key}_auc_mean"]) == pytest.approx(per_seed.mean())
    markdown = (out / "comparison.md").read_text()
    assert ("| strategy | seeds | final | best | 50 k | run 1 (51 k) | run 2 (51 k) | "
            "pooled 10 (51 k) | 100 k |") in markdown  # fmt: skip
    _, pooled = published("vadam", (1, 2))
    steps, _ = published("vadam", (1,))
    at_101k = pooled[:, np.flatnonzero(steps == 101_000)[0]]
    assert f"| {at_101k.mean():.0f} ± " in markdown
    assert "Khan et al. 2018, HalfCheetah-v1" in capsys.readouterr().out


def test_one_published_run_alone(tmp_path):
    env_dir = write_runs(tmp_path / "runs", {"vadam": 0.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--reference", "khan2018:2", "--at", "50000", "--out", str(out),
                 *REPS]) == 0  # fmt: skip
    with open(out / "comparison.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert "run2_at_50000_mean" in row
    assert "run1_at_50000_mean" not in row and "pooled_auc_mean" not in row
    steps, returns = published("vadam", (2,))
    column = returns[:, np.flatnonzero(steps == 51_000)[0]]
    assert float(row["run2_at_50000_mean"]) == pytest.approx(column.mean())


def test_overlay_lines_are_the_published_means_in_the_strategys_colour(tmp_path):
    env_dir = write_runs(tmp_path, {"vadam": 0.0, "sgd-plain": 100.0, "mine": 0.0})
    curves, _ = load_runs(env_dir)
    reference = load_reference("khan2018")
    by_strategy: dict = {}
    for run, strategies in reference.items():
        for strategy, curve in strategies.items():
            by_strategy.setdefault(strategy, {})[run] = curve
    fig = plot_comparison(group_tasks(curves), by_strategy, method_colors(curves))
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert not any(label.startswith("mine,") for label in lines)  # nothing published for it
    for strategy in ("vadam", "sgd-plain"):
        solid = lines[f"{strategy} (2 seeds)"]
        for title, style, runs in (
            ("run 1 (5 seeds)", "--", (1,)),
            ("run 2 (5 seeds)", ":", (2,)),
            ("pooled 10 (10 seeds)", "-.", (1, 2)),
        ):
            line = lines[f"{strategy}, {title}"]
            assert line.get_linestyle() == style
            assert matplotlib.colors.same_color(line.get_color(), solid.get_color())
            steps, returns = published(strategy, runs)
            span = (steps >= 11_000) & (steps <= 101_000)
            np.testing.assert_array_equal(line.get_xdata(), steps[span])
            np.testing.assert_allclose(line.get_ydata(), returns[:, span].mean(axis=0))


def test_median_iqr_figure_draws_the_median_between_the_quartiles(tmp_path, capsys):
    """--figure median-iqr (Zhang et al.'s Fig. 3): the line is the median over seeds, the
    band the 25th to 75th percentile, here by hand: four seeds of returns 0, 1, 2 and 10
    (+ step / 1000) have median 1.5, quartiles 0.75 and 4 (linear between seeds), while
    their mean, 3.25, is pulled by the one seed at 10."""
    env_dir = tmp_path / "SparseMountainCar-v0"
    for seed, offset in enumerate((0.0, 1.0, 2.0, 10.0)):
        logger = RunLogger(env_dir / "ddpg" / f"seed{seed}")
        for step in STEPS:
            logger.evaluation(step, offset + step / 1000, 0.0, 20, 0.0)
        logger.close()
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), "--figure", "median-iqr", *REPS]) == 0
    assert "comparison.png draws the median and interquartile range" in capsys.readouterr().out
    assert (out / "comparison.png").stat().st_size > 0

    curves, _ = load_runs(env_dir)
    for figure, line_value, low, high in (
        ("median-iqr", 1.5, 0.75, 4.0),
        ("mean-se", 3.25, 3.25 - np.std([0, 1, 2, 10], ddof=1) / 2,
         3.25 + np.std([0, 1, 2, 10], ddof=1) / 2),
    ):  # fmt: skip
        fig = plot_comparison(group_tasks(curves), {}, method_colors(curves), figure=figure)
        ax = fig.axes[0]
        (line,) = ax.get_lines()
        np.testing.assert_allclose(line.get_ydata(), line_value + np.array(STEPS) / 1000)
        band = ax.collections[0].get_paths()[0].vertices
        first_step = band[np.isclose(band[:, 0], STEPS[0]), 1]
        np.testing.assert_allclose(sorted(set(first_step)), [low + 10, high + 10])
        assert figure.split("-")[0] in ax.get_ylabel()


def test_interval_estimates_match_rliable_on_the_runs_scores(tmp_path):
    """IQM, mean and P(X > Y) of the final scores in intervals.csv and
    probability_of_improvement.csv: rliable's own metrics on the eval.csv values."""
    env_dir = tmp_path / "HalfCheetah-v4"
    finals = {"vadam": [900.0, 1500.0, 300.0, 1200.0, 2000.0], "adam-plain": [800.0, 100.0,
              1300.0, 600.0, 400.0]}  # fmt: skip
    for strategy, values in finals.items():
        for seed, value in enumerate(values):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            logger.evaluation(10_000, 0.0, 1.0, 20, 0.0)
            logger.evaluation(20_000, value, 1.0, 20, 0.0)
            logger.close()
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    with open(out / "intervals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for strategy, values in finals.items():
        x = np.array(values)[:, None]
        found = {(r["statistic"], r["scope"]): r for r in rows
                 if r["method"] == strategy and r["score"] == "final"}  # fmt: skip
        iqm = found["iqm", "HalfCheetah-v4"]
        assert float(iqm["point"]) == pytest.approx(metrics.aggregate_iqm(x))
        assert float(iqm["lower"]) <= float(iqm["point"]) <= float(iqm["upper"])
        assert float(found["mean", "HalfCheetah-v4"]["point"]) == pytest.approx(np.mean(values))
        normalised = found["iqm", "across tasks"]  # D4RL's HalfCheetah reference returns
        expected = metrics.aggregate_iqm((x + 280.178953) / (12135.0 + 280.178953))
        assert float(normalised["point"]) == pytest.approx(expected)
    with open(out / "probability_of_improvement.csv", newline="") as f:
        pairs = {(r["x"], r["y"], r["score"]): r for r in csv.DictReader(f)}
    x, y = (np.array(finals[s])[:, None] for s in ("vadam", "adam-plain"))
    p = float(pairs["vadam", "adam-plain", "final"]["p_x_above_y"])
    assert p == pytest.approx(metrics.probability_of_improvement(x, y))
    assert p == pytest.approx(19 / 25)  # by hand: 4 + 5 + 1 + 4 + 5 of 25 pairs ahead
    for name in ("intervals.png", "probability_of_improvement.png", "performance_profile.png"):
        assert (out / name).stat().st_size > 10_000
    assert "P(row > column), final score, HalfCheetah-v4" in (out / "comparison.md").read_text()


def test_several_run_directories_with_labels_and_a_strategy_filter(tmp_path, capsys):
    first = write_runs(tmp_path / "a", {"vadam": 0.0, "adam-plain": 0.0})
    second = write_runs(tmp_path / "b", {"vadam": 1000.0, "sgd-plain": 0.0})
    out = tmp_path / "report"
    code = main([str(first), str(second), "--labels", "khan2018,lillicrap", "--strategies",
                 "vadam,vadma", "--at", "50000", "--out", str(out), *REPS])  # fmt: skip
    assert code == 0
    # a name no directory holds (a typo, an arm not trained yet) is said, and left out
    err = capsys.readouterr().err
    assert "note: --strategies names vadma, which no directory given holds: left out" in err
    assert "vadam," not in err
    with open(out / "comparison.csv", newline="") as f:
        table = {row["strategy"]: row for row in csv.DictReader(f)}
    assert set(table) == {"vadam (khan2018)", "vadam (lillicrap)"}
    difference = float(table["vadam (lillicrap)"]["at_50000_mean"]) - float(
        table["vadam (khan2018)"]["at_50000_mean"]
    )
    assert difference == pytest.approx(1000.0)

    with pytest.raises(SystemExit) as exit_info:
        main([str(first), str(second), "--labels", "only-one"])
    assert exit_info.value.code == 2
    assert "--labels names 1 directories, 2 were given" in capsys.readouterr().err


def test_success_rates_of_a_sparse_task_are_tabulated_and_drawn(tmp_path):
    """Hand values: three seeds of one strategy, success rates 0 → 0.5 → 1, 0 → 0 → 0 and
    0 → 0.25 → 0.5 at 10 k, 20 k, 30 k; a second strategy never succeeds. A dense task's
    comparison writes no success files."""
    env_dir = tmp_path / "SparseMountainCar-v0"
    success = {
        "param-noise": [[0.0, 0.5, 1.0], [0.0, 0.0, 0.0], [0.0, 0.25, 0.5]],
        "adam-plain": [[0.0, 0.0, 0.0]] * 3,
    }
    for strategy, per_seed in success.items():
        for seed, rates in enumerate(per_seed):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            for step, rate in zip((10_000, 20_000, 30_000), rates):
                logger.evaluation(step, -100.0 + 50 * rate, 1.0, 20, 0.0, success_rate=rate)
            logger.close()
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    with open(out / "success.csv", newline="") as f:
        rows = {row["strategy"]: row for row in csv.DictReader(f)}
    found = rows["param-noise"]
    assert found["env"] == "SparseMountainCar-v0" and int(found["seeds"]) == 3
    # final: 1, 0, 0.5 → mean 0.5, s.e. 0.5 / √3; over the curve (trapezoid / 20 k):
    # 10 k·(0.25 + 0.75) / 20 k = 0.5, 0, 10 k·(0.125 + 0.375) / 20 k = 0.25 → mean 0.25
    assert float(found["final_mean"]) == pytest.approx(0.5)
    assert float(found["final_se"]) == pytest.approx(0.5 / math.sqrt(3))
    assert float(found["auc_mean"]) == pytest.approx(0.25)
    assert int(found["seeds_reaching_goal"]) == 2
    assert int(rows["adam-plain"]["seeds_reaching_goal"]) == 0
    report = (out / "comparison.md").read_text()
    assert "| param-noise | 0.50 ± 0.29 (2/3) |" in report
    assert "| adam-plain | 0.00 ± 0.00 (0/3) |" in report
    image = matplotlib.image.imread(out / "success.png")
    assert image.ndim == 3 and image.shape[0] > 200

    dense = tmp_path / "dense"
    assert main([str(write_runs(tmp_path, {"vadam": 0.0})), "--out", str(dense), *REPS]) == 0
    assert not (dense / "success.csv").exists() and not (dense / "success.png").exists()
    assert "## Success rate" not in (dense / "comparison.md").read_text()


def test_coverage_in_training_is_reported_from_the_runs_explore_csv(tmp_path, capsys):
    """Hand values: two seeds of SparseMountainCar whose ``explore.csv`` windows reach
    0.1 → 0.5 → 0.3 (the goal, 0.45, in the 2 k window) and −0.2 → 0.44 → 0.0 (never); a
    third seed has no ``explore.csv`` and is left out with a note; the report says per seed
    the extremes over training and when the goal was first reached."""
    env_dir = tmp_path / "SparseMountainCar-v0"
    windows = {
        0: [(0.1, -0.5), (0.5, -1.2), (0.3, -0.7)],
        1: [(-0.2, -0.6), (0.44, -0.9), (0.0, -0.4)],
    }
    for seed in range(3):
        run = env_dir / "ou-action" / f"seed{seed}"
        logger = RunLogger(run)
        logger.evaluation(3000, 0.0, 0.0, 20, 0.0, success_rate=0.0)
        logger.close()
        if seed in windows:
            lines = ["step,position_max,position_min,sigma_mean"]
            lines += [f"{1000 * (i + 1)},{hi},{lo},0" for i, (hi, lo) in enumerate(windows[seed])]
            (run / "explore.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    assert "seed2 have no explore.csv" in capsys.readouterr().err
    with open(out / "coverage.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["seed"], r["goal_step"], r["position_max"], r["position_min"]) for r in rows] == [
        ("seed0", "2000", "0.5", "-1.2"),
        ("seed1", "", "0.44", "-0.9"),
    ]
    report = (out / "comparison.md").read_text()
    assert "| ou-action | 1/2 (seed0 at 2 k) | 0.50, 0.44 | -1.20, -0.90 |" in report

    (env_dir / "ou-action" / "seed1" / "explore.csv").write_text("step,position_max\n2000,x\n")
    with pytest.raises(SystemExit) as stopped:
        main([str(env_dir), "--out", str(out), *REPS])
    assert stopped.value.code == 2
    assert "seed1/explore.csv is damaged: line 2: position_max is 'x'" in capsys.readouterr().err


# --- what the figures and tables say of themselves -------------------------------------


def short_runs(root: Path, strategies: tuple[str, ...], steps: list[int]) -> Path:
    """Two seeds per strategy of HalfCheetah-v4, evaluated at ``steps`` only."""
    env_dir = root / "HalfCheetah-v4"
    for strategy in strategies:
        for seed in (0, 1):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            for step in steps:
                logger.evaluation(step, step / 100 + 50 * seed, 1.0, 2, 0.0)
            logger.close()
    return env_dir


def legend_and_lines(ax) -> tuple[list[str], list[str]]:
    """(the legend's entries, the labels of the lines drawn with two points or more)."""
    entries = [text.get_text() for text in ax.get_legend().get_texts()]
    drawn = [line.get_label() for line in ax.get_lines() if len(line.get_xdata()) > 1]
    return entries, drawn


def test_at_steps_the_table_cannot_give_get_a_note_each(tmp_path, capsys):
    """--at 500000 is beyond the runs (100 k): no column, and a note says so; 55000 is
    within them but no run evaluated there: '–', and a note says so."""
    env_dir = write_runs(tmp_path / "runs", {"vadam": 0.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--at", "50000,55000,500000", "--out", str(out), *REPS]) == 0
    err = capsys.readouterr().err
    assert ("note: --at 500000: no run reached it (the longest ends at step 100000), so the "
            "table has no column for it") in err  # fmt: skip
    assert "note: --at 55000: no evaluation at that step by vadam ('–' in the table)" in err
    assert "--at 50000:" not in err
    assert "| 50 k | 55 k | AUC |" in (out / "comparison.md").read_text()


def test_intervals_over_two_seeds_carry_a_caution(tmp_path):
    env_dir = write_runs(tmp_path / "runs", {"vadam": 0.0, "adam-plain": -500.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    caution = "n = 2 seeds: the 95% intervals are rough (fewer than 5 seeds per method)"
    assert f"Scores: return. **Caution: {caution}.**" in (out / "comparison.md").read_text()
    assert few_seeds_caution({"a": 2, "b": 3}) == caution.replace("n = 2", "n = 2–3")
    assert few_seeds_caution({"a": 3, "b": 10}) == caution.replace("n = 2 seeds", "n = 3 seeds (a)")
    assert few_seeds_caution({"a": 5, "b": 10}) is None
    assert few_seeds_caution({"a": 1, "b": 5}) is None  # one seed: no interval to caution


def test_intervals_figure_of_one_task_has_no_row_across_tasks(tmp_path):
    """One task: a row of four panels, titled by the task, a few round ticks each and a
    caution for two seeds; two tasks: a row each and one across them."""
    first = write_runs(tmp_path / "a", {"vadam": 0.0, "adam-plain": -500.0})
    second = write_runs(tmp_path / "b", {"vadam": 0.0, "adam-plain": -500.0}, "Hopper-v4")
    colors = {"vadam": "C0", "adam-plain": "C1"}
    tasks = group_tasks(load_runs(first)[0] + load_runs(second)[0])
    one = [task_estimates(tasks[0], 100, 0)]
    overall = across_estimates({s: across_tasks(tasks[:1], s) for s in SCORES}, 100, 0, False)
    fig = plot_intervals([*one, overall], colors)
    assert len(fig.axes) == 4
    assert all(ax.get_title().startswith("HalfCheetah-v4\n") for ax in fig.axes)
    assert all(len(ax.get_xticks()) <= 6 for ax in fig.axes)
    assert "n = 2 seeds" in fig.get_suptitle()
    both = [task_estimates(task, 100, 0) for task in tasks]
    overall = across_estimates({s: across_tasks(tasks, s) for s in SCORES}, 100, 0, True)
    fig = plot_intervals([*both, overall], colors)
    assert len(fig.axes) == 12
    assert fig.axes[-1].get_title().startswith("across tasks\n")


def test_published_runs_too_short_to_draw_are_not_in_the_legend(tmp_path, capsys):
    """Runs of 2 k steps span one published test (1 k; the next is 11 k): the published
    runs are points, not drawn, not in the legend, not in the title, and a note says so.
    Runs of 100 k: every legend entry is a line on the axis."""
    reference = load_reference("khan2018")
    by_strategy: dict = {}
    for run, strategies in reference.items():
        for strategy, curve in strategies.items():
            by_strategy.setdefault(strategy, {})[run] = curve
    env_dir = short_runs(tmp_path / "short", ("vadam", "adam-plain"), [1000, 2000])
    curves, _ = load_runs(env_dir)
    fig = plot_comparison(group_tasks(curves), by_strategy, method_colors(curves), "Khan")
    entries, drawn = legend_and_lines(fig.axes[0])
    assert entries == drawn == ["adam-plain (2 seeds)", "vadam (2 seeds)"]
    assert fig.axes[0].get_title() == "HalfCheetah-v4"
    out = tmp_path / "report"
    assert main([str(env_dir), "--reference", "khan2018", "--out", str(out), *REPS]) == 0
    assert ("note: khan2018's published curves of adam-plain, vadam are not drawn beside "
            "HalfCheetah-v4") in capsys.readouterr().err  # fmt: skip

    curves, _ = load_runs(write_runs(tmp_path / "long", {"vadam": 0.0}))
    fig = plot_comparison(group_tasks(curves), by_strategy, method_colors(curves), "Khan")
    entries, drawn = legend_and_lines(fig.axes[0])
    assert entries == drawn and len(entries) == 4
    assert "solid: measured" in fig.axes[0].get_title()


def test_without_a_reference_the_title_is_the_task(tmp_path):
    curves, _ = load_runs(write_runs(tmp_path, {"vadam": 0.0}))
    fig = plot_comparison(group_tasks(curves), {}, method_colors(curves))
    assert fig.axes[0].get_title() == "HalfCheetah-v4"
    assert fig.axes[0].xaxis.get_major_formatter()(50_000) == "50 k"


def sigma_curve(env: str, strategy: str, medians: np.ndarray) -> SigmaCurves:
    """Two seeds logging ``medians`` (and ±10 % as the 10th and 90th percentiles)."""
    steps = np.arange(1, len(medians) + 1) * 1000
    both = np.stack([medians, medians])
    values = {"sigma_q10": both * 0.9, "sigma_median": both, "sigma_q90": both * 1.1}
    return SigmaCurves(env, strategy, steps, values)


def test_sigma_axis_is_linear_with_margins_when_sigma_moves_little():
    """σ falling 0.1 % (Vadam's N s small beside c): a linear axis whose limits leave a
    margin on both sides of every value drawn, ticks that tell values apart; σ spanning
    two decades (a sweep over σ₀): a log axis."""
    fig, ax = plt.subplots()
    narrow = np.array([0.01, 0.009995, 0.00999])
    assert sigma_scale(ax, narrow) == "linear"
    low, high = ax.get_ylim()
    assert low < narrow.min() and high > narrow.max()
    margin = 0.08 * (narrow.max() - narrow.min())
    assert (narrow.min() - low, high - narrow.max()) == pytest.approx((margin, margin))
    fig.canvas.draw()
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert len(set(labels)) == len(labels) and not any("e" in label for label in labels)
    assert sigma_scale(ax, np.array([0.01, 0.01])) == "linear"
    assert ax.get_ylim() == pytest.approx((0.0095, 0.0105))
    assert sigma_scale(ax, np.array([0.01, 0.3, 1.0])) == "log"
    plt.close(fig)


def test_sigma_figure_labels_its_rows_once_and_lists_every_strategy():
    """Two tasks with different strategies: the y titles on the left column only, and a
    legend of the strategies of both columns."""
    flat = np.full(5, 0.01)
    curves = [sigma_curve("Pendulum-v1", "vadam", flat),
              sigma_curve("HalfCheetah-v4", "fixed-noise", flat * 10)]  # fmt: skip
    fig = plot_sigma(curves, {"vadam": "C0", "fixed-noise": "C1"})
    top, bottom = fig.axes[0], fig.axes[2]  # row by row: top-left, top-right, bottom-left
    assert [ax.get_ylabel() != "" for ax in fig.axes] == [True, False, True, False]
    assert top.get_ylabel().startswith("σ") and bottom.get_ylabel().startswith("action")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["vadam", "fixed-noise"]
    assert top.get_yscale() == "linear" and top.get_ylim()[1] > 0.011
    plt.close(fig)


def test_a_success_panel_of_zero_rates_spans_the_rates_range(tmp_path):
    """intervals.png of a sparse task whose every success rate is 0: each panel's axis is
    [0, 1] with success.png's margin, not −1 to 1 around the zeros; a task scored by its
    return keeps an axis fitted to its values."""
    env_dir = tmp_path / "runs" / "SparseMountainCar-v0"
    for strategy in ("vadam", "adam-plain"):
        for seed in (0, 1):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            for step in STEPS:
                logger.evaluation(step, -100.0, 1.0, 20, 0.0, success_rate=0.0)
            logger.close()
    (task,) = group_tasks(load_runs(env_dir)[0])
    assert task.unit == "success rate"
    fig = plot_intervals([task_estimates(task, 100, 0)], {"vadam": "C0", "adam-plain": "C1"})
    assert [ax.get_xlim() for ax in fig.axes] == [(-0.03, 1.03)] * 4
    dense = write_runs(tmp_path / "dense", {"vadam": 0.0, "adam-plain": -500.0})
    fig = plot_intervals([task_estimates(group_tasks(load_runs(dense)[0])[0], 100, 0)],
                         {"vadam": "C0", "adam-plain": "C1"})  # fmt: skip
    assert all(ax.get_xlim()[1] - ax.get_xlim()[0] > 100 for ax in fig.axes)  # returns


def test_every_strategy_of_a_large_comparison_has_a_colour_of_its_own():
    """Twelve strategies (``--opt all`` has 13): twelve colours, told apart (no two closer
    in RGB than matplotlib's own closest two), and each line of the figure in its own."""
    names = [f"strategy-{i}" for i in range(12)]
    steps = np.array([1000, 2000])
    curves = [Curve(name, steps, np.ones((2, 2)) * i, env="Pendulum-v1")
              for i, name in enumerate(names)]  # fmt: skip
    colors = method_colors(curves)
    rgb = {name: matplotlib.colors.to_rgb(colors[name]) for name in names}
    assert len(set(rgb.values())) == 12
    tab10 = [matplotlib.colors.to_rgb(f"C{i}") for i in range(10)]
    closest_of_tab10 = min(math.dist(a, b) for i, a in enumerate(tab10) for b in tab10[i + 1 :])
    values = list(rgb.values())
    assert min(math.dist(a, b) for i, a in enumerate(values) for b in values[i + 1 :]) >= (
        0.9 * closest_of_tab10
    )
    fig = plot_comparison(group_tasks(curves), {}, colors)
    drawn = {line.get_label().split(" (")[0]: matplotlib.colors.to_rgb(line.get_color())
             for line in fig.axes[0].get_lines()}  # fmt: skip
    plt.close(fig)
    assert drawn == rgb


@pytest.mark.parametrize("short_runs", ["truncate", "exclude", "zero"])
def test_a_seed_that_stopped_early_is_truncated_left_out_or_zero_as_asked(
    tmp_path, capsys, short_runs
):
    """A run that stopped before its strategy's others (a diverged update): by default its
    strategy's curve ends where it ends; ``--short-runs exclude`` leaves it out; ``zero``
    scores it 0 at the others' later steps. Each names it."""
    env_dir = write_runs(tmp_path, {"vadam": 0.0, "adam-plain": 100.0})
    (tmp_path / "HalfCheetah-v4" / "vadam" / "seed2").mkdir()
    logger = RunLogger(env_dir / "vadam" / "seed2")
    for step in STEPS[:7]:  # to 70 k, then it failed
        logger.evaluation(step, 1000.0, 1.0, 20, 0.0)
    logger.close()
    out = tmp_path / "out"
    assert main([str(env_dir), "--out", str(out), "--short-runs", short_runs, *REPS]) == 0
    err = capsys.readouterr().err
    assert "seed2" in err and ("left out" in err) == (short_runs == "exclude")
    curves, _ = load_runs(env_dir, short_runs=short_runs)
    vadam = next(c for c in curves if c.strategy == "vadam")
    if short_runs == "truncate":
        assert vadam.seeds == 3 and vadam.steps[-1] == 70_000
        return
    assert vadam.steps[-1] == 100_000
    own = [0.0 + 100_000 / 100 + 50 * seed for seed in (0, 1)]  # seeds 0 and 1 at 100 k
    expected = own if short_runs == "exclude" else [*own, 0.0]
    assert sorted(vadam.returns[:, -1]) == sorted(expected)
    if short_runs == "zero":  # seed2's row: its own evaluations, then 0 from 80 k
        assert list(vadam.returns[2]) == [1000.0] * 7 + [0.0] * 3
