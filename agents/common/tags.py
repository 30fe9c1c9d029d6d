"""The TensorBoard tags of a run, one vocabulary for both engines.

A run of the native DDPG, a run of ``train_agent --engine sb3`` and a model trained with
SB3's own ``learn`` and :class:`agents.sb3.policy.ParamExploreCallback` (rl-zoo3 included)
write the tags named here, so that ``tensorboard --logdir`` overlays them:

    eval/mean_return, eval/std_return, eval/success_rate    the test episodes, with μ
    explore/<statistic>                 the strategy's (σ over the actor's weights, ...)
    explore/sigma_median/<layer>        each layer's median σ, ``<layer>`` as the native
                                        actor names it (:func:`actor_layer_name`)
    train/actor_learning_rate, train/critic_learning_rate

σ is logged only for strategies with weight noise: a σ of 0 for ``adam-plain`` or an
action-noise baseline would be a line that says nothing and would flatten every σ chart
it shares. SB3's own tags (``eval/mean_reward``, ``train/learning_rate``: the critic's,
``rollout/*``) stay beside these; they are SB3's, not the project's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

EVAL_MEAN_RETURN = "eval/mean_return"
EVAL_STD_RETURN = "eval/std_return"
EVAL_SUCCESS_RATE = "eval/success_rate"
TRAIN_EPISODE_RETURN = "train/episode_return"
TRAIN_EPISODE_LENGTH = "train/episode_length"
ACTOR_LEARNING_RATE = "train/actor_learning_rate"
CRITIC_LEARNING_RATE = "train/critic_learning_rate"
EXPLORE = "explore/"
#: The statistics of the weight distribution's σ (``sigma_mean``, ``sigma_median/net.0``, ...).
SIGMA = "sigma_"
EXPLORE_SIGMA_MEAN = EXPLORE + SIGMA + "mean"


def actor_layer_name(linear_index: int) -> str:
    """The name of the actor's ``linear_index``-th linear layer (0 the first) in every
    engine's tags: the native actor's module path (``net.0``, ``net.2``, ... of its
    Linear/activation ``Sequential``), which committed studies' ``explore.csv`` files hold."""
    return f"net.{2 * linear_index}"


def layer_names(linear_module_paths: Iterable[str]) -> dict[str, str]:
    """Module path of each linear layer of an actor, in order → :func:`actor_layer_name`;
    e.g. SB3's ``mu.0``, ``mu.2`` (or ``mu.0``, ``mu.3`` with a LayerNorm between) →
    ``net.0``, ``net.2``."""
    return {path: actor_layer_name(index) for index, path in enumerate(linear_module_paths)}


def renamed_layers(statistics: Mapping[str, float], layers: Mapping[str, str]) -> dict[str, float]:
    """``statistics`` with each per-layer name (``sigma_median/mu.0``) under the
    vocabulary's layer name (``layers``: module path → name, from :func:`layer_names`)."""
    renamed = {}
    for name, value in statistics.items():
        head, _, layer = name.partition("/")
        renamed[f"{head}/{layers.get(layer, layer)}" if layer else name] = value
    return renamed


def explore_scalars(statistics: Mapping[str, float], explores: bool) -> dict[str, float]:
    """A strategy's exploration statistics as ``explore/`` tags: σ's only for a strategy
    with weight noise (``explores``)."""
    return {
        EXPLORE + name: value
        for name, value in statistics.items()
        if explores or not name.startswith(SIGMA)
    }


def learning_rate_scalars(actor: float, critic: float) -> dict[str, float]:
    """The actor's and the critic's learning rate as tags."""
    return {ACTOR_LEARNING_RATE: actor, CRITIC_LEARNING_RATE: critic}


_FORMAT_SPEC = re.compile(r"^(?P<layout>.*?)(\.\d+)?[eEfFgGn%]?$")


class Sigma(float):
    """A σ that prints with four significant digits in scientific notation (``9.999e-03``).

    SB3's stdout table formats every float as ``f"{value:<8.3g}"``, so a σ of 0.009999 —
    Vadam's, a step after it started at 0.01 — reads ``0.01`` and a change never shows.
    As a ``float`` subclass it is logged as itself by every other output (TensorBoard,
    CSV and JSON write its full value); only its formatted text differs. The layout of a
    format spec (fill, alignment, width) is kept, its precision and type replaced.
    """

    def __format__(self, spec: str) -> str:
        match = _FORMAT_SPEC.match(spec)
        layout = match.group("layout") if match else ""
        return format(f"{float(self):.3e}", layout)


def sigma_text(value: float) -> str:
    """σ as every line of the project prints it: four significant digits (``9.999e-03``)."""
    return f"{Sigma(value)}"
