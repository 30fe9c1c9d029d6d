"""A run prints its own lines only: the README's first command, in a short form, as a user
runs it (a process of its own, so that once-per-process warnings are seen fresh)."""

from __future__ import annotations

from collections import Counter

from conftest import train_agent_process


def test_a_run_says_nothing_twice(tmp_path):
    """Every env built (the training env and each of the evaluation episodes' envs) used
    to print MuJoCo's warning about gymnasium's model file again."""
    result = train_agent_process(
        "--env", "HalfCheetah-v4", "--opt", "vadam", "--steps", "100", "--eval-every", "100",
        "--eval-episodes", "3", "--no-compile", "--no-progress", "--set", "hidden_sizes=[8,8]",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    repeated = {line: n for line, n in Counter(lines).items() if n > 1}
    assert not repeated, result.stderr
    mujoco = [line for line in lines if "settotalmass" in line]
    assert len(mujoco) <= 1  # shown once, in MuJoCo's words, not hidden
