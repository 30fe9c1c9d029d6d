"""Parameter noise as Plappert et al. released it (OpenAI baselines ``ddpg/``), and the
layer-normalised actor it perturbs.

* the acting weights θ̃ = μ + σε are taken once per episode and stay fixed until the next;
* σ adapts on a separate copy perturbed with fresh noise, not the acting one;
* LayerNorm parameters are trained but never perturbed, and left out of σ statistics;
* per-episode perturbation is the default wherever the strategy is built.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import DDPG as SB3DDPG
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

import agents.sb3.policy  # registers the policy alias; its callback is used below
import param_explore as pe
from agents import DDPG
from agents.common.callbacks import Callback
from agents.common.errors import ConfigError
from agents.ddpg.networks import Actor
from agents.settings import resolve_settings

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

SMALL = dict(hidden_sizes=[32, 32], batch_size=16)


def agent(strategy="param-noise", **overrides):
    return DDPG("Pendulum-v1", seed=0, device="cpu", strategy=strategy, **{**SMALL, **overrides})


def acting_weights(agent: DDPG) -> list[torch.Tensor]:
    return [t.clone() for t in agent.actor_optimizer.sample()]


def adapted(sigmas: list[float]) -> bool:
    """Whether σ was adapted while these values were recorded: every adaptation multiplies
    or divides it by the factor, so it changes — but as many steps up as down return it to
    where it was, which a comparison of the first and last values would take for none."""
    return len(set(sigmas)) > 1


class SigmaRecorder(Callback):
    """σ after every step of the native agent."""

    def __init__(self) -> None:
        self.sigmas: list[float] = []

    def on_step(self, agent: DDPG) -> bool:
        self.sigmas.append(agent.actor_optimizer.param_groups[0]["noise_std"])
        return True


def test_acting_copy_is_fixed_for_the_episode_and_redrawn_at_the_next():
    a = agent(optimizer_kwargs=dict(adaptation_interval=10), layer_norm=True)
    a.learn(120)  # inside the first 200-step episode: μ trained, σ adapted 11 times
    during = acting_weights(a)
    sigma_during = a.actor_optimizer.param_groups[0]["noise_std"]
    mean_during = [p.detach().clone() for p in a.actor.parameters()]
    recorder = SigmaRecorder()
    a.learn(80, recorder)  # the episode's last step
    assert all(torch.equal(x, y) for x, y in zip(during, acting_weights(a)))
    assert adapted([sigma_during, *recorder.sigmas])  # at steps 130, ..., 200
    assert not torch.equal(mean_during[0], a.actor.net[0].weight)  # μ moved meanwhile

    mean_at_start = [p.detach().clone() for p in a.actor.parameters()]
    sigma = a.actor_optimizer.param_groups[0]["noise_std"]
    a.learn(1)  # a new episode: θ̃ = μ + σε with the μ and σ of its start
    new = acting_weights(a)
    names = [n for n, _ in a.actor.named_parameters()]
    for name, theta, mean in zip(names, new, mean_at_start):
        if name.startswith("norms."):
            assert torch.equal(theta, mean)  # LayerNorm: copied, never perturbed
            continue
        z = ((theta - mean) / sigma).flatten().double()
        if z.numel() >= 1000:  # standard normal
            assert abs(z.mean().item()) < 0.1 and abs(z.std().item() - 1) < 0.05, name


def test_adaptation_uses_a_fresh_perturbation_and_leaves_the_acting_copy():
    torch.manual_seed(0)
    actor = Actor(3, -np.ones(2), np.ones(2), (16, 16), layer_norm=True)
    opt = pe.make_optimizer("param-noise", actor, initial_std=0.05)
    opt.resample_noise(torch.Generator().manual_seed(1))
    acting = [t.clone() for t in opt.sample()]
    obs = torch.randn(64, 3)
    generator = torch.Generator().manual_seed(2)
    expected_draws = torch.Generator().manual_seed(2)

    with torch.no_grad():
        distance = opt.adapt_noise(lambda w: actor(obs, w), generator)
        # Independently: fresh N(0, σ²) on every weight and bias of the Linear layers
        # (drawn in parameter order), nothing on the norms; RMS action difference.
        copy = {
            name: p + 0.05 * torch.randn(p.shape, generator=expected_draws)
            if not name.startswith("norms.")
            else p
            for name, p in actor.named_parameters()
        }
        mean_actions = actor(obs).numpy()
        copy_actions = actor(obs, copy).numpy()
    expected = float(np.sqrt(np.mean((mean_actions - copy_actions) ** 2)))
    assert distance == pytest.approx(expected, rel=1e-5)
    assert all(torch.equal(x, y) for x, y in zip(acting, opt.sample()))  # acting copy kept
    factor = 1.01 if expected <= 0.2 else 1 / 1.01
    assert opt.param_groups[0]["noise_std"] == pytest.approx(0.05 * factor)


@pytest.mark.parametrize("optimizer", ["vadam", "adam-explore", "param-noise", "noisy-adam"])
def test_layer_norm_parameters_are_trained_but_never_perturbed(optimizer):
    a = agent(optimizer, layer_norm=True)
    names = [n for n, _ in a.actor.named_parameters()]
    assert names[-4:] == ["norms.0.weight", "norms.0.bias", "norms.1.weight", "norms.1.bias"]
    before = [p.detach().clone() for p in a.actor.parameters()]
    a.learn(200)  # one whole episode
    at_episode_start = [p.detach().clone() for p in a.actor.parameters()]
    a.learn(1)
    opt = a.actor_optimizer
    # θ is formed from μ as it is now, or (param-noise) from μ at the episode's start.
    means = at_episode_start if a.resample == "episode" else list(a.actor.parameters())
    stds = opt.sampling_std()
    for name, theta, mean, std, old in zip(names, opt.sample(), means, stds, before):
        if name.startswith("norms."):
            assert torch.equal(theta, mean), name  # θ = μ exactly
            assert torch.all(std == 0), name
            assert not torch.equal(mean, old), name  # but trained
        else:
            assert not torch.equal(theta, mean), name
    perturbed = torch.cat([s.flatten() for n, s in zip(names, stds) if not n.startswith("norms.")])
    assert opt.exploration_statistics()["sigma_min"] == pytest.approx(perturbed.min().item())
    assert opt.exploration_statistics()["sigma_min"] > 0


def test_per_episode_perturbation_is_the_default_wherever_param_noise_is_built():
    assert agent().resample == "episode"
    assert agent("vadam").resample == "step"
    assert agent(resample="step").resample == "step"  # an explicit choice wins
    assert resolve_settings(strategy="param-noise").learner.strategy.resample == "episode"
    assert resolve_settings(strategy="vadam").learner.strategy.resample == "step"
    model = SB3DDPG(
        "ParamExplorePolicy",
        "Pendulum-v1",
        policy_kwargs=dict(strategy="param-noise", net_arch=[8, 8]),
        device="cpu",
    )
    assert model.policy.resample == "episode"


def _layer_norms_of_native(agent_: DDPG) -> int:
    return sum(isinstance(m, torch.nn.LayerNorm) for m in agent_.actor.modules())


def _layer_norms_of_sb3(strategy: str) -> int:
    model = SB3DDPG(
        "ParamExplorePolicy", "Pendulum-v1", device="cpu",
        policy_kwargs=dict(strategy=strategy, net_arch=[8, 8]),
    )  # fmt: skip
    return sum(isinstance(m, torch.nn.LayerNorm) for m in model.policy.actor.modules())


@pytest.mark.parametrize(("strategy", "norms"), [("param-noise", 2), ("vadam", 0)])
def test_a_strategys_actor_is_the_same_from_the_cli_python_and_sb3(strategy, norms):
    """A preset means one network everywhere: parameter noise perturbs a layer-normalised
    actor (two hidden layers, two norms) whether it is built by ``train_agent``'s resolved
    config, by ``DDPG(...)`` in Python without a config, or as SB3's policy."""
    config = resolve_settings(strategy=strategy, set_options=["hidden_sizes=[8,8]"])
    from_cli = DDPG("Pendulum-v1", config.learner, seed=0, device="cpu")
    from_python = DDPG("Pendulum-v1", strategy=strategy, hidden_sizes=[8, 8], device="cpu")
    assert _layer_norms_of_native(from_cli) == norms
    assert _layer_norms_of_native(from_python) == norms
    assert _layer_norms_of_sb3(strategy) == norms
    # An explicit setting wins over the strategy's own choice, in both directions.
    assert _layer_norms_of_native(agent(strategy, layer_norm=not norms)) == 2 - norms


def test_noisy_kfac_refuses_a_layer_normalised_actor_clearly():
    message = r"noisy-kfac trains nn\.Linear layers only, so its actor"
    with pytest.raises(ConfigError, match=message):
        agent("noisy-kfac", layer_norm=True)


def test_sb3_policy_layer_norm_and_param_noise():
    model = SB3DDPG(
        "ParamExplorePolicy",
        "Pendulum-v1",
        policy_kwargs=dict(strategy="param-noise", net_arch=[16, 16], layer_norm=True),
        learning_starts=32,
        batch_size=16,
        seed=0,
        device="cpu",
    )
    kinds = [type(m).__name__ for m in model.policy.actor.mu]
    assert kinds == ["Linear", "LayerNorm", "ReLU", "Linear", "LayerNorm", "ReLU", "Linear", "Tanh"]
    recorder = SB3SigmaRecorder()
    model.learn(250, callback=CallbackList([agents.sb3.policy.ParamExploreCallback(), recorder]))
    actor = model.policy.actor
    opt = actor.optimizer
    names = {id(p): n for n, p in actor.named_parameters()}
    params = [p for group in opt.param_groups for p in group["params"]]
    for param in params:  # θ̃ = μ + σε with ε = 0 on the norms only
        is_norm = names[id(param)].startswith(("mu.1.", "mu.4."))
        assert torch.all(opt.state[param]["noise"] == 0) == is_norm, names[id(param)]
    assert adapted([0.2, *recorder.sigmas])  # by the callback, at steps 50, ..., 250


class SB3SigmaRecorder(BaseCallback):
    """σ after every step of an SB3 model (after ``ParamExploreCallback`` adapted it)."""

    def __init__(self) -> None:
        super().__init__()
        self.sigmas: list[float] = []

    def _on_step(self) -> bool:
        self.sigmas.append(self.model.policy.actor.optimizer.param_groups[0]["noise_std"])
        return True
