"""The contract between a learner and a run: the hooks a run is called through
(:class:`Callback`, in the spirit of SB3's ``BaseCallback``), and what a run needs of a
learner (:class:`RunnableAgent`). The native DDPG, the SB3 adapters and a population of
members all provide the second and call the first, so one run machinery
(:mod:`agents.runs`) drives them all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Callback:
    """Hooks into a learner's ``learn``: the same points for every learner."""

    def on_training_start(self, agent: Any) -> None:
        """Called once before the first step of a ``learn`` call."""

    def on_step(self, agent: Any) -> bool:
        """After every environment step (and its updates), or after the steps
        :meth:`next_call` names; return False to stop."""
        return True

    def next_call(self, agent: Any) -> tuple[int, bool]:
        """When the native engine calls :meth:`on_step` next, asked after
        :meth:`on_training_start` and after each call: ``(step, at_episode_end)`` — after
        the step that brings ``agent.num_timesteps`` to ``step``, or, with
        ``at_episode_end``, after an earlier step that ends one of its episodes. The
        default is after every step (SB3's contract); a callback whose work falls at
        boundaries names the next one, so that N members' callbacks are not called every
        step (a stop request reaches every callback after the step anyway)."""
        return agent.num_timesteps + 1, False

    def on_episode_end(
        self, agent: Any, episode_return: float, episode_length: int, step: int
    ) -> None:
        """After the last step of a training episode, ``step`` (a population whose rows are
        on its device hands its episodes over at its next boundary:
        :mod:`agents.ddpg.device_rows`)."""

    def on_training_end(self, agent: Any) -> None:
        """Once after the last step, also when training stops early or is interrupted."""


class RunnableAgent(Protocol):
    """What a run needs of a learner: the native :class:`agents.ddpg.DDPG`, the SB3
    adapters (:mod:`agents.sb3`) provide it."""

    checkpoint_name: str
    #: its env (the run's, with its spaces)
    env: Any
    num_timesteps: int
    num_updates: int
    between_episodes: bool

    def learn(self, total_steps: int, callback: Callback) -> object: ...
    def predict(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray: ...
    def pop_losses(self) -> dict[str, float]: ...
    def exploration_statistics(self) -> dict[str, float]: ...
    def bonus_statistics(self) -> dict[str, float]: ...
    @property
    def skipped_updates(self) -> int: ...
    def save(
        self, path: str | Path, include_buffer: bool = False, metadata: dict | None = None
    ) -> None: ...
    def load_checkpoint(
        self, path: str | Path, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]: ...
