"""What the DDPG loop asks of a curiosity bonus (``agents.curiosity.VimeBonus`` provides it).

The engine knows the bonus only through this protocol, so curiosity stays a family above
the engine: a run builds the bonus from its ``bonus:`` settings and hands it to
:class:`agents.engine.ddpg.DDPG`. The loop puts every stored transition into the bonus's
pool, refits the model when :meth:`RewardBonus.due`, and adds the bonus to each replayed
minibatch's rewards before the update (re-scored with the current model at every update;
the replay buffer keeps the task's own rewards, ``docs/vime.md``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from torch import Tensor


class RewardBonus(Protocol):
    def add(self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray) -> None:
        """Transitions (rows) into the model's pool."""

    def due(self) -> bool:
        """Whether the model should be refitted now."""

    def fit(self) -> bool:
        """Refit the model on its pool; whether it trained."""

    def intrinsic_rewards(self, obs: Tensor, actions: Tensor, next_obs: Tensor) -> Tensor:
        """The bonus of each transition of a batch, shape (B,)."""

    def pop_statistics(self) -> dict[str, float]:
        """Scalars to log since the last call, by TensorBoard tag."""

    def state_dict(self, include_pool: bool = True) -> dict[str, Any]:
        """Everything to continue (tensors and plain data only)."""

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
