"""A population's member k is the run of seed k (agents/ddpg/population.py).

Every member draws its random numbers from its own generator in a single run's order, and
the batched update is the single run's ``ddpg_update`` vmapped over the members, so after
200 updates a member's networks, optimizer state, replay buffer and generator equal the
single run's of its seed — for every strategy, with the curiosity bonus, and for members
with settings of their own — up to the float rounding of batched kernels (generators and
counters exactly).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from agents.common.callbacks import Callback
from agents.common.errors import NonFiniteDataError
from agents.common.strategies import available_strategies
from agents.ddpg import DDPG
from agents.ddpg.population import Population, make_population
from agents.runs.population_run import train_population
from agents.settings import DDPGSettings
from agents.settings.resolve import resolve_runs

pytestmark = pytest.mark.trains

SMALL = dict(hidden_sizes=[32, 32], batch_size=16, learning_starts=64, buffer_size=5000)
STEPS = 264  # 200 updates after learning_starts
SEEDS = [3, 7]
TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def settings(strategy: str, **overrides) -> DDPGSettings:
    return DDPGSettings.from_values({"strategy": strategy, **SMALL, **overrides})


def learn_population(configs: list[DDPGSettings], seeds: list[int], bonuses=None) -> Population:
    population = make_population(["Pendulum-v1"] * len(seeds), configs, seeds, "cpu", bonuses)
    population.learn(STEPS, [Callback() for _ in seeds])
    return population


def single_run(config: DDPGSettings, seed: int, bonus=None) -> DDPG:
    agent = DDPG("Pendulum-v1", config, seed=seed, device="cpu", bonus=bonus)
    agent.learn(STEPS)
    return agent


def assert_same_run(member: DDPG, single: DDPG) -> None:
    assert member.num_timesteps == single.num_timesteps == STEPS
    assert member.num_updates == single.num_updates == STEPS - 64
    # Every random number drawn in the same order: the generators' states are equal.
    assert torch.equal(member.generator.get_state(), single.generator.get_state())
    for module in ("actor", "critic", "target_actor", "target_critic"):
        mine = dict(getattr(member, module).named_parameters())
        theirs = dict(getattr(single, module).named_parameters())
        for name in theirs:
            torch.testing.assert_close(mine[name], theirs[name], **TOLERANCE, msg=name)
    for mine, theirs in zip(
        member.actor_optimizer.sampling_std(), single.actor_optimizer.sampling_std(), strict=True
    ):
        torch.testing.assert_close(mine, theirs, **TOLERANCE)
    n = len(single.buffer)
    assert len(member.buffer) == n and member.buffer.position == single.buffer.position
    torch.testing.assert_close(member.buffer.obs[:n], single.buffer.obs[:n], **TOLERANCE)
    torch.testing.assert_close(member.buffer.rewards[:n], single.buffer.rewards[:n], **TOLERANCE)
    # What it logs: σ's quantiles and the action distance measured on its own generator.
    logged, expected = member.exploration_statistics(), single.exploration_statistics()
    assert logged.keys() == expected.keys()
    for key, value in expected.items():
        assert logged[key] == pytest.approx(value, rel=1e-3, abs=1e-6), key


@pytest.mark.parametrize("strategy", available_strategies())
def test_a_member_is_the_run_of_its_seed(strategy):
    config = settings(strategy)
    population = learn_population([config] * len(SEEDS), SEEDS)
    for member, seed in zip(population.members, SEEDS, strict=True):
        assert_same_run(member, single_run(config, seed))


@pytest.mark.parametrize("posterior", ["bbb", "noisy-adam", "noisy-kfac"])
def test_a_member_with_the_bonus_is_the_run_of_its_seed(posterior):
    """VIME: one dynamics model per member, fitted and scoring its own member's minibatches."""
    from agents.curiosity import VimeConfig, make_vime_bonus

    vime = VimeConfig(
        posterior=posterior, hidden_sizes=[8], num_samples=3, pool_size=1000,
        min_pool_size=100, fit_every=100, updates_per_step=0.2,
    )  # fmt: skip
    config = settings("vadam")

    def bonus(seed: int):
        from gymnasium.spaces import Box

        obs, act = Box(-8.0, 8.0, (3,)), Box(-2.0, 2.0, (1,))
        return make_vime_bonus(vime, obs, act, seed=seed + 2_000_000)

    population = learn_population([config] * 2, SEEDS, [bonus(s) for s in SEEDS])
    for member, seed in zip(population.members, SEEDS, strict=True):
        single = single_run(config, seed, bonus(seed))
        assert_same_run(member, single)
        assert member.bonus.num_fits == single.bonus.num_fits == 2
        for mine, theirs in zip(
            member.bonus.dynamics.parameters, single.bonus.dynamics.parameters, strict=True
        ):
            torch.testing.assert_close(mine, theirs, **TOLERANCE)


def test_members_with_settings_of_their_own_are_the_runs_of_those_settings():
    """Vadam's sampling constant, the critic's step size and τ per member: each member's
    numbers are its own, and each equals its single run; σ differs as c says."""
    configs = [
        settings("vadam", optimizer_kwargs={"sample_constant": 1e4}),
        settings("vadam", optimizer_kwargs={"sample_constant": 1e2}, critic_lr=3e-4, tau=0.01),
    ]
    population = learn_population(configs, SEEDS)
    for member, config, seed in zip(population.members, configs, SEEDS, strict=True):
        assert_same_run(member, single_run(config, seed))
    sigma = [m.actor_optimizer.exploration_statistics()["sigma_max"] for m in population.members]
    assert sigma[0] == pytest.approx(0.01, rel=1e-3) and sigma[1] == pytest.approx(0.1, rel=0.05)


def test_a_compiled_population_acts_and_updates_as_the_eager_one():
    """The compiled population (one Inductor graph for every member's update, one for every
    member's action) equals the eager one up to the rounding of fused kernels."""
    eager = learn_population([settings("vadam")] * 2, SEEDS)
    compiled = learn_population([settings("vadam", compile=True)] * 2, SEEDS)
    assert compiled._update is not None and compiled._acting is not None
    for a, b in zip(eager.members, compiled.members, strict=True):
        for (name, p), (_, q) in zip(a.actor.named_parameters(), b.actor.named_parameters()):
            torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-4, msg=name)


def test_a_population_writes_ordinary_run_directories_and_resumes(tmp_path):
    """Members' run directories hold what a single run's hold, with the same curves, and a
    resumed population continues every member."""

    def runs(logdir: str, steps: int) -> list:
        return resolve_runs(
            ["vadam"], SEEDS, env="Pendulum-v1", total_steps=steps, eval_every=200,
            eval_episodes=2, logdir=str(tmp_path / logdir), compile=False,
            set_options=["hidden_sizes=[32,32]", "log_every=200"],
        )  # fmt: skip

    outcomes = train_population(runs("population", 400))
    assert [o.error for o in outcomes] == [None, None]
    from agents.runs.train import train

    for config in runs("single", 400):
        train(config, progress=False)
    for seed in SEEDS:
        member = tmp_path / "population" / "Pendulum-v1" / "vadam" / f"seed{seed}"
        single = tmp_path / "single" / "Pendulum-v1" / "vadam" / f"seed{seed}"
        assert {p.name for p in member.iterdir()} >= {"config.yaml", "eval.csv", "explore.csv"}
        assert yaml.safe_load((member / "config.yaml").read_text()) == yaml.safe_load(
            (single / "config.yaml").read_text()
        ) | {"logdir": str(tmp_path / "population")}
        np.testing.assert_allclose(returns(member), returns(single), rtol=1e-4)
    outcomes = train_population(runs("population", 600), resume=True)
    assert [o.error for o in outcomes] == [None, None]
    for seed in SEEDS:
        member = tmp_path / "population" / "Pendulum-v1" / "vadam" / f"seed{seed}"
        assert steps(member) == [200, 400, 600]


def returns(run_dir: Path) -> list[float]:
    with open(run_dir / "eval.csv", newline="") as f:
        return [float(row["mean_return"]) for row in csv.DictReader(f)]


def steps(run_dir: Path) -> list[int]:
    with open(run_dir / "eval.csv", newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def test_a_member_that_diverges_stops_alone_with_its_error(tmp_path):
    """A member whose update overflows (its own absurd step size) stops with its own error
    and its last good checkpoint; the other members finish."""
    configs = resolve_runs(
        ["sgd-plain"], [0], env="Pendulum-v1", total_steps=600, eval_every=200,
        eval_episodes=1, logdir=str(tmp_path), compile=False,
        set_options=["hidden_sizes=[32,32]", "optimizer_kwargs.lr=[1e-4,1e38]",
                     "skipped_window=200"],
    )  # fmt: skip
    good, bad = train_population(configs)
    assert good.error is None
    assert isinstance(bad.error, NonFiniteDataError), bad.error
    assert "last good" in str(bad.error) or "not checkpointed" in str(bad.error)
    assert steps(good.run_dir) == [200, 400, 600]


def test_a_member_whose_bonus_overflows_stops_alone(tmp_path):
    """A member's curiosity bonus that overflows float32 (η · gain over a small median)
    stops that member with the single run's line; the other member finishes."""
    configs = resolve_runs(
        ["vadam"], [0], env="Pendulum-v1", total_steps=400, eval_every=200,
        eval_episodes=1, logdir=str(tmp_path), compile=False,
        set_options=["bonus.kind=vime", "hidden_sizes=[16,16]", "learning_starts=100",
                     "bonus.fit_every=100", "bonus.min_pool_size=100", "bonus.updates_per_step=1",
                     "bonus.max_information_gain=1", "bonus.eta=[1e-3,3e38]"],
    )  # fmt: skip
    good, bad = train_population(configs)
    assert good.error is None
    assert isinstance(bad.error, NonFiniteDataError), bad.error
    assert "non-finite curiosity bonus" in str(bad.error), bad.error
    assert "in the update at step" in str(bad.error)
    assert steps(good.run_dir) == [200, 400]


def test_the_memory_check_counts_every_member(tmp_path):
    """A population that cannot fit is refused with one line, before anything is written:
    the estimate is every member's."""
    from agents.common.memory_budget import available_memory

    available = available_memory(torch.device("cpu"))
    if available is None:
        pytest.skip("this machine does not say how much memory it has")
    per_member = available // 3 // (4 * 8) + 1  # each member's buffer a third of the memory
    configs = resolve_runs(
        ["vadam"], [0, 1, 2, 3], env="Pendulum-v1", total_steps=200, logdir=str(tmp_path),
        set_options=[f"buffer_size={per_member}", "hidden_sizes=[8,8]"],
    )  # fmt: skip
    with pytest.raises(Exception, match="these settings need at least"):
        train_population(configs)
    assert not (tmp_path / "Pendulum-v1").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_population_on_a_gpu_is_the_population_on_the_cpu():
    config = settings("vadam")
    on_cpu = learn_population([config] * 2, SEEDS)
    on_gpu = make_population(["Pendulum-v1"] * 2, [config] * 2, SEEDS, "cuda")
    on_gpu.learn(STEPS, [Callback() for _ in SEEDS])
    for a, b in zip(on_cpu.members, on_gpu.members, strict=True):
        for p, q in zip(a.actor.parameters(), b.actor.parameters(), strict=True):
            torch.testing.assert_close(p, q.cpu(), rtol=1e-3, atol=1e-4)
