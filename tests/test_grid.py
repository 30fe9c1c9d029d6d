"""Grids of runs (local processes and Ray) and ``compare_runs`` on their output."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
import torch
from rliable import library as rly
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2

from agents import cli
from agents.common.errors import ConfigError, RunDirectoryError
from agents.reporting.compare import main as compare_runs
from agents.runs.grid import run_grid, single_run_threads, threads_per_worker
from agents.settings import RunSettings, resolve_settings

SMALL = ["--env", "Pendulum-v1", "--steps", "400", "--eval-every", "200",
         "--eval-episodes", "1", "--set", "hidden_sizes=[32,32]", "--no-compile"]  # fmt: skip


def script(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def eval_rows(path: Path) -> dict[int, float]:
    with open(path, newline="") as f:
        return {int(r["step"]): float(r["mean_return"]) for r in csv.DictReader(f)}


def test_local_grid_then_compare_runs(tmp_path):
    result = subprocess.run(
        [script("train_agent"), *SMALL, "--opt", "vadam,adam-plain", "--seeds", "2",
         "--workers", "2", "--logdir", "out", "--set", "log_every=100"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "4 of 4 runs finished, 0 failed" in result.stdout
    # The suite's OMP_NUM_THREADS=1 (conftest) caps each worker's share of the cores.
    assert "2 worker(s) with 1 torch thread(s) each" in result.stdout
    env_dir = tmp_path / "out" / "Pendulum-v1"
    for opt in ("vadam", "adam-plain"):
        for seed in (0, 1):
            run_dir = env_dir / opt / f"seed{seed}"
            assert list(eval_rows(run_dir / "eval.csv")) == [200, 400]
            assert (run_dir / "checkpoints" / "latest.pt").exists()
            assert (run_dir / "config.yaml").exists()

    # The comparison layout for TensorBoard's Custom Scalars tab, once per env directory
    # (the grid's end rewrote it with the strategies' margin charts).
    layouts = list(env_dir.glob("events.out.tfevents.*.layout"))
    assert len(layouts) == 1
    acc = EventAccumulator(str(env_dir))
    acc.Reload()
    charts = acc.PluginTagToContent("custom_scalars")
    assert charts  # the layout summary is there

    out = tmp_path / "report"
    compared = subprocess.run(
        [script("compare_runs"), str(env_dir), "--out", str(out), "--at", "200"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    image = matplotlib.image.imread(out / "comparison.png")
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300

    with open(out / "comparison.csv", newline="") as f:
        table = {row["strategy"]: row for row in csv.DictReader(f)}
    assert set(table) == {"vadam", "adam-plain"}
    for opt, row in table.items():
        curves = [eval_rows(env_dir / opt / f"seed{s}" / "eval.csv") for s in (0, 1)]
        finals = np.array([c[400] for c in curves])
        assert int(row["seeds"]) == 2
        assert float(row["final_mean"]) == pytest.approx(finals.mean())
        se = np.std(finals, ddof=1) / math.sqrt(2)
        assert float(row["final_se"]) == pytest.approx(se)
        firsts = np.array([c[200] for c in curves])
        assert float(row["at_200_mean"]) == pytest.approx(firsts.mean())
        best = max(firsts.mean(), finals.mean())
        assert float(row["best_mean"]) == pytest.approx(best)
        auc = ((firsts + finals) / 2).mean()  # two points: the average of the endpoints
        assert float(row["auc_mean"]) == pytest.approx(auc)
    markdown = (out / "comparison.md").read_text()
    assert "| vadam | 2 |" in markdown and "| adam-plain | 2 |" in markdown
    check_strategy_aggregates(env_dir, "ci")

    # compare_runs again: the aggregates are replaced, no step appears twice.
    code = compare_runs([str(env_dir), "--out", str(out), "--band", "se", "--reps", "50"])
    assert code == 0  # its main(), in this process
    check_strategy_aggregates(env_dir, "se")


def ci_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """rliable called directly: the 95 % stratified-bootstrap interval of the mean at each
    step (steps as strata), 2000 replicates, NumPy's global generator seeded with 0."""
    state = np.random.get_state()
    np.random.seed(0)
    _, intervals = rly.get_interval_estimates(
        {"curve": values}, lambda x: x.mean(axis=0), reps=2000
    )
    np.random.set_state(state)
    return intervals["curve"][0], intervals["curve"][1]


def check_strategy_aggregates(env_dir: Path, band: str) -> None:
    """Per strategy: the mean over seeds and its band (``ci``: rliable's bootstrap interval
    called directly; ``se``: ± s.e. by NumPy) as TensorBoard reads it, on the runs'
    eval.csv (and on their σ events: as is, and as % change since the first record, for
    vadam; adam-plain has no weight noise and no σ); the layout's margin charts use those
    tags, and their titles name the strategy and the band. The means share one tag across
    strategies (one chart of all of them, lines only); each band is under its strategy's
    name."""
    for opt in ("vadam", "adam-plain"):
        acc = EventAccumulator(str(env_dir / "compare" / opt), size_guidance={"scalars": 0})
        acc.Reload()
        curves = [eval_rows(env_dir / opt / f"seed{s}" / "eval.csv") for s in (0, 1)]
        returns = np.array([[c[200], c[400]] for c in curves])
        sigmas = []
        for s in (0, 1):
            run = EventAccumulator(str(env_dir / opt / f"seed{s}"), size_guidance={"scalars": 0})
            run.Reload()
            if "explore/sigma_mean" in run.Tags()["scalars"]:
                sigmas.append({e.step: e.value for e in run.Scalars("explore/sigma_mean")})
        series = [("eval_return", returns, [200, 400])]
        if opt == "adam-plain":
            assert not sigmas
            assert not [tag for tag in acc.Tags()["scalars"] if "sigma" in tag]
        else:
            sigma_steps = sorted(set(sigmas[0]) & set(sigmas[1]))
            sigma = np.array([[seed[t] for t in sigma_steps] for seed in sigmas])
            change = 100 * (sigma / sigma[:, :1] - 1)
            series += [("sigma_mean", sigma, sigma_steps), ("sigma_change", change, sigma_steps)]
        for name, values, steps in series:
            mean = values.mean(axis=0)
            se = values.std(axis=0, ddof=1) / math.sqrt(2)
            lower, upper = ci_band(values) if band == "ci" else (mean - se, mean + se)
            expected = {f"strategy/{name}": mean}
            if name != "sigma_mean":  # σ as is: its mean only
                base = f"strategy_band/{opt}/{name}"
                expected.update({base: mean, f"{base}_lower": lower, f"{base}_upper": upper})
            for tag, values in expected.items():
                events = acc.Scalars(tag)
                assert [e.step for e in events] == steps  # each step once
                np.testing.assert_allclose([e.value for e in events], values, rtol=1e-5,
                                           atol=1e-6)  # fmt: skip
        assert not [t for t in acc.Tags()["scalars"] if t.startswith("strategy/") and
                    t.endswith(("_lower", "_upper"))]  # fmt: skip

    acc = EventAccumulator(str(env_dir))
    acc.Reload()
    (tag,) = acc.PluginTagToContent("custom_scalars")  # the layout, as TensorBoard reads it
    (event,) = acc.Tensors(tag)
    layout = layout_pb2.Layout()
    layout.ParseFromString(event.tensor_proto.string_val[0])
    margins = {chart.title: chart.margin.series[0] for category in layout.category
               for chart in category.chart if chart.HasField("margin")}  # fmt: skip
    triple = lambda base: (base, f"{base}_lower", f"{base}_upper")  # noqa: E731
    assert {(m.value, m.lower, m.upper) for m in margins.values()} == {
        triple("strategy_band/vadam/eval_return"), triple("strategy_band/adam-plain/eval_return"),
        triple("strategy_band/vadam/sigma_change"),
    }  # fmt: skip
    interval = "95 % bootstrap CI" if band == "ci" else "± 1 s.e."
    for title, margin in margins.items():
        assert interval in title
        assert title.startswith(f"{margin.value.split('/')[1]}: ")
    # All strategies' means, lines only: the first chart of each comparison category.
    firsts = [category.chart[0] for category in layout.category
              if category.title.startswith("Compare strategies")]  # fmt: skip
    assert [list(chart.multiline.tag) for chart in firsts] == [
        ["^strategy/eval_return$"], ["^strategy/sigma_change$"]
    ]  # fmt: skip
    assert firsts[0].title.startswith("eval return, all 2 strategies: mean over seeds")


def test_a_worker_trains_one_task_after_another_in_one_process(tmp_path):
    """Three runs of three strategies (three tasks) on one worker: one process trains them
    all (its start paid once), not the grid's driver; each run is complete."""
    result = subprocess.run(
        [script("train_agent"), *SMALL, "--opt", "vadam,adam-plain,fixed-noise",
         "--workers", "1", "--logdir", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "3 of 3 runs finished, 0 failed" in result.stdout
    pids = set()
    for opt in ("vadam", "adam-plain", "fixed-noise"):
        run_dir = tmp_path / "out" / "Pendulum-v1" / opt / "seed0"
        assert list(eval_rows(run_dir / "eval.csv")) == [200, 400]
        (events,) = run_dir.glob("events.out.tfevents.*")
        pids.add(int(events.name.split(".")[-2]))
    assert len(pids) == 1


def test_workers_split_the_cores_and_an_explicit_thread_count_caps_the_share(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert [threads_per_worker(w) for w in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    # Two grids side by side, each told OMP_NUM_THREADS=2, take 2 cores each, not 8.
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert [threads_per_worker(w) for w in (1, 2, 8)] == [2, 2, 1]
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        with pytest.raises(ConfigError, match="OMP_NUM_THREADS"):
            threads_per_worker(1)


def test_a_bad_thread_count_stops_the_grid_with_one_line(tmp_path):
    result = subprocess.run(
        [script("train_agent"), *SMALL, "--opt", "vadam", "--seeds", "2", "--logdir", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "zero"},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "OMP_NUM_THREADS='zero' is not a positive whole number" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_interrupted_grid_completes_without_redoing_finished_runs(tmp_path):
    command = [script("train_agent"), *SMALL, "--opt", "vadam,adam-explore,adam-plain",
               "--workers", "1", "--logdir", "out"]  # fmt: skip
    proc = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    finished = None
    for line in proc.stdout:
        if line.strip().endswith(": ok"):
            finished = Path(line.strip().split(":")[0])
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert finished is not None
    finished_dir = tmp_path / finished
    stamp = {p: p.stat().st_mtime_ns for p in finished_dir.rglob("*") if p.is_file()}

    rerun = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    assert "3 of 3 runs finished, 0 failed" in rerun.stdout
    assert f"{finished}: already complete (400 steps)" in rerun.stdout
    assert stamp == {p: p.stat().st_mtime_ns for p in finished_dir.rglob("*") if p.is_file()}
    for opt in ("vadam", "adam-explore", "adam-plain"):
        rows = eval_rows(tmp_path / "out" / "Pendulum-v1" / opt / "seed0" / "eval.csv")
        assert list(rows) == [200, 400]


def configs(tmp_path: Path, strategies: list[str]) -> list[RunSettings]:
    return [
        resolve_settings(
            strategy=opt,
            set_options=["hidden_sizes=[32,32]"],
            env="Pendulum-v1",
            total_steps=400,
            eval_every=200,
            eval_episodes=1,
            logdir=str(tmp_path / "out"),
            compile=False,
        )
        for opt in strategies
    ]


def test_a_failing_run_does_not_stop_the_others(tmp_path):
    grid = configs(tmp_path, ["vadam", "adam-plain"])
    grid[0] = dataclasses.replace(grid[0], env="NoSuchEnv-v0")  # breaks inside the worker
    outcomes = run_grid(grid, workers=2)
    by_ok = {o.ok: o for o in outcomes}
    assert set(by_ok) == {True, False}
    assert "unknown environment 'NoSuchEnv-v0'" in by_ok[False].message
    assert (tmp_path / "out" / "Pendulum-v1" / "adam-plain" / "seed0" / "eval.csv").exists()


def test_ray_backend_on_a_local_ray_instance(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is the optional 'ray' extra; CI installs it")
    # Ray starts its workers at niceness 15, where beside the suite's other test process
    # (niceness 0) on a 2-core machine they get a sliver of a core: each worker's import of
    # torch took 40-47 s of wall time for 1.7 s of CPU (176 s for the test), 2.5 s at 0.
    monkeypatch.setenv("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcomes = run_grid(configs(tmp_path, ["vadagrad", "sgd-plain"]), 2, backend="ray")
    finally:
        ray.shutdown()
    assert all(o.ok for o in outcomes), outcomes
    for opt in ("vadagrad", "sgd-plain"):
        rows = eval_rows(tmp_path / "out" / "Pendulum-v1" / opt / "seed0" / "eval.csv")
        assert list(rows) == [200, 400]


def test_committed_results_without_checkpoints_count_as_finished(tmp_path, capsys):
    """A study committed with eval.csv and config.yaml only (no checkpoints, no events) is
    complete: re-running its grid in a fresh clone skips it and changes nothing, while
    extending it (no checkpoint to continue from) is refused, and changes nothing either."""
    from agents.runs.train import train

    (config,) = configs(tmp_path, ["adam-plain"])
    run_dir = train(config, progress=False)
    for path in [*run_dir.glob("events.out.tfevents.*"), *run_dir.glob("checkpoints/*")]:
        path.unlink()
    before = (run_dir / "eval.csv").read_bytes()
    capsys.readouterr()
    train(config, resume=True, progress=False)
    assert "already complete (eval.csv reaches the last evaluation)" in capsys.readouterr().out
    assert (run_dir / "eval.csv").read_bytes() == before
    assert not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").iterdir())

    config = dataclasses.replace(config, total_steps=600)  # the last evaluation is missing
    with pytest.raises(RunDirectoryError, match=r"checkpoint .* is missing but the directory"):
        train(config, resume=True, progress=False)
    assert (run_dir / "eval.csv").read_bytes() == before


def test_a_run_of_its_own_takes_one_thread_unless_told(monkeypatch, tmp_path):
    """A single run takes one torch thread (quiet as fast on 2 cores, and degrading least
    beside other work: docs/speed.md), or the threads OMP_NUM_THREADS names."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert single_run_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert single_run_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    with pytest.raises(ConfigError, match="OMP_NUM_THREADS"):
        single_run_threads()
    monkeypatch.delenv("OMP_NUM_THREADS")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        code = cli.main(["--env", "Pendulum-v1", "--steps", "80", "--eval-episodes", "1",
                         "--set", "hidden_sizes=[8,8]", "--set", "learning_starts=32",
                         "--no-compile", "--no-progress", "--logdir", str(tmp_path)])  # fmt: skip
        assert code == 0 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------- each check once per command
def counted(monkeypatch, function) -> list[str]:
    """Every reference the project's modules hold to ``function`` replaced by one that
    records its call (its name) and calls it; the record."""
    import sys as _sys

    calls: list[str] = []

    def counting(*args, **kwargs):
        calls.append(function.__name__)
        return function(*args, **kwargs)

    for name, module in list(_sys.modules.items()):
        if name.split(".")[0] == "agents" and getattr(module, function.__name__, None) is function:
            monkeypatch.setattr(module, function.__name__, counting)
    return calls


@pytest.mark.parametrize("runs", [["--seed", "0"], ["--seeds", "2"]], ids=["single", "grid"])
def test_a_command_checks_its_settings_sharing_and_memory_once(
    runs, tmp_path, train_agent, monkeypatch
):
    """A single run and a grid of two seeds (one population) through ``train_agent``: the
    grid's check, the runs' check on their env, the memory check and the check that runs
    may share a population each run once — in the command's one check, shared with
    ``--check``, or where the runs are built — not again in the grid, its task or the
    stacked build. (The grid's task runs in this process here, as its worker runs it.)"""
    from agents.common import memory_budget
    from agents.runs import agent_factory, grid
    from agents.settings import sharing

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a task sets it for its process
    calls = [
        counted(monkeypatch, check)
        for check in (grid.check_grid, agent_factory.check_runs_env, memory_budget.check_memory,
                      sharing.check_population, sharing.check_members_share)
    ]  # fmt: skip

    def in_this_process(tasks, workers, report, progress, tracking, checked):
        outcomes = [o for t in tasks for o in grid.run_task(t, 1, progress, tracking, checked)]
        for outcome in outcomes:
            report(outcome)
        return outcomes

    monkeypatch.setattr(grid, "_run_local", in_this_process)
    result = train_agent(*SMALL[:2], *runs, "--steps", "100", "--eval-every", "100",
                         "--eval-episodes", "1", "--set", "hidden_sizes=[16,16]", "--no-compile",
                         "--no-progress", "--logdir", "out", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    seeds = 2 if "--seeds" in runs else 1
    assert len(list((tmp_path / "out").rglob("eval.csv"))) == seeds
    made = [name for call in calls for name in call]
    assert sorted(made) == sorted(
        ["check_grid"] * (seeds - 1) + ["check_runs_env", "check_memory", "check_population"]
    )
