"""Warnings about what the user cannot change, each shown once per process
(``docs/decisions.md#warnings``): MuJoCo's, and the ones gymnasium gives while making an env.

MuJoCo's C library reports a warning through ``mju_warning``, which calls the handler
``mju_user_warning`` when one is set and otherwise prints ``WARNING: …`` to the terminal
itself. MuJoCo 4.0 warns, while compiling gymnasium 1.4's own model files (HalfCheetah-v4
and -v5 alike), that the compiler attribute ``settotalmass`` is deprecated: once per env
built, 21 times in a run with 20 evaluation episodes, about a file the user cannot change.
The handler installed here prints each distinct message the first time it comes, in
MuJoCo's words, and drops its repetitions, so nothing is hidden and nothing is said twice.

gymnasium warns through Python's ``warnings`` (HalfCheetah-v4 "is out of date"), whose
"once per place" memory is forgotten whenever any module changes the warning filters (SymPy
does, when torch first imports it): :func:`each_warning_once` keeps its own memory.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

_shown: set[str] = set()
_shown_warnings: set[tuple[type[Warning], str]] = set()


@contextmanager
def each_warning_once() -> Iterator[None]:
    """Python warnings raised in the block are passed on once per process each (by category
    and message), through the user's own filters."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        key = (warning.category, str(warning.message))
        if key not in _shown_warnings:
            _shown_warnings.add(key)
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )


def _show_once(message: str) -> None:
    if message in _shown:
        return
    _shown.add(message)
    print(f"WARNING: {message} (MuJoCo; shown once per process)", file=sys.stderr, flush=True)


def show_mujoco_warnings_once() -> None:
    """Install the once-per-message handler, unless a handler is set already (a user's
    own handler is kept). Idempotent; without MuJoCo installed it does nothing."""
    try:
        import mujoco
    except ImportError:
        return
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_show_once)
