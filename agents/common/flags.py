"""Command-line flags as users of other RL tools type them: a usage error in one line, an
unknown flag answered with the nearest known one, a count of steps written as a float.

Why: argparse answers every usage error with the whole usage (17 lines for
``train_agent``) above its message, and an unknown flag with "unrecognized arguments" and
no hint. The project's own errors are one ``prog: error: ...`` line with exit code 2
(:mod:`agents.common.errors`); :class:`OneLineParser` makes argparse's the same, and
names the closest flag (difflib) for a misspelt or foreign one. Users of CleanRL and
rl-zoo3 write step counts as ``1e6`` (their own scripts parse them as floats or ints);
:func:`whole_number` takes any integral value, however written, and refuses a fraction.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn


def whole_number(text: str) -> int:
    """An argparse ``type``: an integer written as one (``100000``, ``100_000``) or as an
    integral float (``1e5``, ``100000.0``); a fraction, or no number, is refused."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a whole number, got {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expects a whole number, got {text!r}")
    return int(value)


def closest_flag(given: str, flags: Sequence[str]) -> str | None:
    """The known flag nearest to ``given`` (a misspelling, ``_`` for ``-``), or None."""
    matches = difflib.get_close_matches(given, flags, n=1, cutoff=0.6)
    return matches[0] if matches else None


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line (exit code 2),
    an unknown flag's with the closest known flag; ``hint`` ends the line of an unknown
    flag that resembles none (where the setting may be given instead)."""

    def __init__(self, *args: Any, hint: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hint = hint

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        words = [word for word in extras if word != "--"]  # "--" itself ends the flags
        if words:
            self.error(self.unknown_message(words[0]))
        return parsed

    def unknown_message(self, word: str) -> str:
        """What the line says of ``word``, the first argument no flag took."""
        if not word.startswith("-") or word == "-":
            return f"unexpected argument {word!r} (a flag's value needs its flag before it)"
        name = word.split("=", 1)[0]
        flags = [flag for action in self._actions for flag in action.option_strings]
        suggestion = closest_flag(name, flags)
        if suggestion is not None:
            return f"unknown flag {name}; did you mean {suggestion}?"
        tail = f"; {self.hint}" if self.hint else ""
        return f"unknown flag {name}{tail} ({self.prog} --help lists the flags)"

    def error(self, message: str) -> NoReturn:
        """One line on stderr, exit code 2 (argparse's own would print the usage first)."""
        self.exit(2, f"{self.prog}: error: {message}\n")
