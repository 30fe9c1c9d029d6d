"""The members' bookkeeping as rows: step, update and episode counts, the running episode's
return and length, whether each member is between episodes — one (N,) array each.

Why: a population's step is batched everywhere else (envs, buffer, acting, update), and
counting it member by member was the host's work that grew with N (a dozen Python calls per
member per step). The engine (:mod:`agents.ddpg.engine`) updates every row with one array
operation a step; a member's front (:class:`~agents.ddpg.agent.DDPG`) reads and writes its
counters through :class:`MemberCounters`, a view of its row, at the boundaries where they
are read (logging, evaluation, checkpoints). A single run is a population of one: the same
rows, N = 1.

Where: on the host, as NumPy arrays, beside what the host reads of each step
(:class:`~agents.common.tensor_envs.HostStep`'s rewards and flags), which they count. Where
the envs step on the device and nothing in a step needs its flags on the host, the rows the
flags change (episodes, returns, lengths, between episodes) are counted on the device and
taken here at the boundaries (:mod:`agents.ddpg.device_rows`); the step and update counts,
which no env's answer changes, stay here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class MemberRows:
    """N members' counters, an (N,) array each (module docstring)."""

    #: the arrays' names
    fields = (
        "timesteps",
        "updates",
        "episodes",
        "episode_return",
        "episode_length",
        "between_episodes",
    )

    def __init__(self, count: int) -> None:
        #: Environment steps each member has taken.
        self.timesteps = np.zeros(count, np.int64)
        #: Updates each member has made (applied or skipped).
        self.updates = np.zeros(count, np.int64)
        #: Training episodes each member has ended.
        self.episodes = np.zeros(count, np.int64)
        #: The running episode's return and length, each member's.
        self.episode_return = np.zeros(count, np.float64)
        self.episode_length = np.zeros(count, np.int64)
        #: Whether each member's last episode ended and its next has not started (every
        #: member is, before its first step).
        self.between_episodes = np.ones(count, np.bool_)

    def __len__(self) -> int:
        return len(self.timesteps)

    def row(self, k: int) -> MemberCounters:
        """Member ``k``'s counters: a view of its row."""
        return MemberCounters(self, k)

    def taken(self, rows: Sequence[int]) -> MemberRows:
        """The counters of ``rows``, in that order, as rows of their own (a copy)."""
        taken = MemberRows(len(rows))
        for name in self.fields:
            getattr(taken, name)[...] = getattr(self, name)[list(rows)]
        return taken

    def start_episodes(self, starting: np.ndarray) -> None:
        """The members ``starting`` (a row each) begin an episode: return and length from 0."""
        self.episode_return[starting] = 0.0
        self.episode_length[starting] = 0
        self.between_episodes[starting] = False

    def count_step(self, stepped: np.ndarray | None, rewards: np.ndarray) -> None:
        """One step of the members ``stepped`` (None: every member), each with its reward."""
        if stepped is None:
            self.timesteps += 1
            self.episode_return += rewards
            self.episode_length += 1
            return
        self.timesteps[stepped] += 1
        self.episode_return[stepped] += rewards[stepped]
        self.episode_length[stepped] += 1

    def count_timesteps(self, stepped: np.ndarray | None) -> None:
        """One step of the members ``stepped`` (None: every member), its reward and length
        counted on the device (:class:`~agents.ddpg.device_rows.DeviceRows`)."""
        if stepped is None:
            self.timesteps += 1
        else:
            self.timesteps[stepped] += 1

    def take(self, ended: np.ndarray, returns: np.ndarray, lengths: np.ndarray,
             between: np.ndarray) -> None:  # fmt: skip
        """The episode rows read from the device: the episodes ``ended`` since the last read
        ((steps, N) each), each member's running return and length, whether it is between
        episodes."""
        self.episodes += np.count_nonzero(ended, axis=0)
        self.episode_return[...] = returns
        self.episode_length[...] = lengths
        self.between_episodes[...] = between

    def end_episodes(self, ended: np.ndarray) -> None:
        """The episodes of the members ``ended`` are over."""
        self.episodes[ended] += 1
        self.between_episodes[ended] = True


class RowValue:
    """One member's number in a :class:`MemberRows` array of the same name, read as a Python
    number (``cast``) and written into the array."""

    def __init__(self, cast: type) -> None:
        self.cast = cast

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: MemberCounters | None, owner: type | None = None) -> object:
        if obj is None:
            return self
        return self.cast(getattr(obj.rows, self.name)[obj.k])

    def __set__(self, obj: MemberCounters, value: object) -> None:
        getattr(obj.rows, self.name)[obj.k] = value


class MemberCounters:
    """One member's counters, read and written as numbers: its row of a :class:`MemberRows`."""

    __slots__ = ("k", "rows")

    timesteps = RowValue(int)
    updates = RowValue(int)
    episodes = RowValue(int)
    episode_return = RowValue(float)
    episode_length = RowValue(int)
    between_episodes = RowValue(bool)

    def __init__(self, rows: MemberRows, k: int) -> None:
        self.rows, self.k = rows, k

    def count_update(self) -> None:
        """One update more (``updates += 1`` in one write)."""
        self.rows.updates[self.k] += 1

    def rebind(self, rows: MemberRows, k: int) -> None:
        """Point at row ``k`` of ``rows`` (a member regrouped into a stack of its own)."""
        self.rows, self.k = rows, k
