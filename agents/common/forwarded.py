"""An attribute that is another object's: read and written there.

Why: a population's members keep their counters (step, update and episode counts) and
their replay buffers' fill in objects shared with, or rows of, their stack's; a member's
front reads and writes them as its own attributes (``agent.num_timesteps``,
``buffer.position``), as every caller and checkpoint did before they were stacked.
"""

from __future__ import annotations

from typing import Any


class Forwarded:
    """``obj.<name>`` is ``obj.<holder>.<field>``, read and written there."""

    def __init__(self, holder: str, field: str, doc: str | None = None) -> None:
        self.holder, self.field = holder, field
        self.__doc__ = doc

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.holder), self.field)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(getattr(obj, self.holder), self.field, value)
