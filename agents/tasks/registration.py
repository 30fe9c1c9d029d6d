"""The sparse-reward tasks' gymnasium ids, registered when :mod:`agents` is imported."""

from __future__ import annotations

import gymnasium as gym

#: Plappert et al. 2018, Sec. 4.2: "For all tasks, we use a time horizon of T = 500 steps".
HORIZON = 500

#: id → entry point. Each task is defined as VIME's released code defines it
#: (``docs/decisions.md#sparse-tasks``).
TASKS = {
    "SparseMountainCar-v0": "agents.tasks.mountain_car:SparseMountainCarEnv",
    "SparseMountainCarRllab-v0": "agents.tasks.rllab_mountain_car:SparseMountainCarRllabEnv",
    "SparseCartpoleSwingup-v0": "agents.tasks.cartpole_swingup:SparseCartpoleSwingupEnv",
    "SparseDoublePendulum-v0": "agents.tasks.double_pendulum:SparseDoublePendulumEnv",
    "SparseHalfCheetah-v5": "agents.tasks.half_cheetah:SparseHalfCheetahEnv",
}


def register_tasks() -> None:
    """Register every task with gymnasium (again after an import is harmless)."""
    for env_id, entry_point in TASKS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, max_episode_steps=HORIZON)
