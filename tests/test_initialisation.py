"""The ``init`` setting: each layer's initial statistics against the schemes' definitions.

``khan2018`` is the authors' released code (docs/decisions.md, "Initialisation"):
actor hidden weights N(0, 0.3²), every actor bias 0.1, output weights U(±3e-3); critic
hidden weights a normal of std 0.02 truncated at ±2 std, biases 0, output U(±3e-3) with
bias 0. ``lillicrap`` is torch's fan-in default for hidden layers and U(±3e-3) for the
output layers' weights and biases. The expected values below are computed here from those
definitions, not taken from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from stable_baselines3 import DDPG as SB3DDPG
from torch import nn

import agents.sb3.policy  # noqa: F401  (registers the policy alias)
from agents import DDPG
from agents.common.errors import ConfigError
from agents.ddpg.networks import Actor, Critic
from agents.settings import resolve_settings

OBS, ACT = 17, 6


def _uniform_std(bound: float) -> float:
    return bound / math.sqrt(3)


def _truncated_normal_std(std: float, cut: float = 2.0) -> float:
    """Std of N(0, std²) truncated at ±cut·std: std·√(1 − 2c φ(c) / (2Φ(c) − 1))."""
    pdf = math.exp(-(cut**2) / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(cut / math.sqrt(2))
    return std * math.sqrt(1 - 2 * cut * pdf / mass)


def _check_normal(weight: torch.Tensor, std: float) -> None:
    w = weight.detach().double()
    n = w.numel()
    assert abs(w.mean().item()) < 5 * std / math.sqrt(n)
    assert w.std().item() == pytest.approx(std, rel=8 / math.sqrt(2 * n) + 0.01)


def _check_uniform(tensor: torch.Tensor, bound: float) -> None:
    t = tensor.detach()
    assert t.abs().max().item() <= bound
    if t.numel() >= 300:
        _check_normal(t, _uniform_std(bound))


def _linears(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def _actor(init: str, seed: int = 0) -> Actor:
    torch.manual_seed(seed)
    return Actor(OBS, -np.ones(ACT), np.ones(ACT), (400, 300), init=init)


def _critic(init: str, seed: int = 0) -> Critic:
    torch.manual_seed(seed)
    return Critic(OBS, ACT, (400, 300), init=init)


def _check_khan2018_actor(layers: list[nn.Linear]) -> None:
    *hidden, output = layers
    for layer in hidden:
        _check_normal(layer.weight, 0.3)
        assert torch.all(layer.bias == torch.tensor(0.1, dtype=layer.bias.dtype))
    _check_uniform(output.weight, 3e-3)
    assert torch.all(output.bias == torch.tensor(0.1, dtype=output.bias.dtype))


def _check_khan2018_critic(layers: list[nn.Linear]) -> None:
    *hidden, output = layers
    for layer in hidden:
        assert layer.weight.abs().max().item() <= 0.04  # cut at 2 std
        _check_normal(layer.weight, _truncated_normal_std(0.02))
        assert torch.all(layer.bias == 0)
    _check_uniform(output.weight, 3e-3)
    assert torch.all(output.bias == 0)


def _check_lillicrap(layers: list[nn.Linear]) -> None:
    *hidden, output = layers
    for layer in hidden:
        bound = 1 / math.sqrt(layer.in_features)
        _check_uniform(layer.weight, bound)
        _check_uniform(layer.bias, bound)
    _check_uniform(output.weight, 3e-3)
    _check_uniform(output.bias, 3e-3)


def test_khan2018_actor_and_critic_layer_statistics():
    _check_khan2018_actor(_linears(_actor("khan2018")))
    critic = _critic("khan2018")
    # The action enters at the joint layer, whose whole weight (action branch
    # included) is a hidden weight of the released code's critic.
    assert critic.joint_layer.in_features == 400 + ACT
    _check_khan2018_critic(_linears(critic))


def test_lillicrap_layer_statistics():
    _check_lillicrap(_linears(_actor("lillicrap")))
    _check_lillicrap(_linears(_critic("lillicrap")))


def test_lillicrap_is_torch_default_hidden_layers_plus_uniform_outputs():
    """The ``lillicrap`` networks are exactly what torch's layers give from the same seed."""
    torch.manual_seed(3)
    expected = [nn.Linear(OBS, 400), nn.Linear(400, 300), nn.Linear(300, ACT)]
    nn.init.uniform_(expected[-1].weight, -3e-3, 3e-3)
    nn.init.uniform_(expected[-1].bias, -3e-3, 3e-3)
    actor = _actor("lillicrap", seed=3)
    for mine, reference in zip(_linears(actor), expected):
        torch.testing.assert_close(mine.weight, reference.weight, rtol=0, atol=0)
        torch.testing.assert_close(mine.bias, reference.bias, rtol=0, atol=0)


def test_the_schemes_differ_and_a_seed_fixes_them():
    a, b = _actor("khan2018", seed=1), _actor("khan2018", seed=1)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    c = _actor("lillicrap", seed=1)
    assert not torch.equal(a.net[0].weight, c.net[0].weight)


def test_agent_uses_the_configured_scheme_and_defaults_to_khan2018():
    agent = DDPG("Pendulum-v1", seed=0, hidden_sizes=[400, 300])
    assert agent.config.init == "khan2018"
    _check_khan2018_actor(_linears(agent.actor))
    _check_khan2018_critic(_linears(agent.critic))
    for net, target in ((agent.actor, agent.target_actor), (agent.critic, agent.target_critic)):
        for p, q in zip(net.parameters(), target.parameters()):
            assert torch.equal(p, q)
    other = DDPG("Pendulum-v1", seed=0, hidden_sizes=[400, 300], init="lillicrap")
    _check_lillicrap(_linears(other.actor))


def test_cli_config_selects_the_scheme_and_rejects_unknown_ones():
    assert resolve_settings(strategy="vadam").learner.init == "khan2018"
    lillicrap = resolve_settings(strategy="adam-plain", set_options=["init=lillicrap"])
    assert lillicrap.learner.init == "lillicrap"
    with pytest.raises(ConfigError, match="init must be one of khan2018, lillicrap"):
        resolve_settings(strategy="vadam", set_options=["init=xavier"])


def test_sb3_policy_init_kwarg():
    def model(**policy_kwargs):
        torch.manual_seed(0)
        kwargs = dict(net_arch=[400, 300], **policy_kwargs)
        return SB3DDPG("ParamExplorePolicy", "Pendulum-v1", policy_kwargs=kwargs, seed=0)

    default = model().policy
    assert default.init == "sb3"  # SB3's own initialisation unless asked otherwise
    _check_uniform(default.actor.mu[-2].weight, 1 / math.sqrt(300))  # torch's default

    policy = model(init="khan2018").policy
    _check_khan2018_actor(_linears(policy.actor.mu))
    for q_network in policy.critic.q_networks:
        _check_khan2018_critic(_linears(q_network))
    for net, target in ((policy.actor, policy.actor_target), (policy.critic, policy.critic_target)):
        for p, q in zip(net.parameters(), target.parameters()):
            assert torch.equal(p, q)

    _check_lillicrap(_linears(model(init="lillicrap").policy.actor.mu))
    with pytest.raises(ValueError, match="init must be one of sb3, khan2018, lillicrap"):
        model(init="orthogonal")
