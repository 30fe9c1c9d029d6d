"""``train_agent`` end to end: real environments, real TensorBoard files, bad input.

Runs that need a process (a kill, Ctrl-C, a terminal, the console script's own exit) start
``train_agent`` as one; the others call its ``main()`` in this process (``conftest.py``).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.runs.run_logger import read_eval_csv

from conftest import error_line, train_agent_on_terminal, train_agent_process

SMALL_NET = ["--set", "hidden_sizes=[32,32]", "--no-compile"]  # eager: no compile time
EXPECTED_TAGS = {
    "eval/mean_return",
    "eval/std_return",
    "train/episode_return",
    "train/episode_length",
    "explore/sigma_mean",
    "explore/sigma_min",
    "explore/sigma_max",
    "loss/critic",
    "loss/actor",
    "time/steps_per_second",
}


def scalars(run_dir: Path) -> dict[str, list[int]]:
    """Steps per tag as TensorBoard itself reads the run (purged events dropped)."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_short_halfcheetah_run_writes_the_run_directory(tmp_path):
    result = train_agent_process(
        "--env", "HalfCheetah-v4", "--opt", "vadam", "--steps", "2000", "--seed", "1",
        "--eval-every", "1000", "--eval-episodes", "2", "--logdir", "out",
        "--set", "log_every=250", *SMALL_NET, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "out" / "HalfCheetah-v4" / "vadam" / "seed1"
    assert "step 1000: eval return" in result.stdout  # plain lines when not on a terminal

    files = {p.name for p in run_dir.iterdir()}
    assert {"config.yaml", "eval.csv", "checkpoints"} <= files
    assert any(name.startswith("events.out.tfevents") for name in files)

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["strategy"] == "vadam" and config["seed"] == 1
    assert config["optimizer_kwargs"]["sample_constant"] == 1e4  # the Table 3 preset
    assert config["hidden_sizes"] == [32, 32] and config["total_steps"] == 2000

    rows = read_eval_csv(run_dir / "eval.csv")
    assert [r["step"] for r in rows] == [1000, 2000]
    assert all(r["episodes"] == 2 for r in rows)
    assert all(-2000 < r["mean_return"] < 2000 for r in rows)

    steps = scalars(run_dir)
    assert set(steps) >= EXPECTED_TAGS
    assert steps["eval/mean_return"] == [1000, 2000]
    assert steps["train/episode_return"] == [1000, 2000]  # two 1000-step episodes
    assert steps["loss/critic"] == [250, 500, 750, 1000, 1250, 1500, 1750, 2000]
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    tb_means = [e.value for e in acc.Scalars("eval/mean_return")]
    assert tb_means == pytest.approx([r["mean_return"] for r in rows], rel=1e-6)
    sigma = [e.value for e in acc.Scalars("explore/sigma_mean")]
    assert all(0 < s <= 1e-2 for s in sigma)  # σ = 1/√(s + λ + c) ≤ 1/√c

    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert state["counters"]["num_timesteps"] == 2000
    assert "buffer" not in state  # only with save_replay_buffer


def test_sb3_engine_writes_the_same_layout_and_resumes(tmp_path, train_agent):
    args = ["--env", "Pendulum-v1", "--engine", "sb3", "--opt", "vadagrad", "--eval-every",
            "400", "--eval-episodes", "1", "--logdir", "out", "--set", "log_every=200",
            *SMALL_NET]  # fmt: skip
    first = train_agent(*args, "--steps", "400", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadagrad-sb3" / "seed0"
    assert (run_dir / "checkpoints" / "latest.pt").exists()
    more = train_agent(*args, "--steps", "800", "--resume", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == [400, 800]
    steps = scalars(run_dir)
    assert set(steps) >= EXPECTED_TAGS
    assert steps["eval/mean_return"] == [400, 800]
    assert steps["train/episode_return"] == [200, 400, 600, 800]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["engine"] == "sb3" and config["total_steps"] == 800


def test_action_noise_baseline_through_both_engines(tmp_path, train_agent):
    """ou-action: adam-plain plus the OU process, natively and as SB3's action_noise."""
    for engine, name in (("native", "ou-action"), ("sb3", "ou-action-sb3")):
        result = train_agent("--env", "Pendulum-v1", "--opt", "ou-action", "--engine", engine,
                             "--steps", "300", "--eval-every", "300", "--eval-episodes", "1",
                             "--logdir", "out", "--set", "action_noise.sigma=0.3", *SMALL_NET,
                             cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
        run_dir = tmp_path / "out" / "Pendulum-v1" / name / "seed0"
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert config["action_noise"] == {"theta": 0.15, "sigma": 0.3, "dt": 1.0}
        assert config["optimizer_kwargs"]["lr"] == 1e-4  # adam-plain's
        assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == [300]


def test_runs_are_compiled_by_default_and_resume_compiled(tmp_path, train_agent, monkeypatch):
    """Without a flag a run trains with the update compiled by TorchInductor, and resumes
    into it from a checkpoint; --no-compile is eager."""
    compiles = []
    inductor_compile = torch._inductor.compile

    def recording_compile(graph, inputs):
        compiled_graph = inductor_compile(graph, inputs)  # the real compiler
        compiles.append(compiled_graph)  # counted once it succeeded
        return compiled_graph

    monkeypatch.setattr(torch._inductor, "compile", recording_compile)
    # test_compiled_update's networks and batch: its vadam update then comes from the cache.
    args = ["--env", "Pendulum-v1", "--opt", "vadam", "--eval-every", "200", "--eval-episodes",
            "1", "--set", "hidden_sizes=[32,24]", "--set", "batch_size=16"]  # fmt: skip

    def compiled(*extra: str, logdir: str) -> int:
        """How many updates the run compiled."""
        before = len(compiles)
        result = train_agent(*args, *extra, "--logdir", logdir, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return len(compiles) - before

    assert compiled("--steps", "200", logdir="out") == 1
    assert compiled("--steps", "400", "--resume", logdir="out") == 1
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["compile"] is True  # resolved
    assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == [200, 400]
    assert compiled("--steps", "200", "--no-compile", logdir="eager") == 0


def test_existing_run_is_not_overwritten_without_resume(tmp_path, train_agent):
    args = ["--env", "Pendulum-v1", "--steps", "200", "--eval-every", "200",
            "--eval-episodes", "1", "--logdir", "out", *SMALL_NET]  # fmt: skip
    assert train_agent(*args, cwd=tmp_path).returncode == 0
    again = train_agent(*args, cwd=tmp_path)
    assert again.returncode == 2
    assert "already holds a run; pass --resume" in again.stderr
    done = train_agent(*args, "--resume", cwd=tmp_path)
    assert done.returncode == 0 and "already complete" in done.stdout


def test_killed_run_resumes_without_duplicated_or_missing_points(tmp_path, train_agent):
    args = ["--env", "Pendulum-v1", "--opt", "adam-explore", "--steps", "3000",
            "--eval-every", "500", "--eval-episodes", "1", "--logdir", "out",
            "--set", "checkpoint_every=500", "--set", "log_every=100", *SMALL_NET]  # fmt: skip
    run_dir = tmp_path / "out" / "Pendulum-v1" / "adam-explore" / "seed0"
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    exe = Path(sys.executable).with_name("train_agent")
    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip

    def checkpointed() -> int:  # a run writes its first checkpoint (step 0) as it starts
        if not checkpoint.exists():
            return 0
        return torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"]

    deadline = time.time() + 300
    while checkpointed() < 600 and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let it log past the checkpoint
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"]
    assert 600 <= killed_at < 3000 and killed_at % 200 == 0  # at an episode end

    resumed = train_agent(*args, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    eval_steps = list(range(500, 3001, 500))
    assert [r["step"] for r in read_eval_csv(run_dir / "eval.csv")] == eval_steps
    steps = scalars(run_dir)
    assert steps["eval/mean_return"] == eval_steps
    assert steps["loss/critic"] == list(range(100, 3001, 100))
    assert steps["train/episode_return"] == list(range(200, 3001, 200))


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_writes_a_final_checkpoint(tmp_path):
    args = ["--env", "Pendulum-v1", "--steps", "100000", "--eval-every", "50000",
            "--logdir", "out", *SMALL_NET]  # fmt: skip
    exe = Path(sys.executable).with_name("train_agent")
    # Ctrl-C's default action even when the tests run as a background job, which starts
    # with SIGINT ignored (a shell without job control does that) and passes it on.
    proc = subprocess.Popen([str(exe), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # fmt: skip
    # Interrupt once training runs, however long the start takes on a loaded machine: the
    # event file is created just before the training loop, which then runs for minutes.
    run_dir = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0"
    deadline = time.monotonic() + 120
    while not list(run_dir.glob("events.out.tfevents.*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    resume = shlex.join([str(exe), *args, "--resume"]).replace(str(exe), "train_agent", 1)
    assert stderr.strip().splitlines()[-1] == (
        f"train_agent: stopped (interrupted), checkpoint written; to continue: {resume}"
    )
    checkpoint = run_dir / "checkpoints" / "latest.pt"
    assert torch.load(checkpoint, weights_only=True)["counters"]["num_timesteps"] > 0


BAD_INPUT = {
    "unknown env": (["--env", "NoSuchEnv-v0"], "unknown environment 'NoSuchEnv-v0'"),
    "discrete actions": (["--env", "CartPole-v1"], "Discrete action space; DDPG needs"),
    "unknown strategy": (
        ["--opt", "adamw"],
        "unknown strategy adamw (did you mean vadam?); valid: sgd-plain",
    ),
    "unknown --set key": (
        ["--set", "batchsize=3"],
        "unknown config key(s) in --set: batchsize (did",
    ),
    "bad --set syntax": (["--set", "batch_size"], "--set expects key=value"),
    "zero steps": (["--steps", "0"], "total_steps must be > 0"),
    "negative eval": (["--eval-every", "-5"], "eval_every must be > 0"),
    "bad hyperparameter": (["--set", "optimizer_kwargs.lr=-1"], "lr must be a finite number > 0"),
    "unknown hyperparameter": (["--set", "optimizer_kwargs.beta=1"], "unknown hyperparameter"),
    "missing config": (["--config", "nope.yaml"], "cannot read config file nope.yaml"),
    "broken yaml": (
        ["--config", "broken.yaml"],
        "cannot parse config file broken.yaml (line 3): expected",
    ),
    "config not a mapping": (["--config", "list.yaml"], "must hold a mapping"),
    "unknown key in file": (["--config", "typo.yaml"], "unknown config key(s) in typo.yaml: gama"),
    "wrong type": (["--set", "batch_size=many"], "batch_size must be an integer, got 'many'"),
    "action noise on a weight strategy": (
        ["--set", "action_noise.sigma=0.3"],
        "unknown action_noise setting(s) sigma for 'vadam'; it adds no action noise",
    ),
    "bad action noise": (
        ["--opt", "ou-action", "--set", "action_noise.sigma=-1"],
        "sigma must be a finite number >= 0",
    ),
    "compile on the sb3 engine": (
        ["--engine", "sb3", "--compile"],
        "compile applies to the native engine only",
    ),
    "noisy-kfac interval": (
        ["--opt", "noisy-kfac", "--set", "optimizer_kwargs.stats_interval=0"],
        "stats_interval must be an integer >= 1",
    ),
}


def bad_input(tmp_path: Path, case: str) -> tuple[list[str], str]:
    (tmp_path / "broken.yaml").write_text("seed: 1\nbatch_size: [64\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "typo.yaml").write_text("gama: 0.9\n")
    args, message = BAD_INPUT[case]
    # --steps 1 first, so that a case that wrongly passes validation ends quickly (updates
    # from the first step: a run that never trains is refused).
    return ["--steps", "1", "--set", "learning_starts=0", *args], message


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_gives_one_clear_line(tmp_path, case, train_agent):
    args, message = bad_input(tmp_path, case)
    assert message in error_line(train_agent(*args, cwd=tmp_path))
    assert not (tmp_path / "runs").exists()  # nothing was started


@pytest.mark.parametrize("case", ["unknown env", "broken yaml", "noisy-kfac interval"])
def test_the_console_script_ends_bad_input_with_one_line_and_exit_code_2(tmp_path, case):
    """As the user sees it: one line on stderr, no traceback, exit code 2 — for an error
    found while parsing, while resolving the config, and while building the run."""
    args, message = bad_input(tmp_path, case)
    assert message in error_line(train_agent_process(*args, cwd=tmp_path))
    assert not (tmp_path / "runs").exists()


def test_progress_bar_on_a_terminal(tmp_path):
    """On a terminal (a pseudo-terminal here) stderr shows a bar with steps/s and eval."""
    code, text, stdout, _ = train_agent_on_terminal(
        "--env", "Pendulum-v1", "--steps", "600", "--eval-every", "200", "--eval-episodes", "1",
        "--logdir", "out", "--set", "log_every=100", *SMALL_NET, cwd=tmp_path,
    )  # fmt: skip
    assert code == 0
    assert "600/600" in text and "steps/s=" in text and "eval=" in text
    assert "step 200: eval return" in stdout  # evaluation lines go above the bar


# ------------------------------------------------- list flags, a short run's schedule
@pytest.mark.parametrize(
    "lists",
    [["--opt", "vadam", "adam-plain", "--seeds", "0", "3"],
     ["--opt", "vadam,adam-plain", "--seeds", "0,3"],
     ["--opt", "vadam", "adam-plain", "--seeds", "0,3"]],
    ids=["words", "commas", "both"],
)  # fmt: skip
def test_list_flags_take_words_as_well_as_commas(lists, tmp_path, train_agent):
    """``--opt a b`` (argparse's own convention, as users bring it) names the same grid
    as ``--opt a,b``; so do ``--seeds 0 3`` and ``--seeds 0,3``."""
    result = train_agent("--env", "Pendulum-v1", *lists, "--logdir", "out", "--check",
                         cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    checked = [line.split(":")[0] for line in result.stdout.splitlines() if "checked" in line]
    assert checked == [f"out/Pendulum-v1/{opt}/seed{seed}"
                       for seed in (0, 3) for opt in ("vadam", "adam-plain")]  # fmt: skip


def test_seeds_as_one_word_is_a_count(tmp_path, train_agent):
    result = train_agent("--env", "Pendulum-v1", "--seeds", "3", "--check", cwd=tmp_path)
    assert result.stdout.count("settings checked") == 3, result.stderr
    line = error_line(train_agent("--env", "Pendulum-v1", "--seeds", "1", "x", cwd=tmp_path))
    assert "--seeds expects a count or a list of integers, got '1 x'" in line


def test_steps_without_eval_every_gives_a_curve_and_says_so(tmp_path, train_agent):
    """``--steps 400`` alone: 10 evaluations (every 40 steps, the preset's 10 000 being
    for 3 M), said in one line; extending the run with ``--resume`` keeps its schedule."""
    args = ["--env", "Pendulum-v1", "--eval-episodes", "1", "--logdir", "out", "--no-progress",
            "--set", "learning_starts=50", *SMALL_NET]  # fmt: skip
    run = train_agent(*args, "--steps", "400", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    note = "--steps 400 without --eval-every: an evaluation every 40 steps, 10 in all"
    assert run.stdout.count(note) == 1, run.stdout
    eval_csv = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0" / "eval.csv"
    assert [row["step"] for row in read_eval_csv(eval_csv)] == list(range(40, 401, 40))
    more = train_agent(*args, "--steps", "600", "--resume", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert "without --eval-every" not in more.stdout
    assert [row["step"] for row in read_eval_csv(eval_csv)] == list(range(40, 601, 40))


@pytest.mark.parametrize(
    ("flags", "options", "every"),
    [({}, [], 10_000),  # the paper's setting
     ({"total_steps": 3_000_000}, [], 10_000),
     ({"total_steps": 100_000}, [], 10_000),  # the studies' runs: 10 points already
     ({"total_steps": 50_000}, [], 5_000),
     ({"total_steps": 3_000}, [], 300),
     ({"total_steps": 3_000, "eval_every": 1_000}, [], 1_000),
     ({"total_steps": 3_000}, ["eval_every=1500"], 1_500)],
)  # fmt: skip
def test_a_short_run_schedule_only_where_nothing_sets_one(flags, options, every):
    from agents.settings.resolve import resolve_runs

    (run,) = resolve_runs(["vadam"], [0], None, options, env="Pendulum-v1", **flags)
    assert run.eval_every == every
