"""What a task reports beyond its reward: success, and coverage of its state space.

Both follow conventions the rest of the toolkit reads without knowing the task:

* **success** is ``info["is_success"]`` at every step (the key SB3's ``EvalCallback`` reads
  at an episode's last step): whether the episode has reached the task's goal so far;
* **coverage** is ``pop_coverage() -> dict[str, float]``: extremes of a few named
  quantities (the cart's position, the cheetah's furthest x, ...) over the steps since the
  last call. The native agent calls it once per logging window of its training env and
  logs every entry as ``explore/<name>``; evaluation envs are separate instances, so the
  window holds what the exploring policy reached and nothing else.

A task states both once, as a :class:`Coverage`: the quantities it reports and the
threshold on one of them that is its goal. Its env builds its :class:`TaskReport` from
it, and the coverage report of ``compare_runs`` (:mod:`agents.reporting.coverage`) reads
the same object to say in which training window an exploring policy first reached the
goal, so the two cannot disagree.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass

_COMPARISONS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


class TaskReport:
    """Success in the current episode and per-window extremes, for one env instance.

    ``highest`` and ``lowest`` name the quantities whose maximum (``<name>_max``) and
    minimum (``<name>_min``) over the window are reported; :meth:`record` takes their
    values after every step.
    """

    def __init__(self, highest: Iterable[str] = (), lowest: Iterable[str] = ()) -> None:
        self.highest = tuple(highest)
        self.lowest = tuple(lowest)
        self.succeeded = False
        self._window: dict[str, float] = {}

    def start_episode(self) -> None:
        self.succeeded = False

    def record(self, goal_reached: bool, **values: float) -> dict[str, bool]:
        """One step: ``goal_reached`` at this step, the quantities' values after it.

        Returns the step's ``info`` entry: success so far in this episode.
        """
        self.succeeded = self.succeeded or bool(goal_reached)
        window = self._window
        for name in self.highest:
            key, value = f"{name}_max", float(values[name])
            window[key] = max(window.get(key, value), value)
        for name in self.lowest:
            key, value = f"{name}_min", float(values[name])
            window[key] = min(window.get(key, value), value)
        return {"is_success": self.succeeded}

    def pop_coverage(self) -> dict[str, float]:
        """The window's extremes (empty if no step was recorded), and a new window."""
        window, self._window = self._window, {}
        return window


@dataclass(frozen=True)
class Coverage:
    """A task's coverage quantities and its goal expressed in them.

    ``highest``/``lowest`` name the quantities reported as ``<name>_max``/``<name>_min``;
    the goal is reached in a window whose ``goal`` scalar (one of those) compares to
    ``threshold`` as ``reached_when`` says (the reward's own comparison, e.g. ``">"`` for
    "x > 5"), so a window's extremes tell whether any of its steps was at the goal.
    """

    highest: tuple[str, ...]
    lowest: tuple[str, ...]
    goal: str
    threshold: float
    reached_when: str

    def __post_init__(self) -> None:
        if self.goal not in self.scalars:
            raise ValueError(f"goal {self.goal!r} is not one of {self.scalars}")
        if self.reached_when not in _COMPARISONS:
            raise ValueError(f"reached_when must be one of {sorted(_COMPARISONS)}")
        if self.reached_when[0] != (">" if self.goal.endswith("_max") else "<"):
            raise ValueError(
                f"{self.goal} is an extreme in the other direction than {self.reached_when!r}"
            )

    @property
    def scalars(self) -> tuple[str, ...]:
        """The names of the window's extremes (``pop_coverage``'s keys)."""
        return (*(f"{n}_max" for n in self.highest), *(f"{n}_min" for n in self.lowest))

    def goal_reached(self, extreme: float) -> bool:
        """Whether a window whose ``goal`` extreme is ``extreme`` reached the goal."""
        return bool(_COMPARISONS[self.reached_when](extreme, self.threshold))

    def new_report(self) -> TaskReport:
        """A :class:`TaskReport` of these quantities, for one env instance."""
        return TaskReport(highest=self.highest, lowest=self.lowest)
