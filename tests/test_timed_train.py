"""``benchmarks/timed_train.py`` reads a population's figures off the lines it prints — as
:func:`~agents.runs.callback.start_line` and :class:`~agents.runs.population_lines.
PopulationLines` write them — so a change of their form that the benchmark would no longer
read fails here, not on a lent GPU's time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agents.runs.callback import start_line
from agents.runs.population_lines import PopulationLines
from agents.settings.resolve import resolve_runs

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "timed_train.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("timed_train", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_populations_lines_give_its_first_step_and_its_steady_state(tmp_path):
    timed_train = load_benchmark()
    configs = resolve_runs(
        ["vadam"], [0, 1, 2], env="HalfCheetah-v4", total_steps=3000, logdir=str(tmp_path)
    )
    names = [str(config.run_dir()) for config in configs]
    written: list[str] = []
    lines = PopulationLines(configs, names)
    lines.writes_with(written.append)
    lines.started(start_line(configs[0], 0))
    lines.status(500, 3000, 40.0)
    # the first member's line at the first update (RunCallback's, with its compile)
    written.append(f"{names[0]} step 65: the first update took 12.5 s with its compile")
    lines.status(1000, 3000, 45.0)
    for k in range(3):
        lines.evaluated(1000, -1.0 - k, None, 0.01)
    lines.status(1500, 3000, 50.0)  # with the last evaluation
    lines.status(2500, 3000, 60.0)
    stamped = [(1.0 + k, line) for k, line in enumerate(written)]

    found = timed_train.figures(stamped)

    assert (found["members"], found["steps"]) == (3, 3000)
    assert (found["to_start_s"], found["to_first_status_s"]) == (1.0, 2.0)
    assert (found["first_update_step"], found["first_update_s"]) == (65, 12.5)
    assert [s["step"] for s in found["status"]] == [500, 1000, 1500, 2500]
    assert [s["seed_steps_per_s"] for s in found["status"]] == [120, 135, 150, 180]
    # measured from a log 1 000 steps past the first update or later: 1 500 and 2 500
    assert found["steady_seed_steps_per_s"] == 165
    assert found["last_seed_steps_per_s"] == 180
