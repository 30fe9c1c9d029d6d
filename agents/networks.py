"""Actor and critic of DDPG as in Lillicrap et al. (2015), used by Khan et al. 2018 (App. K).

Both are 400-300 ReLU MLPs. The actor's tanh output is scaled to the action bounds;
the critic takes the action at its second hidden layer, as in Lillicrap et al. (Sec. 7).
How their weights start is the ``init`` setting (:mod:`agents.initialisation`): the
authors' released code (``khan2018``, the default) or Lillicrap et al.'s (``lillicrap``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .initialisation import InitScheme, initialise_actor_, initialise_critic_, linear_layers


class Actor(nn.Module):
    """Deterministic policy π(s) = scale · tanh(MLP(s)) + offset.

    ``forward(obs, weights)`` evaluates the same network at other weights — the sampled
    θ of an exploration strategy, given in ``parameters()`` order — without touching the
    module's own (the mean μ), so one θ per environment step serves both acting and the
    actor update.
    """

    def __init__(
        self,
        obs_dim: int,
        action_low: np.ndarray,
        action_high: np.ndarray,
        hidden_sizes: Sequence[int] = (400, 300),
        init: InitScheme = "khan2018",
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, len(action_low)))
        self.net = nn.Sequential(*layers)
        initialise_actor_(linear_layers(self.net), init)
        low = torch.as_tensor(action_low, dtype=torch.float32)
        high = torch.as_tensor(action_high, dtype=torch.float32)
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_offset", (high + low) / 2)

    def forward(self, obs: Tensor, weights: Sequence[Tensor] | None = None) -> Tensor:
        if weights is None:
            hidden = self.net(obs)
        else:
            hidden = obs
            layers = [m for m in self.net if isinstance(m, nn.Linear)]
            for i, _ in enumerate(layers):
                hidden = F.linear(hidden, weights[2 * i], weights[2 * i + 1])
                if i < len(layers) - 1:
                    hidden = torch.relu(hidden)
        return torch.tanh(hidden) * self.action_scale + self.action_offset


class Critic(nn.Module):
    """Q(s, a) with the action entering at the second hidden layer."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int] = (400, 300),
        init: InitScheme = "khan2018",
    ) -> None:
        super().__init__()
        if len(hidden_sizes) < 2:
            raise ValueError(f"the critic needs at least two hidden layers, got {hidden_sizes}")
        first, second, *rest = hidden_sizes
        self.obs_layer = nn.Linear(obs_dim, first)
        self.joint_layer = nn.Linear(first + action_dim, second)
        layers: list[nn.Module] = []
        width = second
        for size in rest:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, 1))
        self.head = nn.Sequential(*layers)
        initialise_critic_(linear_layers(self), init)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        hidden = torch.relu(self.obs_layer(obs))
        hidden = torch.relu(self.joint_layer(torch.cat([hidden, action], dim=-1)))
        return self.head(hidden).squeeze(-1)
