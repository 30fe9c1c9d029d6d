"""Ctrl-C and SIGTERM: a run stops at the next step boundary, after a checkpoint.

A signal that raised ``KeyboardInterrupt`` wherever it landed could land in the middle of
an update (half the optimizer's tensors stepped) or of an evaluation (the checkpoint would
then pass an evaluation that was never written), and the checkpoint taken on the way out
would hold that state. So inside :func:`stop_on_signals` the first SIGINT or SIGTERM only
*asks* to stop (:func:`stop_requested`, :mod:`agents.common.stop_requests`); the training
loop looks after every environment step and between the updates of a round, the run
writes its checkpoint and :func:`agents.runs.train.train` raises :class:`RunInterrupted`.
A second signal raises ``KeyboardInterrupt`` at once (a step that hangs), and then no
checkpoint is written: the last one, written atomically, stays.

A grid's worker processes ask to stop on every signal and never raise: their parent sends
the signal on to them when it is the one that got it, so they may receive it twice, and
the parent itself stops them at once (SIGKILL; their last checkpoints stay) on a second
Ctrl-C. A signal that was ignored when the process started (``nohup``, a background job)
stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from ..common.stop_requests import forget_stop_request, request_stop, stop_requested

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_depth = 0


class RunInterrupted(KeyboardInterrupt):
    """A run or grid stopped by ``signum`` (SIGINT or SIGTERM) after its checkpoint."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by the signal: 128 + its number."""
        return 128 + self.signum


def _ask_to_stop(signum: int, frame: FrameType | None) -> None:
    request_stop(signum)


def _ask_then_raise(signum: int, frame: FrameType | None) -> None:
    if stop_requested() is not None:
        raise KeyboardInterrupt  # the second signal: stop now
    _ask_to_stop(signum, frame)


@contextmanager
def stop_on_signals(escalate: bool = True) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM ask to stop (see the module docstring); with
    ``escalate`` a second one raises ``KeyboardInterrupt``. Nested blocks keep the
    outermost handlers; the request is forgotten when the outermost block ends."""
    global _depth
    if _depth > 0:  # inside another block (or a grid worker): its handlers stay
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return
    handler = _ask_then_raise if escalate else _ask_to_stop
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(signum, handler)
    _depth = 1
    forget_stop_request()
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        _depth = 0
        forget_stop_request()


def install_for_grid_worker() -> None:
    """A grid worker's handlers, for the process's life: every signal asks to stop."""
    global _depth
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _ask_to_stop)
    _depth = 1


@contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`RunInterrupted` at once: for a
    process that only waits (a grid's parent), where any point is a safe one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise RunInterrupted(signum)

    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(signum, interrupt)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
