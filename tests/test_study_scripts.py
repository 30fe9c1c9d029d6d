"""Each study's one documented command (``studies/<study>/reproduce.sh``) runs end to end.

A study takes hours, and its script is what a user runs to redo it, extend it or regenerate
its report from the committed CSVs. These tests run the scripts as the docs say, in a copy
of ``studies/`` and ``configs/`` (the committed runs stay untouched), with budgets of a few
thousand steps on one task and one seed, and check the runs and the reports they write.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def copy_of_the_studies(tmp_path: Path, keep_runs: bool) -> Path:
    root = tmp_path / "repo"
    ignore = None if keep_runs else shutil.ignore_patterns("runs")
    shutil.copytree(REPO / "studies", root / "studies", ignore=ignore)
    shutil.copytree(REPO / "configs", root / "configs")
    return root


def run_script(
    root: Path, study: str, expected_status: int = 0, **settings: str
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["bash", str(root / "studies" / study / "reproduce.sh")],
        capture_output=True, text=True, timeout=1800,
        env={**os.environ, **settings},
    )  # fmt: skip
    assert result.returncode == expected_status, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def methods_in(success_csv: Path) -> set[str]:
    with open(success_csv, newline="") as f:
        return {row["strategy"] for row in csv.DictReader(f)}


def test_sparse_then_vime_study_on_one_task(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    task = "SparseMountainCar-v0"
    tiny = {"TASKS": task, "SEEDS": "1", "WORKERS": "1"}
    run_script(root, "sparse", STEPS="2000", **tiny)
    runs = root / "studies" / "sparse" / "runs" / task
    sparse = {"adam-plain", "gaussian-action", "ou-action", "param-noise", "vadam", "noisy-adam"}
    assert {d.name for d in runs.iterdir() if (d / "seed0" / "eval.csv").exists()} == sparse
    assert methods_in(root / "studies" / "sparse" / "success.csv") == sparse
    assert "## Success rate" in (root / "studies" / "sparse" / "comparison.md").read_text()

    # The VIME study adds its methods to the same run tree and reports per learner; the DDPG
    # strategies without the bonus are the sparse study's runs above, not run again. Its
    # DDPG runs take 5000 steps: the bonus is first fitted there (bonus.fit_every), and a
    # run that would never fit it is refused.
    plain_eval = (runs / "vadam" / "seed0" / "eval.csv").read_text()
    run_script(root, "vime", TRPO_STEPS="5000", DDPG_STEPS="5000", **tiny)
    assert (runs / "vadam" / "seed0" / "eval.csv").read_text() == plain_eval
    trpo = {"trpo-sb3", "trpo+vime-bbb-sb3", "trpo+vime-noisy-kfac-sb3"}
    ddpg = {"adam-plain", "param-noise", "vadam"}
    ddpg |= {f"{s}+vime-noisy-kfac" for s in ddpg}
    assert methods_in(root / "studies" / "vime" / "trpo" / "success.csv") == trpo
    assert methods_in(root / "studies" / "vime" / "ddpg" / "success.csv") == ddpg
    for method in trpo | ddpg:
        with open(runs / method / "seed0" / "eval.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert rows and "success_rate" in rows[0], method

    # Re-running the script redoes nothing: every run is finished.
    written = {p: p.stat().st_mtime_ns for p in runs.glob("*/seed0/eval.csv")}
    run_script(root, "vime", TRPO_STEPS="5000", DDPG_STEPS="5000", **tiny)
    assert {p: p.stat().st_mtime_ns for p in runs.glob("*/seed0/eval.csv")} == written


def test_population_fidelity_study_in_both_modes(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    run_script(root, "population-fidelity", STEPS="3000", SEEDS="2", WORKERS="1")
    study = root / "studies" / "population-fidelity"
    for mode in ("population", "single"):
        for seed in (0, 1):
            run = study / "runs" / mode / "Pendulum-v1" / "vadam" / f"seed{seed}"
            assert (run / "eval.csv").read_text().count("\n") == 2, (mode, seed)
    assert "vadam (population)" in (study / "comparison.md").read_text()


def test_zhang_study_on_one_task(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    task = "SparseMountainCarRllab-v0"
    run_script(root, "zhang2018-fig3", TASKS=task, SEEDS="1", WORKERS="1", STEPS="5000")
    study = root / "studies" / "zhang2018-fig3"
    methods = {"trpo-sb3", "trpo+vime-bbb-sb3", "trpo+vime-noisy-kfac-sb3"}
    assert methods_in(study / "success.csv") == methods
    for method in methods:
        config = (study / "runs" / task / method / "seed0" / "config.yaml").read_text()
        assert "normalize_actions: true" in config, method


def test_plappert_study_on_one_task(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    task = "SparseMountainCar-v0"
    run_script(root, "plappert2018-sparse", TASKS=task, SEEDS="2", WORKERS="1", STEPS="1000")
    study = root / "studies" / "plappert2018-sparse"
    strategies = {"adam-plain", "gaussian-action", "ou-action", "param-noise", "vadam",
                  "noisy-adam"}  # fmt: skip
    assert methods_in(study / "success.csv") == strategies
    config = (study / "runs" / task / "vadam" / "seed1" / "config.yaml").read_text()
    for setting in ("normalize_observations: true", "critic_layer_norm: true",
                    "train_every: 100", "gradient_steps: 50"):  # fmt: skip
        assert setting in config


def test_sigma_study_on_one_task(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    task = "SparseMountainCar-v0"
    run_script(root, "sigma", TASKS=task, SEEDS="1", WORKERS="1", STEPS="1000")
    runs = root / "studies" / "sigma" / "runs" / task
    swept = {f"vadam@sample_constant={c}" for c in (10000, 1000, 100, 10)}
    swept |= {f"fixed-noise@initial_precision={c}" for c in (10000, 1000, 100, 10)}
    swept |= {"vadam@num_data=1000"}
    assert {d.name for d in runs.iterdir() if (d / "seed0" / "eval.csv").exists()} == swept
    sigma = (root / "studies" / "sigma" / "sweep" / "sigma.csv").read_text()
    assert "vadam@sample_constant=10," in sigma
    # One sample per episode: Vadam and fixed-noise at each c, in a run tree of its own,
    # reported beside the per-step runs.
    episode = root / "studies" / "sigma" / "runs-episode" / task
    assert {d.name for d in episode.iterdir() if (d / "seed0" / "eval.csv").exists()} == {
        name for name in swept if name != "vadam@num_data=1000"
    }
    assert "resample: episode" in (episode / "vadam@sample_constant=10" / "seed0" /
                                   "config.yaml").read_text()  # fmt: skip
    resample = (root / "studies" / "sigma" / "resample" / "comparison.md").read_text()
    assert "vadam@sample_constant=10 (episode)" in resample


def test_an_unknown_vime_part_is_refused_before_any_training(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    # The misspelt part comes second: the valid one before it must not start training.
    result = run_script(
        root, "vime", expected_status=2, PARTS="trpo ddgp", TASKS="SparseMountainCar-v0"
    )
    assert result.stderr.strip() == "unknown part ddgp (trpo, ddpg)"
    assert not (root / "studies" / "sparse" / "runs").exists()


def test_committed_reports_regenerate_from_the_committed_runs(tmp_path):
    root = copy_of_the_studies(tmp_path, keep_runs=True)
    studies = root / "studies"
    # Every study's report (its tables; figures are images whose bytes carry the plotting
    # library's version): the committed report is what the command gives (the bootstrap is
    # seeded), so the report beside the runs is the one its data produce. coverage.csv is
    # computed from the runs' committed explore.csv, not their events.
    complete = sorted(
        path
        for pattern in ("*.md", "*.csv")
        for path in studies.rglob(pattern)
        if not any(part.startswith("runs") for part in path.relative_to(studies).parts)
        and path.name != "README.md"
    )
    committed = {path: path.read_text() for path in complete}
    for path in complete:
        path.unlink(missing_ok=True)
    reported = sorted({path.relative_to(studies).parts[0] for path in complete})
    assert {"reproduction", "sparse", "vime", "population-fidelity"} <= set(reported)
    for study in reported:
        run_script(root, study, REPORT_ONLY="1")
    assert {path: path.read_text() for path in complete} == committed


def test_ivon_study_on_one_task(tmp_path):
    """Hopper-v4's five arms (the first IVON preset's and the variational one's) at a
    check's budget, then its report; the committed tasks' reports from the committed runs
    beside them."""
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    run_script(root, "ivon", TASKS="Hopper-v4", SEEDS="1", WORKERS="1", STEPS="400",
               TRAIN_ARGS="--no-compile --eval-every 200 --eval-episodes 1")  # fmt: skip
    runs = root / "studies" / "ivon" / "runs" / "Hopper-v4"
    arms = {"ivon@ess=100", "vadam@sample_constant=100", "fixed-noise@initial_precision=100",
            "adam-plain", "ivon@weight_decay=5e-05"}  # fmt: skip
    assert {d.name for d in runs.iterdir() if (d / "seed0" / "eval.csv").exists()} == arms
    assert "resample: step" in (runs / "ivon@ess=100" / "seed0" / "config.yaml").read_text()
    report = (root / "studies" / "ivon" / "Hopper-v4" / "comparison.md").read_text()
    assert all(arm in report for arm in arms - {"ivon@weight_decay=5e-05"})
    assert "ivon@weight_decay" not in report  # the committed arms' report keeps its four
    both = (root / "studies" / "ivon" / "Hopper-v4-variational" / "comparison.md").read_text()
    assert all(arm in both for arm in arms)


def test_critic_study_on_one_task(tmp_path):
    """The critic study's six arms on one task at a check's budget (the sampled critics
    logging their spread), then its report and the spread table."""
    root = copy_of_the_studies(tmp_path, keep_runs=False)
    task = "SparseMountainCar-v0"
    run_script(root, "critic", TASKS=task, SEEDS="10", WORKERS="1", STEPS="400",
               TRAIN_ARGS="--no-compile --eval-every 200 --eval-episodes 1 "
               "--set log_every=200")  # fmt: skip
    runs = root / "studies" / "critic" / "runs" / task
    critics = {f"adam-plain+critic-{c}" for c in ("ivon", "noisy-adam", "langevin")}
    arms = critics | {"ivon", "fixed-noise@initial_precision=10", "adam-plain"}
    assert {d.name for d in runs.iterdir() if (d / "seed10" / "eval.csv").exists()} == arms
    config = (runs / "adam-plain+critic-ivon" / "seed10" / "config.yaml").read_text()
    assert "buffer_size: 100000" in config and "critic_optimizer: ivon" in config
    report = (root / "studies" / "critic" / task / "comparison.md").read_text()
    assert all(arm in report for arm in arms)
    spread = (root / "studies" / "critic" / task / "spread.md").read_text()
    assert all(f"| {arm} | 400 | 1 |" in spread for arm in critics)


def test_ivon_diagnostics_on_one_task(tmp_path):
    """studies/ivon/diagnostics.py: two arms of Hopper-v4 at two checkpoints, a row each with
    every measurement in range, resumed arm by arm, and its report from the CSV alone."""
    out, report = tmp_path / "runs-diagnostics", tmp_path / "diagnostics.md"
    command = ["python", str(REPO / "studies" / "ivon" / "diagnostics.py"), "--tasks",
               "Hopper-v4", "--arms", "ivon@weight_decay=5e-05", "adam-plain", "--steps", "200",
               "400", "--no-compile", "--set", "learning_starts=100", "--set",
               "hidden_sizes=[16,16]", "--weights", "10", "--out", str(out), "--report-file",
               str(report)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "Hopper-v4.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["arm"], r["step"]) for r in rows] == [
        ("ivon@weight_decay=5e-05", "200"), ("ivon@weight_decay=5e-05", "400"),
        ("adam-plain", "200"), ("adam-plain", "400")]  # fmt: skip
    for row in rows:
        assert 0 <= float(row["saturated_mean"]) <= 1 and row["weights"] == "10"
    assert float(rows[0]["sigma_median"]) == pytest.approx(0.1, rel=0.05)  # σ₀ of the preset
    assert float(rows[0]["optimizer_curvature_median"]) > 0  # IVON's h
    assert rows[2]["optimizer_curvature_median"] == "nan" and rows[2]["sigma_median"] == "0.0"
    first = report.read_text()
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "step 200" not in again.stdout  # nothing trained again
    assert report.read_text() == first and "| adam-plain | 400 |" in first
    # Which loss each curvature is of: the variational IVON's mean is 1/64 of a summed loss's.
    assert "their sum for adam-plain; their mean for ivon@weight_decay=5e-05." in first
