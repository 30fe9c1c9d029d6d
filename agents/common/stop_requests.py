"""A request to stop a run, and the safe points where the loops honour it.

Whoever asks (a SIGINT or SIGTERM handler, :mod:`agents.runs.stopping`; a grid worker
whose driver is gone, :mod:`agents.runs.grid`) only records the request here; the loops
read it at points where the learner's state is whole: after every environment step (the
run's callback) and between the gradient steps of one round of updates
(:func:`unless_stopped`), so that a round of many updates (``gradient_steps``) does not
keep a stopped run going. The run then writes its checkpoint; the rest of an interrupted
round is not made up on resume (the run goes on at its next environment step).
"""

from __future__ import annotations

from collections.abc import Iterator

_requested: int | None = None


def stop_requested() -> int | None:
    """The signal that asked the run to stop, or None."""
    return _requested


def request_stop(signum: int) -> None:
    """Ask the run to stop; the first request's signal is kept."""
    global _requested
    if _requested is None:
        _requested = signum


def forget_stop_request() -> None:
    """No request any more (a new block of :func:`agents.runs.stopping.stop_on_signals`)."""
    global _requested
    _requested = None


def unless_stopped(count: int) -> Iterator[int]:
    """``range(count)``, ended early once a stop is requested: the loop of a round of
    updates, whose every iteration leaves the learner's state whole."""
    for i in range(count):
        if _requested is not None:
            return
        yield i
