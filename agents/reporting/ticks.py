"""Tick marks of ``compare_runs``' figures: few, round and short enough to read.

Matplotlib's default locator fills an axis with as many ticks as fit its length at the
default font, which on a narrow panel of returns in the thousands prints labels edge to
edge ("−1400−1350−1300") and runs the last into the next panel. The figures' axes take
at most ``nbins`` ticks at round steps instead, and environment steps are written in
thousands ("25 k" rather than "25000"; a short run's "200" stays as it is).
"""

from __future__ import annotations

from matplotlib.axis import Axis
from matplotlib.ticker import FuncFormatter, MaxNLocator

#: The round tick spacings (× a power of ten) matplotlib's own default locator uses.
ROUND_STEPS = (1, 2, 2.5, 5, 10)


def few_ticks(axis: Axis, nbins: int = 4) -> None:
    """At most ``nbins`` intervals between ticks on ``axis``, at round values."""
    axis.set_major_locator(MaxNLocator(nbins=nbins, steps=list(ROUND_STEPS)))


def _thousands(value: float, _position: int | None = None) -> str:
    """'25 k' for 25000, '2.5 k' for 2500; below a thousand the number itself."""
    return f"{value:g}" if abs(value) < 1000 else f"{value / 1000:g} k"


def step_ticks(axis: Axis, nbins: int = 5) -> None:
    """Environment steps on ``axis``: few round ticks, labelled in thousands."""
    few_ticks(axis, nbins)
    axis.set_major_formatter(FuncFormatter(_thousands))
