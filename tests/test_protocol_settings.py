"""Plappert et al.'s DDPG protocol as settings of the native DDPG, each checked where it acts.

The critic's loss of a real update is recomputed in NumPy from the weights before it (its
LayerNorms, its L2 penalty over the weight matrices baselines penalises, the observations
normalised by the agent's statistics); the statistics equal a NumPy reference of the
stored observations and survive a checkpoint; updates come ``gradient_steps`` at a time
every ``train_every`` steps. Eager against compiled: ``tests/test_compiled_update.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import DDPG
from agents.common.callbacks import Callback
from agents.common.errors import CheckpointError, ConfigError
from agents.ddpg.networks import Critic
from agents.ddpg.replay_buffer import Batch
from agents.settings import resolve_settings

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

SMALL = dict(hidden_sizes=[32, 24], batch_size=16)


def agent(**overrides) -> DDPG:
    settings = {**SMALL, "strategy": "adam-plain", **overrides}
    return DDPG("Pendulum-v1", seed=0, device="cpu", **settings)


# ----------------------------------------------------------------- NumPy references
def weights(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().double().numpy().copy() for k, v in module.state_dict().items()}


def np_layer_norm(x: np.ndarray, w: dict, name: str, eps: float = 1e-5) -> np.ndarray:
    """LayerNorm over the last axis with a learned scale and shift (torch's ε)."""
    centred = x - x.mean(-1, keepdims=True)
    scaled = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)
    return scaled * w[f"{name}.weight"] + w[f"{name}.bias"]


def np_critic(w: dict, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Q(s, a): obs layer, [h, a] joint layer, then the head; a LayerNorm before each
    hidden ReLU where the critic has one (baselines models.py l.59-69)."""

    def hidden(x, layer, name):
        x = x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        if f"norms.{layer}.weight" in w:
            x = np_layer_norm(x, w, f"norms.{layer}")
        return np.maximum(x, 0.0)

    h = hidden(obs, 0, "obs_layer")
    h = hidden(np.concatenate([h, actions], axis=-1), 1, "joint_layer")
    heads = sorted({int(k.split(".")[1]) for k in w if k.startswith("head.")})
    for layer, index in enumerate(heads[:-1], start=2):
        h = hidden(h, layer, f"head.{index}")
    last = f"head.{heads[-1]}"
    return (h @ w[f"{last}.weight"].T + w[f"{last}.bias"])[:, 0]


def np_actor(w: dict, obs: np.ndarray) -> np.ndarray:
    h = obs
    layers = sorted({int(k.split(".")[1]) for k in w if k.startswith("net.")})
    for index in layers[:-1]:
        h = np.maximum(h @ w[f"net.{index}.weight"].T + w[f"net.{index}.bias"], 0.0)
    last = f"net.{layers[-1]}"
    out = np.tanh(h @ w[f"{last}.weight"].T + w[f"{last}.bias"])
    return out * w["action_scale"] + w["action_offset"]


def np_statistics(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """baselines' RunningMeanStd(epsilon=1e-2) over these rows: count and Σx² start at
    0.01; std = √max(Σx²/n − mean², 0.01) (mpi_running_mean_std.py l.6-26)."""
    x = observations.astype(np.float64)
    count = len(x) + 1e-2
    mean = x.sum(0) / count
    variance = (np.square(x).sum(0) + 1e-2) / count - mean**2
    return mean, np.sqrt(np.maximum(variance, 1e-2))


def next_batch(learner: DDPG) -> Batch:
    """The minibatch the learner's next update draws (its generator, copied)."""
    generator = torch.Generator().manual_seed(0)
    generator.set_state(learner.generator.get_state())
    return learner.buffer.sample(learner.config.batch_size, generator)


def filled(learner: DDPG, steps: int = 120) -> DDPG:
    """``learner`` after ``steps`` steps without an update (learning_starts not reached)."""
    learner.learn(steps)
    assert learner.num_updates == 0
    return learner


def with_outputs_that_matter(learner: DDPG) -> DDPG:
    """``learner`` whose critics' Q is of the rewards' order (at their U(±3e-3) start the
    targets' Q, and so how s′ is fed, would hardly move the loss)."""
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for critic in (learner.critic, learner.target_critic):
            critic.head[-1].weight.normal_(0.0, 3.0, generator=gen.manual_seed(2))
    return learner


def one_update_critic_loss(learner: DDPG) -> float:
    learner.pop_losses()
    learner.train_step()
    return learner.pop_losses()["critic"]


def reference_critic_loss(learner: DDPG, batch: Batch, normalise=lambda x: x) -> float:
    """The squared TD error of ``batch`` from the current weights, in NumPy."""
    critic, target_critic = weights(learner.critic), weights(learner.target_critic)
    target_actor = weights(learner.target_actor)
    obs, next_obs = (normalise(x.double().numpy()) for x in (batch.obs, batch.next_obs))
    actions, rewards = batch.actions.double().numpy(), batch.rewards.double().numpy()
    done = batch.terminated.double().numpy()
    next_q = np_critic(target_critic, next_obs, np_actor(target_actor, next_obs))
    target = rewards + 0.99 * (1 - done) * next_q
    return float(np.mean((np_critic(critic, obs, actions) - target) ** 2))


# ----------------------------------------------------------------- the critic
def test_the_critic_has_a_layer_norm_after_each_hidden_layer_before_its_relu():
    critic = Critic(5, 2, [16, 8, 6], layer_norm=True)
    names = [name for name, _ in critic.named_parameters()]
    plain = [name for name, _ in Critic(5, 2, [16, 8, 6]).named_parameters()]
    assert names == plain + [f"norms.{i}.{p}" for i in range(3) for p in ("weight", "bias")]
    assert [norm.normalized_shape for norm in critic.norms] == [(16,), (8,), (6,)]
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # norms that matter: not the identity they start as
        for norm in critic.norms:
            norm.weight.normal_(1.0, 0.5, generator=gen)
            norm.bias.normal_(0.0, 0.5, generator=gen)
        obs, actions = torch.randn(7, 5, generator=gen), torch.randn(7, 2, generator=gen)
        q = critic(obs, actions).double().numpy()
    np.testing.assert_allclose(
        q, np_critic(weights(critic), obs.double().numpy(), actions.double().numpy()), rtol=1e-5
    )
    assert critic.weight_names() == ["obs_layer.weight", "joint_layer.weight",
                                     "head.0.weight", "head.2.weight"]  # fmt: skip


def test_the_critics_loss_adds_half_lambda_times_its_squared_weight_matrices():
    """baselines ddpg.py l.183-192: λ·l2_loss (½Σw²) over every kernel of the critic, the
    output layer's too at 8b3a6c2; not the biases nor the LayerNorm's scale and shift."""
    lam = 5.0  # large enough that λW stands out of the gradients' float32 rounding
    learner = filled(agent(critic_l2_reg=lam, critic_layer_norm=True, learning_starts=500))
    plain = filled(agent(critic_layer_norm=True, learning_starts=500))
    with torch.no_grad():  # norms that are not the identity, the same in both
        for a, b in zip(learner.critic.norms, plain.critic.norms, strict=True):
            a.weight.uniform_(0.5, 1.5), a.bias.uniform_(-0.5, 0.5)
            b.weight.copy_(a.weight), b.bias.copy_(a.bias)
    batch = next_batch(learner)
    w = weights(learner.critic)
    matrices = ("obs_layer.weight", "joint_layer.weight", "head.0.weight")  # the output's too
    penalty = lam * 0.5 * sum(np.sum(w[name] ** 2) for name in matrices)
    expected = reference_critic_loss(learner, batch) + penalty
    assert one_update_critic_loss(learner) == pytest.approx(expected, rel=1e-5)
    assert one_update_critic_loss(plain) == pytest.approx(expected - penalty, rel=1e-5)
    # The gradients differ by λW on the weight matrices, by nothing elsewhere.
    for (name, p), (_, q) in zip(
        learner.critic.named_parameters(), plain.critic.named_parameters(), strict=True
    ):
        penalised = name in learner.critic.weight_names()
        extra = lam * w[name] if penalised else 0.0
        rounding = 1e-6 * float(q.grad.abs().max())  # float32 gradients, differenced
        assert not penalised or rounding < 0.01 * np.abs(extra).max(), name  # λW stands out
        np.testing.assert_allclose(
            (p.grad - q.grad).double().numpy(), np.broadcast_to(extra, p.shape), atol=rounding
        )


# ----------------------------------------------------------------- observations
def test_observation_statistics_are_a_running_mean_and_std_of_the_stored_observations():
    learner = filled(agent(normalize_observations=True, learning_starts=500), steps=150)
    stored = learner.buffer.obs[:150].numpy()  # the raw s of every transition
    assert np.abs(stored).max() > 1.0  # raw: the buffer holds the task's own
    mean, std = np_statistics(stored)
    np.testing.assert_allclose(learner.obs_statistics.mean.numpy(), mean, rtol=1e-6)
    np.testing.assert_allclose(learner.obs_statistics.std.numpy(), std, rtol=1e-6)
    fresh = agent(normalize_observations=True)
    assert torch.equal(fresh.obs_statistics.std, torch.ones(3))  # the prior's std is 1


def test_the_networks_see_observations_normalised_and_clipped_at_5():
    learner = filled(agent(normalize_observations=True, learning_starts=500), steps=150)
    with_outputs_that_matter(learner)
    mean, std = np_statistics(learner.buffer.obs[:150].numpy())
    obs = np.stack([mean + 100 * std, mean - 100 * std, mean + 0.5 * std]).astype(np.float32)
    normalised = np.clip((obs - mean) / std, -5, 5)
    np.testing.assert_allclose(normalised[:2], [[5, 5, 5], [-5, -5, -5]])
    # acting (and evaluation, through predict) ...
    np.testing.assert_allclose(
        learner.predict(obs), np_actor(weights(learner.actor), normalised), rtol=1e-5, atol=1e-6
    )
    # ... and the update: s and s' of the minibatch, for the critic and the target networks
    batch = next_batch(learner)
    expected = reference_critic_loss(learner, batch, lambda x: np.clip((x - mean) / std, -5, 5))
    assert one_update_critic_loss(learner) == pytest.approx(expected, rel=1e-5)
    raw = with_outputs_that_matter(filled(agent(learning_starts=500), steps=150))
    assert one_update_critic_loss(raw) != pytest.approx(expected, rel=1e-3)


def test_observation_statistics_are_saved_and_restored_by_checkpoints(tmp_path):
    """Saved with or without the buffer; a run resumed at an episode's end continues as
    the uninterrupted one (Pendulum: 200-step episodes)."""
    settings = dict(normalize_observations=True, learning_starts=64)
    whole = agent(**settings)
    whole.learn(200)
    assert "observation_statistics" in whole.state_dict(include_buffer=False)
    whole.save(tmp_path / "a.pt", include_buffer=True)
    resumed = agent(**settings)
    resumed.load_checkpoint(tmp_path / "a.pt")
    for key, value in whole.obs_statistics.state_dict().items():
        assert torch.equal(resumed.obs_statistics.state_dict()[key], value), key
    assert torch.equal(resumed.obs_statistics.std, whole.obs_statistics.std)
    for learner in (whole, resumed):
        learner.learn(100)
    assert torch.equal(resumed.obs_statistics.mean, whole.obs_statistics.mean)
    for name, value in whole.actor.state_dict().items():
        assert torch.equal(resumed.actor.state_dict()[name], value), name

    agent(learning_starts=64).save(tmp_path / "raw.pt")  # a run without statistics
    with pytest.raises(CheckpointError, match=r"does not match.*observation_statistics"):
        agent(**settings).load_checkpoint(tmp_path / "raw.pt")


# ----------------------------------------------------------------- the schedule
class UpdatesPerStep(Callback):
    def __init__(self) -> None:
        self.updates: list[int] = []

    def on_step(self, agent) -> bool:
        self.updates.append(agent.num_updates)
        return True


def test_gradient_steps_updates_come_every_train_every_steps():
    learner = agent(train_every=10, gradient_steps=3, learning_starts=25)
    record = UpdatesPerStep()
    learner.learn(75, record)
    made = {step: n - m for step, (m, n) in
            enumerate(zip([0, *record.updates], record.updates), start=1) if n != m}  # fmt: skip
    # step 20: 20 transitions, not more than 25; from step 30 on, 3 every 10 steps
    assert made == {30: 3, 40: 3, 50: 3, 60: 3, 70: 3}
    every_step = agent(learning_starts=25)
    every_step.learn(30)
    assert every_step.num_updates == 5  # the default: one per step once past learning_starts


# ----------------------------------------------------------------- where they apply
@pytest.mark.parametrize(
    "option",
    ["train_every=100", "normalize_observations=true", "critic_layer_norm=true",
     "critic_l2_reg=0.01"],
)  # fmt: skip
def test_the_sb3_engine_refuses_the_native_protocol_settings(option):
    key = option.split("=")[0]
    with pytest.raises(ConfigError, match=f"^{key} applies to the native engine only"):
        resolve_settings(engine="sb3", set_options=[option])
    with pytest.raises(ConfigError, match=f"^{key} applies to a DDPG learner"):
        resolve_settings(engine="sb3", algo="trpo", set_options=[option])
