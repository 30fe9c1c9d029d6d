"""A population's progress as one run's: one starts line, one status line, one line per
evaluation — for all its members at once.

Why: each member of a population is an ordinary run, and each run's callback
(:class:`~agents.runs.callback.RunCallback`) says what it does in lines naming it. For a
hundred members that was a hundred lines at the start and at every evaluation, and a
status line per member every 30 s: a log nobody reads, written by a loop over the members.
The members' callbacks of one population share a :class:`PopulationLines`, which prints a
line for all of them: what trains and where, the step, the population's speed in
seed-steps per second, and the latest evaluation's return as the minimum / median /
maximum over the members (with their success rate and σ where they have one). Each
member's own numbers stay in its run directory, TensorBoard and W&B; a member that fails
is still named alone (its error, :mod:`agents.runs.population_run`), and so are a member's
own warnings (skipped updates).
"""

from __future__ import annotations

import os.path
import statistics
from collections.abc import Callable, Sequence

from ..common.tags import sigma_text
from ..settings import RunSettings


def population_name(names: Sequence[str]) -> str:
    """The members' run names as one: their common directory and how many
    (``HalfCheetah-v4/vadam: 10 members``)."""
    common = os.path.commonpath(names) if len(names) > 1 else names[0]
    return f"{common or '.'}: {len(names)} members"


def spread(values: Sequence[float], digits: int = 1) -> str:
    """``min / median / max`` of ``values``, or the one value."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:.{digits}f} / {mid:.{digits}f} / {high:.{digits}f} (min / median / max)"


class PopulationLines:
    """The lines of one population's members (module docstring), written through
    ``write`` (the first member's callback's: plain on a pipe, above a bar on a terminal)."""

    def __init__(self, configs: Sequence[RunSettings], names: Sequence[str]) -> None:
        self.name = population_name(list(names))
        self._count = len(configs)
        self._first = configs[0]
        self._write: Callable[[str], None] = print
        self._started = False
        self._stopped = 0
        #: (step, each member's return, success rate, σ) of the evaluation being gathered
        self._step: int | None = None
        self._returns: list[float] = []
        self._successes: list[float] = []
        self._sigmas: list[float] = []
        #: the last complete evaluation's summary, for the status lines
        self._last_eval: str | None = None
        self._status_step = -1
        #: The members' callbacks still training, in order: the first says the status lines.
        self._speakers: list[object] = []

    def join(self, member: object) -> None:
        """``member`` (a run's callback) is the population's next member."""
        self._speakers.append(member)

    def speaks(self, member: object) -> bool:
        """Whether ``member`` says the population's status lines: the first member still
        training. The others' callbacks need no call for them (nor every 100 steps for
        their time), so that a step's boundaries are not every member's."""
        return bool(self._speakers) and self._speakers[0] is member

    def writes_with(self, write: Callable[[str], None]) -> None:
        """Lines go through ``write``."""
        self._write = write

    def started(self, line: str) -> None:
        """A member's starts line (:func:`~agents.runs.callback.start_line`): the first is the
        population's, naming how many members and where they write."""
        if self._started:
            return
        self._started = True
        self._write(f"{self.name} {line.replace(str(self._first.run_dir()), self._dirs())}")

    def _dirs(self) -> str:
        run_dir = self._first.run_dir()
        return f"{run_dir.parent}/{{{self._count} run directories}}"

    def evaluated(self, step: int, mean: float, success: float | None, sigma: float | None) -> None:
        """A member's evaluation at ``step``: the line is written once every member still
        training has reported it (or when the next evaluation, or the end, comes first)."""
        if self._step is not None and step != self._step:
            self.flush()
        self._step = step
        self._returns.append(mean)
        if success is not None:
            self._successes.append(success)
        if sigma is not None:
            self._sigmas.append(sigma)
        if len(self._returns) >= self._count - self._stopped:
            self.flush()

    def flush(self) -> None:
        """Write the evaluation gathered so far, if any."""
        if self._step is None:
            return
        summary = f"eval return {spread(self._returns)}"
        if self._successes:
            summary += f", success {spread([100 * s for s in self._successes], 0)} %"
        if self._sigmas:
            summary += f", σ median {sigma_text(statistics.median(self._sigmas))}"
        members = len(self._returns)
        self._write(f"{self.name} step {self._step}: {summary} ({members} members)")
        self._last_eval = summary
        self._step, self._returns, self._successes, self._sigmas = None, [], [], []

    def status(self, step: int, total: int, speed: float | None) -> None:
        """A member's status line at ``step`` (members step together: the first to report
        a step writes the population's, its speed times the members still training)."""
        if step == self._status_step:
            return
        self._status_step = step
        live = self._count - self._stopped
        parts = [f"step {step}/{total} ({step / total:.0%})"]
        if speed is not None:
            parts.append(f"{speed * live:.0f} seed-steps/s ({live} members)")
        if self._last_eval is not None:
            parts.append(f"last {self._last_eval}")
        self._write(f"{self.name} {', '.join(parts)}")

    def stopped(self, member: object) -> None:
        """``member`` stopped early (its own failure): the others' lines no longer wait for
        it, and the next member says the status lines if it did."""
        self._stopped += 1
        if member in self._speakers:
            self._speakers.remove(member)
        if self._step is not None and len(self._returns) >= self._count - self._stopped:
            self.flush()
