"""What a careful user or a changed file brings to ``train_agent`` and ``compare_runs``, and
what each must get: an empty list, layered ``--config`` files, a checkpoint whose counters
were edited, settings whose derived quantities make a run fail before any update, a short
run without its ``config.yaml``, the short-run note's count, a misspelled ``--strategies``,
a closed stdout, a W&B setting W&B refuses. Each gets one clear line (exit 2) and leaves
nothing behind, or runs as the manual promises."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from test_compare_faults import two_seeds
from test_faults import TINY, snapshot

from agents import DDPG
from agents.common.errors import CheckpointError
from agents.reporting.compare import main as compare_main
from agents.runs.run_logger import read_eval_csv
from agents.runs.train import train
from agents.settings import resolve_settings
from agents.settings.resolve import resolve_runs

from conftest import error_line

ROOT = Path(__file__).resolve().parents[1]
#: Short episodes: an evaluation is 20 steps, so a run of many evaluations is quick.
SHORT = ["--set", "max_episode_steps=20", "--no-progress"]


# --------------------------------------------------------------------------- empty lists
@pytest.mark.parametrize(
    "args, says",
    [
        (["--opt", ""], "--opt names no strategy"),
        (["--opt", ",", "--workers", "2"], "--opt names no strategy"),
        (["--opt", " , "], "--opt names no strategy"),
        (["--seeds", ","], "--seeds names no seed"),
        (["--seeds", ""], "--seeds names no seed"),
    ],
)
@pytest.mark.parametrize("check", [False, True])
def test_an_empty_strategy_or_seed_list_is_one_line(tmp_path, train_agent, args, says, check):
    """Not an IndexError, nor a ``--check`` that approves a grid of no run in silence."""
    result = train_agent(*TINY, "--steps", "100", *args, *(["--check"] if check else []),
                         cwd=tmp_path)  # fmt: skip
    assert says in error_line(result)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- --config layers
def write(path: Path, values: dict) -> str:
    path.write_text(yaml.safe_dump(values))
    return str(path)


def test_a_later_config_file_wins_over_an_earlier_ones_strategy_section(tmp_path):
    """Each file is a layer over the one before, its ``strategies:`` section included: a
    later file's plain value wins over an earlier file's section, and the other way."""
    study = str(ROOT / "configs" / "sparse-study.yaml")  # strategies.gaussian-action: 0.6
    mine = write(tmp_path / "noise02.yaml", {"action_noise": {"sigma": 0.2}})
    later = resolve_settings(strategy="gaussian-action", config_file=[study, mine])
    assert later.values()["action_noise"]["sigma"] == 0.2
    earlier = resolve_settings(strategy="gaussian-action", config_file=[mine, study])
    assert earlier.values()["action_noise"]["sigma"] == 0.6

    wide = str(ROOT / "configs" / "ivon-wide-prior.yaml")  # strategies.ivon: sum, ess 100
    f = write(tmp_path / "f.yaml", {"actor_grad_reduction": "mean",
                                    "optimizer_kwargs": {"ess": 1000}})  # fmt: skip
    values = resolve_settings(strategy="ivon", config_file=[wide, f]).values()
    assert values["actor_grad_reduction"] == "mean"
    assert values["optimizer_kwargs"]["ess"] == 1000
    assert values["optimizer_kwargs"]["hess_init"] == 1.0  # the earlier file's, kept


# --------------------------------------------------------------------------- checkpoint counters
@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> Path:
    """A finished 200-step run (evaluations at 100 and 200) to edit copies of."""
    root = tmp_path_factory.mktemp("short")
    config = resolve_settings(
        env="Pendulum-v1", total_steps=200, eval_every=100, eval_episodes=1, compile=False,
        logdir=str(root / "out"), set_options=["hidden_sizes=[16,16]", "max_episode_steps=20"],
    )  # fmt: skip
    return train(config, progress=False)


def copy_to(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    shutil.copytree(run_dir, target)
    return target


@pytest.mark.parametrize("value", ["200", -100, 2.5, True, None])
def test_a_checkpoint_counter_that_is_not_a_count_is_one_line_and_changes_nothing(
    tmp_path, short_run, train_agent, value
):
    """A negative step would have the resume rewrite eval.csv from step 0 (its evaluations
    discarded); a string one was a TypeError. Refused as the checkpoint is read."""
    run_dir = copy_to(short_run, tmp_path)
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    state = torch.load(checkpoint, weights_only=True)
    state["counters"]["num_timesteps"] = value
    torch.save(state, checkpoint)
    before = snapshot(run_dir)
    line = error_line(train_agent(*TINY, *SHORT, "--steps", "300", "--eval-every", "100",
                                  "--resume", cwd=tmp_path))  # fmt: skip
    assert f"counter num_timesteps is {value!r}, not a count" in line, line
    assert str(checkpoint.relative_to(tmp_path)) in line
    assert snapshot(run_dir) == before
    with pytest.raises(CheckpointError, match="counter num_timesteps"):
        DDPG("Pendulum-v1", hidden_sizes=[16, 16]).load_checkpoint(checkpoint)


# --------------------------------------------------------------------------- derived settings
@pytest.mark.parametrize(
    "opt, setting, says",
    [
        ("ou-action", "action_noise.theta=1e30", "theta * dt = 1e+30 * 1 = 1e+30 must be <= 2"),
        ("ou-action", "action_noise.dt=30", "theta * dt = 0.15 * 30 = 4.5 must be <= 2"),
        ("ivon", "optimizer_kwargs.ess=1e-30", "ess = 1e-30 gives the initial sampling std"),
    ],
)
@pytest.mark.parametrize("check", [True, False])
def test_a_derived_quantity_out_of_range_is_refused_with_the_settings(
    tmp_path, train_agent, opt, setting, says, check
):
    """``--check`` refuses what the run would fail on before any update (the OU recursion
    with θ·dt > 2 diverges; IVON's σ₀ = 1/√(ess·(h₀ + δ)) = 1e17), naming the setting, not
    an update; the run refuses it the same way, before anything is written."""
    result = train_agent(*TINY, "--steps", "100", "--opt", opt, "--set", setting,
                         *(["--check"] if check else []), cwd=tmp_path)  # fmt: skip
    assert says in error_line(result)
    assert not (tmp_path / "out").exists()


def test_derived_quantities_within_range_are_taken():
    assert resolve_settings(strategy="ou-action", set_options=["action_noise.theta=2"])
    assert resolve_settings(strategy="ivon", set_options=["optimizer_kwargs.ess=1"])


# --------------------------------------------------------------------------- short runs
def test_a_short_run_without_its_config_yaml_resumes_on_its_own_schedule(tmp_path, train_agent):
    """The schedule is read from the checkpoint's settings when config.yaml is gone (the
    resume writes config.yaml again from them), not derived anew from ``--steps``."""
    args = [*TINY, *SHORT]
    assert train_agent(*args, "--steps", "100", cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    (run_dir / "config.yaml").unlink()
    result = train_agent(*args, "--steps", "200", "--resume", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "config.yaml was missing; written again" in result.stdout
    assert [row["step"] for row in read_eval_csv(run_dir / "eval.csv")] == list(range(10, 201, 10))
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["eval_every"] == 10


@pytest.mark.parametrize("steps", [1, 5, 9, 11, 25, 99])
def test_the_short_run_note_counts_the_evaluations_the_run_makes(steps):
    """As the callback evaluates: every ``eval_every`` steps, and at the end of a run the
    schedule misses."""
    notes: list[str] = []
    (run,) = resolve_runs([None], [None], set_options=["learning_starts=0"], notes=notes,
                          env="Pendulum-v1", total_steps=steps)  # fmt: skip
    made = [s for s in range(1, steps + 1) if s % run.eval_every == 0 or s == steps]
    assert f", {len(made)} in all" in notes[0], notes


def test_the_short_run_note_matches_eval_csv(tmp_path, train_agent):
    result = train_agent(*TINY, *SHORT, "--steps", "25", "--set", "learning_starts=0",
                         cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = read_eval_csv(tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0" / "eval.csv")
    assert "an evaluation every 2 steps, 13 in all" in result.stdout
    assert len(rows) == 13


# --------------------------------------------------------------------------- compare_runs
def test_compare_runs_names_a_misspelled_strategy_when_every_name_is_one(tmp_path, capsys):
    """The typo, with the nearest strategy the directory holds, not "no eval.csv under"."""
    env_dir = tmp_path / "runs" / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    with pytest.raises(SystemExit) as exit_info:
        compare_main([str(env_dir), "--strategies", "vadm", "--reps", "50"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("compare_runs: error: ") and len(err.splitlines()) == 1, err
    assert "vadm (did you mean vadam?)" in err


# --------------------------------------------------------------------------- stdout, W&B
def test_a_closed_stdout_does_not_stop_the_run(tmp_path):
    """``train_agent … | head -1``: the run trains to its end, its files complete, one line
    on stderr saying its progress goes nowhere (the reader is gone before the first line)."""
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write to stdout is a broken pipe
    try:
        result = subprocess.run(
            [str(Path(sys.executable).with_name("train_agent")), *TINY, "--set",
             "max_episode_steps=20", "--steps", "100", "--eval-every", "50"],
            cwd=tmp_path, stdout=write, stderr=subprocess.PIPE, text=True, timeout=600,
        )  # fmt: skip
    finally:
        os.close(write)
    assert result.returncode == 0, result.stderr
    assert "stdout is closed (broken pipe); training goes on" in result.stderr
    assert "Traceback" not in result.stderr
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    assert [row["step"] for row in read_eval_csv(run_dir / "eval.csv")] == [50, 100]
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 100


@pytest.mark.parametrize("check", [True, False])
def test_track_refuses_a_wandb_setting_wandb_refuses(tmp_path, train_agent, monkeypatch, check):
    """``WANDB_MODE=bogus``: ``--check`` refuses it as the run would, nothing started."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "bogus")
    result = train_agent(*TINY, "--steps", "100", "--track", *(["--check"] if check else []),
                         cwd=tmp_path)  # fmt: skip
    line = error_line(result)
    assert "W&B refuses" in line and "WANDB_MODE='bogus'" in line, line
    assert not (tmp_path / "out").exists()
