"""Every member's action noise as rows on the engine's device (``agents/ddpg/action_noise_rows.py``)
against each member's own process and ``DDPG.with_action_noise``, and against the processes'
equations computed here by hand."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents import DDPG
from agents.common.action_noise import GaussianActionNoise, OrnsteinUhlenbeckActionNoise
from agents.common.errors import ConfigError
from agents.ddpg.action_noise_rows import ActionNoiseRows

SPACE = gym.spaces.Box(np.array([-2.0, -1.0, 0.0]), np.array([1.0, 1.0, 0.5]), dtype=np.float32)


def processes(kind: str) -> list:
    if kind == "gaussian":
        return [GaussianActionNoise(3, sigma=s) for s in (0.1, 0.6, 2.5)]
    return [
        OrnsteinUhlenbeckActionNoise(3, theta=0.15, sigma=0.6, dt=0.01),
        OrnsteinUhlenbeckActionNoise(3, theta=0.3, sigma=0.2, dt=1.0),
        OrnsteinUhlenbeckActionNoise(3, theta=0.0, sigma=1.3, dt=0.5),
    ]


@pytest.mark.parametrize("kind", ["gaussian", "ou"])
def test_rows_add_what_each_members_process_adds(kind):
    """Three members, each its own settings: over 40 steps with an episode restart of two
    rows at step 20, the rows' noisy actions equal, to the bit, each member's process fed
    the same draws and added as ``DDPG.with_action_noise`` adds it (noise in [−1, 1] units
    scaled by (high − low)/2, clipped to the bounds, float32); and the rows' own numbers
    follow the processes' equations computed here in NumPy."""
    mine, theirs = processes(kind), processes(kind)
    rows = ActionNoiseRows(mine, SPACE, torch.device("cpu"))
    rng = np.random.default_rng(0)
    low, high = SPACE.low.astype(float), SPACE.high.astype(float)
    scale = (SPACE.high - SPACE.low) / 2
    state = np.zeros((3, 3))
    for t in range(40):
        if t == 20:
            rows.reset(np.array([True, False, True]))
            for k in (0, 2):
                theirs[k].reset()
                state[k] = 0.0
        actions = rng.uniform(-1.5, 1.5, (3, 3)).astype(np.float32)
        draws = rng.standard_normal((3, 3))
        got = rows.add(torch.tensor(actions), torch.tensor(draws)).numpy()
        assert got.dtype == np.float32
        for k, process in enumerate(theirs):
            noisy = actions[k] + process.of_draw(draws[k]) * scale
            np.testing.assert_array_equal(got[k], np.clip(noisy, low, high).astype(np.float32))
        # the equations, by hand: x ← x − θ x dt + σ √dt ε (OU), σ ε (Gaussian)
        for k, process in enumerate(mine):
            if kind == "ou":
                state[k] = (
                    state[k]
                    - process.theta * state[k] * process.dt
                    + (process.sigma * math.sqrt(process.dt) * draws[k])
                )
                noise = state[k]
            else:
                noise = process.sigma * draws[k]
            want = np.clip(actions[k] + noise * scale, low, high).astype(np.float32)
            np.testing.assert_allclose(got[k], want, rtol=0, atol=1e-6)
    assert rows.crossings == (1 if kind == "ou" else 0)  # the restart's mask, for a state
    rows.give_back()
    if kind == "ou":
        for process, want in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(process.state, want.state)


def test_an_agents_learning_leaves_its_process_where_its_row_is():
    """A single run's process goes on outside ``learn`` from where the engine's row left it
    (``with_action_noise`` after ``learn`` continues the same episode's process)."""
    agent = DDPG("Pendulum-v1", strategy="ou-action", seed=0, learning_starts=1000,
                 hidden_sizes=[8, 8])  # fmt: skip
    agent.learn(30)
    row = agent._engine.action_noise.state[0].numpy()
    assert np.abs(row).sum() > 0
    np.testing.assert_array_equal(agent.action_noise.state, row)


def test_members_of_two_kinds_are_refused_in_one_line():
    noises = [GaussianActionNoise(3), OrnsteinUhlenbeckActionNoise(3)]
    with pytest.raises(ConfigError, match="one known kind of noise"):
        ActionNoiseRows(noises, SPACE, torch.device("cpu"))
