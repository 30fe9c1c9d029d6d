"""The engine (agents/ddpg/engine.py): a single run is an engine of one member.

What is checked: ``DDPG.learn`` — an engine of one on the run's own env, drawing from the
run's own generator — makes exactly the steps of the single-run loop written out by hand
below from the member's public phases (the loop the project ran before the engine was one),
to the bit: every weight, buffer row and counter, across episodes, with weight noise drawn
per step or per episode and with action noise, and over two ``learn`` calls (an episode goes
on across them), in no more Python calls a step than that loop. And a single run's failure
is raised, not kept as a member's.
"""

from __future__ import annotations

import pytest
import torch

from agents.common.callbacks import Callback
from agents.common.errors import NonFiniteDataError
from agents.common.noise_redraw import redrawn_every_step
from agents.ddpg import DDPG
from agents.settings import DDPGSettings

from conftest import python_calls

SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=50, buffer_size=1000,
             compile=False)  # fmt: skip


def hand_loop(agent: DDPG, steps: int) -> None:
    """The single-run loop, by hand: the env reset at an episode's start (seeded at the
    first), ε drawn when due, the action (θ's, plus action noise), the env's step, the
    transition stored and counted, the updates, the noise's adaptation, the episode's end."""
    env, obs = agent.env, None
    for _ in range(steps):
        starting = obs is None
        if starting:
            seed = agent.seed if agent.num_episodes == 0 else None
            obs = env.reset(seed=seed)[0]
            if agent.action_noise is not None:
                agent.action_noise.reset()
        if redrawn_every_step(agent.resample) or starting:
            agent.actor_optimizer.resample_noise(agent.generator)
        action = agent.with_action_noise(agent.predict(obs, deterministic=False))
        agent.check_action(action)
        next_obs, reward, terminated, truncated = agent.checked_transition(*env.step(action)[:4])
        agent.buffer.add(obs, action, reward, next_obs, terminated)
        agent.num_timesteps += 1
        obs = next_obs
        if agent.updates_due():
            for _ in range(agent.config.gradient_steps):
                agent.train_step()
        if agent.noise_adaptation_due():
            agent.adapt_noise()
        if terminated or truncated:
            agent.num_episodes += 1
            obs = None


@pytest.mark.trains
@pytest.mark.parametrize("strategy", ["vadam", "param-noise", "ou-action", "ivon"])
def test_a_single_run_is_an_engine_of_one_that_steps_as_the_hand_written_loop(strategy):
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL})
    engine_run = DDPG("Pendulum-v1", config, seed=3, device="cpu")
    by_hand = DDPG("Pendulum-v1", config, seed=3, device="cpu")
    engine_run.learn(250)
    engine_run.learn(200)  # the second episode goes on across the calls
    hand_loop(by_hand, 450)
    assert engine_run.num_episodes == by_hand.num_episodes == 2
    assert engine_run.num_updates == by_hand.num_updates == 400
    for module in ("actor", "critic", "target_actor", "target_critic"):
        theirs = getattr(by_hand, module).state_dict()
        for name, value in getattr(engine_run, module).state_dict().items():
            assert torch.equal(value, theirs[name]), f"{module}.{name}"
    for field in ("obs", "actions", "rewards", "next_obs", "terminated"):
        assert torch.equal(getattr(engine_run.buffer, field), getattr(by_hand.buffer, field))
    assert torch.equal(engine_run.generator.get_state(), by_hand.generator.get_state())


def test_a_single_runs_failure_is_raised_with_its_step():
    agent = DDPG("Pendulum-v1", DDPGSettings.from_values(SMALL), seed=0, device="cpu")
    agent.learn(5)
    with torch.no_grad():
        next(agent.actor.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteDataError, match=r"non-finite action .* at step 6"):
        agent.learn(5)
    assert agent.num_timesteps == 5
    assert torch.isfinite(torch.as_tensor(agent.observation)).all()


class AtBoundaries(Callback):
    """A run's callback: called every 1 000 steps, as a run's is at its boundaries."""

    def next_call(self, agent) -> tuple[int, bool]:
        return (agent.num_timesteps // 1000 + 1) * 1000, False


@pytest.mark.parametrize("strategy", ["adam-plain", "param-noise", "vadam"])
def test_a_single_runs_step_makes_no_more_python_calls_than_the_hand_written_loop(strategy):
    """The engine is no host work a single run did not do before it was one: its steps make
    at most the Python calls of the hand-written loop of the member's phases (numbers of
    calls, not time: the same on any machine; with an update every 50 steps). Before the
    single run's host work was cut (e485db8) they made 1.08-1.28× the loop's
    (``param-noise`` most); now 0.82-1.02× (docs/speed.md, "A single run's host work")."""
    config = DDPGSettings.from_values(
        {"strategy": strategy, **SMALL, "train_every": 50, "gradient_steps": 1}
    )
    engine_run = DDPG("Pendulum-v1", config, seed=3, device="cpu")
    by_hand = DDPG("Pendulum-v1", config, seed=3, device="cpu")
    callback = AtBoundaries()
    engine_run.learn(100, callback)  # past learning_starts, its first update made
    hand_loop(by_hand, 100)
    engine = python_calls(lambda: engine_run.learn(300, callback))
    loop = python_calls(lambda: hand_loop(by_hand, 300))
    assert engine <= 1.05 * loop, (engine / 300, loop / 300)
