"""The rows a step's answer changes, kept on the device between a population's boundaries.

Why: the host's bookkeeping of a step (:class:`~agents.ddpg.member_rows.MemberRows`) reads the
envs' rewards and flags. Where the envs step on the device (MuJoCo Warp, the torch car,
:class:`~agents.common.tensor_envs.DeviceEnvs`), reading them is a device→host copy, and a
copy is a synchronisation: the host waits for the device to finish the step before it can
queue the next, so host and device take turns instead of working at once. Nothing in a step
needs those numbers on the host, though — the running episodes' returns and lengths, which
episodes ended and restart, whether every number was finite are all a few operations on
(N,) tensors — and the work that does need them (a callback's episode-end scalars, a
member's failure, its counters in a checkpoint) happens at the boundaries its callback
names. So the engine keeps those rows here and the host reads them at a boundary, in one
copy: every episode that ended since the last read (its step, return and length), the
running ones, and each member's first non-finite step.

What it costs and what it changes: a step adds about ten small operations on the device and
no copy. A member whose action or transition was not finite is found at the next read, not
at its step: its other rows are not touched (every buffer row, statistic and update is a
member's own), it is named with the step it failed at and the same message as a step read
at once, and the state it trained to after that step is not checkpointed
(:meth:`agents.runs.callback.RunCallback.checkpoint_last_good`). The engine reads every
step while a callback waits for an episode's end (a checkpoint), and keeps reading each
step where a member's own work needs the step's flags (a bonus, a sampled critic, parameter
noise, ε drawn per episode): :meth:`Engine.reads_at_boundaries
<agents.ddpg.engine.Engine.reads_at_boundaries>`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..common.tensor_envs import EnvStep
from .member_rows import MemberRows


class RowsRead(NamedTuple):
    """What the host reads of the steps since the last read (:meth:`DeviceRows.read`)."""

    #: the step the first of them took (the steps are ``first_step + t``, t = 0, 1, …)
    first_step: int
    #: (T, N) whether member k's episode ended at step t; its return and length then
    ended: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    #: (N,) the running episodes' return and length, and whether each member is between
    #: episodes (its last episode ended at the last step)
    episode_return: np.ndarray
    episode_length: np.ndarray
    between_episodes: np.ndarray
    #: (N,) the step of each member's first action or transition that was not finite (0:
    #: none)
    failed_at: np.ndarray


class DeviceRows:
    """N members' episode rows on ``device`` (module docstring), starting from ``rows``."""

    def __init__(
        self, rows: MemberRows, live: np.ndarray, device: torch.device, next_step: int
    ) -> None:
        """``live``: which members train; ``next_step``: the step the next record is of."""
        self.device = device
        #: host↔device copies so far: this start's, each read's, each change of the members
        #: that train (the engine counts here its reads of a failed member's row)
        self.crossings = 1
        start = np.stack([rows.episode_return, rows.episode_length, rows.between_episodes, live])
        start = torch.as_tensor(start.astype(np.float64), device=device)  # the start's copy
        self.episode_return = start[0]
        self.episode_length = start[1].to(torch.int64)
        #: whether each member's last episode ended (it starts one at the next step)
        self.ended = start[2] > 0
        self._live = start[3] > 0
        self.failed_at = torch.zeros(len(rows), dtype=torch.int64, device=device)
        self._records: list[Tensor] = []
        self._first_step = next_step

    @property
    def live(self) -> Tensor:
        """Which members still train, a row each on the device."""
        return self._live

    @live.setter
    def live(self, live: np.ndarray) -> None:
        self.crossings += 1  # one copy when members leave
        self._live = torch.as_tensor(live, device=self.device)

    @property
    def pending(self) -> int:
        """Steps recorded since the last read."""
        return len(self._records)

    def record(self, step: EnvStep) -> None:
        """One step of every live member: its episode restarted where the last ended, its
        reward and length counted, its episode's end and the step of its first non-finite
        row kept (the row itself is in the replay buffer, where the step stored it)."""
        live, f64 = self._live, torch.float64
        restart = self.ended & live
        returns = torch.where(restart, 0.0, self.episode_return)
        lengths = torch.where(restart, 0, self.episode_length)
        self.episode_return = torch.where(live, returns + step.rewards.to(f64), returns)
        self.episode_length = lengths + live
        ended = (step.terminated | step.truncated) & live
        self.ended = torch.where(live, ended, self.ended)
        self._records.append(
            torch.stack((ended.to(f64), self.episode_return, self.episode_length.to(f64)))
        )
        bad = ~(step.finite_actions & step.finite) & live & (self.failed_at == 0)
        step_number = self._first_step + len(self._records) - 1
        self.failed_at = torch.where(bad, step_number, self.failed_at)

    def read(self) -> RowsRead:
        """The steps recorded since the last read, and the rows now: one copy to the host."""
        members = len(self.ended)
        records = (
            torch.stack(self._records)
            if self._records
            else torch.zeros((0, 3, members), dtype=torch.float64, device=self.device)
        )
        now = (self.episode_return, self.episode_length, self.ended, self.failed_at)
        packed = torch.cat([records.flatten(), *(row.to(torch.float64) for row in now)])
        self.crossings += 1
        host = packed.cpu().numpy()  # the read's one copy
        steps = len(self._records)
        table = host[: steps * 3 * members].reshape(steps, 3, members)
        tail = host[steps * 3 * members :].reshape(4, members)
        read = RowsRead(
            self._first_step,
            table[:, 0] > 0,
            table[:, 1],
            table[:, 2].astype(np.int64),
            tail[0],
            tail[1].astype(np.int64),
            tail[2] > 0,
            tail[3].astype(np.int64),
        )
        self._first_step += steps
        self._records = []
        return read
