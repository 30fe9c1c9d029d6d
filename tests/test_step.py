"""The one environment step (agents/ddpg/step.py): its phases' order, what passes between
them, where a stop request ends a round of updates, and that the engine's phases (a single
run's and a population's) are the protocol's."""

from __future__ import annotations

import inspect
import signal

import numpy as np
import pytest

from agents.common.stop_requests import forget_stop_request, request_stop
from agents.ddpg.engine import Engine
from agents.ddpg.step import StepPhases, environment_step


class RecordedPhases:
    """Phases that record what they were called with (the step's own logic under test)."""

    def __init__(self, due: bool = True, answer: object = "answer", stop_after: int = 0):
        self.calls: list[tuple] = []
        self.gradient_steps = 4
        self.due, self.answer, self.stop_after = due, answer, stop_after

    def start_episodes(self):
        self.calls.append(("start_episodes",))
        return "starting"

    def draw_weight_noise(self, starting):
        self.calls.append(("draw_weight_noise", starting))

    def exploration_actions(self):
        self.calls.append(("exploration_actions",))
        return np.zeros(2)

    def step_envs(self, actions):
        self.calls.append(("step_envs", actions.shape))
        return self.answer

    def store(self, actions, answer):
        self.calls.append(("store", answer))
        return "ended"

    def updates_due(self):
        self.calls.append(("updates_due",))
        return self.due

    def train_step(self):
        self.calls.append(("train_step",))
        if len([c for c in self.calls if c == ("train_step",)]) == self.stop_after:
            request_stop(signal.SIGINT)

    def end_step(self, ended):
        self.calls.append(("end_step", ended))


@pytest.fixture(autouse=True)
def no_stop_request():
    forget_stop_request()
    yield
    forget_stop_request()


def test_the_phases_run_in_order_and_pass_on_what_they_return():
    phases = RecordedPhases()
    environment_step(phases)
    assert phases.calls == [
        ("start_episodes",),
        ("draw_weight_noise", "starting"),
        ("exploration_actions",),
        ("step_envs", (2,)),
        ("store", "answer"),
        ("updates_due",),
        *[("train_step",)] * 4,
        ("end_step", "ended"),
    ]


def test_no_updates_when_none_is_due():
    phases = RecordedPhases(due=False)
    environment_step(phases)
    assert ("train_step",) not in phases.calls and phases.calls[-1] == ("end_step", "ended")


def test_a_stop_request_ends_the_round_between_updates_and_the_step_still_ends():
    phases = RecordedPhases(stop_after=2)
    environment_step(phases)
    assert phases.calls.count(("train_step",)) == 2
    assert phases.calls[-1] == ("end_step", "ended")


def test_when_no_member_is_left_to_answer_for_nothing_is_stored():
    phases = RecordedPhases(answer=None)
    environment_step(phases)
    assert phases.calls[-1] == ("step_envs", (2,))


def test_the_engine_provides_every_phase_with_its_arguments():
    """The one driver of the step, for a single run (an engine of one) and a population."""
    driver = Engine
    phases = [
        name
        for name, member in vars(StepPhases).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]
    assert len(phases) == 8
    for name in phases:
        wanted = inspect.signature(getattr(StepPhases, name)).parameters
        theirs = inspect.signature(getattr(driver, name)).parameters
        assert len(theirs) == len(wanted), name
