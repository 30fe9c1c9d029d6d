"""Every decision both engines share is made once, in one function (issue 56, stage 1;
``docs/architecture.md``, "One engine: the stages"): each checked here against cases known
by hand, and the layout test below checks that nothing else decides it again."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.common.errors import ConfigError
from agents.common.noise_redraw import redrawn_after_episodes, redrawn_every_step
from agents.ddpg import DDPG
from agents.ddpg.compiled_update import CompilationError
from agents.ddpg.engine import starting_point
from agents.ddpg.execution import ChosenUpdate, Execution, acting_batched, update_execution
from agents.ddpg.stacked_state import StackedState
from agents.settings import DDPGSettings
from agents.settings.memory import learners_needs, members_that_fit, run_needs
from agents.settings.resolve import resolve_runs
from agents.settings.sharing import check_members_share, check_population, population_key
from param_explore import UntraceableOptimizerError


def run(strategy: str = "vadam", seed: int = 0, *options: str, **flags):
    (settings,) = resolve_runs([strategy], [seed], set_options=list(options), **flags)
    return settings


# --------------------------------------------------------------------------- sharing
def test_runs_differing_in_seed_or_the_update_numbers_share_a_population():
    base = population_key(run("vadam", 0))
    assert base is not None
    assert population_key(run("vadam", 1)) == base
    for per_member in ("gamma=0.9", "tau=0.01", "critic_lr=0.002"):
        assert population_key(run("vadam", 1, per_member)) == base, per_member


def test_runs_differing_in_shape_schedule_strategy_or_bonus_do_not():
    base = population_key(run("vadam", 0))
    for shaping in ("hidden_sizes=[8,8]", "batch_size=32", "train_every=2", "total_steps=99"):
        assert population_key(run("vadam", 0, shaping)) != base, shaping
    assert population_key(run("noisy-adam", 0)) != base
    assert population_key(run("vadam", 0, "bonus.kind=vime")) != base


def test_only_the_native_ddpg_runs_are_members():
    assert population_key(run("vadam", 0, engine="sb3")) is None
    assert population_key(run("trpo", 0, algo="trpo", engine="sb3")) is None
    check_population([run("vadam", 0), run("vadam", 1, "gamma=0.9")])
    with pytest.raises(ConfigError, match="cannot be one population"):
        check_population([run("vadam", 0), run("vadam", 1, engine="sb3")])
    with pytest.raises(ConfigError, match="cannot be one population"):
        check_population([run("vadam", 0), run("vadam", 1, "hidden_sizes=[8,8]")])


def test_members_must_share_what_is_not_a_number_of_the_update():
    check_members_share([DDPGSettings(gamma=0.9), DDPGSettings(gamma=0.5, tau=0.1)])
    with pytest.raises(ConfigError, match=r"share hidden_sizes; got \[8, 8\] and \[4, 4\]"):
        check_members_share([DDPGSettings(hidden_sizes=[8, 8]), DDPGSettings(hidden_sizes=[4, 4])])


def test_members_start_together_at_one_step_and_buffer_fill():
    """Where a run resumes decides which runs train together (a population's members
    step together): its step, its buffer's fill and write position."""
    config = DDPGSettings(hidden_sizes=[8, 8], buffer_size=10, learning_starts=9, batch_size=4)
    agent = DDPG("Pendulum-v1", config, seed=0, device="cpu")
    assert starting_point(agent) == (0, 0, 0)
    agent.learn(12)  # the buffer wrapped around: 10 rows, the next write at row 2
    assert starting_point(agent) == (12, 10, 2)
    assert starting_point(DDPG("Pendulum-v1", config, seed=1, device="cpu")) == (0, 0, 0)


# --------------------------------------------------------------------------- memory
#: A learner on Pendulum's spaces (3, 1), its parts counted by hand: the buffer 100 rows of
#: 2·3 + 1 + 2 floats; the networks' 113 (actor 3-8-8-1) + 121 (critic 4-8-8-1) parameters
#: four times; a minibatch of 4 through the critic's 21 units twice and the actor's 20.
SMALL = DDPGSettings(hidden_sizes=[8, 8], buffer_size=100, batch_size=4)
BUFFER, NETWORKS, UPDATE = 100 * 9 * 4, 4 * 234 * 4, 4 * 62 * 4


def total(needs) -> int:
    return sum(need.nbytes for need in needs)


def test_the_estimate_of_one_learner_and_of_members():
    assert total(learners_needs([SMALL], 3, 1)) == BUFFER + NETWORKS + UPDATE
    assert total(learners_needs([SMALL] * 3, 3, 1)) == 3 * (BUFFER + NETWORKS + UPDATE)


def test_a_run_counts_its_bonus_beside_its_learner():
    options = ("hidden_sizes=[8,8]", "buffer_size=100", "batch_size=4")
    assert total(run_needs(run("vadam", 0, *options), 3, 1)) == BUFFER + NETWORKS + UPDATE
    with_bonus = run_needs(run("vadam", 0, *options, "bonus.kind=vime"), 3, 1)
    assert total(with_bonus) > BUFFER + NETWORKS + UPDATE


def test_how_many_members_fit():
    member = BUFFER + NETWORKS + UPDATE
    small = run("vadam", 0, "hidden_sizes=[8,8]", "buffer_size=100", "batch_size=4")
    assert members_that_fit(small, 3, 1, 10, 1, None) == 10  # memory not known: all
    assert members_that_fit(small, 3, 1, 10, 1, 4 * member) == 4
    assert members_that_fit(small, 3, 1, 10, 2, 4 * member) == 2  # two workers at once
    assert members_that_fit(small, 3, 1, 10, 1, member - 1) == 1  # at least one
    assert members_that_fit(small, 3, 1, 3, 1, 100 * member) == 3  # at most all
    # a member's bonus counts too (its model and pool beside the learner)
    vime = run("vadam", 0, "hidden_sizes=[8,8]", "buffer_size=100", "batch_size=4",
               "bonus.kind=vime")  # fmt: skip
    with_bonus = total(run_needs(vime, 3, 1))
    assert with_bonus > member
    assert members_that_fit(vime, 3, 1, 10, 1, 4 * with_bonus) == 4
    assert members_that_fit(small, 3, 1, 10, 1, 4 * with_bonus) == 10


# --------------------------------------------------------------------------- noise redraw
def test_weight_noise_is_redrawn_every_step_or_as_an_episode_starts():
    assert redrawn_every_step("step") and not redrawn_every_step("episode")


def test_sb3_redraws_after_an_episode_only_for_per_episode_noise():
    assert redrawn_after_episodes("episode", np.array([False, True]))
    assert not redrawn_after_episodes("episode", np.array([False, False]))
    assert not redrawn_after_episodes("episode", None)
    assert not redrawn_after_episodes("step", np.array([True]))  # drawn before each action


@pytest.mark.parametrize("strategy, drawn", [("vadam", [0, 1, 2]), ("param-noise", [0, 2])])
def test_the_engine_redraws_every_members_noise_per_step_or_the_starting_rows(strategy, drawn):
    """The strategies' own choices reach the decision (param-noise's per episode): every
    member's ε is new each step, else only the rows that start an episode."""
    settings = DDPGSettings.from_values({"strategy": strategy, "hidden_sizes": [4, 4]})
    env = gym.make("Pendulum-v1")
    state = StackedState.build([settings] * 3, [0, 1, 2], env.observation_space,
                               env.action_space, torch.device("cpu"))  # fmt: skip
    stacks = list(state.noise_stacks.values())
    before = [stack.clone() for stack in stacks]
    starting = np.array([True, False, True])
    resample = settings.strategy.resample
    assert state.draw_noise(resample, starting, torch.Generator().manual_seed(0)) == drawn
    changed = [any(not torch.equal(a[k], b[k]) for a, b in zip(before, stacks)) for k in range(3)]
    assert np.flatnonzero(changed).tolist() == drawn
    for none in (np.zeros(3, bool), None):  # no row starts one (None: the engine's form)
        assert state.draw_noise(resample, none, torch.Generator()) == (
            [0, 1, 2] if strategy == "vadam" else []
        )


# --------------------------------------------------------------------------- compile or eager
def test_compile_trace_or_eager_for_a_single_run_and_a_population():
    assert update_execution(compile=True, stacked=False) is Execution.COMPILED
    assert update_execution(compile=True, stacked=True) is Execution.COMPILED
    assert update_execution(compile=False, stacked=False) is Execution.EAGER
    assert update_execution(compile=False, stacked=True) is Execution.TRACED
    for compile, stacked in [(True, False), (True, True), (False, True)]:
        assert update_execution(compile, stacked, traceable=False) is Execution.EAGER


def test_a_population_acts_in_one_batched_graph_only_at_its_training_point():
    assert acting_batched(explores=True, gradient_at_sample=True)  # vadam
    assert acting_batched(explores=False, gradient_at_sample=False)  # adam-plain
    assert not acting_batched(explores=True, gradient_at_sample=False)  # param-noise


class Graph:
    """A stand-in for the compiled update (the decision's own bookkeeping is under test,
    not torch's): records its calls; its first call fails to compile if asked."""

    def __init__(self, fails: bool = False) -> None:
        self.calls, self.traced, self.fails = 0, False, fails

    def run_traced(self) -> None:
        self.traced = True

    def __call__(self, batch) -> None:
        if self.fails and not self.traced:
            raise CompilationError("no compiler")
        self.calls += 1


@pytest.mark.parametrize(
    ("compile", "stacked", "ran", "traced"),
    [(True, False, Execution.COMPILED, False), (True, True, Execution.COMPILED, False),
     (False, True, Execution.TRACED, True), (False, False, Execution.EAGER, False)],
)  # fmt: skip
def test_the_chosen_update_builds_what_the_decision_says(compile, stacked, ran, traced):
    graph, eager = Graph(), []
    update = ChosenUpdate(compile, stacked, lambda: graph, eager.append)
    assert update.graph is None  # built at the first update
    assert update("batch") is ran
    assert (update.graph is graph) == (ran is not Execution.EAGER)
    assert graph.traced == traced and len(eager) == (ran is Execution.EAGER)


def test_a_failed_compile_goes_on_as_without_compile():
    single, eager = Graph(fails=True), []
    update = ChosenUpdate(True, False, lambda: single, eager.append)
    with pytest.warns(UserWarning, match="compile failed, training eagerly: no compiler"):
        assert update("batch") is Execution.EAGER
    assert update.graph is None and eager == ["batch"] and update("next") is Execution.EAGER
    members = Graph(fails=True)
    update = ChosenUpdate(True, True, lambda: members, eager.append)
    with pytest.warns(UserWarning, match="compile failed, training the population eagerly"):
        assert update("batch") is Execution.TRACED
    assert members.traced and members.calls == 1


def test_a_strategy_without_a_traced_form_trains_eagerly():
    def untraceable():
        raise UntraceableOptimizerError("NoisyKFAC has no traced form")

    eager = []
    with pytest.warns(UserWarning, match="compile: NoisyKFAC has no traced form"):
        assert ChosenUpdate(True, False, untraceable, eager.append)(1) is Execution.EAGER
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a population's members step one by one, silently
        assert ChosenUpdate(True, True, untraceable, eager.append)(2) is Execution.EAGER
        assert ChosenUpdate(False, True, lambda: None, eager.append)(3) is Execution.EAGER
    assert eager == [1, 2, 3]
