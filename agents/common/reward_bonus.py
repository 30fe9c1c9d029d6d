"""What a learner asks of a curiosity bonus (``agents.curiosity`` provides them).

The learners know a bonus only through these protocols, so curiosity stays a family of its
own: a run makes the bonus from its resolved ``bonus:`` settings (:class:`BonusSettings`,
``agents.curiosity.registry``) and hands it to the learner. The native DDPG puts every
stored transition into the bonus's pool, refits the model when :meth:`RewardBonus.due`, and
adds the bonus to each replayed minibatch's rewards before the update (re-scored with the
current model at every update; the replay buffer keeps the task's own rewards,
``docs/vime.md``); an on-policy learner scores each rollout
(``agents.curiosity.sb3.VimeCallback``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from .errors import NonFiniteDataError
from .memory_budget import MemoryNeed


class BonusSettings(Protocol):
    """A bonus's settings, checked when made (``agents.curiosity.registry.BONUSES``)."""

    kind: str

    def label(self) -> str:
        """How a run directory names the bonus (``vime-noisy-kfac``)."""

    def values(self) -> dict[str, Any]:
        """The settings-file form (every setting, ``kind`` included)."""

    def require_fitted_within(self, total_steps: int, rollout: int | None) -> None:
        """One ConfigError line unless the bonus's model is first fitted within a run of
        ``total_steps`` (``rollout``: an on-policy learner's steps per rollout, after each of
        which it fits; None for an off-policy learner): a bonus never fitted is never given,
        as updates that never come (``train_every`` beyond the run) are refused."""

    def memory_needs(self, obs_dim: int, action_dim: int, batch_size: int = 1) -> list[MemoryNeed]:
        """What the bonus these settings make needs in memory at least, for an env's
        observation and action sizes and a learner that scores ``batch_size`` transitions
        at once: a run adds it to its learner's estimate and refuses settings that cannot
        fit before anything is allocated (``agents.common.memory_budget``)."""


class RewardBonus(Protocol):
    #: Whether the bonus is given yet (VIME: once its model was fitted).
    ready: bool

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

    def load_state_dict(self, state: dict[str, Any], steps: int | None = None) -> None:
        """Continue from :meth:`state_dict`'s form, read from a checkpoint, so checked
        first: :class:`~agents.common.errors.CheckpointError` saying what is not valid, and
        nothing loaded. ``steps``: the learner's environment steps when it was saved, one
        transition each (None when unknown), which bounds what the state may count."""


def fitted(bonus: RewardBonus, where: str) -> bool:
    """``bonus.fit()``; a model that diverged in it (the bonus's own NonFiniteDataError)
    stops the run as a non-finite bonus does, one line saying ``where`` (``in its fit at
    step 5000``), instead of training on with a bonus of zeros to a state no checkpoint
    takes."""
    try:
        return bonus.fit()
    except NonFiniteDataError as err:
        raise NonFiniteDataError(f"{err}, {where}; training stopped") from None


def scored(bonus: RewardBonus, obs: Any, actions: Any, next_obs: Any, where: str) -> Tensor:
    """``bonus.intrinsic_rewards`` of a batch, every one finite: a non-finite bonus stops
    the run as a non-finite reward does (one :class:`NonFiniteDataError` line saying
    ``where``, e.g. ``in the update at step 200``), instead of reaching the update,
    whose non-finite loss would be skipped step after step while nothing trains."""
    try:
        rewards = bonus.intrinsic_rewards(obs, actions, next_obs)
    except NonFiniteDataError as err:  # the bonus's own account of it
        raise NonFiniteDataError(f"{err}, {where}; training stopped") from None
    finite = torch.isfinite(rewards)
    if not bool(finite.all()):
        shown = rewards[~finite][:3].tolist()
        raise NonFiniteDataError(f"non-finite curiosity bonus ({shown}) {where}; training stopped")
    return rewards
