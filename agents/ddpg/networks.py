"""Actor and critic of DDPG as in Lillicrap et al. (2015), used by Khan et al. 2018 (App. K).

Both are 400-300 ReLU MLPs. The actor's tanh output is scaled to the action bounds;
the critic takes the action at its second hidden layer, as in Lillicrap et al. (Sec. 7).
How their weights start is the ``init`` setting (:mod:`agents.common.initialisation`): the
authors' released code (``khan2018``, the default) or Lillicrap et al.'s (``lillicrap``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from param_explore import linear_layers

from ..common.initialisation import InitScheme, initialise_actor_, initialise_critic_


class Actor(nn.Module):
    """Deterministic policy π(s) = scale · tanh(MLP(s)) + offset.

    ``forward(obs, weights)`` evaluates the same network at other weights — the sampled
    θ of an exploration strategy, by parameter name (``named_parameters()``'s) — without
    touching the module's own (the mean μ), so one θ per environment step serves both
    acting and the actor update.

    ``layer_norm`` puts a LayerNorm (learned scale and shift) after each hidden layer,
    before its ReLU, as Plappert et al.'s parameter-noise actor has
    (``docs/decisions.md#layer-norm``).
    """

    def __init__(
        self,
        obs_dim: int,
        action_low: np.ndarray,
        action_high: np.ndarray,
        hidden_sizes: Sequence[int] = (400, 300),
        init: InitScheme = "khan2018",
        layer_norm: bool = False,
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
        self.norms = (
            nn.ModuleList(nn.LayerNorm(size) for size in hidden_sizes) if layer_norm else None
        )
        #: Per layer of ``net``: the names of its weight and bias, and of its norm's scale
        #: and shift (None for the output layer, or without ``layer_norm``).
        self._names: list[tuple[str, str, tuple[str, str] | None]] = []
        linears = [i for i, m in enumerate(self.net) if isinstance(m, nn.Linear)]
        for layer, index in enumerate(linears):
            norm = None
            if self.norms is not None and layer < len(hidden_sizes):
                norm = (f"norms.{layer}.weight", f"norms.{layer}.bias")
            self._names.append((f"net.{index}.weight", f"net.{index}.bias", norm))
        low = torch.as_tensor(action_low, dtype=torch.float32)
        high = torch.as_tensor(action_high, dtype=torch.float32)
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_offset", (high + low) / 2)

    def forward(self, obs: Tensor, weights: Mapping[str, Tensor] | None = None) -> Tensor:
        if weights is None:  # the modules are called (hooks see them: noisy K-FAC)
            return self._forward_modules(obs)
        hidden = obs
        for layer, (weight, bias, norm) in enumerate(self._names):
            hidden = F.linear(hidden, weights[weight], weights[bias])
            if layer == len(self._names) - 1:
                break
            if norm is not None:  # before the activation
                module = self.norms[layer]
                scale, shift = weights[norm[0]], weights[norm[1]]
                hidden = F.layer_norm(hidden, module.normalized_shape, scale, shift, module.eps)
            hidden = torch.relu(hidden)
        return torch.tanh(hidden) * self.action_scale + self.action_offset

    def _forward_modules(self, obs: Tensor) -> Tensor:
        hidden, layer = obs, 0
        for module in self.net:
            if isinstance(module, nn.Linear):
                hidden = module(hidden)
                continue
            if self.norms is not None:  # hidden layer `layer`, before its activation
                hidden = self.norms[layer](hidden)
            hidden = torch.relu(hidden)
            layer += 1
        return torch.tanh(hidden) * self.action_scale + self.action_offset


class Critic(nn.Module):
    """Q(s, a) with the action entering at the second hidden layer.

    ``layer_norm`` puts a LayerNorm (learned scale and shift) after each hidden layer,
    before its ReLU, as Plappert et al.'s critic has it (OpenAI baselines ``models.py``
    l.59-69: after the observation's layer and after the layer the action joins;
    ``docs/decisions.md#critic-layer-norm``). Its parameters are ``norms.<i>.weight`` and
    ``norms.<i>.bias``; the ``Linear`` layers keep their names either way.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int] = (400, 300),
        init: InitScheme = "khan2018",
        layer_norm: bool = False,
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
        # Made after the initialisation, which they do not take part in (scale 1, shift 0).
        self.norms = (
            nn.ModuleList(nn.LayerNorm(size) for size in hidden_sizes) if layer_norm else None
        )

    def weight_names(self) -> list[str]:
        """The names of the weight matrices of the critic's ``Linear`` layers, output
        included: the weights its L2 penalty covers (``docs/decisions.md#critic-l2``)."""
        return [f"{name}.weight" for name, m in self.named_modules() if isinstance(m, nn.Linear)]

    def _activation(self, layer: int, hidden: Tensor) -> Tensor:
        """Hidden layer ``layer``'s ReLU, after its LayerNorm if it has one."""
        if self.norms is not None:
            hidden = self.norms[layer](hidden)
        return torch.relu(hidden)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        hidden = self._activation(0, self.obs_layer(obs))
        hidden = self._activation(1, self.joint_layer(torch.cat([hidden, action], dim=-1)))
        layer = 2
        for module in self.head:
            if isinstance(module, nn.Linear):
                hidden = module(hidden)
            else:  # the ReLU of hidden layer `layer`
                hidden = self._activation(layer, hidden)
                layer += 1
        return hidden.squeeze(-1)
