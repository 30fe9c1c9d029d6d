"""A run on a task measures success and coverage: ``eval/success_rate`` in TensorBoard and
a ``success_rate`` column in ``eval.csv`` for tasks that define success, ``explore/``
coverage from the training env, and one clear line for a task setting the env refuses."""

from __future__ import annotations

import csv
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents import DDPG
from agents.common.evaluation import evaluate_together, success_rate
from agents.reporting.compare import main as compare_runs
from agents.runs.explore_log import read_explore_csv
from agents.runs.run_logger import RunLogger, read_eval_csv
from agents.settings import resolve_settings
from agents.tasks import COVERAGE as TASK_COVERAGE
from agents.tasks import TASKS

from conftest import error_line

#: The coverage each task reports, as ``explore/<name>`` scalars.
COVERAGE = {
    "SparseMountainCar-v0": {"position_max", "position_min"},
    "SparseMountainCarRllab-v0": {"position_max", "position_min"},
    "MountainCarContinuous-v0": {"position_max", "position_min"},
    "SparseCartpoleSwingup-v0": {"pole_height_max", "cart_distance_max"},
    "SparseDoublePendulum-v0": {"tip_height_max", "goal_distance_min"},
    "SparseHalfCheetah-v5": {"x_max", "x_min"},
}
#: Tiny settings; updates only in the last 500 of the 2000 steps (the measuring is under
#: test here, not learning), which keeps the five runs at a few seconds of CPU each.
TINY = ["--set", "hidden_sizes=[32,32]", "--set", "learning_starts=1500", "--no-compile",
        "--eval-every", "1000", "--eval-episodes", "2", "--no-progress",
        "--logdir", "out"]  # fmt: skip


class Constant:
    """A policy that always takes the same action (batched, as evaluation asks)."""

    def __init__(self, action: list[float]) -> None:
        self.action = np.asarray(action, dtype=np.float32)

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        return np.broadcast_to(self.action, (len(obs), len(self.action)))


def test_success_rate_is_the_fraction_of_episodes_reporting_success():
    """Full elbow torque reaches SparseDoublePendulum's goal, no torque never does; a task
    without ``is_success`` (Pendulum-v1) has no success rate."""
    envs = [gym.make("SparseDoublePendulum-v0") for _ in range(3)]
    for action, expected in [([50.0], 1.0), ([0.0], 0.0)]:
        infos: list[dict] = []
        evaluate_together(Constant(action), envs, seed=0, final_infos=infos)
        assert len(infos) == 3 and success_rate(infos) == expected
    infos = []
    evaluate_together(Constant([0.0]), [gym.make("Pendulum-v1")], seed=0, final_infos=infos)
    assert success_rate(infos) is None
    assert success_rate([{"is_success": True}, {"is_success": False}]) == 0.5


def test_eval_csv_gets_the_success_column_and_keeps_it_on_resume(tmp_path):
    logger = RunLogger(tmp_path)
    logger.evaluation(1000, 0.0, 0.0, 4, 1.0, success_rate=0.25)
    logger.evaluation(2000, 1.0, 0.5, 4, 2.0, success_rate=0.5)
    logger.close()
    header = (tmp_path / "eval.csv").read_text().splitlines()[0]
    assert header == "step,mean_return,std_return,episodes,wall_time,success_rate"
    kept = [r for r in read_eval_csv(tmp_path / "eval.csv") if r["step"] <= 1000]
    resumed = RunLogger(tmp_path, resume_step=1000, rows=kept)  # the rows to the checkpoint
    resumed.evaluation(2000, 2.0, 0.5, 4, 3.0, success_rate=1.0)
    resumed.close()
    rows = read_eval_csv(tmp_path / "eval.csv")
    assert [(r["step"], r["success_rate"]) for r in rows] == [(1000, 0.25), (2000, 1.0)]

    plain = RunLogger(tmp_path / "plain")  # a task without success: no column
    plain.evaluation(1000, 0.0, 0.0, 4, 1.0)
    plain.close()
    assert "success_rate" not in (tmp_path / "plain" / "eval.csv").read_text()


def test_the_success_column_is_filled_in_every_row_or_absent(tmp_path):
    """An empty cell would make the file unreadable for ``compare_runs``: rows without a
    success rate (an older run resumed; an evaluation without one) keep the column out,
    while TensorBoard keeps every value that was measured."""
    older = RunLogger(tmp_path / "older")  # written before success was measured
    older.evaluation(1000, 0.0, 0.0, 4, 1.0)
    older.close()
    rows = read_eval_csv(tmp_path / "older" / "eval.csv")
    resumed = RunLogger(tmp_path / "older", resume_step=1000, rows=rows)
    resumed.evaluation(2000, 1.0, 0.0, 4, 2.0, success_rate=0.5)
    resumed.close()
    dropped = RunLogger(tmp_path / "dropped")
    dropped.evaluation(1000, 0.0, 0.0, 4, 1.0, success_rate=0.25)
    dropped.evaluation(2000, 1.0, 0.0, 4, 2.0)
    dropped.close()
    for name in ("older", "dropped"):
        lines = (tmp_path / name / "eval.csv").read_text().splitlines()
        assert lines[0] == "step,mean_return,std_return,episodes,wall_time", name
        assert [line.count(",") for line in lines[1:]] == [4, 4], name
    acc = EventAccumulator(str(tmp_path / "older"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.value for e in acc.Scalars("eval/success_rate")] == [0.5]


def test_the_native_agent_reports_its_training_env_coverage_per_window():
    agent = DDPG(
        "SparseMountainCar-v0",
        strategy="ou-action",
        seed=0,
        hidden_sizes=[8, 8],
        learning_starts=150,
    )
    agent.learn(200)
    statistics = agent.exploration_statistics()
    assert {"sigma_mean", "position_max", "position_min"} <= set(statistics)
    assert -1.2 <= statistics["position_min"] < statistics["position_max"] <= 0.6
    assert "position_max" not in agent.exploration_statistics()  # a new, empty window


@pytest.mark.parametrize("env_id", [*TASKS, "MountainCarContinuous-v0"])
def test_a_short_parameter_noise_run_measures_success_and_coverage(tmp_path, env_id, train_agent):
    result = train_agent(
        "--env", env_id, "--opt", "param-noise", "--steps", "2000", *TINY, cwd=tmp_path
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / env_id / "param-noise" / "seed0"
    rows = read_eval_csv(run_dir / "eval.csv")
    assert [r["step"] for r in rows] == [1000, 2000]
    assert all(r["success_rate"] in (0.0, 0.5, 1.0) for r in rows)  # of 2 episodes
    assert "success" in result.stdout  # the evaluation line says it too
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert "eval/success_rate" in tags
    assert {f"explore/{name}" for name in COVERAGE[env_id]} <= tags
    success = [e.value for e in acc.Scalars("eval/success_rate")]
    assert success == pytest.approx([r["success_rate"] for r in rows])
    # explore.csv holds the explore/ scalars TensorBoard shows, the task's coverage among them
    assert set(TASK_COVERAGE[env_id].scalars) == COVERAGE[env_id]
    explore = read_explore_csv(run_dir / "explore.csv")
    for tag in (t for t in tags if t.startswith("explore/")):
        logged = [(e.step, e.value) for e in acc.Scalars(tag)]
        written = [(r["step"], r[tag.removeprefix("explore/")]) for r in explore]
        assert [s for s, _ in written] == [s for s, _ in logged]
        assert [v for _, v in written] == pytest.approx([v for _, v in logged], rel=1e-7)


def test_explore_csv_follows_a_resumed_run_and_is_restored_for_a_finished_one(
    tmp_path, train_agent
):
    """A run extended from its checkpoint rewrites ``explore.csv`` with every window once;
    a finished run that lacks the file (trained before runs wrote it) gets it from its
    events when ``train_agent`` skips it."""
    args = ["--env", "SparseMountainCar-v0", "--opt", "ou-action", *TINY, "--set",
            "log_every=500", "--resume", "--set", "learning_starts=999"]  # fmt: skip
    assert train_agent(*args, "--steps", "1000", cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "out" / "SparseMountainCar-v0" / "ou-action" / "seed0"
    assert [r["step"] for r in read_explore_csv(run_dir / "explore.csv")] == [500, 1000]
    assert train_agent(*args, "--steps", "2000", cwd=tmp_path).returncode == 0
    rows = read_explore_csv(run_dir / "explore.csv")
    assert [r["step"] for r in rows] == [500, 1000, 1500, 2000]
    assert all(-1.2 <= r["position_min"] <= r["position_max"] <= 0.6 for r in rows)
    written = (run_dir / "explore.csv").read_text()
    (run_dir / "explore.csv").unlink()
    result = train_agent(*args, "--steps", "2000", cwd=tmp_path)
    assert "already complete" in result.stdout
    assert (run_dir / "explore.csv").read_text() == written


BAD_SETTINGS = {
    "unknown setting": (
        ["--env", "SparseHalfCheetah-v5", "--set", "env_kwargs.frame_skp=2"],
        "SparseHalfCheetah-v5 refuses env_kwargs {'frame_skp': 2}: ",
    ),
    "bad value": (
        ["--env", "SparseHalfCheetah-v5", "--set", "env_kwargs.frame_skip=0"],
        "frame_skip must be a positive integer, got 0",
    ),
    "bad horizon": (
        ["--env", "SparseMountainCar-v0", "--set", "env_kwargs.max_episode_steps=many"],
        "SparseMountainCar-v0 refuses env_kwargs {'max_episode_steps': 'many'}",
    ),
    "not a mapping": (["--set", "env_kwargs=5"], "env_kwargs must be a dict"),
    "in a grid": (
        ["--env", "SparseMountainCar-v0", "--seeds", "2", "--set", "env_kwargs.goal_velocity=x"],
        "goal_velocity must be a number, got 'x'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SETTINGS), ids=list(BAD_SETTINGS))
def test_a_bad_task_setting_gives_one_clear_line(tmp_path, case, train_agent):
    args, message = BAD_SETTINGS[case]
    line = error_line(
        train_agent("--steps", "1", "--set", "learning_starts=0", *args, cwd=tmp_path)
    )
    assert message in line
    assert not (tmp_path / "runs").exists()  # nothing was started


STUDY = ["adam-plain", "gaussian-action", "ou-action", "param-noise", "vadam", "noisy-adam"]


def test_the_sparse_study_file_configures_every_strategy_of_the_study():
    path = Path(__file__).resolve().parents[1] / "configs" / "sparse-study.yaml"
    configs = {s: resolve_settings(s, path, env="SparseMountainCar-v0") for s in STUDY}
    for config in configs.values():
        ddpg = config.learner
        assert (ddpg.hidden_sizes, ddpg.tau, ddpg.strategy.layer_norm) == ([64, 64], 0.01, True)
        assert (config.eval_every, config.eval_episodes) == (10_000, 20)
        # Plappert et al.'s DDPG as baselines ran it (docs/decisions.md#plappert-protocol)
        assert ddpg.normalize_observations and ddpg.critic_layer_norm
        assert ddpg.critic_l2_reg == 0.01
        assert (ddpg.train_every, ddpg.gradient_steps) == (100, 50)
        assert config.normalize_actions is True
    strategy = {name: config.learner.strategy for name, config in configs.items()}
    assert strategy["gaussian-action"].action_noise == {"sigma": 0.6}
    assert strategy["ou-action"].action_noise == {"sigma": 0.6, "theta": 0.15, "dt": 0.01}
    kwargs = strategy["param-noise"].optimizer_kwargs
    assert (kwargs["initial_std"], kwargs["target_distance"]) == (0.6, 0.6)
    assert kwargs["adaptation_interval"] == 100  # once per 50 updates: once per cycle
    text = path.read_text()
    assert "Not expressible" not in text and "cannot express" not in text
    assert (
        strategy["vadam"].optimizer_kwargs
        == resolve_settings("vadam").learner.strategy.optimizer_kwargs
    )


def test_a_sparse_study_run_resumes_as_the_uninterrupted_one(tmp_path, train_agent):
    """Plappert et al.'s protocol in a run: 50 updates every 100 steps, the observation
    statistics in the checkpoint, a resume from an episode's end (step 1000: Pendulum's
    episodes are 200 steps, a sparse task's may end early) equal to the whole run."""
    study = Path(__file__).resolve().parents[1] / "configs" / "sparse-study.yaml"
    args = ["--config", str(study), "--env", "Pendulum-v1", "--opt",
            "param-noise", "--no-compile", "--no-progress", "--eval-every", "1000",
            "--eval-episodes", "1", "--set", "hidden_sizes=[16,16]", "--set",
            "save_replay_buffer=true"]  # fmt: skip
    for logdir, steps in (("whole", ["1500"]), ("parts", ["1000", "1500"])):
        for total in steps:
            result = train_agent(*args, "--logdir", logdir, "--steps", total, "--resume",
                                 cwd=tmp_path)  # fmt: skip
            assert result.returncode == 0, result.stderr
    name = Path("Pendulum-v1") / "param-noise" / "seed0"
    whole, parts = (
        torch.load(tmp_path / d / name / "checkpoints" / "latest.pt", weights_only=True)
        for d in ("whole", "parts")
    )
    assert whole["counters"]["num_updates"] == parts["counters"]["num_updates"] == 15 * 50
    statistics = whole["observation_statistics"]
    assert float(statistics["count"]) == pytest.approx(1500.01)  # every stored s
    for key, value in statistics.items():
        assert torch.equal(parts["observation_statistics"][key], value), key
    for key, value in whole["critic"].items():
        assert torch.equal(parts["critic"][key], value), key
    assert {"norms.0.weight", "norms.1.bias"} <= set(whole["critic"])
    config = yaml.safe_load((tmp_path / "whole" / name / "config.yaml").read_text())
    assert (config["train_every"], config["gradient_steps"]) == (100, 50)
    assert config["normalize_observations"] and config["normalize_actions"]


def test_compare_runs_scores_real_runs_of_a_sparse_task_by_success_rate(
    tmp_path, train_agent, capsys
):
    """``compare_runs`` reads an empty ``success_rate`` cell as a damaged file: two real runs
    of a sparse task (one update, at the last step: what is written is under test, not
    learning; a run with none is refused) fill every row, and the comparison scores the
    task by their success rates."""
    for seed in ("0", "1"):
        result = train_agent(
            "--env", "SparseDoublePendulum-v0", "--opt", "param-noise", "--seed", seed,
            "--steps", "2000", *TINY, "--set", "learning_starts=1999", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    runs = tmp_path / "out" / "SparseDoublePendulum-v0"
    rows = [read_eval_csv(runs / "param-noise" / f"seed{s}" / "eval.csv") for s in (0, 1)]
    assert all(len(r) == 2 and all("success_rate" in row for row in r) for r in rows)

    report = tmp_path / "report"
    assert compare_runs([str(runs), "--out", str(report), "--reps", "50"]) == 0
    assert "error" not in capsys.readouterr().err
    with open(report / "intervals.csv", newline="") as f:
        scores = {
            (r["scope"], r["method"], r["score"], r["statistic"]): r for r in csv.DictReader(f)
        }
    final = scores["SparseDoublePendulum-v0", "param-noise", "final", "mean"]
    assert final["unit"] == "success rate"
    assert float(final["point"]) == pytest.approx(np.mean([r[-1]["success_rate"] for r in rows]))


def test_a_run_shorter_than_eval_every_is_evaluated_at_its_end(tmp_path, train_agent):
    """``--steps 300`` with ``--eval-every 10000`` (the preset's, given: a short run left
    without one is scheduled ten evaluations) still reports its return and success rate,
    once, at step 300."""
    args = ["--env", "SparseDoublePendulum-v0", "--opt", "param-noise", "--steps", "300",
            "--eval-every", "10000", "--eval-episodes", "1", "--set", "hidden_sizes=[8,8]", "--set",
            "learning_starts=299", "--no-compile", "--no-progress", "--logdir", "out"]  # fmt: skip
    assert train_agent(*args, cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "out" / "SparseDoublePendulum-v0" / "param-noise" / "seed0"
    rows = read_eval_csv(run_dir / "eval.csv")
    assert [r["step"] for r in rows] == [300] and "success_rate" in rows[0]
