"""A closed stdout does not stop a run: ``train_agent … | head -1``, a log reader that
quits, a terminal that went away.

What a run prints on stdout is progress (its start line, status and evaluation lines, the
closing ``run directory:`` line); its results are its files (checkpoints, ``eval.csv``,
the events). Once nobody reads stdout, stopping would throw away the steps trained since
the last checkpoint for the sake of lines nobody would see, so the run goes on silently
instead: at the first write that finds stdout closed (a broken pipe), stdout is pointed at
the null device for the rest of the process, one line on stderr says so, and training,
evaluation and checkpoints go on as before. The command's exit code is the run's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO


class _SilencedWhenClosed:
    """``stream`` (the process's stdout), whose writes after its reader has gone go to
    the null device instead of raising BrokenPipeError (everything else is the stream's)."""

    def __init__(self, stream: TextIO, program: str) -> None:
        self._stream = stream
        self._program = program

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _silence(self) -> None:
        """Point the stream's file descriptor at the null device (the unwritten rest of its
        buffer goes there too, and so does the interpreter's flush at exit); say so once."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError, ValueError):  # stderr may be gone as well
            print(
                f"{self._program}: stdout is closed (broken pipe); training goes on without "
                "progress lines, its checkpoints, eval.csv and events written as usual",
                file=sys.stderr,
                flush=True,
            )


def run_on_without_stdout(program: str = "train_agent") -> None:
    """From now on, a closed stdout silences this process's output instead of stopping it
    (module docstring); once per process (a second call changes nothing)."""
    if not isinstance(sys.stdout, _SilencedWhenClosed) and hasattr(sys.stdout, "fileno"):
        sys.stdout = _SilencedWhenClosed(sys.stdout, program)
