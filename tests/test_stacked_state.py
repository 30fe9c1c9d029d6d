"""The learning state of N members held stacked, its one owner (agents/ddpg/stacked_state.py).

What is checked: a single run is a state of one built by the same code; member k's networks
are its single run's; every tensor a member trains (parameters, the actor's buffers, optimizer
state and step counts, ε, loss sums, skip count, observation moments, replay buffer) is a view
of its row, so that writing the row is seen through the member and the other way round; a
checkpoint loaded into a member writes into those views (a population resumes on them); and a
regrouped stack holds its members' values and is what they view afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.common.callbacks import Callback
from agents.common.envs import make_env
from agents.common.errors import ConfigError
from agents.ddpg import DDPG
from agents.ddpg.observations import StackedObservationStatistics
from agents.ddpg.population import build_members, make_population
from agents.ddpg.stacked_state import StackedState, load_in_place
from agents.settings import DDPGSettings

SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=16, buffer_size=300,
             normalize_observations=True)  # fmt: skip
SEEDS = [3, 7, 11]


def settings(strategy: str = "vadam", **overrides) -> DDPGSettings:
    return DDPGSettings.from_values({"strategy": strategy, **SMALL, **overrides})


def member_tensors(agent: DDPG) -> dict[str, torch.Tensor]:
    """Every tensor of a member's learning state, by a readable name."""
    tensors = {}
    for module in ("actor", "critic", "target_actor", "target_critic"):
        for name, p in getattr(agent, module).named_parameters():
            tensors[f"{module}.{name}"] = p.data
    for name, b in agent.actor.named_buffers():
        tensors[f"actor buffer {name}"] = b
    for which in ("actor_optimizer", "critic_optimizer"):
        optimizer = getattr(agent, which)
        for i, p in enumerate(optimizer.param_groups[0]["params"]):
            for key, value in optimizer.state[p].items():
                if torch.is_tensor(value):
                    tensors[f"{which}[{i}].{key}"] = value
    tensors["loss_sums"] = agent.learner.loss_sums
    tensors["skipped"] = agent.learner.skipped
    tensors["obs mean"] = agent.obs_statistics.mean
    tensors["obs std"] = agent.obs_statistics.std
    for field in ("obs", "actions", "rewards", "next_obs", "terminated"):
        tensors[f"buffer.{field}"] = getattr(agent.buffer, field)
    return tensors


def stacked_storages(state: StackedState) -> list[torch.Tensor]:
    """Every stack the state owns."""
    stacks = [*state.params["actor"].values(), *state.params["critic"].values(),
              *state.params["target_actor"].values(), *state.params["target_critic"].values(),
              *state.actor_buffers.values(), *state.obs_moments, *state.buffer.storage.values(),
              state.loss_sums, state.skipped, *state.step_counts.values()]  # fmt: skip
    for states in (state.critic_state, state.actor_state or {}):
        for tensors in states.values():
            stacks.extend(tensors)
    if state.noise is not None:
        stacks.append(state.noise)
    return stacks


def owner(tensor: torch.Tensor, stacks: list[torch.Tensor]) -> torch.Tensor | None:
    """The stack whose elements ``tensor`` views, if any."""
    for stack in stacks:
        first = tensor.storage_offset() - stack.storage_offset()
        if (
            tensor.untyped_storage().data_ptr() == stack.untyped_storage().data_ptr()
            and 0 <= first < stack.numel()
        ):
            return stack
    return None


@pytest.mark.parametrize("strategy", ["vadam", "ivon", "param-noise", "adam-plain"])
def test_every_tensor_a_member_trains_is_a_view_of_its_row(strategy):
    envs = [make_env("Pendulum-v1") for _ in SEEDS]
    members = build_members(envs, [settings(strategy)] * 3, SEEDS, "cpu")
    stacks = stacked_storages(members.state)
    for k, agent in enumerate(members.agents):
        for name, tensor in member_tensors(agent).items():
            stack = owner(tensor, stacks)
            assert stack is not None, f"member {k}'s {name} is not a view of the stacked state"
            # its row: the member's first element sits in row k of the stack
            if stack is not members.state.noise:
                first = tensor.storage_offset() - stack.storage_offset()
                assert first // (stack.numel() // stack.shape[0]) == k, name


def test_a_single_run_is_a_state_of_one_and_a_member_starts_as_its_single_run():
    """Member k's networks are its single run's (the same seed, the same build); the
    single run's tensors are views of a stack of one."""
    envs = [make_env("Pendulum-v1") for _ in SEEDS]
    members = build_members(envs, [settings()] * 3, SEEDS, "cpu")
    for seed, member in zip(SEEDS, members.agents, strict=True):
        single = DDPG("Pendulum-v1", settings(), seed=seed, device="cpu")
        for module in ("actor", "critic", "target_actor", "target_critic"):
            theirs = getattr(single, module).state_dict()
            for name, value in getattr(member, module).state_dict().items():
                assert torch.equal(value, theirs[name]), f"{module}.{name}"
        stack = single._stack
        assert len(stack) == 1
        for name, weight in single.actor.named_parameters():
            assert weight.data_ptr() == stack.params["actor"][name][0].data_ptr(), name
        assert single.learner.skipped.data_ptr() == stack.skipped.data_ptr()


def test_the_row_and_the_member_are_one_tensor_both_ways():
    population = make_population("Pendulum-v1", [settings()] * 3, SEEDS, "cpu")
    state, member = population.state, population.members[1]
    name = next(iter(state.params["critic"]))
    state.params["critic"][name][1].fill_(0.25)
    assert torch.all(member.critic.get_parameter(name) == 0.25)
    member.learner.skipped.fill_(5)
    assert state.skipped.tolist() == [0, 5, 0]
    member.actor_optimizer.resample_noise(torch.Generator().manual_seed(0))
    assert torch.count_nonzero(state.noise) > 0  # its ε drawn in place, into its row


def test_a_checkpoint_loaded_into_a_member_is_written_into_its_row(tmp_path):
    """A population member resumes on the stack: the file's values land in its row and its
    tensors stay views (the batched update and acting read the stack)."""
    single = DDPG("Pendulum-v1", settings(), seed=5, device="cpu")
    single.learn(40)  # past learning_starts: optimizer state and ε that are not zero
    path = tmp_path / "latest.pt"
    single.save(path, include_buffer=True)
    population = make_population("Pendulum-v1", [settings()] * 3, SEEDS, "cpu")
    member = population.members[2]
    before = {name: t for name, t in member_tensors(member).items()}
    member.load_checkpoint(path)
    after = member_tensors(member)
    stacks = stacked_storages(population.state)
    for name, tensor in after.items():
        assert tensor is before[name] or owner(tensor, stacks) is not None, name
    saved = single.state_dict(include_buffer=True)
    for name, value in member.actor_optimizer.state_dict()["state"].items():
        for key, tensor in value.items():
            expected = saved["actor_optimizer"]["state"][name][key]
            assert torch.equal(torch.as_tensor(tensor), torch.as_tensor(expected)), (name, key)
    weights = dict(single.actor.named_parameters())
    for name, stack in population.state.params["actor"].items():
        assert torch.equal(stack[2], weights[name].detach())
    assert torch.equal(population.state.buffer.storage["obs"][2][:40], single.buffer.obs[:40])
    population.learn(2, [Callback()] * 3)  # and trains on


def test_load_in_place_gives_torchs_values_in_the_tensors_it_held():
    """Against torch's own load: the same values, the same tensor objects; state the file
    lacks keeps its value."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))]
    trained = torch.optim.Adam(params, lr=0.1)
    for _ in range(3):
        for p in params:
            p.grad = torch.randn_like(p)
        trained.step()
    saved = trained.state_dict()
    fresh_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    fresh = torch.optim.Adam(fresh_params, lr=0.1)
    held = []
    for p in fresh_params:
        fresh.state[p] = {
            "step": torch.tensor(0.0),
            "exp_avg": torch.zeros_like(p),
            "exp_avg_sq": torch.zeros_like(p),
        }
        held.append(dict(fresh.state[p]))
    load_in_place(fresh, saved)
    reference = torch.optim.Adam([torch.nn.Parameter(p.detach().clone()) for p in params])
    reference.load_state_dict(saved)
    for p, mine, ref_p in zip(fresh_params, held, reference.param_groups[0]["params"]):
        for key, tensor in fresh.state[p].items():
            assert tensor is mine[key]
            assert torch.equal(tensor, reference.state[ref_p][key])
    partial = {"state": {0: {"step": torch.tensor(7.0)}}, "param_groups": saved["param_groups"]}
    load_in_place(fresh, partial)
    assert float(fresh.state[fresh_params[0]]["step"]) == 7.0
    assert fresh.state[fresh_params[0]]["exp_avg"] is held[0]["exp_avg"]
    assert torch.equal(
        held[0]["exp_avg"], reference.state[reference.param_groups[0]["params"][0]]["exp_avg"]
    )


def test_a_regrouped_stack_holds_its_members_values_and_they_view_it():
    envs = [make_env("Pendulum-v1") for _ in SEEDS]
    members = build_members(envs, [settings()] * 3, SEEDS, "cpu")
    for agent in members.agents:
        agent.actor_optimizer.resample_noise(torch.Generator().manual_seed(agent.seed))
    values = [member_tensors(agent) for agent in members.agents]
    values = [{k: v.clone() for k, v in row.items()} for row in values]
    regrouped = members.state.regrouped([2, 0])
    assert len(regrouped) == 2
    stacks = stacked_storages(regrouped)
    for k, old in zip([2, 0], [values[2], values[0]], strict=True):
        agent = members.agents[k]
        for name, tensor in member_tensors(agent).items():
            assert torch.equal(tensor, old[name]), name
            assert owner(tensor, stacks) is not None, name


def test_settings_that_cannot_share_a_stack_are_refused_before_anything_is_allocated():
    env = make_env("Pendulum-v1")
    with pytest.raises(ConfigError, match="share hidden_sizes"):
        StackedState.build(
            [settings(), settings(hidden_sizes=[8, 8])], [0, 1], env.observation_space,
            env.action_space, torch.device("cpu"),
        )  # fmt: skip
    with pytest.raises(ConfigError, match="memory"):
        StackedState.build(
            [settings(buffer_size=10**12)], [0], env.observation_space, env.action_space,
            torch.device("cpu"),
        )  # fmt: skip


def test_stacked_observation_statistics_are_each_members_running_statistics():
    """One update of every member's observation (or of some members') gives each row the
    statistics of baselines' RunningMeanStd over that member's observations alone, computed
    here from the formula: float64 sums from a prior count and Σx² of 0.01, mean and std in
    float32, std ≥ 0.1."""
    rng = np.random.default_rng(0)
    stack = StackedObservationStatistics(3, 2)
    seen = [[], [], []]
    for t in range(20):
        obs = rng.normal(3.0, 2.0, size=(3, 2))
        rows = None if t % 3 else np.array([True, False, t % 2 == 0])
        stack.update(obs, rows)
        for k in range(3):
            if rows is None or rows[k]:
                seen[k].append(obs[k])
    for k, observations in enumerate(seen):
        x = np.array(observations)
        count = 0.01 + len(x)
        mean = (x.sum(0) / count).astype(np.float32)
        variance = ((0.01 + np.square(x).sum(0)) / count).astype(np.float32) - np.square(mean)
        std = np.sqrt(np.maximum(variance, np.float32(0.01)))
        np.testing.assert_array_equal(stack.mean[k].numpy(), mean)
        np.testing.assert_array_equal(stack.std[k].numpy(), std)
        row = stack.row(k)
        assert float(row.state_dict()["count"]) == pytest.approx(count, rel=1e-12)
        assert row.mean.data_ptr() == stack.mean[k].data_ptr()
