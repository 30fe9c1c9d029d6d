"""Faults of the newer surfaces, tried as a user would: a grid's worker killed or orphaned,
a stop request inside a long round of updates, schedules that never train or never finish,
one member's damaged file at a grid's end, what ``--check`` approves, and the lines that
say what a report or a resume did on its own (an empty σ column, a run without its
``config.yaml``, an edited ``config.yaml``, a checkpoint that does not fit).

Where the behaviour is about processes, the real ``train_agent`` runs as a process and
real signals reach it; tiny Pendulum runs, eager updates (``--no-compile``)."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from agents import DDPG
from agents.common.errors import CheckpointError
from agents.reporting.run_files import RunFileError, load_runs
from agents.reporting.sigma_report import write_sigma_report
from agents.reporting.strategy_aggregates import AGGREGATE_DIR, write_strategy_aggregates
from agents.runs.run_lock import LOCK_FILE
from agents.runs.run_logger import RunLogger, read_eval_csv
from agents.runs.train import train
from agents.settings import resolve_settings
from agents.settings.learners import DDPGSettings

from conftest import error_line

SMALL = ["--env", "Pendulum-v1", "--eval-episodes", "1", "--logdir", "out",
         "--set", "hidden_sizes=[16,16]", "--no-compile"]  # fmt: skip
#: One round of updates at step 100 that takes minutes (the most a schedule may make).
LONG_ROUND = ["--set", "train_every=100", "--set", "gradient_steps=100000"]


def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``train_agent`` as a user starts it, in a session of its own (so that a test can
    kill what it left), with SIGINT at its default action (``env`` adds to the environment)."""
    exe = Path(sys.executable).with_name("train_agent")
    return subprocess.Popen(
        [str(exe), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def lock_holder(run_dir: Path) -> int:
    """The PID of the process training ``run_dir`` (its lock file says)."""
    return int((run_dir / LOCK_FILE).read_text().split()[0])


def checkpointed_step(run_dir: Path) -> int:
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    return state["counters"]["num_timesteps"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def kill_the_worker_of(run_dir: Path, proc: subprocess.Popen) -> tuple[int, str, str]:
    """kill -9 of the process training ``run_dir`` once it has a checkpoint and its event
    file (a new run checkpoints its step 0 before its first scalar creates the file); then
    the grid ``proc``'s end: the killed PID, its stdout and stderr."""
    try:
        wait_for(
            lambda: (
                (run_dir / "checkpoints" / "latest.pt").exists()
                and any(run_dir.glob("events.out.tfevents.*"))
            )
        )
        killed = lock_holder(run_dir)
        os.kill(killed, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        kill_session(proc)
    return killed, stdout, stderr


def kill_session(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


# ----------------------------------------------------------------- a worker lost or orphaned
@pytest.mark.parametrize("workers", ["2", "1"], ids=["beside another", "queue taken on"])
def test_a_killed_worker_loses_its_own_runs_only_and_says_so(tmp_path, workers):
    """kill -9 of one worker (the kernel's out-of-memory killer does that): its run is
    reported lost in one line, the other run finishes — on the other worker, or, with one
    worker, on a new one (another process) that takes the queue on — exit 1, no traceback."""
    (tmp_path / "long.yaml").write_text(  # vadam's run lasts until its worker is killed
        "strategies:\n  vadam: {train_every: 100, gradient_steps: 100000}\n"
    )
    proc = start(*SMALL, "--opt", "vadam,adam-plain", "--workers", workers, "--steps", "400",
                 "--eval-every", "200", "--config", "long.yaml", cwd=tmp_path)  # fmt: skip
    killed, stdout, stderr = kill_the_worker_of(
        tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0", proc
    )
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "BrokenProcessPool" not in stderr
    lost_line = ("out/Pendulum-v1/vadam/seed0: FAILED: lost with its worker (killed by "
                 "SIGKILL); re-run the command to continue")  # fmt: skip
    assert stdout.count(lost_line) == 1, stdout
    assert "out/Pendulum-v1/adam-plain/seed0: ok" in stdout
    assert "1 of 2 runs finished, 1 failed" in stdout
    finished = tmp_path / "out" / "Pendulum-v1" / "adam-plain" / "seed0"
    assert [row["step"] for row in read_eval_csv(finished / "eval.csv")] == [200, 400]
    (events,) = finished.glob("events.out.tfevents.*")
    assert int(events.name.split(".")[-2]) not in (killed, proc.pid)


def test_a_killed_ray_worker_s_run_is_retried_by_ray_from_its_checkpoint(tmp_path):
    """kill -9 of the Ray worker training a run: Ray retries its task (Ray's default for a
    task whose worker died), the retry continues the run from its checkpoint, and the grid
    ends with every run finished once, its evaluations neither repeated nor missing."""
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra; CI installs it")
    (tmp_path / "slow.yaml").write_text(  # vadam's rounds of updates take seconds each
        "strategies:\n  vadam: {train_every: 100, gradient_steps: 2000}\n"
    )
    ray_workers = {"RAY_worker_niceness": "0"}  # test_grid.py's Ray test says why
    proc = start(*SMALL, "--opt", "vadam,adam-plain", "--workers", "2", "--steps", "400",
                 "--eval-every", "200", "--config", "slow.yaml", "--backend", "ray",
                 cwd=tmp_path, env=ray_workers)  # fmt: skip
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    killed, stdout, stderr = kill_the_worker_of(run_dir, proc)
    assert proc.returncode == 0, stderr
    assert "2 of 2 runs finished, 0 failed" in stdout, stdout
    assert stdout.count("out/Pendulum-v1/vadam/seed0: ok") == 1
    assert [row["step"] for row in read_eval_csv(run_dir / "eval.csv")] == [200, 400]
    writers = {int(path.name.split(".")[-2]) for path in run_dir.glob("events.out.tfevents.*")}
    assert killed in writers and len(writers) == 2  # the killed worker, then the retry


def test_a_worker_whose_driver_is_killed_stops_with_a_checkpoint(tmp_path):
    """kill -9 of the grid's driver alone: its worker stops at its next step, with a
    checkpoint, instead of training every member to the end unseen."""
    proc = start(*SMALL, "--seeds", "2", "--workers", "1", "--steps", "1000000",
                 "--eval-every", "500000", cwd=tmp_path)  # fmt: skip
    try:
        run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
        wait_for(lambda: list(run_dir.glob("events.out.tfevents.*")))
        worker = lock_holder(run_dir)
        time.sleep(1.0)  # a few hundred steps
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(lambda: not alive(worker), timeout=60)
    finally:
        kill_session(proc)
    for seed in (0, 1):
        assert checkpointed_step(run_dir.with_name(f"seed{seed}")) > 0


# ----------------------------------------------------------------- stop between updates
@pytest.mark.parametrize("grid", [[], ["--seeds", "2", "--workers", "1"]],
                         ids=["run", "population"])  # fmt: skip
def test_sigterm_stops_a_long_round_of_updates_between_two_of_them(tmp_path, grid):
    """A round of 100 000 updates at step 100 (minutes) is left at the next update after
    SIGTERM, with a checkpoint of the step it belongs to: exit 143 in seconds."""
    proc = start(*SMALL, *grid, "--steps", "400", "--eval-every", "200", *LONG_ROUND,
                 cwd=tmp_path)  # fmt: skip
    try:
        run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
        wait_for(lambda: list(run_dir.glob("events.out.tfevents.*")))
        time.sleep(2.0)  # 100 steps take well under a second: the round is under way
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        kill_session(proc)
    assert proc.returncode == 143, stderr
    assert "terminated" in stderr and "Traceback" not in stderr
    for seed in range(2 if grid else 1):
        assert checkpointed_step(run_dir.with_name(f"seed{seed}")) == 100


# ----------------------------------------------------------------- schedules
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--set", "train_every=1e12"],
         "train_every (1000000000000) exceeds total_steps (200): updates come every "
         "train_every steps, so this run would never train"),
        (["--set", "gradient_steps=1000000000"],
         "gradient_steps makes 1e+09 updates per environment step (1000000000 every 1 "
         "step(s)), more than the 1000 a run may make"),
        (["--set", "train_every=10", "--set", "gradient_steps=10001"],
         "gradient_steps makes 1000.1 updates per environment step"),
        (["--bonus", "vime", "--set", "bonus.updates_per_step=1001"],
         "bonus.updates_per_step makes 1001 updates per environment step"),
    ],
    ids=["train_every", "gradient_steps", "gradient_steps per train_every", "bonus fit"],
)  # fmt: skip
def test_a_schedule_that_never_trains_or_never_finishes_is_refused(
    tmp_path, train_agent, options, message
):
    result = train_agent(*SMALL, "--steps", "200", *options, cwd=tmp_path)
    assert result.returncode == 2
    assert message in error_line(result)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--set", "learning_starts=1000", "--set", "buffer_size=2000"],
         "learning_starts (1000) leaves no update within total_steps (300): updates start once "
         "the buffer holds more than learning_starts transitions, at step 1001"),
        (["--set", "learning_starts=250", "--set", "train_every=200"],
         "learning_starts (250) leaves no update within total_steps (300): updates start once "
         "the buffer holds more than learning_starts transitions, at step 400 (every 200"),
        (["--bonus", "vime", "--set", "bonus.fit_every=1e8"],
         "the bonus's model would first be fitted at step 100000000 (bonus.fit_every "
         "(100000000), bonus.min_pool_size (500)), beyond the run's 300 steps"),
        (["--bonus", "vime", "--set", "bonus.fit_every=100", "--set", "bonus.min_pool_size=301"],
         "the bonus's model would first be fitted at step 301 (bonus.fit_every (100), "
         "bonus.min_pool_size (301)), beyond the run's 300 steps"),
        (["--engine", "sb3", "--algo", "trpo", "--set", "trpo.n_steps=100", "--bonus", "vime",
          "--set", "bonus.min_pool_size=301"],
         "the bonus's model would first be fitted at step 400 (bonus.min_pool_size (301), "
         "after rollouts of 100 steps), beyond the run's 300 steps"),
    ],
    ids=["learning_starts", "learning_starts and train_every", "bonus fit_every",
         "bonus min_pool_size", "trpo bonus"],
)  # fmt: skip
def test_r6_5_a_run_that_never_trains_or_never_fits_its_bonus_is_refused(
    tmp_path, train_agent, options, message
):
    """``learning_starts=1000 --steps 300`` passed ``--check`` and the run, exit 0, no line,
    ``num_updates: 0``; a bonus never fitted ran to the end giving none."""
    args = [*SMALL, "--steps", "300", *options]
    checked = train_agent(*args, "--check", cwd=tmp_path)
    assert message in error_line(checked)
    assert error_line(train_agent(*args, cwd=tmp_path)) == error_line(checked)
    assert not (tmp_path / "out").exists()


def test_r6_5_the_last_step_may_be_the_first_update_or_fit(tmp_path, train_agent):
    last = ["--set", "learning_starts=299", "--bonus", "vime", "--set", "bonus.fit_every=300",
            "--set", "bonus.min_pool_size=300"]  # fmt: skip
    checked = train_agent(*SMALL, "--steps", "300", *last, "--check", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr


def test_the_most_updates_per_step_a_schedule_may_make_are_accepted():
    assert DDPGSettings(train_every=10, gradient_steps=10_000).gradient_steps == 10_000


# ----------------------------------------------------------------- --check
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--seeds", "2", "--set", "optimizer_kwargs.sample_constant=[100,1e2]"],
         "more than once (a strategy or seed listed twice?)"),
        (["--set", "buffer_size=1e13"], "these settings need at least"),
        (["--workers", "0"], "--workers must be > 0"),
    ],
    ids=["a directory twice", "memory", "workers"],
)  # fmt: skip
def test_check_refuses_what_the_command_refuses(tmp_path, train_agent, options, message):
    checked = train_agent(*SMALL, "--steps", "200", *options, "--check", cwd=tmp_path)
    assert checked.returncode == 2 and message in error_line(checked)
    assert "settings checked" not in checked.stdout
    run = train_agent(*SMALL, "--steps", "200", *options, cwd=tmp_path)
    assert run.returncode == 2 and error_line(run) == error_line(checked)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- aggregates at a grid's end
def write_eval_csv(seed_dir: Path, rows: list[tuple[int, float]]) -> None:
    logger = RunLogger(seed_dir)
    for step, value in rows:
        logger.evaluation(step, value, 0.0, 1, 0.0)
    logger.close()


def test_aggregates_leave_a_damaged_run_out_and_name_it_once(tmp_path):
    env_dir = tmp_path / "Pendulum-v1"
    write_eval_csv(env_dir / "vadam" / "seed0", [(200, -1000.0), (400, -900.0)])
    write_eval_csv(env_dir / "vadam" / "seed1", [(200, -1100.0), (400, -800.0)])
    damaged = env_dir / "vadam" / "seed1" / "eval.csv"
    lines = damaged.read_text().splitlines()
    damaged.write_text("\n".join([*lines, lines[-1]]) + "\n")  # step 400 twice
    with pytest.raises(RunFileError) as refused:  # compare_runs: refused, the file named once
        load_runs(env_dir)
    assert str(refused.value).count(str(damaged)) == 1 and "is damaged" in str(refused.value)

    skipped: list[str] = []
    assert write_strategy_aggregates(env_dir, "se", skipped=skipped) == ["vadam"]
    assert skipped == [str(refused.value)]
    assert list((env_dir / AGGREGATE_DIR / "vadam").glob("events.out.tfevents.*"))


# ----------------------------------------------------------------- what reports and resumes say
def test_an_empty_sigma_column_is_a_note_not_a_numpy_warning(tmp_path):
    env_dir = tmp_path / "Pendulum-v1"
    for seed in range(2):
        run_dir = env_dir / "vadam" / f"seed{seed}"
        write_eval_csv(run_dir, [(1000, -1000.0), (2000, -900.0)])
        with open(run_dir / "explore.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["step", "sigma_q10", "sigma_median", "sigma_q90",
                             "action_distance", "sigma_median/net.0"])  # fmt: skip
            writer.writerow([1000, 0.05, 0.1, 0.2, "", ""])
            writer.writerow([2000, 0.04, 0.08, 0.16, 0.3, ""])
    notes: list[str] = []
    out = tmp_path / "report"
    out.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        section = write_sigma_report([(env_dir, None)], None, out, {}, notes)
    assert notes == [
        f"{env_dir / 'vadam'}: no seed logged a value of sigma_median/net.0 at any shared "
        "step; left blank in the σ report"
    ]
    assert "| vadam | 2 |" in section
    with open(out / "sigma.csv") as f:
        rows = list(csv.DictReader(f))
    assert [row["action_distance"] for row in rows] == ["", "0.3"]
    assert [row["sigma_median/net.0"] for row in rows] == ["", ""]


def test_a_run_without_its_config_yaml_is_compared_with_a_note(tmp_path):
    env_dir = tmp_path / "Pendulum-v1"
    for seed in range(2):
        write_eval_csv(env_dir / "vadam" / f"seed{seed}", [(200, -1000.0)])
    (env_dir / "vadam" / "seed1" / "config.yaml").write_text("env: Pendulum-v1\n")
    curves, notes = load_runs(env_dir)
    assert curves[0].returns.shape == (2, 1)
    assert notes == [
        f"{env_dir / 'vadam'}: seed0 without config.yaml, compared as run(s) of Pendulum-v1 "
        "with settings nothing records"
    ]


def tiny_run(tmp_path: Path, total_steps: int):
    return resolve_settings(
        "adam-plain", set_options=["hidden_sizes=[16,16]"], env="Pendulum-v1",
        total_steps=total_steps, eval_every=200, eval_episodes=1, logdir=str(tmp_path),
        compile=False,
    )  # fmt: skip


def test_an_edited_config_yaml_rewritten_on_resume_is_said_in_one_line(tmp_path, capsys):
    run_dir = train(tiny_run(tmp_path, 200), progress=False)
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("gamma: 0.99", "gamma: 0.5"))
    capsys.readouterr()
    train(tiny_run(tmp_path, 400), resume=True, progress=False)
    said = [line for line in capsys.readouterr().out.splitlines() if "config.yaml" in line]
    assert said == [
        f"{run_dir}: config.yaml differs from the settings the checkpoint was trained with "
        "(gamma: 0.5 -> 0.99); written again from the checkpoint's"
    ]
    assert "gamma: 0.99" in config.read_text()


def test_a_checkpoint_of_another_env_is_refused_in_one_line(tmp_path):
    path = tmp_path / "agent.pt"
    DDPG("Pendulum-v1", DDPGSettings(hidden_sizes=[16, 16]), seed=0).save(path)
    with pytest.raises(CheckpointError) as refused:
        DDPG.load(path, env="MountainCarContinuous-v0")
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        f"checkpoint {path} (saved by a run of Pendulum-v1) does not match this run's "
        "networks or optimizer: size mismatch for net.0.weight: copying a param with shape "
        "[16, 3] from checkpoint, the shape in current model is [16, 2]"
    )
