"""``train_agent``'s flags as users of CleanRL and rl-zoo3 type them: their names for the
same flags, a step count written as a float, and a flag it does not know answered in one
line with the nearest one (not argparse's usage)."""

from __future__ import annotations

import pytest

from agents.cli import build_parser

from conftest import error_line, train_agent_process


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (["--env-id", "Hopper-v4"], ["--env", "Hopper-v4"]),  # CleanRL
        (["--total-timesteps", "5000"], ["--steps", "5000"]),  # CleanRL
        (["-n", "5000"], ["--steps", "5000"]),  # rl-zoo3
        (["--n-timesteps", "5000"], ["--steps", "5000"]),  # rl-zoo3
        (["--eval-freq", "500"], ["--eval-every", "500"]),  # rl-zoo3
    ],
)
def test_cleanrl_and_rl_zoo_names_mean_the_same_flags(theirs, ours):
    parser = build_parser()
    assert parser.parse_args(theirs) == parser.parse_args(ours)
    assert parser.parse_args(theirs) != parser.parse_args([])  # the flag was taken


WHOLE = [("1e5", 100_000), ("2.5e4", 25_000), ("100000.0", 100_000), ("100_000", 100_000)]


@pytest.mark.parametrize(("written", "steps"), WHOLE)
def test_a_whole_number_of_steps_may_be_written_as_a_float(written, steps):
    args = build_parser().parse_args(["--steps", written, "--eval-every", "1e3"])
    assert (args.total_steps, args.eval_every) == (steps, 1000)


@pytest.mark.parametrize("written", ["1.5", "1e-3", "abc", "inf"])
def test_a_fraction_of_a_step_is_refused_in_one_line(written, train_agent, tmp_path):
    line = error_line(train_agent("--env", "Pendulum-v1", "--steps", written, cwd=tmp_path))
    assert line.endswith(f"expects a whole number, got {written!r}")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--total_timesteps", "100"], "unknown flag --total_timesteps; did you mean "
                                       "--total-timesteps?"),
        (["--eval-frequency=500"], "unknown flag --eval-frequency; did you mean --eval-freq?"),
        (["--learning-rate", "3e-4"], "unknown flag --learning-rate; a setting without a flag of "
                                      "its own is given as --set KEY=VALUE"),
        (["--seed", "1", "2"], "unexpected argument '2'"),
    ],
)  # fmt: skip
def test_an_unknown_flag_is_answered_in_one_line(args, message, train_agent, tmp_path):
    result = train_agent("--env", "Pendulum-v1", *args, cwd=tmp_path)
    assert message in error_line(result)
    assert "usage:" not in result.stderr and result.stdout == ""


def test_the_console_script_answers_an_unknown_flag_in_one_line(tmp_path):
    """As the user sees it: stderr is the one line (no usage above it), exit code 2."""
    result = train_agent_process("--env-idd", "Pendulum-v1", cwd=tmp_path)
    line = error_line(result)
    assert line == "train_agent: error: unknown flag --env-idd; did you mean --env-id?"
    assert result.stderr.strip().splitlines() == [line]
