"""The DDPG agent on real gymnasium environments: semantics of the paper's Algorithms 1-2."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents import DDPG, ConfigError, evaluate, evaluate_together
from agents.ddpg.networks import Actor, Critic
from agents.ddpg.replay_buffer import ReplayBuffer

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

SMALL = dict(hidden_sizes=[32, 32], learning_starts=64, batch_size=16)


def small_agent(strategy="vadam", env="Pendulum-v1", seed=0, **overrides):
    return DDPG(env, seed=seed, device="cpu", strategy=strategy, **{**SMALL, **overrides})


def test_actor_respects_action_bounds():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 5.0])
    actor = Actor(3, low, high, [8, 8])
    # Seeded: with some random weights every ReLU is dead and the action is constant.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in actor.parameters():
            p.normal_(0, 10, generator=gen)  # saturate tanh
        actions = actor(torch.randn(1000, 3, generator=gen) * 10)
    assert torch.all(actions >= torch.tensor(low, dtype=torch.float32))
    assert torch.all(actions <= torch.tensor(high, dtype=torch.float32))
    assert actions[:, 1].min() < 0.01 and actions[:, 1].max() > 4.99


def test_critic_takes_action_at_second_layer():
    critic = Critic(obs_dim=5, action_dim=2, hidden_sizes=[16, 8])
    assert critic.obs_layer.in_features == 5
    assert critic.joint_layer.in_features == 16 + 2
    assert critic(torch.zeros(4, 5), torch.zeros(4, 2)).shape == (4,)


def test_replay_buffer_is_fifo_and_round_trips():
    buffer = ReplayBuffer(3, obs_dim=1, action_dim=1)
    for i in range(5):
        buffer.add(np.array([i]), np.array([i * 10]), float(i), np.array([i + 1]), i == 4)
    assert len(buffer) == 3
    assert sorted(buffer.obs[:, 0].tolist()) == [2.0, 3.0, 4.0]
    batch = buffer.sample(100, torch.Generator().manual_seed(0))
    assert set(batch.obs[:, 0].tolist()) == {2.0, 3.0, 4.0}
    torch.testing.assert_close(batch.actions, batch.obs * 10)
    torch.testing.assert_close(batch.next_obs, batch.obs + 1)
    torch.testing.assert_close(batch.terminated, (batch.obs[:, 0] == 4).float())
    clone = ReplayBuffer(3, obs_dim=1, action_dim=1)
    clone.load_state_dict(buffer.state_dict())
    assert torch.equal(clone.obs, buffer.obs) and clone.position == buffer.position


class Recorder:
    """Records the first-layer weight the actor computes with at every forward call."""

    def __init__(self, agent: DDPG):
        self.calls: list[tuple[str, torch.Tensor]] = []
        self.phase = "act"

        def hook(module, args, kwargs):
            weights = args[1] if len(args) > 1 else kwargs.get("weights")
            used = module.net[0].weight if weights is None else weights["net.0.weight"]
            self.calls.append((self.phase, used.detach().clone()))

        agent.actor.register_forward_pre_hook(hook, with_kwargs=True)
        original = agent.update

        def update(batch):
            self.phase = "train"
            original(batch)
            self.phase = "act"

        agent.update = update

    def act_then_train(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(acting weights, training weights) of every step that acted and then updated."""
        calls = self.calls
        return [(calls[i][1], calls[i + 1][1]) for i in range(len(calls) - 1)
                if calls[i][0] == "act" and calls[i + 1][0] == "train"]  # fmt: skip


@pytest.mark.parametrize(
    "optimizer", ["vadam", "vadagrad", "adam-explore", "sgd-explore", "noisy-adam", "noisy-kfac"]
)
def test_actor_gradient_is_taken_at_the_weights_that_acted(optimizer):
    """One θ_t per step, used to act and for that step's update (decisions: sample-per-step)."""
    agent = small_agent(optimizer, learning_starts=20)
    recorder = Recorder(agent)
    agent.learn(30)
    pairs = recorder.act_then_train()
    assert len(pairs) == 10
    for acted, trained in pairs:
        assert torch.equal(acted, trained)
    acting = [w for phase, w in recorder.calls if phase == "act"]
    assert not torch.equal(acting[0], acting[1])  # a new sample every step
    mean = agent.actor.net[0].weight.detach()
    assert not torch.equal(acting[-1], mean)  # acting used a sample, not μ


def test_parameter_noise_acts_perturbed_and_trains_the_mean():
    """Plappert et al.: a perturbed copy taken at the episode start acts for the whole
    episode, while the unperturbed actor gets the gradient."""
    agent = small_agent("param-noise", learning_starts=20)
    start = agent.actor.net[0].weight.detach().clone()  # μ at the episode's start
    recorder = Recorder(agent)
    agent.learn(30)
    pairs = recorder.act_then_train()
    assert len(pairs) == 10
    sigma = agent.actor_optimizer.param_groups[0]["noise_std"]  # not adapted before step 50
    noise = agent.actor_optimizer.state[agent.actor.net[0].weight]["noise"]  # one per episode
    acted = [a for a, _ in pairs]
    trained = [t for _, t in pairs]
    assert all(torch.equal(a, acted[0]) for a in acted)  # one copy for the episode
    torch.testing.assert_close(acted[0] - start, sigma * noise)
    assert not torch.equal(trained[0], trained[-1])  # while μ is trained, at μ
    torch.testing.assert_close(trained[-1], agent.actor.net[0].weight.detach(), atol=1e-3, rtol=0)


def test_per_episode_resampling_keeps_the_noise_within_an_episode():
    agent = small_agent("vadam", resample="episode", learning_starts=1000)
    weight = agent.actor.net[0].weight
    agent.learn(1)
    noise = agent.actor_optimizer.state[weight]["noise"].clone()
    agent.learn(150)  # Pendulum episodes have 200 steps
    assert torch.equal(agent.actor_optimizer.state[weight]["noise"], noise)
    agent.learn(100)
    assert not torch.equal(agent.actor_optimizer.state[weight]["noise"], noise)


@pytest.mark.parametrize("optimizer", ["sgd-plain", "adam-plain"])
def test_plain_strategies_act_with_the_mean(optimizer):
    agent = small_agent(optimizer)
    agent.learn(100)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(agent.predict(obs, False), agent.predict(obs, True))


def test_target_actor_tracks_the_mean_not_the_sample():
    agent = small_agent("vadam", tau=0.1)
    agent.learn(100)
    agent.actor_optimizer.resample_noise(agent.generator)
    target_before = copy.deepcopy(agent.target_actor.state_dict())
    agent.train_step()
    for name, mean in agent.actor.state_dict().items():
        if name.startswith("action_"):
            continue
        expected = 0.9 * target_before[name] + 0.1 * mean
        torch.testing.assert_close(agent.target_actor.state_dict()[name], expected)


def test_sum_reduction_scales_the_actor_gradient_by_the_batch_size():
    """With the same seed, the summed gradient is batch_size × the mean (summed-gradient)."""
    grads = {}
    for reduction in ("sum", "mean"):
        agent = small_agent("sgd-plain", actor_grad_reduction=reduction, batch_size=16)
        agent.learn(64)  # no update yet: both agents are identical up to here
        agent.train_step()
        grads[reduction] = agent.actor.net[0].weight.grad
    torch.testing.assert_close(grads["sum"], 16 * grads["mean"])
    assert grads["mean"].abs().max() > 0


def test_truncation_is_bootstrapped_termination_is_not():
    agent = small_agent("adam-plain", learning_starts=10_000)
    agent.learn(200)  # one full Pendulum episode, truncated at 200 steps
    assert len(agent.buffer) == 200
    assert agent.buffer.terminated[:200].sum() == 0


def test_same_seed_gives_identical_evaluations():
    returns = []
    for _ in range(2):
        agent = small_agent("vadam", seed=3)
        agent.learn(300)
        returns.append(evaluate(agent, gym.make("Pendulum-v1"), 2, seed=7))
    assert returns[0] == returns[1]
    other = small_agent("vadam", seed=4)
    other.learn(300)
    assert evaluate(other, gym.make("Pendulum-v1"), 2, seed=7) != returns[0]


@pytest.mark.parametrize("optimizer", ["vadam", "adam-explore", "adam-plain"])
def test_save_load_restores_everything_and_continues_identically(tmp_path, optimizer):
    agent = small_agent(optimizer)
    agent.learn(400)  # two full episodes: the checkpoint is at an episode boundary
    agent.save(tmp_path / "agent.pt", include_buffer=True)
    restored = DDPG.load(tmp_path / "agent.pt", device="cpu")

    assert restored.num_timesteps == agent.num_timesteps == 400
    assert restored.num_updates == agent.num_updates
    for name in ("actor", "critic", "target_actor", "target_critic"):
        for (key, a), b in zip(
            getattr(agent, name).state_dict().items(), getattr(restored, name).state_dict().values()
        ):
            assert torch.equal(a, b), (name, key)
    for a, b in zip(agent.actor_optimizer.sampling_std(), restored.actor_optimizer.sampling_std()):
        assert torch.equal(a, b)
    assert torch.equal(agent.generator.get_state(), restored.generator.get_state())

    agent.learn(150)
    restored.learn(150)
    for a, b in zip(agent.actor.parameters(), restored.actor.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(agent.critic.obs_layer.weight, restored.critic.obs_layer.weight)


def test_discrete_action_space_is_rejected():
    with pytest.raises(ConfigError, match="Discrete action space; DDPG needs a continuous"):
        DDPG("CartPole-v1", device="cpu")


def test_unknown_env_is_rejected():
    with pytest.raises(ConfigError, match="unknown environment 'NoSuchEnv-v0'"):
        DDPG("NoSuchEnv-v0", device="cpu")


def test_unknown_agent_setting_is_rejected():
    with pytest.raises(ConfigError, match="batchsize"):
        DDPG("Pendulum-v1", device="cpu", batchsize=3)


def test_episodes_stepped_together_return_what_sequential_episodes_return():
    """One forward pass per step for all test episodes: the same returns, up to the float
    rounding of a batched matrix product (Pendulum does not amplify it over an episode)."""
    agent = small_agent("vadam", hidden_sizes=[64, 64])
    agent.learn(600)
    sequential = evaluate(agent, gym.make("Pendulum-v1"), 5, seed=11)
    together = evaluate_together(agent, [gym.make("Pendulum-v1") for _ in range(5)], seed=11)
    assert together == pytest.approx(sequential, rel=1e-6)
