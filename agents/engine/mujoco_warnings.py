"""MuJoCo's warnings, each shown once per process (``docs/decisions.md#warnings``).

MuJoCo's C library reports a warning through ``mju_warning``, which calls the handler
``mju_user_warning`` when one is set and otherwise prints ``WARNING: …`` to the terminal
itself. MuJoCo 4.0 warns, while compiling gymnasium 1.4's own model files (HalfCheetah-v4
and -v5 alike), that the compiler attribute ``settotalmass`` is deprecated: once per env
built, 21 times in a run with 20 evaluation episodes, about a file the user cannot change.
The handler installed here prints each distinct message the first time it comes, in
MuJoCo's words, and drops its repetitions, so nothing is hidden and nothing is said twice.
"""

from __future__ import annotations

import sys

_shown: set[str] = set()


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
