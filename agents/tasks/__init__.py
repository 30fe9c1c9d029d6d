"""Sparse-reward tasks where exploration decides the outcome, and what every task reports.

Importing :mod:`agents` registers ``SparseMountainCar-v0``, ``SparseCartpoleSwingup-v0``,
``SparseDoublePendulum-v0`` and ``SparseHalfCheetah-v5`` with gymnasium: the tasks of VIME
(Houthooft et al. 2016, released code ``openai/vime`` ``envs/``) that Plappert et al. 2018
used for parameter noise, on gymnasium's simulators (``docs/decisions.md#sparse-tasks``);
and ``SparseMountainCarRllab-v0``, VIME's mountain car on rllab's own car in Box2D, beside
``SparseMountainCar-v0``'s gymnasium car.
Each reports success as ``info["is_success"]`` and the coverage of its state space through
``pop_coverage()`` (:mod:`agents.tasks.report`); :func:`with_task_report` gives
gymnasium's own ``MountainCarContinuous-v0`` the same reports, its task unchanged.
:data:`COVERAGE` gives every reported task's quantities and goal by id, for reports that
read a run's ``explore.csv`` without making its env.
"""

from __future__ import annotations

import gymnasium as gym

from . import cartpole_swingup, double_pendulum, half_cheetah, mountain_car, rllab_mountain_car
from .mountain_car import MountainCarGoalReport
from .registration import HORIZON, TASKS, register_tasks
from .report import Coverage

#: gymnasium's tasks in the suite, unchanged but for the reports these wrappers add.
REPORTED = {"MountainCarContinuous-v0": MountainCarGoalReport}

#: Every task that reports coverage, by id: its quantities and its goal in their terms.
COVERAGE: dict[str, Coverage] = {
    "SparseMountainCar-v0": mountain_car.COVERAGE,
    "SparseMountainCarRllab-v0": rllab_mountain_car.COVERAGE,
    "MountainCarContinuous-v0": mountain_car.COVERAGE,
    "SparseCartpoleSwingup-v0": cartpole_swingup.COVERAGE,
    "SparseDoublePendulum-v0": double_pendulum.COVERAGE,
    "SparseHalfCheetah-v5": half_cheetah.COVERAGE,
}


def with_task_report(env: gym.Env) -> gym.Env:
    """``env`` with its task's success and coverage reports (the sparse tasks report
    themselves; gymnasium's tasks in :data:`REPORTED` get a wrapper; others stay as they are)."""
    wrapper = REPORTED.get(env.spec.id) if env.spec is not None else None
    return wrapper(env) if wrapper is not None else env


register_tasks()

__all__ = ["COVERAGE", "HORIZON", "REPORTED", "TASKS", "register_tasks", "with_task_report"]
