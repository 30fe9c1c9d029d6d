"""What a task reports beyond its reward: success, and coverage of its state space.

Both follow conventions the rest of the toolkit reads without knowing the task:

* **success** is ``info["is_success"]`` at every step (the key SB3's ``EvalCallback`` reads
  at an episode's last step): whether the episode has reached the task's goal so far;
* **coverage** is ``pop_coverage() -> dict[str, float]``: extremes of a few named
  quantities (the cart's position, the cheetah's furthest x, ...) over the steps since the
  last call. The native agent calls it once per logging window of its training env and
  logs every entry as ``explore/<name>``; evaluation envs are separate instances, so the
  window holds what the exploring policy reached and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable


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
