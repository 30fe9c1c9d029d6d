"""How the actor's and the critic's weights start: the ``init`` setting.

Khan et al. (2018) do not say how their networks were initialised, so the authors' released
code decides (``docs/decisions.md``, "Initialisation"). It matters for exploration more
than for anything else: every weight-noise strategy starts from the *absolute* σ₀ = 0.01,
and how far that noise moves the actions depends on the scale of the weights it perturbs.
On HalfCheetah-v4 it moves them ~6× further with the released scheme than with torch's
fan-in default (``examples/initial_action_noise.py`` measures it).

Schemes, for layers that arrive with torch's default ``nn.Linear`` initialisation (weights
and biases U(−1/√f, 1/√f), f = fan-in — which is already Lillicrap et al.'s hidden-layer
rule, so ``lillicrap`` leaves hidden layers as they are and draws no random numbers for
them):

``khan2018`` — the released code (TensorFlow 1, ``ActorNetwork*`` and ``CriticNetwork``):
    actor   hidden weights N(0, 0.3²); every bias, hidden and output, 0.1;
            output weights U(−3e-3, 3e-3);
    critic  hidden weights (the action branch of the joint layer included) a normal of
            std 0.02 truncated at 2 std (tflearn's default), biases 0;
            output weights U(−3e-3, 3e-3), bias 0.
``lillicrap`` — Lillicrap et al. (2015), Sec. 7: hidden layers U(−1/√f, 1/√f) (torch's
    default), output weights *and* biases U(−3e-3, 3e-3), actor and critic alike.

LayerNorm parameters are never touched (scale 1, shift 0). Random numbers come from torch's
global generator, in layer order, so a seed gives the same networks every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

InitScheme = Literal["khan2018", "lillicrap"]
INIT_SCHEMES: tuple[str, ...] = ("khan2018", "lillicrap")

#: Both schemes: output weights U(−3e-3, 3e-3), so that first actions and Q-values are ~0.
OUTPUT_BOUND = 3e-3
#: khan2018 actor: std of the hidden weights, and the value of every bias.
KHAN2018_ACTOR_HIDDEN_STD = 0.3
KHAN2018_ACTOR_BIAS = 0.1
#: khan2018 critic: std of the hidden weights' normal before truncation at ±2 std.
KHAN2018_CRITIC_HIDDEN_STD = 0.02


def check_scheme(scheme: str) -> str:
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"init must be one of {', '.join(INIT_SCHEMES)}, got {scheme!r}")
    return scheme


@torch.no_grad()
def initialise_actor_(layers: Sequence[nn.Linear], scheme: InitScheme) -> None:
    """Re-initialise an actor's ``Linear`` layers in place (the last one is the output)."""
    *hidden, output = layers
    if check_scheme(scheme) == "khan2018":
        for layer in hidden:
            nn.init.normal_(layer.weight, 0.0, KHAN2018_ACTOR_HIDDEN_STD)
            nn.init.constant_(layer.bias, KHAN2018_ACTOR_BIAS)
        nn.init.uniform_(output.weight, -OUTPUT_BOUND, OUTPUT_BOUND)
        nn.init.constant_(output.bias, KHAN2018_ACTOR_BIAS)
    else:
        _lillicrap_output_(output)


@torch.no_grad()
def initialise_critic_(layers: Sequence[nn.Linear], scheme: InitScheme) -> None:
    """Re-initialise a critic's ``Linear`` layers in place (the last one is the output)."""
    *hidden, output = layers
    if check_scheme(scheme) == "khan2018":
        std = KHAN2018_CRITIC_HIDDEN_STD
        for layer in hidden:
            nn.init.trunc_normal_(layer.weight, 0.0, std, -2 * std, 2 * std)
            nn.init.zeros_(layer.bias)
        nn.init.uniform_(output.weight, -OUTPUT_BOUND, OUTPUT_BOUND)
        nn.init.zeros_(output.bias)
    else:
        _lillicrap_output_(output)


def _lillicrap_output_(layer: nn.Linear) -> None:
    nn.init.uniform_(layer.weight, -OUTPUT_BOUND, OUTPUT_BOUND)
    nn.init.uniform_(layer.bias, -OUTPUT_BOUND, OUTPUT_BOUND)
