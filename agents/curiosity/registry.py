"""Curiosity bonuses by kind: what ``--bonus KIND`` and a run's ``bonus:`` mapping mean.

**Adding a bonus** is its module and one entry of :data:`BONUSES`: a settings record (a
dataclass checked when made, with ``kind``, ``label()``, ``values()``, ``memory_needs()``
and ``require_fitted_within()``; :class:`agents.common.reward_bonus.BonusSettings`) and a
function that makes the bonus for an env's spaces (an
:class:`agents.common.reward_bonus.RewardBonus`, whose ``load_state_dict`` checks a
checkpoint's state before loading it). ``train_agent --bonus KIND`` and ``bonus.<key>``
settings, the run directory's name, checkpoints and both learners that take a bonus (the
native DDPG, TRPO) then work with it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from gymnasium import spaces

from ..common.checks import record_from_mapping, require, require_known
from ..common.reward_bonus import BonusSettings, RewardBonus
from .config import VimeConfig
from .vime import make_vime_bonus


@dataclass(frozen=True)
class BonusKind:
    """A registered bonus: its settings record and how it is made for an env's spaces."""

    #: The settings record: a dataclass checked when made.
    settings: type
    make: Callable[[Any, spaces.Space, spaces.Space, int | None, torch.device | str], RewardBonus]


#: Every bonus ``--bonus`` accepts, by kind.
BONUSES: dict[str, BonusKind] = {"vime": BonusKind(VimeConfig, make_vime_bonus)}


def resolve_bonus(values: Mapping[str, Any] | None) -> BonusSettings | None:
    """The checked settings of a ``bonus:`` mapping; None for no bonus (None, {}, or
    ``kind: none``). Bad input is one :class:`ConfigError` line."""
    if not values:
        return None
    require(
        isinstance(values, Mapping),
        f"bonus must be a mapping such as {{kind: vime}}, got {values!r}",
    )
    kind = values.get("kind")
    if kind in (None, "none"):
        require(
            not set(values) - {"kind"},
            f"bonus settings given without a kind; set bonus.kind: {', '.join(BONUSES)}",
        )
        return None
    require_known("bonus kind", [kind], BONUSES)
    return record_from_mapping(BONUSES[kind].settings, values, "bonus setting(s)")


def make_bonus(
    settings: BonusSettings,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    seed: int | None,
    device: torch.device | str = "cpu",
) -> RewardBonus:
    """The bonus ``settings`` describe, for an env's spaces, on its own generator."""
    return BONUSES[settings.kind].make(settings, observation_space, action_space, seed, device)
