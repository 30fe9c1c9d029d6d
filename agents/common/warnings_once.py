"""Warnings about what the user cannot change (``docs/decisions.md#warnings``): MuJoCo's,
each shown once per process, but for the one about gymnasium's own model file, and the
ones gymnasium gives while making an env, once each.

MuJoCo's C library reports a warning through ``mju_warning``, which calls the handler
``mju_user_warning`` when one is set and otherwise prints ``WARNING: …`` to the terminal
itself. The handler installed here prints each distinct message the first time it comes, in
MuJoCo's words, and drops its repetitions, so nothing is said twice. One message is not
shown at all where an env is made (:func:`making_envs`): MuJoCo 4.0's deprecation of the
compiler attribute ``settotalmass``, which gymnasium 1.4's ``half_cheetah.xml`` (HalfCheetah
v4 and v5, the sparse half-cheetah) sets. It opened every run with a request neither the
user nor this project can act on (the model is gymnasium's, and the masses it sets are the
task's); a model of the user's own that sets the attribute, compiled anywhere else, still
gets it once.

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
#: MuJoCo's warnings about gymnasium's model files, by their beginning: not shown while an
#: env is made (module docstring).
GYMNASIUM_MODEL_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)
#: How many :func:`making_envs` blocks are open (envs are made inside others' too).
_making = 0


@contextmanager
def making_envs() -> Iterator[None]:
    """MuJoCo's warnings about gymnasium's model files (:data:`GYMNASIUM_MODEL_WARNINGS`)
    are not shown while the block makes envs; every other one is, once."""
    global _making
    _making += 1
    try:
        yield
    finally:
        _making -= 1


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
    if message in _shown or (_making and message.startswith(GYMNASIUM_MODEL_WARNINGS)):
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
