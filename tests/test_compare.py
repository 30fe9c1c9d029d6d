"""``compare_runs --reference khan2018``: the published curves beside measured ones.

The published values are recomputed here with NumPy straight from the shipped CSV
(strategy, seed, step, mean_return, ...), independently of ``agents.reporting.curves``. The measured
runs are eval CSVs written by the project's own ``RunLogger``: compare_runs reads nothing
else of a run.
"""

from __future__ import annotations

import csv
import math
from importlib import resources
from pathlib import Path

import matplotlib.colors
import numpy as np
import pytest

from agents.reporting.compare import main, plot_comparison
from agents.reporting.curves import load_curves, load_reference
from agents.runs.run_logger import RunLogger

STEPS = list(range(10_000, 100_001, 10_000))


def published(strategy: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, returns[seed, step]) of ``strategy`` in the shipped CSV, by NumPy alone."""
    path = resources.files("agents.reporting").joinpath(
        "data", "khan2018_halfcheetah_v1_curves.csv"
    )
    data = np.genfromtxt(str(path), delimiter=",", names=True, dtype=None, encoding="utf-8")
    rows = data[data["strategy"] == strategy]
    steps = np.unique(rows["step"])
    seeds = np.unique(rows["seed"])
    returns = np.array(
        [[rows[(rows["seed"] == s) & (rows["step"] == t)]["mean_return"][0] for t in steps]
         for s in seeds]
    )  # fmt: skip
    return steps, returns


def write_runs(root: Path, strategies: dict[str, float]) -> Path:
    """Two seeds per strategy, returns rising linearly from ``offset``."""
    env_dir = root / "HalfCheetah-v4"
    for strategy, offset in strategies.items():
        for seed in (0, 1):
            logger = RunLogger(env_dir / strategy / f"seed{seed}")
            for step in STEPS:
                logger.evaluation(step, offset + step / 100 + 50 * seed, 1.0, 20, 0.0)
            logger.close()
    return env_dir


def test_published_curves_overlay_and_tables(tmp_path, capsys):
    env_dir = write_runs(tmp_path / "runs", {"vadam": 0.0, "adam-plain": -500.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--reference", "khan2018", "--at", "50000,100000",
                 "--out", str(out)]) == 0  # fmt: skip
    assert (out / "comparison.png").stat().st_size > 10_000

    with open(out / "comparison.csv", newline="") as f:
        table = {row["strategy"]: row for row in csv.DictReader(f)}
    for strategy in ("vadam", "adam-plain"):
        steps, returns = published(strategy)
        row = table[strategy]
        # 51 k is the published step nearest 50 k (41 k and 51 k straddle it), 101 k
        # the one nearest 100 k.
        for at, expected_step in ((50_000, 51_000), (100_000, 101_000)):
            assert int(row[f"published_step_at_{at}"]) == expected_step
            column = returns[:, np.flatnonzero(steps == expected_step)[0]]
            assert float(row[f"published_at_{at}_mean"]) == pytest.approx(column.mean())
            se = column.std(ddof=1) / math.sqrt(len(column))
            assert float(row[f"published_at_{at}_se"]) == pytest.approx(se)
        # The published average over the measured span: 11 k … 101 k, trapezoid rule.
        span = (steps >= 11_000) & (steps <= 101_000)
        trapezoid = getattr(np, "trapezoid", None) or np.trapz  # NumPy 2 renamed it
        per_seed = trapezoid(returns[:, span], steps[span], axis=1) / 90_000
        assert float(row["published_auc_mean"]) == pytest.approx(per_seed.mean())
    markdown = (out / "comparison.md").read_text()
    assert "| strategy | seeds | final | best | 50 k | published (51 k) | 100 k |" in markdown
    vadam_steps, vadam_returns = published("vadam")
    at_101k = vadam_returns[:, np.flatnonzero(vadam_steps == 101_000)[0]]
    assert f"| {at_101k.mean():.0f} ± " in markdown
    assert "Khan et al. 2018, HalfCheetah-v1" in capsys.readouterr().out


def test_overlay_lines_are_the_published_mean_in_the_strategys_colour(tmp_path):
    env_dir = write_runs(tmp_path, {"vadam": 0.0, "sgd-plain": 100.0, "mine": 0.0})
    fig = plot_comparison(load_curves(env_dir), load_reference("khan2018"))
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert "mine, published (5 seeds)" not in lines  # no published curve for it
    for strategy in ("vadam", "sgd-plain"):
        dashed = lines[f"{strategy}, published (5 seeds)"]
        solid = lines[f"{strategy} (2 seeds)"]
        assert dashed.get_linestyle() == "--"
        assert matplotlib.colors.same_color(dashed.get_color(), solid.get_color())
        steps, returns = published(strategy)
        span = (steps >= 11_000) & (steps <= 101_000)
        np.testing.assert_array_equal(dashed.get_xdata(), steps[span])
        np.testing.assert_allclose(dashed.get_ydata(), returns[:, span].mean(axis=0))


def test_several_run_directories_with_labels_and_a_strategy_filter(tmp_path, capsys):
    first = write_runs(tmp_path / "a", {"vadam": 0.0, "adam-plain": 0.0})
    second = write_runs(tmp_path / "b", {"vadam": 1000.0, "sgd-plain": 0.0})
    out = tmp_path / "report"
    code = main([str(first), str(second), "--labels", "khan2018,lillicrap",
                 "--strategies", "vadam", "--at", "50000", "--out", str(out)])  # fmt: skip
    assert code == 0
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
