"""The members' bookkeeping as rows (agents/ddpg/member_rows.py) and the host work of a step.

What is checked: a member's counters are its row of its stack's (read and written through
its front, kept across a regroup); a population's callbacks are called only at the steps
they name and a run then writes what it writes when called every step; and the Python work
of a population's step does not grow with its members (function calls counted, not timed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agents.common.callbacks import Callback
from agents.ddpg.member_rows import MemberRows
from agents.ddpg.population import make_population
from agents.runs.callback import RunCallback
from agents.runs.population_run import train_population
from agents.settings import DDPGSettings
from agents.settings.resolve import resolve_runs

from conftest import python_calls

SMALL = dict(hidden_sizes=[8, 8], batch_size=8, learning_starts=16, buffer_size=300)


def test_a_members_counters_are_its_row():
    population = make_population(
        "Pendulum-v1", [DDPGSettings.from_values(SMALL)] * 3, [0, 1, 2], "cpu"
    )
    rows = population.rows
    first, second, third = population.members
    second.num_timesteps, third.num_updates = 40, 7
    assert rows.timesteps.tolist() == [0, 40, 0] and rows.updates.tolist() == [0, 0, 7]
    rows.episodes[0] = 5
    assert first.num_episodes == 5 and isinstance(first.num_episodes, int)
    assert all(m.between_episodes for m in population.members)
    regrouped = population.state.regrouped([2, 1])
    assert regrouped.rows.timesteps.tolist() == [0, 40]
    assert third.num_updates == 7 and second.num_timesteps == 40  # their new rows
    third.num_updates = 8
    assert regrouped.rows.updates.tolist() == [8, 0] and rows.updates[2] == 7


def test_rows_count_steps_and_episodes_for_the_members_given():
    rows = MemberRows(3)
    rows.start_episodes(np.array([True, True, False]))
    rows.count_step(np.array([True, True, False]), np.array([1.5, -2.0, 9.0]))
    rows.count_step(np.array([True, False, False]), np.array([0.25, 7.0, 9.0]))
    rows.end_episodes(np.array([True, False, False]))
    assert rows.timesteps.tolist() == [2, 1, 0]
    assert rows.episode_return.tolist() == [1.75, -2.0, 0.0]
    assert rows.episode_length.tolist() == [2, 1, 0]
    assert rows.episodes.tolist() == [1, 0, 0]
    assert rows.between_episodes.tolist() == [True, False, True]


def configs(logdir: Path) -> list:
    """Three Pendulum members (200-step episodes) whose checkpoints (every 150 steps) wait
    for an episode's end, with logs, evaluations and skip windows at other periods."""
    return resolve_runs(
        ["vadam"], [0, 1, 2], env="Pendulum-v1", total_steps=450, eval_every=200,
        eval_episodes=1, logdir=str(logdir), compile=False,
        set_options=["hidden_sizes=[8,8]", "learning_starts=32", "log_every=50",
                     "checkpoint_every=150", "skipped_window=70"],
    )  # fmt: skip


@pytest.mark.trains
def test_callbacks_called_at_their_boundaries_write_what_every_step_calls_write(
    tmp_path, monkeypatch
):
    """A population whose run callbacks are called only at the steps they name writes the
    same runs — evaluations, logged scalars, checkpoints (at the episode's end they waited
    for) — as one whose callbacks are called after every step, in far fewer calls."""
    calls = {"boundaries": 0, "every step": 0}
    on_step = RunCallback.on_step

    def counted(key):
        def call(self, agent):
            calls[key] += 1
            return on_step(self, agent)

        return call

    monkeypatch.setattr(RunCallback, "on_step", counted("boundaries"))
    scheduled = train_population(configs(tmp_path / "boundaries"))
    monkeypatch.setattr(RunCallback, "on_step", counted("every step"))
    monkeypatch.setattr(RunCallback, "next_call", Callback.next_call)
    every = train_population(configs(tmp_path / "every"))
    assert all(o.error is None for o in [*scheduled, *every])
    assert calls["every step"] == 3 * 450
    assert calls["boundaries"] < calls["every step"] / 4
    for a, b in zip(scheduled, every, strict=True):
        rows = [(a.run_dir / name).read_text() for name in ("explore.csv",)]
        assert rows == [(b.run_dir / name).read_text() for name in ("explore.csv",)]
        evals = [line.split(",")[:3] for line in (a.run_dir / "eval.csv").read_text().split()]
        assert evals == [
            line.split(",")[:3] for line in (b.run_dir / "eval.csv").read_text().split()
        ]
        saved = [torch.load(r.run_dir / "checkpoints/latest.pt", weights_only=True)
                 for r in (a, b)]  # fmt: skip
        assert saved[0]["counters"] == saved[1]["counters"]
        for name, value in saved[0]["actor"].items():
            assert torch.equal(value, saved[1]["actor"][name]), name


class Boundaries(Callback):
    """A callback with work only every 1 000 steps."""

    def next_call(self, agent) -> tuple[int, bool]:
        return (agent.num_timesteps // 1000 + 1) * 1000, False


def python_calls_per_step(members: int, steps: int = 60) -> float:
    """Python function calls of ``steps`` steps of a warm population (built, acting and
    updating already), per step."""
    population = make_population(
        "SparseMountainCar-v0", [DDPGSettings.from_values(SMALL)] * members,
        list(range(members)), "cpu",
    )  # fmt: skip
    callbacks = [Boundaries() for _ in range(members)]
    population.learn(40, callbacks)  # past learning_starts: every phase has run
    return python_calls(lambda: population.learn(steps, callbacks)) / steps


def test_a_populations_host_work_per_step_does_not_grow_with_its_members():
    """No Python loop over the members in a step or an update: 40 members make the calls 2
    make (numbers of calls, not time: the same on any machine; before the rows, 25e1472
    made 1 594 a step with 2 members and 5 205 with 40, ~95 more per member)."""
    few, many = python_calls_per_step(2), python_calls_per_step(40)
    assert many <= few * 1.05 + 5, (few, many)
