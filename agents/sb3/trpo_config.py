"""The settings of ``--algo trpo`` (``trpo:`` in a run's config), checked without SB3.

Kept apart from :mod:`agents.sb3.trpo_agent` so that :mod:`agents.runs.config` validates
them without importing SB3.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

from ..engine.config import coerce_fields, require

#: The strategy a TRPO run records: it explores through its own Gaussian policy.
TRPO_STRATEGY = "trpo"


@dataclass
class TRPOSettings:
    """sb3-contrib TRPO's settings a run exposes (``trpo:`` mapping; defaults and their
    anchors in ``docs/decisions.md#trpo``)."""

    #: Steps per rollout (one policy update each): VIME's batch of 5000 steps.
    n_steps: int = 5000
    #: Maximum KL divergence of an update: VIME's step size 0.01 (sb3-contrib's default).
    target_kl: float = 0.01
    #: GAE's λ: 1.0 as VIME's BatchPolopt (sb3-contrib's default is 0.95).
    gae_lambda: float = 1.0
    #: Minibatch of the value function's updates (sb3-contrib's default).
    batch_size: int = 128

    def validate(self) -> None:
        coerce_fields(self, prefix="trpo.")
        require(self.n_steps >= 2, f"trpo.n_steps must be >= 2, got {self.n_steps}")
        require(self.target_kl > 0, f"trpo.target_kl must be > 0, got {self.target_kl}")
        require(
            0 <= self.gae_lambda <= 1, f"trpo.gae_lambda must be in [0, 1], got {self.gae_lambda}"
        )
        require(self.batch_size >= 1, f"trpo.batch_size must be >= 1, got {self.batch_size}")


def trpo_settings(values: Any) -> TRPOSettings:
    """A ``trpo:`` mapping as validated :class:`TRPOSettings`; one clear line otherwise."""
    require(isinstance(values, dict), f"trpo must be a mapping of settings, got {values!r}")
    valid = [f.name for f in dataclasses.fields(TRPOSettings)]
    for key in values:
        close = difflib.get_close_matches(str(key), valid, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        require(key in valid, f"unknown trpo setting {key!r}{hint}; known: {', '.join(valid)}")
    settings = TRPOSettings(**values)
    settings.validate()
    return settings
