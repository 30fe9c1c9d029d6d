"""What a run shows while it trains: a single run's bar with one speed figure and the
latest evaluation; a grid's runs, one status line each, and evaluation lines that name
their run."""

from __future__ import annotations

import re
import sys

import pytest

from agents.runs import callback
from agents.runs.grid import run_grid, run_task
from agents.runs.run_logger import read_eval_csv
from agents.settings.resolve import resolve_runs, resolve_settings

from conftest import train_agent_process

ENV = "Pendulum-v1"
SETS = ["hidden_sizes=[16,16]", "learning_starts=50", "log_every=100", "compile=false"]


def test_a_single_runs_bar_shows_one_speed_and_the_latest_eval(train_agent, tmp_path, capsys):
    """The bar on a terminal (stderr made one): its last state, as the run ends, has the
    training throughput once (tqdm's own rate hidden) and the last evaluation's return."""
    capsys.readouterr()
    sys.stderr.isatty = lambda: True  # capsys's stream, replaced after the test
    result = train_agent("--env", ENV, "--steps", "400", "--eval-every", "200",
                         "--eval-episodes", "1", "--logdir", "out", "--no-compile",
                         "--set", "hidden_sizes=[16,16]", "--set", "learning_starts=50",
                         "--set", "log_every=100", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / ENV / "vadam" / "seed0"
    last = read_eval_csv(run_dir / "eval.csv")[-1]
    final = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith(f"{ENV}/vadam/seed0: 100%")  # the bar names the run
    assert "400/400" in final
    assert len(re.findall(r"/s\b", final)) == 1 and "steps/s=" in final  # one speed
    assert f"eval={last['mean_return']:.1f}" in final  # the evaluation at step 400
    assert f"{ENV}/vadam/seed0 step 400: eval return {last['mean_return']:.1f}" in result.stdout


def test_a_grids_population_prints_its_lines_once_for_its_members(tmp_path, capsys, monkeypatch):
    """A grid's task (a population of two seeds here) in "lines" progress: one starts line,
    status lines (the step, the population's seed-steps/s, the latest evaluation) and a
    line per evaluation (the members' returns as min / median / max), each naming the
    population; no member's own line."""
    monkeypatch.setattr(callback, "STATUS_SECONDS", 0.0)  # a status line every 100 steps
    monkeypatch.setattr(callback, "STATUS_FRACTION", 1.0)  # and none for the fraction
    monkeypatch.chdir(tmp_path)
    configs = resolve_runs(["vadam"], [0, 1], None, [*SETS, "logdir=out"], env=ENV,
                           total_steps=200, eval_every=100, eval_episodes=1)  # fmt: skip
    capsys.readouterr()
    outcomes = run_task(configs, threads=1)
    assert [o.ok for o in outcomes] == [True, True], outcomes
    lines = capsys.readouterr().out.splitlines()
    evals = [
        {row["step"]: row["mean_return"]
         for row in read_eval_csv(tmp_path / "out" / ENV / "vadam" / f"seed{seed}" / "eval.csv")}
        for seed in (0, 1)
    ]  # fmt: skip
    name = f"{ENV}/vadam: 2 members"
    own = [line for line in lines if line.startswith(f"{name} ")]
    assert own[0] == (
        f"{name} starts: DDPG with vadam on {ENV}, 200 steps, an evaluation "
        f"every 100; writes out/{ENV}/vadam/{{2 run directories}}"
    )
    for step in (100, 200):
        low, high = sorted(e[step] for e in evals)
        summary = (
            f"eval return {low:.1f} / {(low + high) / 2:.1f} / {high:.1f} (min / median / max)"
        )
        assert any(line.startswith(f"{name} step {step}: {summary}") for line in own)
    status = [line for line in own if re.match(rf"{name} step \d+/200 \(\d+%\)", line)]
    assert [line.split()[4] for line in status] == ["100/200", "200/200"]
    assert re.search(r", \d+ seed-steps/s \(2 members\)", status[0])
    assert "last eval return" in status[-1]
    assert not any(line.startswith(f"{ENV}/vadam/seed") for line in lines)


@pytest.mark.parametrize("progress", ["lines", False])
def test_a_grids_runs_without_progress_print_no_status_lines(
    progress, tmp_path, capsys, monkeypatch
):
    """``--no-progress`` on a grid (progress False in its workers): no run's status line;
    each evaluation's line (the run's result, as a single run prints it) still."""
    monkeypatch.setattr(callback, "STATUS_SECONDS", 0.0)  # a status line at every log
    monkeypatch.chdir(tmp_path)
    configs = resolve_runs(["vadam"], [0], None, [*SETS, "logdir=out"], env=ENV,
                           total_steps=100, eval_every=100, eval_episodes=1)  # fmt: skip
    capsys.readouterr()
    assert [o.ok for o in run_task(configs, threads=1, progress=progress)] == [True]
    out = capsys.readouterr().out
    status = re.findall(rf"{ENV}/vadam/seed0 step 100/100 \(100%\)", out)
    assert len(status) == (1 if progress else 0)
    assert f"{ENV}/vadam/seed0 step 100: eval return" in out


def test_the_grid_command_passes_no_progress_to_its_workers(train_agent, tmp_path, monkeypatch):
    """``train_agent --seeds 2 --no-progress`` runs its grid (for real) with the workers'
    progress off; without the flag, with status lines."""
    import agents.cli

    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs.get("progress"))
        return run_grid(*args, **kwargs)

    monkeypatch.setattr(agents.cli, "run_grid", recording)
    args = ["--env", ENV, "--seeds", "2", "--workers", "1", "--steps", "100",
            "--eval-every", "100", "--eval-episodes", "1", "--no-compile", "--logdir", "out",
            *[arg for value in SETS for arg in ("--set", value)]]  # fmt: skip
    assert train_agent(*args, "--no-progress", cwd=tmp_path).returncode == 0
    assert train_agent(*args, cwd=tmp_path).returncode == 0  # resumes: both runs are done
    assert seen == [False, "lines"]


def test_a_piped_run_says_what_runs_and_prints_a_status_line_every_tenth(tmp_path):
    """A single run whose stdout is a pipe (a log, ``nohup``, a batch scheduler) shows no
    bar: it says at its start what runs and where it writes, then a status line at every
    tenth of its steps (400 steps: one every 40), each with its speed, and after the first
    evaluation that evaluation's return and σ."""
    result = train_agent_process(
        "--env", ENV, "--steps", "400", "--eval-every", "200", "--eval-episodes", "1",
        "--logdir", "out", "--no-compile", *[arg for value in SETS for arg in ("--set", value)],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    name = f"{ENV}/vadam/seed0"
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{name} starts: DDPG with vadam on {ENV}, 400 steps, an evaluation every 200; "
        f"writes out/{name}"
    )
    status = [line for line in lines if re.match(rf"{name} step \d+/400 \(\d+%\)", line)]
    assert [line.split()[2] for line in status] == [f"{k}/400" for k in range(40, 401, 40)]
    assert all(re.search(r", \d+ steps/s", line) for line in status)
    first_eval = read_eval_csv(tmp_path / "out" / name / "eval.csv")[0]["mean_return"]
    assert "last eval" not in status[3]  # step 160
    assert f"last eval return {first_eval:.1f}, σ " in status[4]  # step 200, after its eval


def test_a_compiled_run_says_its_first_update_compiles():
    """The seconds the run stops for at its first update are said at its start."""
    compiled = callback.start_line(resolve_settings(env=ENV, compile=True), 0)
    assert "the first update, once 64 transitions are stored, compiles, once per machine" in (
        compiled
    )
    eager = callback.start_line(resolve_settings(env=ENV, compile=False, seed=3), 1000)
    assert eager.startswith("resumes at step 1000: DDPG with vadam") and "compiles" not in eager
