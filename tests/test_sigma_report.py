"""``compare_runs``' σ report (``sigma.{csv,png}`` and its section) from the runs'
``explore.csv``, against medians over seeds computed here with NumPy."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from agents.reporting.compare import main
from agents.runs.run_logger import RunLogger

STEPS = [1000, 2000, 3000]
COLUMNS = ["sigma_q10", "sigma_median", "sigma_q90", "action_distance",
           "sigma_median/net.0", "sigma_median/net.2"]  # fmt: skip


def sigma_values(seed: int, shrink: float) -> np.ndarray:
    """(steps, columns): σ falling by ``shrink`` per logged step from 0.1 (+ 0.01 · seed),
    the first layer twice as fast as the whole, the last not at all."""
    rows = []
    for k, _ in enumerate(STEPS):
        median = (0.1 + 0.01 * seed) * shrink**k
        rows.append([median / 2, median, median * 2, 0.05 * (seed + 1) * shrink**k,
                     median * shrink**k, 0.1 + 0.01 * seed])  # fmt: skip
    return np.array(rows)


def write_run(run_dir: Path, values: np.ndarray | None, columns: list[str] = COLUMNS) -> None:
    logger = RunLogger(run_dir)
    for step in STEPS:
        logger.evaluation(step, 0.0, 0.0, 20, 0.0)
    logger.close()
    with open(run_dir / "explore.csv", "w", newline="") as f:
        writer = csv.writer(f)
        if values is None:  # a noise-free strategy: σ's mean, min and max, all 0
            writer.writerow(["step", "sigma_mean", "sigma_min", "sigma_max"])
            writer.writerows([[step, 0, 0, 0] for step in STEPS])
            return
        writer.writerow(["step", *columns])
        for step, row in zip(STEPS, values):
            writer.writerow([step, *(f"{v:.9g}" for v in row[: len(columns)])])


def test_sigma_report_is_the_median_over_seeds_of_each_run(tmp_path, capsys):
    env_dir = tmp_path / "Pendulum-v1"
    expected = {}
    for strategy, shrink in (("vadam", 0.5), ("fixed-noise", 1.0)):
        runs = [sigma_values(seed, shrink) for seed in range(3)]
        for seed, values in enumerate(runs):
            write_run(env_dir / strategy / f"seed{seed}", values)
        expected[strategy] = np.median(np.stack(runs), axis=0)
    for seed in range(2):
        write_run(env_dir / "adam-plain" / f"seed{seed}", None)
    # one seed logged before σ's quantiles existed: the strategy is left out, with a note
    write_run(env_dir / "noisy-adam" / "seed0", sigma_values(0, 0.5))
    write_run(env_dir / "noisy-adam" / "seed1", sigma_values(1, 0.5)[:, :1], ["sigma_q10"])

    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), "--reps", "100"]) == 0
    captured = capsys.readouterr()
    assert "noisy-adam: not every seed logged σ's quantiles" in captured.err
    assert (out / "sigma.png").stat().st_size > 0
    with open(out / "sigma.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["strategy"] for row in rows} == {"vadam", "fixed-noise"}
    for row in rows:
        k = STEPS.index(int(row["step"]))
        for j, column in enumerate(COLUMNS):
            assert float(row[column]) == pytest.approx(expected[row["strategy"]][k, j], rel=1e-6)
        assert row["seeds"] == "3"

    section = (out / "comparison.md").read_text().split("## σ of the weight noise")[1]
    vadam = next(line for line in section.splitlines() if line.startswith("| vadam"))
    # σ falls ×0.25 over two logged steps, the first layer ×0.0625, the last not at all
    assert "| 0.25 |" in vadam and "`net.0` ×0.0625" in vadam
    assert "0.055 / 0.11 / 0.22 (1 k)" in vadam  # the median seed's σ₀ = 0.11
    assert "0.1 → 0.025" in vadam  # the action distance's medians over seeds
    fixed = next(line for line in section.splitlines() if line.startswith("| fixed-noise"))
    assert "| 1 | – |" in fixed  # σ did not move: no layer shrank
    assert "adam-plain" not in section
