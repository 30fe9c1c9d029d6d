"""Which runs may share a population: the one rule, decided here for a grid's plan, a
population of runs and a population's members alike.

Why one place: a grid groups runs into populations (:func:`agents.runs.grid.plan_tasks`),
a population of runs refuses a group it cannot train (:func:`~agents.runs.population_run.
train_population`, once per population: what it builds is not checked again), and a
population built alone refuses members that differ
(:meth:`agents.ddpg.stacked_state.StackedState.build`); were each to decide, a grid could plan a
population its runner refuses. The rule: members stack their tensors and step on one
schedule, so they share every setting but those the update takes as numbers
(:data:`PER_MEMBER_KEYS`), their seed and their variant's label; and only the native DDPG's
runs are members at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..common.errors import ConfigError
from .learners import DDPGSettings
from .run import RunSettings

#: The DDPG settings the update takes as numbers, which members of one population may each
#: have of their own (:mod:`agents.ddpg.population`: each member's step numbers are its
#: own); every other setting shapes the stacked tensors or the schedule, and members share it.
PER_MEMBER_KEYS = ("optimizer_kwargs", "action_noise", "gamma", "tau", "critic_lr")


def shared_by_members(learner: DDPGSettings) -> dict[str, Any]:
    """The learner's settings members of one population must share: all but
    :data:`PER_MEMBER_KEYS`."""
    return {k: v for k, v in learner.values().items() if k not in PER_MEMBER_KEYS}


def can_be_populated(settings: RunSettings) -> bool:
    """Whether a run can be a population's member: the native DDPG's runs can."""
    return settings.algo == "ddpg" and settings.engine == "native"


def population_key(settings: RunSettings) -> tuple | None:
    """What the members of one population share, as one value — the learner's settings
    but :data:`PER_MEMBER_KEYS`, the bonus's kind, and every run setting but the seed and
    the variant's label — or None for a run that trains alone (:func:`can_be_populated`).
    Runs of equal keys may share a population."""
    learner = settings.learner
    if not can_be_populated(settings) or not isinstance(learner, DDPGSettings):
        return None
    values = settings.values()
    shared = {k: v for k, v in values.items() if k not in ("seed", "variant", "bonus")}
    shared = {
        **{k: v for k, v in shared.items() if k not in learner.values()},
        **shared_by_members(learner),
    }
    bonus = values["bonus"].get("kind") if values["bonus"] else None
    return (repr(sorted(shared.items())), bonus)


def check_population(configs: Sequence[RunSettings]) -> None:
    """ConfigError, before anything is written, unless the runs ``configs`` may be one
    population (:func:`population_key`: every one a member, all of one key)."""
    keys = {population_key(c) for c in configs}
    if len(keys) > 1 or None in keys:
        raise ConfigError("these runs cannot be one population (they differ in their shape)")


def check_members_share(learners: Sequence[DDPGSettings]) -> None:
    """ConfigError naming the first setting the members' learners ``learners`` differ in
    that they must share (:func:`shared_by_members`)."""
    shared = shared_by_members(learners[0])
    for learner in learners[1:]:
        theirs = shared_by_members(learner)
        for key, value in shared.items():
            if theirs[key] != value:
                raise ConfigError(
                    f"the members of a population share {key}; got {value!r} and {theirs[key]!r}"
                )
