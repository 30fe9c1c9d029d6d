"""One environment step of DDPG, written once for one member or many.

Why: a single run and a population take the same step — a new episode where one ended, new
weight noise, acting, the env's answer, storing it, the updates when due, the step's end —
and differ only in how many members each phase serves and where its random numbers come
from. The order of the phases, which of them may stop the step, and where a stop request is
honoured are therefore written here once; :class:`StepPhases` is what the driver provides:
:class:`~agents.ddpg.engine.Engine`, for one member (a single run) or many (a row each, one
vector env, one generator). ``docs/architecture.md``, "One environment step", draws the
flow.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..common.stop_requests import unless_stopped


class StepPhases(Protocol):
    """The phases of :func:`environment_step` for the members a driver steps.

    What passes between them (which members start an episode, the env's answer, which
    episodes ended) is the driver's own: a flag for one member, a row per member for many.
    """

    @property
    def gradient_steps(self) -> int:
        """Updates per round when :meth:`updates_due` says one is due."""
        ...

    def start_episodes(self) -> object:
        """A new episode for every member whose last one ended; which members start one
        (the driver's own form: a row each, None when none does)."""
        ...

    def draw_weight_noise(self, starting: object) -> None:
        """New weight noise: every member's per step, those starting an episode per
        episode."""
        ...

    def exploration_actions(self) -> np.ndarray:
        """The behaviour policy's actions (θ's, plus action noise), checked finite."""
        ...

    def step_envs(self, actions: np.ndarray) -> object | None:
        """The envs' answer to ``actions``, every number checked finite; None when no
        member is left to answer for (every one stopped)."""
        ...

    def store(self, actions: np.ndarray, answer: object) -> object:
        """The transitions into the replay buffer and the members' own records (observation
        statistics, bonus pool, counters); which episodes ended."""
        ...

    def updates_due(self) -> bool:
        """Whether this step ends with a round of updates."""
        ...

    def train_step(self) -> None:
        """One update of every member, on a minibatch drawn now."""
        ...

    def end_step(self, ended: object) -> None:
        """The strategy's noise adaptation when due, the ended episodes' ends, the
        members' callbacks' episode hooks."""
        ...


def environment_step(phases: StepPhases) -> None:
    """One environment step of every member ``phases`` drives.

    A stop request (Ctrl-C, SIGTERM) is honoured between the updates of a round as well
    as between steps (:func:`~agents.common.stop_requests.unless_stopped`): the rest of an
    interrupted round is not made up on resume.
    """
    starting = phases.start_episodes()
    phases.draw_weight_noise(starting)
    actions = phases.exploration_actions()
    answer = phases.step_envs(actions)
    if answer is None:
        return
    ended = phases.store(actions, answer)
    if phases.updates_due():
        for _ in unless_stopped(phases.gradient_steps):
            phases.train_step()
    phases.end_step(ended)
