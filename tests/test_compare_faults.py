"""``compare_runs`` on damaged, mixed or partial run directories, through its CLI with real
files: one ``compare_runs: error:`` line naming the file (exit 2), or a note on what was
dropped, never a silent average of what does not belong together."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from agents.reporting.compare import main
from agents.runs.run_logger import EVAL_FIELDS

REPS = ["--reps", "50"]


def write_seed(
    env_dir: Path,
    strategy: str,
    seed: int,
    values: dict[int, float],
    env: str | None = None,
    success: dict[int, float] | None = None,
) -> Path:
    """``eval.csv`` (and ``config.yaml`` naming ``env``) of one run, as training writes them."""
    seed_dir = env_dir / strategy / f"seed{seed}"
    seed_dir.mkdir(parents=True)
    fields = EVAL_FIELDS + (["success_rate"] if success else [])
    with open(seed_dir / "eval.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for step, value in values.items():
            row = dict(step=step, mean_return=value, std_return=1.0, episodes=5, wall_time=0.0)
            if success:
                row["success_rate"] = success[step]
            writer.writerow(row)
    if env is not None:
        (seed_dir / "config.yaml").write_text(yaml.safe_dump({"env": env, "seed": seed}))
    return seed_dir


def two_seeds(env_dir: Path, strategy: str, offset: float = 0.0, env: str | None = None):
    for seed in (0, 1):
        write_seed(env_dir, strategy, seed, {100: offset + seed, 200: offset + 10 + seed}, env)


def error_line(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compare_runs: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    "damage",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe garbage \x00\x01",  # binary
        b"step,mean_return,std_return,episodes,wall_time\n100,1.0,1.0,5,0.0\n200,2.",  # cut short
        b"step,mean_return,std_return,episodes,wall_time\n100,abc,1.0,5,0.0\n",  # not a number
    ],
    ids=["binary", "truncated", "not-a-number"],
)
def test_a_damaged_eval_csv_is_named_in_one_line(tmp_path, capsys, damage):
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    (env_dir / "vadam" / "seed1" / "eval.csv").write_bytes(damage)
    line = error_line(capsys, [str(env_dir), *REPS])
    assert str(env_dir / "vadam" / "seed1" / "eval.csv") in line


def test_a_damaged_config_yaml_is_named_in_one_line(tmp_path, capsys):
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam", env="Pendulum-v1")
    (env_dir / "vadam" / "seed0" / "config.yaml").write_bytes(b"\xff\xfe\x00garbage: [")
    line = error_line(capsys, [str(env_dir), *REPS])
    assert str(env_dir / "vadam" / "seed0" / "config.yaml") in line


@pytest.mark.parametrize("kind", ["deep", "endless", "laughs"])
def test_a_config_yaml_beyond_any_config_is_refused_in_one_line(tmp_path, capsys, kind):
    """A shared runs directory's config.yaml is read within the bounds of a --config file
    (agents.common.bounded_yaml): never read forever, never a RecursionError."""
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam", env="Pendulum-v1")
    path = env_dir / "vadam" / "seed1" / "config.yaml"
    path.unlink()
    if kind == "endless":
        path.symlink_to("/dev/zero")
    elif kind == "deep":
        path.write_text("env: Pendulum-v1\nseed: " + "[" * 5000 + "]" * 5000 + "\n")
    else:
        levels = [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
        path.write_text("env: Pendulum-v1\nl0: &l0 [lol, lol]\n" + "\n".join(levels) + "\n")
    line = error_line(capsys, [str(env_dir), "--out", str(tmp_path / "report"), *REPS])
    assert f"cannot parse {path}: " in line, line
    assert not (tmp_path / "report").exists()


def test_out_pointing_at_a_file(tmp_path, capsys):
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    target = tmp_path / "report.txt"
    target.write_text("mine")
    line = error_line(capsys, [str(env_dir), "--out", str(target), *REPS])
    assert "is a file" in line and target.read_text() == "mine"


def test_a_duplicated_step_is_refused_not_overwritten(tmp_path, capsys):
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    path = env_dir / "vadam" / "seed0" / "eval.csv"
    with open(path, "a") as f:
        f.write("200,999.0,1.0,5,0.0\n")  # a second writer's row for step 200
    line = error_line(capsys, [str(env_dir), *REPS])
    assert str(path) in line and "step 200 twice" in line


def test_seeds_of_different_envs_are_never_averaged(tmp_path, capsys):
    env_dir = tmp_path / "runs"
    write_seed(env_dir, "vadam", 0, {100: 1.0}, env="Pendulum-v1")
    write_seed(env_dir, "vadam", 1, {100: -300.0}, env="HalfCheetah-v4")
    line = error_line(capsys, [str(env_dir), *REPS])
    assert "2 envs" in line and "HalfCheetah-v4: seed1" in line and "Pendulum-v1: seed0" in line


def test_what_is_dropped_is_said(tmp_path, capsys):
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    write_seed(env_dir, "vadam", 2, {})  # header only: no evaluation yet
    write_seed(env_dir, "adam-plain", 0, {100: 1.0, 200: 2.0})
    write_seed(env_dir, "adam-plain", 1, {300: 1.0, 400: 2.0})  # no step in common
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    err = capsys.readouterr().err
    assert f"dropped {env_dir / 'vadam' / 'seed2'}: its eval.csv holds no evaluation" in err
    assert f"dropped {env_dir / 'adam-plain'}: its seeds share no evaluation step" in err
    with open(out / "comparison.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert row["strategy"] == "vadam" and row["seeds"] == "2"


def test_the_reference_is_shown_beside_its_own_env_only(tmp_path, capsys):
    pendulum = tmp_path / "a" / "Pendulum-v1"
    two_seeds(pendulum, "vadam", env="Pendulum-v1")
    line = error_line(capsys, [str(pendulum), "--reference", "khan2018", *REPS])
    assert "HalfCheetah-v4 or HalfCheetah-v5 only" in line and "Pendulum-v1" in line

    cheetah = tmp_path / "b" / "HalfCheetah-v4"
    two_seeds(cheetah, "vadam", offset=500.0, env="HalfCheetah-v4")
    out = tmp_path / "report"
    assert main([str(pendulum), str(cheetah), "--reference", "khan2018:1", "--out", str(out),
                 *REPS]) == 0  # fmt: skip
    assert (
        "khan2018 is shown beside HalfCheetah-v4 only, not Pendulum-v1" in capsys.readouterr().err
    )
    with open(out / "comparison.csv", newline="") as f:
        rows = {row["env"]: row for row in csv.DictReader(f)}
    assert rows["Pendulum-v1"]["run1_auc_mean"] == ""
    assert rows["HalfCheetah-v4"]["run1_auc_mean"] != ""


def test_tasks_are_envs_normalised_across(tmp_path):
    """Two RUNS_DIRs of two envs: two tasks; scores across them normalised (HalfCheetah by
    D4RL's reference returns, a sparse task by its success rate)."""
    cheetah = tmp_path / "HalfCheetah-v4"
    sparse = tmp_path / "SparseTask-v0"
    for strategy, offset in (("vadam", 1000.0), ("adam-plain", 0.0)):
        two_seeds(cheetah, strategy, offset, env="HalfCheetah-v4")
        for seed in (0, 1):
            rates = {100: 0.0, 200: 0.5 + 0.25 * seed if strategy == "vadam" else 0.25}
            write_seed(sparse, strategy, seed, {100: 0.0, 200: 3.0}, "SparseTask-v0", rates)
    out = tmp_path / "report"
    assert main([str(cheetah), str(sparse), "--out", str(out), *REPS]) == 0
    with open(out / "intervals.csv", newline="") as f:
        rows = {(r["scope"], r["method"], r["score"], r["statistic"]): r for r in csv.DictReader(f)}
    assert rows["SparseTask-v0", "vadam", "final", "mean"]["unit"] == "success rate"
    assert float(rows["SparseTask-v0", "vadam", "final", "mean"]["point"]) == pytest.approx(0.625)
    cheetah_finals = (np.array([1010.0, 1011.0]) + 280.178953) / (12135.0 + 280.178953)
    across = rows["across tasks", "vadam", "final", "mean"]
    assert float(across["point"]) == pytest.approx((cheetah_finals.mean() + 0.625) / 2)
    assert across["runs"] == "4"
    gap = rows["across tasks", "vadam", "final", "optimality_gap"]
    assert float(gap["point"]) == pytest.approx(1 - (cheetah_finals.mean() + 0.625) / 2)
    assert "| strategy | env | seeds |" in (out / "comparison.md").read_text()


# --------------------------------------------------------------------------- outputs
@pytest.fixture
def mount_point(tmp_path):
    """``mount(options)``: a directory with a file system of its own mounted there (root
    only; unmounted after the test)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    mounted: list[Path] = []

    def mount(*args: str) -> Path:
        path = tmp_path / f"mount{len(mounted)}"
        path.mkdir(exist_ok=True)
        done = subprocess.run(["mount", *args, str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount here: {done.stderr.decode().strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", str(path)], check=True)


def test_reps_have_a_ceiling_and_a_failed_comparison_writes_nothing(tmp_path, capsys, request):
    """--reps 10**12 asked rliable for 29 TiB (a traceback), after comparison.csv was
    written; a disk filling up mid-way left half a report beside the earlier one."""
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam")
    out = tmp_path / "report"
    line = error_line(capsys, [str(env_dir), "--out", str(out), "--reps", str(10**12)])
    assert f"--reps must be between 1 and 100000, got {10**12}" in line, line
    assert not out.exists()

    full = request.getfixturevalue("mount_point")("-t", "tmpfs", "-o", "size=64k", "tmpfs")
    (full / "comparison.md").write_text("an earlier comparison\n")
    line = error_line(capsys, [str(env_dir), "--out", str(full), *REPS])
    assert "no space left on device" in line.lower(), line
    assert [p.name for p in full.iterdir()] == ["comparison.md"]
    assert (full / "comparison.md").read_text() == "an earlier comparison\n"


def test_one_seed_has_no_interval_and_says_so(tmp_path, capsys):
    """One run resampled is that run every time: its "95 % interval" had zero width, and
    P(X > Y) between two one-seed methods read 1.00 [1.00, 1.00]."""
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam", offset=100.0)
    write_seed(env_dir, "adam-plain", 0, {100: 1.0, 200: 2.0})
    write_seed(env_dir, "param-noise", 0, {100: 0.0, 200: 1.0})
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    err = capsys.readouterr().err
    assert (
        "compare_runs: note: Pendulum-v1: adam-plain and param-noise have one seed: no "
        "standard error and no 95 % interval, of their scores or of P(X > Y) with them" in err
    )
    with open(out / "intervals.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["scope"] == "Pendulum-v1"]
    for row in rows:
        one = row["method"] != "vadam"
        assert (row["lower"] == row["upper"] == "") == one, row
    with open(out / "probability_of_improvement.csv", newline="") as f:
        pairs = {(r["x"], r["y"]): r for r in csv.DictReader(f) if r["score"] == "final"}
    assert pairs["adam-plain", "param-noise"]["p_x_above_y"] == "1.0"
    assert all(pair["lower"] == pair["upper"] == "" for pair in pairs.values())
    with open(out / "comparison.csv", newline="") as f:
        table = {r["strategy"]: r for r in csv.DictReader(f)}
    assert table["adam-plain"]["final_se"] == "" and table["vadam"]["final_se"] == "0.5"
    report = (out / "comparison.md").read_text()
    assert "| adam-plain | 1 | 2.00 (one seed) |" in report
    assert "| adam-plain | 1 | 2 (no interval: one seed) |" in report
    assert "| adam-plain | – | 1.00 (no interval) |" in report
    assert "[1.00, 1.00]" not in report


def test_runs_of_different_lengths_are_compared_at_a_common_step(tmp_path, capsys):
    """P(X > Y) compared each method at its own last step: runs trained longer won."""
    env_dir = tmp_path / "Pendulum-v1"
    two_seeds(env_dir, "vadam", offset=10.0)  # 10, 11 at step 100; 20, 21 at 200
    for seed in (0, 1):
        write_seed(env_dir, "adam-plain", seed, {100: seed, 200: 1.0 + seed, 300: 30.0 + seed})
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    assert (
        "compare_runs: note: Pendulum-v1: the interval estimates and P(X > Y) compare every "
        "method at 0.2 k, the last step all reached (adam-plain ran to 0.3 k)"
    ) in capsys.readouterr().err
    with open(out / "probability_of_improvement.csv", newline="") as f:
        pairs = {(r["scope"], r["score"], r["x"], r["y"]): r for r in csv.DictReader(f)}
    for score in ("final", "auc"):
        assert float(pairs["Pendulum-v1", score, "vadam", "adam-plain"]["p_x_above_y"]) == 1.0
    with open(out / "intervals.csv", newline="") as f:
        rows = {(r["scope"], r["method"], r["score"], r["statistic"]): r for r in csv.DictReader(f)}
    assert float(rows["Pendulum-v1", "adam-plain", "final", "mean"]["point"]) == 1.5


def test_a_read_only_runs_dir_is_compared_and_what_was_skipped_is_said(
    tmp_path, capsys, mount_point
):
    """A read-only RUNS_DIR with a writable --out wrote the whole report, then exit 2 on
    the TensorBoard aggregates it writes into each RUNS_DIR."""
    source = tmp_path / "runs"
    two_seeds(source / "Pendulum-v1", "vadam", env="Pendulum-v1")
    runs = mount_point("--bind", "-o", "ro", str(source))
    subprocess.run(["mount", "-o", "remount,bind,ro", str(runs)], check=True)
    env_dir = runs / "Pendulum-v1"
    out = tmp_path / "report"
    assert main([str(env_dir), "--out", str(out), *REPS]) == 0
    captured = capsys.readouterr()
    assert (
        f"compare_runs: note: {env_dir} is not writable, so its TensorBoard strategy "
        "aggregates (compare/) were not written" in captured.err
    ), captured.err
    assert "wrote strategy aggregates" not in captured.out
    assert (out / "comparison.md").exists() and not (env_dir / "compare").exists()
