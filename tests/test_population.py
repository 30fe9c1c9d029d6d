"""A population's step is the single run's step, batched (agents/ddpg/population.py).

The batched update is the single run's ``ddpg_update`` vmapped over the members: given the
same weight noise and the same minibatches (injected), a member's networks and optimizer
state after its updates equal a single run's of the same seed and settings — for every
strategy, with each posterior of the curiosity bonus — to the float rounding of batched
kernels. A member is not the single run of its seed over a whole run (its random numbers
are the population's one stream); what holds instead: every random quantity of a step is one
draw for all members, and the same population command gives the same runs.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.common.callbacks import Callback
from agents.common.errors import ConfigError, NonFiniteDataError
from agents.common.strategies import available_strategies
from agents.ddpg import DDPG
from agents.ddpg.engine import population_seed
from agents.ddpg.population import make_population
from agents.ddpg.replay_buffer import Batch, ReplayBuffer
from agents.runs.callback import RunCallback
from agents.runs.population_run import train_population
from agents.settings import DDPGSettings
from agents.settings.resolve import resolve_runs

from conftest import DEVICES

SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=32, buffer_size=500,
             normalize_observations=True)  # fmt: skip
SEEDS = [3, 7]
OBS_DIM, ACTION_DIM = 3, 1  # Pendulum-v1
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


def settings(strategy: str, **overrides) -> DDPGSettings:
    return DDPGSettings.from_values({"strategy": strategy, **SMALL, **overrides})


def member_settings(strategy: str) -> list[DDPGSettings]:
    """Two members, the second with numbers of its own (γ, τ, the critic's step size)."""
    return [settings(strategy), settings(strategy, gamma=0.9, tau=0.01, critic_lr=3e-4)]


def the_same_transitions(population, singles, count: int, rng: np.random.Generator) -> None:
    """``count`` random transitions into every member's buffer and observation statistics
    and into each single run's the same (what their env steps would have stored)."""
    n = len(singles)
    for _ in range(count):
        obs, next_obs = rng.normal(size=(2, n, OBS_DIM))
        actions = rng.uniform(-2, 2, size=(n, ACTION_DIM))
        rewards, terminated = rng.normal(size=n), rng.uniform(size=n) < 0.1
        population.buffer.add(obs, actions, rewards, next_obs, terminated)
        for k, (member, single) in enumerate(zip(population.members, singles, strict=True)):
            single.buffer.add(obs[k], actions[k], rewards[k], next_obs[k], terminated[k])
            for agent in (member, single):
                if agent.obs_statistics is not None:
                    agent.obs_statistics.update(obs[k])


def the_same_noise(population, singles, rng: np.random.Generator) -> None:
    """A new ε for every member, written into its own ε (a view of the population's), and
    the same into its single run's."""
    for member, single in zip(population.members, singles, strict=True):
        for agent in (member, single):
            optimizer = agent.actor_optimizer
            if not optimizer.explores:
                continue
            if agent is single:
                optimizer.resample_noise()  # creates ε where it has none yet
        params = [p for g in member.actor_optimizer.param_groups for p in g["params"]]
        theirs = [p for g in single.actor_optimizer.param_groups for p in g["params"]]
        for p, q, perturbed in zip(params, theirs, member.actor_optimizer.perturbed()):
            if perturbed:
                eps = torch.as_tensor(rng.normal(size=tuple(p.shape)), dtype=torch.float32)
                member.actor_optimizer.state[p]["noise"].copy_(eps)
                single.actor_optimizer.state[q]["noise"].copy_(eps)
        member.actor_optimizer.noise_changed()
        single.actor_optimizer.noise_changed()


def a_minibatch(population, rng: np.random.Generator) -> Batch:
    """Each member's rows of its buffer at indices drawn here (members, batch, …)."""
    size, batch = len(population.buffer), population.members[0].config.batch_size
    index = torch.as_tensor(rng.integers(size, size=(len(population.members), batch)))
    storage = population.buffer.storage
    return Batch(*(
        torch.stack([storage[name][k][index[k]] for k in range(len(index))])
        for name in ReplayBuffer.fields
    ))  # fmt: skip


def rows(batch: Batch, k: int) -> Batch:
    return Batch(*(field[k].clone() for field in batch))


def assert_same_state(member: DDPG, single: DDPG) -> None:
    assert member.num_updates == single.num_updates
    assert member.skipped_updates == single.skipped_updates
    for module in ("actor", "critic", "target_actor", "target_critic"):
        mine = dict(getattr(member, module).named_parameters())
        for name, theirs in getattr(single, module).named_parameters():
            torch.testing.assert_close(mine[name], theirs, **TOLERANCE, msg=f"{module}.{name}")
    for mine, theirs in zip(
        member.actor_optimizer.sampling_std(), single.actor_optimizer.sampling_std(), strict=True
    ):
        torch.testing.assert_close(mine, theirs, **TOLERANCE)


def updated_side_by_side(strategy: str, bonuses=None, single_bonuses=None):
    """A population of two and the two single runs of its seeds and settings, after three
    updates on the same injected ε and minibatches."""
    configs = member_settings(strategy)
    population = make_population("Pendulum-v1", configs, SEEDS, "cpu", bonuses)
    singles = [
        DDPG("Pendulum-v1", config, seed=seed, device="cpu", bonus=bonus)
        for config, seed, bonus in zip(configs, SEEDS, single_bonuses or [None, None])
    ]
    rng = np.random.default_rng(0)
    the_same_transitions(population, singles, 40, rng)
    for _ in range(3):
        the_same_noise(population, singles, rng)
        batch = a_minibatch(population, rng)
        scored = population.with_bonuses(batch)
        population.update(scored)
        for k, single in enumerate(singles):
            expected = single.with_bonus(rows(batch, k))
            torch.testing.assert_close(scored.rewards[k], expected.rewards, **TOLERANCE)
            single.update(expected)
    return population, singles


@pytest.mark.parametrize("strategy", available_strategies())
def test_a_members_update_is_the_single_runs_update(strategy):
    population, singles = updated_side_by_side(strategy)
    for member, single in zip(population.members, singles, strict=True):
        assert_same_state(member, single)
    # The test episodes' policy: every member's μ in one vmapped call, as each single's.
    obs = np.random.default_rng(1).normal(size=(2, 5, OBS_DIM))
    actions = population.mean_actions(obs).numpy()
    for k, single in enumerate(singles):
        np.testing.assert_allclose(actions[k], single.predict(obs[k]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("posterior", ["bbb", "noisy-adam", "noisy-kfac"])
def test_a_members_bonus_and_update_are_the_single_runs(posterior):
    """VIME: one dynamics model per member, scoring its own member's rows of the batch."""
    from gymnasium.spaces import Box

    from agents.curiosity import VimeConfig, make_vime_bonus

    vime = VimeConfig(
        posterior=posterior, hidden_sizes=[8], num_samples=3, pool_size=1000,
        min_pool_size=20, fit_every=20, updates_per_step=0.2,
    )  # fmt: skip

    def bonuses():
        built = [
            make_vime_bonus(vime, Box(-8.0, 8.0, (3,)), Box(-2.0, 2.0, (1,)), seed=seed)
            for seed in SEEDS
        ]
        rng = np.random.default_rng(2)  # the same pool, fitted once, for both sides
        for bonus in built:
            obs, actions, next_obs = (
                rng.normal(size=(30, 3)),
                rng.normal(size=(30, 1)),
                rng.normal(size=(30, 3)),
            )
            bonus.add(obs, actions, next_obs)
            assert bonus.fit()
        return built

    population, singles = updated_side_by_side("vadam", bonuses(), bonuses())
    for member, single in zip(population.members, singles, strict=True):
        assert_same_state(member, single)


def test_each_random_quantity_is_one_draw_for_every_member():
    """One step: the envs reset from the members' seeds, then every member's ε is its row
    of one ``normal_`` per parameter (a (members, …) block each, in the parameters' order)
    from the population's generator (seeded from the members' seeds and the step); a
    minibatch's indices are one (members, batch) ``randint``."""
    population = make_population("Pendulum-v1", [settings("vadam")] * 2, SEEDS, "cpu")
    population.learn(1, [Callback(), Callback()])
    generator = torch.Generator().manual_seed(population_seed(SEEDS, 0))
    params = population.members[0].actor_optimizer.param_groups[0]["params"]
    blocks = [torch.empty(2, *p.shape).normal_(generator=generator) for p in params]
    for k, member in enumerate(population.members):
        optimizer = member.actor_optimizer
        for p, block in zip(optimizer.param_groups[0]["params"], blocks, strict=True):
            assert torch.equal(optimizer.state[p]["noise"], block[k])
    # The buffer's draw: the indices of torch.randint on the same stream, gathered by NumPy.
    buffer = ReplayBuffer.stacked(2, 10, OBS_DIM, ACTION_DIM)
    rng = np.random.default_rng(3)
    stored = rng.normal(size=(7, 2, OBS_DIM))
    for obs in stored:
        buffer.add(obs, np.zeros((2, 1)), np.zeros(2), obs + 1, np.zeros(2))
    assert len(buffer) == 7 and all(len(b) == 7 and b.position == 7 for b in buffer.members)
    batch = buffer.sample(4, torch.Generator().manual_seed(5))
    index = torch.randint(7, (2, 4), generator=torch.Generator().manual_seed(5)).numpy()
    for k in range(2):
        np.testing.assert_allclose(batch.obs[k].numpy(), stored[index[k], k], rtol=1e-6)
        np.testing.assert_allclose(batch.next_obs[k].numpy(), stored[index[k], k] + 1, rtol=1e-6)


def test_per_episode_noise_is_drawn_for_the_members_that_start_an_episode():
    """Parameter noise (ε per episode): when only member 0 starts an episode, only its ε is
    new (its row of a fresh draw); member 1 keeps its ε and its acting copy θ̃, taken at its
    episode's start, though μ moved since."""
    population = make_population("Pendulum-v1", [settings("param-noise")] * 2, SEEDS, "cpu")
    population.learn(40, [Callback(), Callback()])  # updates since step 33: μ moved
    first, second = (m.actor_optimizer for m in population.members)
    params = [[p for g in o.param_groups for p in g["params"]] for o in (first, second)]
    noise = [[o.state[p]["noise"].clone() for p in ps] for o, ps in zip((first, second), params)]
    acting = [second.state[p]["perturbed"].clone() for p in params[1]]
    population.rows.end_episodes(np.array([True, False]))  # member 0's episode ends
    population.learn(1, [Callback(), Callback()])
    for p, before in zip(params[1], noise[1], strict=True):
        assert torch.equal(second.state[p]["noise"], before)
    for p, before in zip(params[1], acting, strict=True):
        assert torch.equal(second.state[p]["perturbed"], before)
    perturbed = first.perturbed()
    assert any(perturbed)
    for p, before, drawn in zip(params[0], noise[0], perturbed, strict=True):
        assert torch.equal(first.state[p]["noise"], before) != drawn


def test_members_must_share_the_settings_that_shape_the_stack():
    with pytest.raises(ConfigError, match="share hidden_sizes"):
        make_population(
            "Pendulum-v1", [settings("vadam"), settings("vadam", hidden_sizes=[8, 8])], SEEDS, "cpu"
        )


def runs(logdir: Path, steps: int, seeds=SEEDS) -> list:
    return resolve_runs(
        ["vadam"], seeds, env="Pendulum-v1", total_steps=steps, eval_every=200,
        eval_episodes=2, logdir=str(logdir), compile=False,
        set_options=["hidden_sizes=[16,16]", "log_every=200", "learning_starts=100"],
    )  # fmt: skip


def eval_rows(run_dir: Path) -> list[dict]:
    """eval.csv's rows but their wall time."""
    with open(run_dir / "eval.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k != "wall_time"} for row in csv.DictReader(f)]


def steps(run_dir: Path) -> list[int]:
    return [int(row["step"]) for row in eval_rows(run_dir)]


@pytest.mark.trains
def test_the_same_population_command_gives_the_same_runs_and_resumes(tmp_path):
    """Twice the same population: every member's eval.csv the same; a population resumed
    from its members' checkpoints continues every member."""
    first = [o.error for o in train_population(runs(tmp_path / "a", 400))]
    second = [o.error for o in train_population(runs(tmp_path / "b", 400))]
    assert first == second == [None, None]
    for seed in SEEDS:
        a = tmp_path / "a" / "Pendulum-v1" / "vadam" / f"seed{seed}"
        b = tmp_path / "b" / "Pendulum-v1" / "vadam" / f"seed{seed}"
        assert {p.name for p in a.iterdir()} >= {"config.yaml", "eval.csv", "explore.csv"}
        assert eval_rows(a) == eval_rows(b) and steps(a) == [200, 400]
    rows_a = [eval_rows(tmp_path / "a" / "Pendulum-v1" / "vadam" / f"seed{s}") for s in SEEDS]
    assert rows_a[0] != rows_a[1]  # members are runs of their own
    outcomes = train_population(runs(tmp_path / "a", 600), resume=True)
    assert [o.error for o in outcomes] == [None, None]
    for seed in SEEDS:
        assert steps(tmp_path / "a" / "Pendulum-v1" / "vadam" / f"seed{seed}") == [200, 400, 600]


@pytest.mark.trains
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


@pytest.mark.trains
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


def fail_for(seed: int, after: int, what: str, owner: type = DDPG):
    """An exception of one member's own: ``owner``'s method ``what`` (a member's front's, or
    its run's callback's) raises RuntimeError once for the member of ``seed``, at step
    ``after`` or the first call after it (a fault injected into the project's code, as a
    bug or a library's error of that member would raise)."""
    original = getattr(owner, what)
    raised = []

    def faulty(self, *args, **kwargs):
        agent = self if owner is DDPG else args[0]
        if agent.seed == seed and agent.num_timesteps >= after and not raised:
            raised.append(what)
            raise RuntimeError(f"member {seed}'s {what} broke")
        return original(self, *args, **kwargs)

    return faulty


@pytest.mark.parametrize(
    "phase",
    ["open_run", "act", "add_to_bonus", "with_bonus", "update", "on_episode_end", "on_step"],
)
def test_r6_3_a_member_stops_alone_on_any_exception_of_its_own(tmp_path, monkeypatch, phase):
    """Any exception one member's setup, step, bonus, update or callback (its episode's
    end, its boundaries) raises stops that member alone, named once; the other finishes.
    Only a project error or the disk's did before: any other (``hess_init=[1,1e300]``'s
    overflow) ended every member."""
    bonus = ["bonus.kind=vime", "bonus.fit_every=100", "bonus.min_pool_size=100",
             "bonus.hidden_sizes=[8]", "bonus.num_samples=2"]  # fmt: skip
    # noisy K-FAC's members act and update one by one (each member's act and update)
    strategy = "noisy-kfac" if phase in ("act", "update") else "vadam"
    configs = resolve_runs(
        [strategy], SEEDS, env="Pendulum-v1", total_steps=400, eval_every=200,
        eval_episodes=1, logdir=str(tmp_path), compile=False,
        set_options=["hidden_sizes=[16,16]", "learning_starts=100", "log_every=50",
                     *(bonus if "bonus" in phase else [])],
    )  # fmt: skip
    if phase == "open_run":  # a member's setup: its directory, its checkpoint
        import agents.runs.population_run as population_run

        original = population_run.open_run

        def open_run(config, member, *args, **kwargs):
            if config.seed == SEEDS[1]:
                raise RuntimeError(f"member {SEEDS[1]}'s open_run broke")
            return original(config, member, *args, **kwargs)

        monkeypatch.setattr(population_run, "open_run", open_run)
    elif phase.startswith("on_"):  # its run's callback, called at its boundaries
        monkeypatch.setattr(RunCallback, phase, fail_for(SEEDS[1], 150, phase, RunCallback))
    else:
        monkeypatch.setattr(DDPG, phase, fail_for(SEEDS[1], 150, phase))
    good, bad = train_population(configs)
    assert good.error is None, good.error
    assert steps(good.run_dir) == [200, 400]
    assert isinstance(bad.error, RuntimeError), bad.error
    assert str(bad.error).count(f"member {SEEDS[1]}'s {phase} broke") == 1
    if phase != "open_run":  # it trained: its last good state and its exploration are kept
        assert "last good" in str(bad.error), bad.error
        assert (bad.run_dir / "explore.csv").is_file()


def test_r6_3_an_error_of_the_whole_population_stays_whole(tmp_path, monkeypatch):
    """The shared vector env's batched step is every member's: an exception there (not
    the env's own, which each member reports) ends the population."""
    from agents.ddpg.engine import Engine

    def broken(self, actions):
        raise RuntimeError("the population's step broke")

    monkeypatch.setattr(Engine, "step_envs", broken)
    with pytest.raises(RuntimeError, match="the population's step broke"):
        train_population(runs(tmp_path, 400))


@pytest.mark.trains
def test_a_compiled_population_acts_and_updates_as_the_eager_one():
    """The compiled population (one Inductor graph for every member's update, one for every
    member's action) equals the eager one up to the rounding of fused kernels: the same
    stream of draws, the same steps."""
    configs = [settings("vadam", learning_starts=64)] * 2
    eager = make_population("Pendulum-v1", configs, SEEDS, "cpu")
    eager.learn(150, [Callback(), Callback()])
    compiled_configs = [settings("vadam", learning_starts=64, compile=True)] * 2
    compiled = make_population("Pendulum-v1", compiled_configs, SEEDS, "cpu")
    compiled.learn(150, [Callback(), Callback()])
    assert compiled._update.graph is not None and compiled._acting is not None
    for a, b in zip(eager.members, compiled.members, strict=True):
        for (name, p), (_, q) in zip(a.actor.named_parameters(), b.actor.named_parameters()):
            torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-4, msg=name)

    # Nothing the compiled update keeps grows with the steps (it kept each step's numbers)
    def sizes() -> dict[str, int]:
        graph = compiled._update.graph
        return {k: len(v) for k, v in vars(graph).items() if isinstance(v, (dict, list, set))}

    before, updates = sizes(), compiled.members[0].num_updates
    compiled.learn(100, [Callback(), Callback()])
    assert compiled.members[0].num_updates == updates + 100
    assert sizes() == before


def test_the_memory_check_counts_every_member(tmp_path):
    """A population that cannot fit is refused with one line, before anything is written:
    the estimate is every member's, each part named once with how many members need it."""
    from agents.common.memory_budget import available_memory

    available = available_memory(torch.device("cpu"))
    if available is None:
        pytest.skip("this machine does not say how much memory it has")
    per_member = available // 3 // (4 * 8) + 1  # each member's buffer a third of the memory
    configs = resolve_runs(
        ["vadam"], [0, 1, 2, 3], env="Pendulum-v1", total_steps=200, logdir=str(tmp_path),
        set_options=[f"buffer_size={per_member}", "hidden_sizes=[8,8]"],
    )  # fmt: skip
    with pytest.raises(Exception, match="these settings need at least") as refused:
        train_population(configs)
    assert not (tmp_path / "Pendulum-v1").exists()
    line = str(refused.value)
    for part in ("replay buffer", "one update", "networks"):
        assert line.count(part) == 1 and f"4 × {part}" in line, line


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("compile", [False, True])
def test_a_population_on_its_device_updates_as_on_the_cpu(compile, device):
    """The same injected minibatch and ε on the CPU (the eager update, the reference) and on
    ``device`` (eager or compiled): the same update; then the population learns on its
    device (acting, the envs, ε drawn there)."""
    sides = [
        make_population("Pendulum-v1", [settings("vadam", compile=compiled)] * 2, SEEDS, side)
        for side, compiled in (("cpu", False), (device, compile))
    ]
    rng = np.random.default_rng(0)
    obs, next_obs = rng.normal(size=(2, 40, 2, OBS_DIM))
    for population in sides:
        for t in range(40):
            population.buffer.add(obs[t], np.zeros((2, 1)), np.ones(2), next_obs[t], np.zeros(2))
        population.state.noise.copy_(torch.ones_like(population.state.noise))
    index = rng.integers(40, size=(2, 8))
    for population in sides:
        storage = population.buffer.storage
        picked = torch.as_tensor(index, device=population.device)
        batch = Batch(*(
            torch.stack([storage[name][k][picked[k]] for k in range(2)])
            for name in ReplayBuffer.fields
        ))  # fmt: skip
        population.update(batch)
    for a, b in zip(sides[0].members, sides[1].members, strict=True):
        for p, q in zip(a.critic.parameters(), b.critic.parameters(), strict=True):
            torch.testing.assert_close(p, q.cpu(), rtol=1e-3, atol=1e-4)
    population = sides[1]
    population.learn(5, [Callback(), Callback()])  # acting, the envs, the draws on the device
    noise = population.state.noise  # every member's ε, drawn again as it learned
    assert noise.device.type == device and not torch.equal(noise, torch.ones_like(noise))
    assert all(m.num_timesteps == 5 for m in population.members)


def test_a_population_prints_its_lines_once_for_all_its_members(tmp_path, capsys):
    """One starts line, one line per evaluation (the members' returns as min / median /
    max) and status lines of the population, not of each member."""
    outcomes = train_population(runs(tmp_path, 400, seeds=[0, 1, 2]), progress="lines")
    assert all(o.error is None for o in outcomes)
    lines = capsys.readouterr().out.splitlines()
    ours = [line for line in lines if line.startswith("Pendulum-v1/vadam: 3 members ")]
    assert len([line for line in ours if " starts: " in line]) == 1
    evaluations = [line for line in ours if "eval return" in line and "last eval" not in line]
    assert [line.split(" step ")[1].split(":")[0] for line in evaluations] == ["200", "400"]
    assert all("(min / median / max)" in line for line in evaluations)
    assert not any("/seed" in line and "eval return" in line for line in lines)
    assert any("seed-steps/s (3 members)" in line for line in ours)


@pytest.mark.trains
def test_one_member_says_the_status_lines_and_the_next_when_it_fails(tmp_path, capsys, monkeypatch):
    """Only the member that says a population's status lines is called for them (every
    tenth of the run, and every 100 steps for their time); the others' callbacks are called
    at their own boundaries (the evaluations and logs at 200, the end). When it fails, the
    next member says them from the next step on, for the members left."""
    calls = {seed: [] for seed in (0, 1, 2)}
    on_step = RunCallback.on_step

    def counted(self, agent):
        step = agent.num_timesteps
        calls[self.config.seed].append(step)
        if self.config.seed == 0 and step >= 120:
            raise RuntimeError("member 0 fails")
        return on_step(self, agent)

    monkeypatch.setattr(RunCallback, "on_step", counted)
    outcomes = train_population(runs(tmp_path, 400, seeds=[0, 1, 2]), progress="lines")
    assert [o.error is None for o in outcomes] == [False, True, True]
    assert calls[0] == [40, 80, 100, 120]
    assert calls[2] == [200, 400]  # no status boundary: its own only
    assert calls[1][0] == 121 and set(calls[2]) < set(calls[1])  # it speaks from 121 on
    lines = capsys.readouterr().out.splitlines()
    status = [line for line in lines if "seed-steps/s" in line]
    said = [int(line.split(" step ")[1].split("/")[0]) for line in status]
    assert said == [40, 80, 121, 161, 201, 241, 281, 321, 361], said  # a tenth apart
    assert all(line.endswith("(2 members)") or "(2 members)," in line for line in status[2:])


#: What reads a tensor on the host or sends one to the device: on a GPU each waits for it.
HOST_CROSSINGS = {"item", "cpu", "numpy", "tolist", "to", "tensor", "as_tensor",
                  "__bool__", "__int__", "__float__", "__index__"}  # fmt: skip


class Crossings(torch.overrides.TorchFunctionMode):
    """The names of the tensor functions called inside it that cross to or from the host."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_CROSSINGS:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


def test_a_compiled_population_counts_its_steps_on_its_device(monkeypatch):
    """The compiled update computes each member's numbers from its own step counts inside
    the graph and moves them on there: no flag read back, nothing sent, per update. A
    member whose update is skipped (a non-finite reward) keeps its counts and counts a
    skip; its next steps take their bias corrections from its own count — the eager
    population's updates, member by member, with the members' settings apart."""
    from agents.ddpg.compiled_update import CompiledUpdate, run_traced_graph

    monkeypatch.setattr(CompiledUpdate, "backend", staticmethod(run_traced_graph))
    sides = [
        make_population("Pendulum-v1",
                        [settings("vadam", compile=c), settings("vadam", compile=c, critic_lr=3e-4,
                                                                optimizer_kwargs={"lr": 5e-4})],
                        SEEDS, "cpu")
        for c in (False, True)
    ]  # fmt: skip
    rng = np.random.default_rng(1)
    obs, next_obs = rng.normal(size=(2, 40, 2, OBS_DIM))
    for population in sides:
        for t in range(40):
            population.buffer.add(obs[t], rng.uniform(-2, 2, (2, 1)) * 0, np.ones(2),
                                  next_obs[t], np.zeros(2))  # fmt: skip
        population.state.noise.copy_(torch.ones_like(population.state.noise))
    eager, compiled = sides
    crossings = Crossings()
    for update in range(6):
        index = rng.integers(40, size=(2, 8))
        for population in sides:
            storage = population.buffer.storage
            batch = Batch(*(
                torch.stack([storage[name][k][torch.as_tensor(index[k])] for k in range(2)])
                for name in ReplayBuffer.fields
            ))  # fmt: skip
            if update == 2:  # member 1's update is skipped
                batch = batch._replace(
                    rewards=batch.rewards.clone().index_fill_(0, torch.tensor([1]), float("nan"))
                )
            if population is compiled and update > 0:  # compiled at the first
                with crossings:
                    population.update(batch)
            else:
                population.update(batch)
    assert compiled._update.graph is not None
    assert crossings.seen == []
    for name, counts in compiled.state.step_counts.items():
        expected = torch.tensor([6.0, 5.0]).unsqueeze(1).expand_as(counts)
        assert torch.equal(counts, expected), name
        assert torch.equal(counts, eager.state.step_counts[name]), name
    assert [m.skipped_updates for m in compiled.members] == [0, 1]
    assert [m.skipped_updates for m in eager.members] == [0, 1]
    for a, b in zip(eager.members, compiled.members, strict=True):
        for module in ("actor", "critic"):
            for (name, p), q in zip(getattr(a, module).named_parameters(),
                                    getattr(b, module).parameters(), strict=True):  # fmt: skip
                torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=f"{module}.{name}")


@pytest.mark.parametrize("device", DEVICES)
def test_a_captured_update_is_the_update(device):
    """The population's update replayed from a CUDA graph (agents/ddpg/captured_call.py:
    its minibatch copied into buffers of its own, direct calls first, then the capture and
    its replays) makes the updates the direct calls make, each call one update; on the CPU
    the same copies and calls run."""
    sides = [
        make_population("Pendulum-v1", member_settings("vadam"), SEEDS, device) for _ in range(2)
    ]
    direct, replayed = sides
    assert replayed.capture_update()
    rng = np.random.default_rng(2)
    obs, next_obs = rng.normal(size=(2, 40, 2, OBS_DIM))
    actions, rewards = rng.uniform(-2, 2, size=(40, 2, ACTION_DIM)), rng.normal(size=(40, 2))
    for population in sides:
        for t in range(40):
            population.buffer.add(obs[t], actions[t], rewards[t], next_obs[t], np.zeros(2))
        population.state.noise.copy_(torch.ones_like(population.state.noise))
    for _ in range(5):
        index = rng.integers(40, size=(2, 8))
        for population in sides:
            storage = population.buffer.storage
            picked = torch.as_tensor(index, device=population.device)
            population.update(Batch(*(
                torch.stack([storage[name][k][picked[k]] for k in range(2)])
                for name in ReplayBuffer.fields
            )))  # fmt: skip
    captured = replayed._update.graph.captured
    assert captured is not None and captured.calls == 5
    assert captured.captured == (device == "cuda")
    for name, counts in replayed.state.step_counts.items():
        assert torch.equal(counts, direct.state.step_counts[name]), name
        assert counts.unique().tolist() == [5.0], name
    for a, b in zip(direct.members, replayed.members, strict=True):
        for module in ("actor", "critic", "target_actor", "target_critic"):
            for (name, p), q in zip(getattr(a, module).named_parameters(),
                                    getattr(b, module).parameters(), strict=True):  # fmt: skip
                torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=f"{module}.{name}")


@pytest.mark.parametrize("device", DEVICES)
def test_a_captured_acting_is_the_acting(device):
    """The members' batched acting replayed from a CUDA graph (its observations copied in,
    its actions the capture's output, read before the next replay) acts as the direct
    calls do, every step one call: the same actions stored, bit for bit; on the CPU the
    same copies and calls run. One member acts through its own predict: nothing to capture."""
    sides = [
        make_population("Pendulum-v1", member_settings("vadam"), SEEDS, device) for _ in range(2)
    ]
    direct, replayed = sides
    assert replayed.capture_acting()
    for population in sides:
        population.learn(60, [Callback() for _ in SEEDS])
    captured = replayed._acting.captured
    assert captured is not None and captured.calls == 60
    assert captured.captured == (device == "cuda")
    assert direct._acting.captured is None
    stored = [population.buffer.storage["actions"][:, :60] for population in sides]
    assert torch.equal(*stored) and stored[0].abs().sum() > 0
    alone = make_population("Pendulum-v1", member_settings("vadam")[:1], SEEDS[:1], device)
    assert not alone.capture_acting()
