"""What a run, or a population's members, need in memory, and how many members fit: the
estimate and the budget decided here once, for a single run, a population and a grid.

Why one place: a grid sizes its populations by the memory they need
(:func:`agents.runs.population_run.population_size`), runs are checked on their env before
their learners and bonuses are made (:func:`agents.runs.agent_factory.check_runs_env`: a
single run's, or a population's members together), and a learner built alone checks its
own part (``DDPG``, ``build_members``, SB3's DDPG, TRPO); each asks here, so that the sum a
grid plans with is the sum a population checks. A command checks once: ``train_agent``'s
one check (``agents.cli._check_runs``, shared with ``--check``) approves each run, and what
it then builds is not checked again (``checked``). The parts are the settings' own
(``memory_needs`` of a learner's and a bonus's settings);
:func:`~agents.common.memory_budget.check_memory` compares them with the machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..common.memory_budget import MemoryNeed, check_memory
from .learners import DDPGSettings, TRPOSettings
from .run import RunSettings


def learners_needs(
    learners: Sequence[DDPGSettings | TRPOSettings],
    obs_dim: int,
    action_dim: int,
) -> list[MemoryNeed]:
    """What ``learners`` — a single run's one, or a population's members — need together
    on spaces of ``obs_dim`` and ``action_dim`` (checked once, before their stacked state is
    allocated: :meth:`agents.ddpg.stacked_state.StackedState.build`)."""
    return [need for learner in learners for need in learner.memory_needs(obs_dim, action_dim)]


def check_learners(
    learners: Sequence[DDPGSettings | TRPOSettings],
    obs_dim: int,
    action_dim: int,
    device: torch.device,
) -> None:
    """ConfigError, before anything is allocated, when ``learners`` cannot fit on
    ``device`` (:func:`learners_needs`)."""
    check_memory(learners_needs(learners, obs_dim, action_dim), device)


def run_needs(settings: RunSettings, obs_dim: int, action_dim: int) -> list[MemoryNeed]:
    """What the run's learner and bonus need in memory at least; the bonus scores what its
    learner hands it at once: DDPG's minibatch, TRPO's rollout."""
    learner = settings.learner
    needs = learners_needs([learner], obs_dim, action_dim)
    if settings.bonus is not None:
        scored = learner.n_steps if settings.algo == "trpo" else learner.batch_size
        needs += settings.bonus.memory_needs(obs_dim, action_dim, scored)
    return needs


def members_that_fit(
    settings: RunSettings,
    obs_dim: int,
    action_dim: int,
    count: int,
    workers: int,
    available: int | None,
) -> int:
    """How many of ``count`` members of a run's ``settings`` fit in one population, with
    ``workers`` such populations running at once: the ``available`` bytes
    (:func:`~agents.common.memory_budget.available_memory`, now) over every member's
    estimate — its learner and its bonus (:func:`run_needs`) — at least one, at most
    ``count`` (all when the memory is not known)."""
    per_member = sum(need.nbytes for need in run_needs(settings, obs_dim, action_dim))
    if available is None or per_member == 0:
        return count
    return max(1, min(count, available // (per_member * workers)))
