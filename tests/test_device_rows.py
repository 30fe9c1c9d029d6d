"""A population's episode rows kept on its device between boundaries (agents/ddpg/device_rows.py).

What is checked: where the envs step on the device (here the torch car on the CPU, the same
code a GPU runs), a population whose callbacks name their boundaries reads the steps'
rewards and flags only there — no copy a step — and trains, counts, hands over its episodes
(with their steps) and calls its callbacks exactly as the same population reading every step
through the host; a member whose numbers stop being finite is found at the next read, named
at the step it failed with its own check's message, stops alone, and its state past that
step is not checkpointed.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.common.callbacks import Callback
from agents.common.envs import make_env
from agents.common.errors import NonFiniteDataError
from agents.common.tags import TRAIN_EPISODE_LENGTH, TRAIN_EPISODE_RETURN
from agents.common.tensor_envs import DeviceEnvs, HostEnvs
from agents.common.vector_envs import make_vector_env
from agents.ddpg.engine import Engine
from agents.ddpg.population import build_members
from agents.runs import population_run
from agents.runs.population_run import train_population
from agents.settings import DDPGSettings
from agents.settings.resolve import resolve_runs

from conftest import DEVICES, NumpyFace

ENV, LIMIT, SEEDS = "MountainCarContinuous-v0", 30, [3, 5, 7]
SMALL = {"hidden_sizes": [8, 8], "batch_size": 8, "learning_starts": 16, "buffer_size": 300,
         "compile": False}  # fmt: skip


class Recorder(Callback):
    """Work every ``every`` steps, and — as a run's checkpoint does — at the end of the
    episode running at a boundary; records what it is handed and what it sees."""

    def __init__(self, every: int, poison_at: int | None = None) -> None:
        self.every, self.poison_at = every, poison_at
        self.episodes: list[tuple] = []
        self.seen: list[tuple] = []
        self.waiting = False

    def next_call(self, agent) -> tuple[int, bool]:
        return (agent.num_timesteps // self.every + 1) * self.every, self.waiting

    def on_episode_end(self, agent, episode_return, episode_length, step) -> None:
        self.episodes.append((step, episode_return, episode_length))

    def on_step(self, agent) -> bool:
        self.waiting = not agent.between_episodes
        counters = agent.counters
        self.seen.append((agent.num_timesteps, agent.num_episodes, agent.between_episodes,
                          counters.episode_return, counters.episode_length))  # fmt: skip
        if agent.num_timesteps == self.poison_at:  # its weights diverge: its actions follow
            with torch.no_grad():
                for stack in self.engine.state.params["actor"].values():
                    stack[self.engine.members.index(agent)].fill_(float("nan"))
        return True


def engines(
    strategy: str, steps: int, device: str, poison: dict[int, int] | None = None, **settings
):
    """The same three members on the torch car on ``device`` trained ``steps`` steps two
    ways — on the device, reading at boundaries, and through the car's numpy face, reading
    every step — with a :class:`Recorder` each (every 25 steps; member k's actor made
    non-finite after step ``poison[k]``; ``settings`` over :data:`SMALL`)."""
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL, **settings})
    ways = []
    for face in (lambda envs: envs, NumpyFace):
        members = build_members(
            [make_env(ENV, max_episode_steps=LIMIT) for _ in SEEDS], [config] * 3, SEEDS, device
        )
        envs = make_vector_env(ENV, 3, max_episode_steps=LIMIT, backend="torch", device=device)
        engine = Engine(members.agents, face(envs), members.state)
        callbacks = [Recorder(25, (poison or {}).get(k)) for k in range(3)]
        for callback in callbacks:
            callback.engine = engine
        engine.learn(steps, callbacks)
        ways.append((engine, callbacks))
    return ways


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["vadam", "ou-action"])
def test_rows_read_at_boundaries_train_and_call_back_as_rows_read_every_step(strategy, device):
    """On the device no step is copied to the host; reads happen at the boundaries and, while
    a callback waits for an episode's end, every step until it ends. Everything else is the
    per-step reading's, bit for bit: weights, buffer, counters, every episode handed over
    with its step, return and length, every call at its step seeing the same counters
    (Ornstein-Uhlenbeck's restarts from the device's mask)."""
    steps = 100
    (boundaries, on_device), (every, through_host) = engines(strategy, steps, device)
    assert isinstance(boundaries.envs, DeviceEnvs) and isinstance(every.envs, HostEnvs)
    assert boundaries.envs.crossings == 0
    for mine, theirs in zip(on_device, through_host, strict=True):
        assert mine.episodes == theirs.episodes
        assert [s for s, *_ in mine.episodes] == [30, 60, 90]
        assert len({r for _, r, _ in mine.episodes}) > 1  # returns, not zeros
        assert mine.seen == theirs.seen
        assert [s for s, *_ in mine.seen] == [25, 30, 50, 60, 75, 90, 100]
    for name in ("timesteps", "updates", "episodes", "episode_return", "episode_length",
                 "between_episodes"):  # fmt: skip
        assert np.array_equal(getattr(boundaries.rows, name), getattr(every.rows, name)), name
    for mine, theirs in zip(boundaries.members, every.members, strict=True):
        assert mine.num_updates == theirs.num_updates > 0
        for p, q in zip(mine.actor.parameters(), theirs.actor.parameters(), strict=True):
            assert torch.equal(p, q)
    for name in ("obs", "actions", "rewards", "next_obs", "terminated"):
        assert torch.equal(boundaries.buffer.storage[name], every.buffer.storage[name])
    # the start's copy, then one a read: 4 boundaries and the 5 + 10 + 15 waiting steps
    assert boundaries.crossings == 1 + 4 + 30
    assert every.crossings == 1 + 2 * steps + (4 if strategy == "ou-action" else 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_member_found_non_finite_at_a_read_stops_alone_named_at_its_step(device):
    """Member 1's actor turns non-finite after step 30 (its callback's call at its episode's
    end): read every step, it stops at step 31; on the device it is found at the next read
    (step 50) with the same message, the step it failed at, and the last good step (30) —
    the others' runs are the same either way."""
    (boundaries, on_device), (every, through_host) = engines("vadam", 75, device, poison={1: 30})
    (late,), (at_once,) = boundaries.failures, every.failures
    assert late.member is boundaries.members[1] and at_once.member is every.members[1]
    assert isinstance(late.error, NonFiniteDataError)
    assert str(late.error) == f"{at_once.error} (read at step 50)"
    assert "non-finite action" in str(late.error) and "at step 31:" in str(late.error)
    assert late.error.good_until == 30 and at_once.error.good_until is None
    assert boundaries.members[1].num_timesteps == 50 and every.members[1].num_timesteps == 30
    assert on_device[1].episodes == through_host[1].episodes == [through_host[1].episodes[0]]
    for k in (0, 2):
        assert on_device[k].episodes == through_host[k].episodes
        assert on_device[k].seen == through_host[k].seen
        mine, theirs = boundaries.members[k].actor, every.members[k].actor
        for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(p, q)


def test_a_failure_whose_row_the_buffer_wrote_over_is_named_at_its_step():
    """The message is made from the row the step stored in the replay buffer: with a buffer
    of 12 transitions, the read at step 50 finds step 31's row written over, and says so,
    with the step it failed at and the last good step."""
    (boundaries, _), _ = engines(
        "vadam", 75, "cpu", poison={1: 30}, buffer_size=12, learning_starts=8
    )
    (late,) = boundaries.failures
    assert late.member is boundaries.members[1] and late.error.good_until == 30
    assert str(late.error) == (
        "a non-finite action or transition at step 31 (read at step 50, its row since "
        "overwritten); training stopped"
    )


class NonFiniteRewardAt(gym.vector.VectorWrapper):
    """A device env whose row ``row`` answers a non-finite reward at its ``step``-th step."""

    def __init__(self, envs, row: int, step: int) -> None:
        super().__init__(envs)
        self.device, self._row, self._at, self._steps = envs.device, row, step, 0

    def reset_tensors(self, *args, **kwargs):
        return self.env.reset_tensors(*args, **kwargs)

    def step_tensors(self, actions):
        answer = self.env.step_tensors(actions)
        self._steps += 1
        if self._steps != self._at:
            return answer
        rewards = answer.rewards.clone()
        rewards[self._row] = float("nan")
        return answer._replace(rewards=rewards)


def scalars(run_dir, tag: str) -> dict[int, float]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {e.step: e.value for e in acc.Scalars(tag)}


@pytest.mark.trains
def test_a_population_run_on_device_envs_writes_the_runs_of_one_reading_every_step(
    tmp_path, monkeypatch
):
    """``train_population`` with the car on its device (as a GPU's population runs it): its
    members' run files — evaluations, exploration, TensorBoard's episode scalars at their
    steps, checkpoints — are those of the same population reading every step through the
    host; a member whose reward is not finite at step 40 stops alone, found at a read, its
    state past step 39 not checkpointed."""
    vector_env = population_run._vector_env
    built: list = []

    def faulty_training_envs(config, n: int):  # the first built: the members' training envs
        built.append(vector_env(config, n))
        return NonFiniteRewardAt(built[-1], 2, 40) if len(built) == 1 else built[-1]

    faces = {
        "device": faulty_training_envs,
        "host": lambda config, n: NumpyFace(vector_env(config, n)),
    }
    outcomes = {}
    for way, face in faces.items():
        monkeypatch.setattr(population_run, "make_vector_env",
                            lambda *a, **k: make_vector_env(*a, **k, backend="torch"))  # fmt: skip
        monkeypatch.setattr(population_run, "_vector_env", face)
        configs = resolve_runs(
            ["vadam"], [0, 1, 2], env=ENV, total_steps=200, eval_every=100, eval_episodes=1,
            logdir=str(tmp_path / way), compile=False,
            set_options=["hidden_sizes=[8,8]", "learning_starts=32", "log_every=50",
                         "checkpoint_every=100", f"max_episode_steps={LIMIT}"],
        )  # fmt: skip
        outcomes[way] = train_population(configs)
    device, host = outcomes["device"], outcomes["host"]
    assert all(o.error is None for o in [*device[:2], *host])
    error = str(device[2].error)
    assert isinstance(device[2].error, NonFiniteDataError)
    assert "non-finite reward (nan)" in error and "at step 40; training stopped (read at" in error
    assert "the state trained past step 39 is not checkpointed" in error
    for mine, theirs in zip(device[:2], host[:2], strict=True):
        # eval.csv's first three columns (the last: wall clock)
        evals = [[row.split(",")[:3] for row in (r.run_dir / "eval.csv").read_text().split()]
                 for r in (mine, theirs)]  # fmt: skip
        assert evals[0] == evals[1] and len(evals[0]) == 3
        explore = [(r.run_dir / "explore.csv").read_text() for r in (mine, theirs)]
        assert explore[0] == explore[1]
        for tag in (TRAIN_EPISODE_RETURN, TRAIN_EPISODE_LENGTH):
            steps = scalars(mine.run_dir, tag)
            assert steps == scalars(theirs.run_dir, tag)
            assert sorted(steps) == list(range(LIMIT, 201, LIMIT))
        saved = [torch.load(r.run_dir / "checkpoints/latest.pt", weights_only=True)
                 for r in (mine, theirs)]  # fmt: skip
        assert saved[0]["counters"] == saved[1]["counters"]
        for name, value in saved[0]["actor"].items():
            assert torch.equal(value, saved[1]["actor"][name]), name
