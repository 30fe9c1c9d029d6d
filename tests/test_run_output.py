"""A run prints its own lines only: the README's first command, in a short form, as a user
runs it (a process of its own, so that once-per-process warnings are seen fresh)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from conftest import train_agent_process


def test_a_run_says_nothing_twice(tmp_path):
    """Every env built (the training env and each of the evaluation episodes' envs) used
    to print MuJoCo's warning about gymnasium's model file again; it is not shown at all
    now (the user cannot act on it), and nothing else is said twice."""
    result = train_agent_process(
        "--env", "HalfCheetah-v4", "--opt", "vadam", "--steps", "100", "--eval-every", "100",
        "--eval-episodes", "3", "--no-compile", "--no-progress", "--set", "hidden_sizes=[8,8]",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    repeated = {line: n for line, n in Counter(lines).items() if n > 1}
    assert not repeated, result.stderr
    assert "settotalmass" not in result.stderr + result.stdout


def test_mujocos_warning_about_gymnasiums_model_is_kept_where_envs_are_made(tmp_path):
    """Only where an env is made: the same model compiled elsewhere (a user's own code)
    still gets MuJoCo's warning, once."""
    script = (
        "import pathlib, sys, gymnasium, mujoco\n"
        "from agents.common.envs import make_env\n"
        "make_env('HalfCheetah-v5').close()\n"
        "make_env('HalfCheetah-v5').close()\n"
        "print('envs made', file=sys.stderr, flush=True)\n"
        "xml = pathlib.Path(gymnasium.__file__).parent / 'envs/mujoco/assets/half_cheetah.xml'\n"
        "for _ in range(2):\n"
        "    mujoco.MjModel.from_xml_path(str(xml))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    warned = [i for i, line in enumerate(lines) if "settotalmass" in line]
    assert len(warned) == 1 and lines[warned[0]].endswith("(MuJoCo; shown once per process)")
    assert warned[0] > lines.index("envs made")  # not while the envs were made
