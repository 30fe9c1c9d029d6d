"""Every command and Python snippet README and the docs give works as written.

A command is a line of a ```bash block in README.md, docs/*.md or a study's README (inline
code is prose). Each one is run here as written (rl-zoo3's with a smoke budget appended,
:data:`RL_ZOO_SMOKE`), or named in :data:`NOT_RUN` with the reason (it trains for longer
than a test may, installs, or serves); a command that is neither fails
the collection test, so a new one has to be considered. Every ``train_agent`` command,
whether run or not, is checked in the default suite with ``--check``: its flags parse, its
settings resolve and its envs are made, so a renamed flag, setting or strategy is caught.

A snippet is a ```python block of the same pages: each runs whole, in a fresh interpreter
in an empty directory, as a reader would paste it, with one textual change: the step count
of every ``.learn(N`` call becomes :data:`SNIPPET_STEPS` (the docs train for 100 000 steps,
a test for a hundred); nothing else is substituted, and the snippet cannot tell that it
runs in a test. A block that is not meant to run (an output, a fragment) is marked with
another language (```text), not ```python.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import train_agent_process

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "studies").glob("*/README.md"))]  # fmt: skip

#: The studies whose report tests/test_study_scripts.py regenerates from the committed runs.
STUDIES_WITH_REPORTS = (
    "reproduction", "sparse", "vime", "population-fidelity", "zhang2018-fig3",
    "plappert2018-sparse", "sigma",
)  # fmt: skip

#: Commands not run by this module, and why (each must still appear in the docs).
NOT_RUN = {
    "pip install torch==2.13.0 && pip install .": "installs: CI installs so, into a fresh venv",
    "pip install -e '.[test,ray]' && python -m pytest -q -m \"not slow\"": "the suite itself (CI)",
    "MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python -m "
    'pytest -q -m "trains and not slow or kernels"': "CI's second pass (.ci/run)",
    "pip install -e '.[gpu]' && WARP_CACHE_PATH=$(mktemp -d) python -m pytest -q -n 0 -m warp": (
        "installs: CI's MuJoCo Warp pass (.ci/run)"
    ),
    "tensorboard --logdir runs/HalfCheetah-v4": "serves until stopped",
    "tensorboard --logdir runs/HalfCheetah-v4/compare": "serves until stopped",
    "train_agent --env SparseMountainCar-v0 --opt vadam --bonus vime "
    "--set bonus.posterior=noisy-kfac": "trains 3 M steps (checked with --check)",
    "train_agent --env SparseMountainCar-v0 --engine sb3 --algo trpo --bonus vime": (
        "trains 3 M steps (checked with --check)"
    ),
    "train_agent --env HalfCheetah-v4 --opt vadam,adam-plain --seeds 3 --steps 50000 "
    "--workers 2": "a grid of six 50 k-step runs, ~25 minutes (checked with --check)",
    "train_agent --env Pendulum-v1 --opt vadam,adam-plain --seeds 3 --steps 20000 --track "
    "--wandb-project pendulum": "a grid of six 20 k-step runs (checked with --check)",
    "wandb leet runs/wandb": "a terminal UI (tests/test_tracking.py runs its inspect form)",
    "wandb leet inspect --summary runs/wandb": "needs a tracked run: tests/test_tracking.py",
    "wandb sync --dry-run runs/wandb/offline-run-*": "needs a tracked run: tests/test_tracking.py",
    "wandb sync runs/wandb/offline-run-*": "uploads: needs a W&B account and the network",
    "compare_runs runs/HalfCheetah-v4 runs/Hopper-v4": "needs grids of runs of two tasks",
    "compare_runs a/HalfCheetah-v4 b/HalfCheetah-v4 --labels a,b": "needs two grids of runs",
    "bash studies/reproduction/reproduce.sh": "the study: ~28 core-hours",
    "STEPS=300000 bash studies/reproduction/reproduce.sh": "extends the study's runs",
    "bash studies/sparse/reproduce.sh": "the study: ~10 core-hours",
    "STEPS=200000 bash studies/sparse/reproduce.sh": "extends the study's runs",
    "TASKS=SparseMountainCar-v0 bash studies/sparse/reproduce.sh": "one task's grid: ~2 hours",
    "bash studies/vime/reproduce.sh": "the study: ~4 core-hours",
    "TASKS=SparseMountainCar-v0 PARTS=trpo bash studies/vime/reproduce.sh": "~40 minutes",
    "train_agent --env HalfCheetah-v4 --opt vadam --seeds 10 --steps 100000 "
    '--set "optimizer_kwargs.sample_constant=[1e4,1e3,1e2]"': (
        "a population of 30 100 k-step runs, ~5 core-hours (checked with --check)"
    ),
    "bash studies/population-fidelity/reproduce.sh": "the study: ~1 core-hour",
    "bash studies/zhang2018-fig3/reproduce.sh": "the study: ~30 core-hours",
    'TASKS="SparseMountainCarRllab-v0" bash studies/zhang2018-fig3/reproduce.sh': "~5 hours",
    "bash studies/plappert2018-sparse/reproduce.sh": "the study: ~6 core-hours",
    "TASKS=SparseMountainCar-v0 bash studies/plappert2018-sparse/reproduce.sh": "~70 minutes",
    "bash studies/sigma/reproduce.sh": "the study: ~12 core-hours",
    "TASKS=SparseMountainCar-v0 bash studies/sigma/reproduce.sh": "~90 minutes",
    "bash studies/ivon/reproduce.sh": "the study: 100 runs of 100 k steps, not yet run",
    "REPORT_ONLY=1 bash studies/ivon/reproduce.sh": "its reports: no runs committed yet",
    "TASKS=Hopper-v4 bash studies/ivon/reproduce.sh": "one task's grids: 40 runs of 100 k steps",
    **{
        f"REPORT_ONLY=1 bash studies/{study}/reproduce.sh": "tests/test_study_scripts.py runs it"
        for study in STUDIES_WITH_REPORTS
    },
}

#: Commands run here, as written, in order, in one empty directory (the later ones read the
#: runs the earlier ones wrote).
RUN_IN_ORDER = [
    "train_agent --env HalfCheetah-v4 --opt vadam --steps 20000",
    "compare_runs runs/HalfCheetah-v4 --at 20000,50000 --reference khan2018",
    "compare_runs runs/HalfCheetah-v4 --at 20000,50000",
    "compare_runs runs/HalfCheetah-v4 --reference khan2018",
]


#: rl-zoo3's commands, run here as written from the repository's root (where docs/sb3.md says
#: to run them: they name examples/rl_zoo/) with these arguments appended, which argparse
#: takes over the command's own: a smoke budget, and rl-zoo3's logs in the test's directory.
RL_ZOO_SMOKE = {
    "OMP_NUM_THREADS=1 python -m rl_zoo3.train --algo ddpg --env Pendulum-v1 -conf "
    "examples/rl_zoo/ddpg.yml --gym-packages agents.sb3.policy --progress": ("-n", "300"),
    "OMP_NUM_THREADS=1 python -m rl_zoo3.train --algo ddpg --env HalfCheetah-v4 -conf "
    "examples/rl_zoo/ddpg.yml --gym-packages agents.sb3.policy --progress --eval-freq 10000 "
    "--eval-episodes 20": ("-n", "300"),
    "OMP_NUM_THREADS=1 python -m rl_zoo3.train --algo td3 --env Pendulum-v1 -conf "
    "examples/rl_zoo/td3.yml --gym-packages agents.sb3.zoo --optimize-hyperparameters "
    "--n-trials 4 --n-timesteps 1500 --n-jobs 1 --sampler random --pruner none --seed 0 "
    "--no-optim-plots": ("--n-trials", "1", "--n-timesteps", "300", "--eval-episodes", "1"),
}


def documented_commands() -> dict[str, list[str]]:
    """Every command of a bash block, joined over ``\\`` continuations, without comments,
    with the files it appears in."""
    found: dict[str, list[str]] = {}
    for path in DOCS:
        text = path.read_text()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            command = ""
            for line in block.splitlines():
                command = f"{command} {line.strip()}" if command else line.strip()
                if command.endswith("\\"):
                    command = command[:-1].rstrip()
                    continue
                command = re.sub(r"\s+#\s.*$", "", command).strip()
                if command and not command.startswith("#"):
                    found.setdefault(command, []).append(str(path.relative_to(REPO)))
                command = ""
    return found


def test_every_documented_command_is_run_or_said_to_be_too_long():
    documented = documented_commands()
    run = set(NOT_RUN) | set(RUN_IN_ORDER) | set(RL_ZOO_SMOKE)
    unconsidered = sorted(set(documented) - run)
    assert not unconsidered, f"commands neither run nor listed in NOT_RUN: {unconsidered}"
    gone = sorted(run - documented.keys())
    assert not gone, f"listed here but no longer documented: {sorted(gone)}"


TRAIN_AGENT = sorted(c for c in documented_commands() if c.startswith("train_agent "))


@pytest.mark.parametrize("command", TRAIN_AGENT)
def test_every_documented_train_agent_command_resolves(command, tmp_path, train_agent):
    result = train_agent(*shlex.split(command)[1:], "--check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "settings checked, nothing trained" in result.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_the_documented_quick_start_runs_as_written(tmp_path):
    """README's run, then the manual's comparisons of what it wrote (~2 minutes)."""
    for command in RUN_IN_ORDER:
        program, *args = shlex.split(command)
        if program == "train_agent":
            result = train_agent_process(*args, cwd=tmp_path)
        else:
            exe = Path(sys.executable).with_name(program)
            result = subprocess.run(
                [str(exe), *args], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                env=os.environ.copy(),
            )  # fmt: skip
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
    assert (tmp_path / "runs" / "HalfCheetah-v4" / "comparison.png").exists()


@pytest.mark.parametrize("command", sorted(RL_ZOO_SMOKE))
def test_every_documented_rl_zoo3_command_runs_from_the_repository_root(command, tmp_path):
    """Each at a smoke budget: a few hundred steps (a rl-zoo3 start is most of it)."""
    words = shlex.split(command)
    start = words.index("python")  # the variables set before it, then its arguments
    assignments, args = words[:start], words[start + 1 :]
    assert all("=" in a for a in assignments), command
    mujoco_log = REPO / "MUJOCO_LOG.TXT"
    kept = mujoco_log.exists()
    result = subprocess.run(
        [sys.executable, *args, *RL_ZOO_SMOKE[command], "-f", str(tmp_path / "logs")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, **dict(a.split("=", 1) for a in assignments)},
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    algo = args[args.index("--algo") + 1]
    assert any((tmp_path / "logs" / algo).iterdir())
    if "--progress" in args:  # rl-zoo3's bar, whole at the end
        assert "300/300" in result.stdout, result.stdout[-2000:]
    assert kept or not mujoco_log.exists()  # the policy's import installs MuJoCo's handler


#: Every ``.learn(N`` of a snippet runs this many steps (:func:`shortened`).
SNIPPET_STEPS = 100


def documented_snippets() -> dict[str, str]:
    """Every ```python block, by ``page:line`` of its first line."""
    found = {}
    for path in DOCS:
        text = path.read_text()
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text.count("\n", 0, match.start(1)) + 1
            found[f"{path.relative_to(REPO)}:{line}"] = match.group(1)
    return found


def shortened(code: str) -> str:
    """``code`` with each ``.learn(N`` made ``.learn(SNIPPET_STEPS``."""
    return re.sub(r"\.learn\(\s*[\d_]+", f".learn({SNIPPET_STEPS}", code)


def test_snippets_are_found_and_their_training_shortened():
    snippets = documented_snippets()
    assert {"README.md", "docs/sb3.md", "docs/strategies.md", "docs/vime.md"} <= {
        where.split(":")[0] for where in snippets
    }
    assert shortened("m.learn(100_000, callback=c)\nagent.learn(5)") == (
        f"m.learn({SNIPPET_STEPS}, callback=c)\nagent.learn({SNIPPET_STEPS})"
    )


SNIPPETS = documented_snippets()


@pytest.mark.parametrize("where", sorted(SNIPPETS))
def test_every_documented_python_snippet_runs(where, tmp_path):
    """Each in a few seconds: most of it starting Python and importing torch."""
    result = subprocess.run(
        [sys.executable, "-c", shortened(SNIPPETS[where])], cwd=tmp_path, capture_output=True,
        text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    # MuJoCo's own warning handler appends its warnings to MUJOCO_LOG.TXT in the directory;
    # the project's handler (make_env, and the import of agents.sb3.policy) replaces it.
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def first_snippet(page: str) -> str:
    """The first ```python block of ``page`` (``docs/sb3.md``)."""
    return SNIPPETS[min((w for w in SNIPPETS if w.split(":")[0] == page), key=_line)]


def _line(where: str) -> int:
    return int(where.split(":")[1])


@pytest.mark.slow
def test_sb3_first_snippet_runs_whole_and_shows_its_progress(tmp_path):
    """docs/sb3.md's first run as written, 3 000 steps (~10 CPU-seconds): SB3's table at
    each 1 000 steps, then the test episodes' line."""
    result = subprocess.run(
        [sys.executable, "-c", first_snippet("docs/sb3.md")], cwd=tmp_path,
        capture_output=True, text=True, timeout=600, env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    steps = re.findall(r"\|\s+total_timesteps\s+\|\s+(\d+)", result.stdout)
    assert steps == ["1000", "2000", "3000"], result.stdout[-3000:]
    assert re.search(r"^test return: -?\d+ ± \d+$", result.stdout, re.M), result.stdout[-500:]
