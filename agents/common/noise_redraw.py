"""When new weight noise ε is drawn: decided here once, for the native engine (a single
run, a population's members) and SB3's policy and its callback.

A strategy's ``resample`` (its own default, or the settings') says ``"step"``: new ε before
every exploration action (Khan et al. 2018, Algorithm 1, line 3); ``"episode"``: new ε as
an episode starts, kept through it (parameter noise, Plappert et al. 2018). The native
engine knows which members start an episode when it acts: every member draws when ε is
drawn every step (:func:`redrawn_every_step`), those that start one otherwise
(:meth:`~agents.ddpg.stacked_state.StackedState.draw_noise`); SB3 acts in its policy's
``_predict`` (:func:`redrawn_every_step`) and learns of an episode's end in its callback,
so the next action starts one (:func:`redrawn_after_episodes`).
"""

from __future__ import annotations

import numpy as np

from .strategies import Resample


def redrawn_every_step(resample: Resample) -> bool:
    """Whether ε is drawn anew before every exploration action."""
    return resample == "step"


def redrawn_after_episodes(resample: Resample, dones: np.ndarray | None) -> bool:
    """Whether ε is drawn anew once episodes ended (``dones``, SB3's, after a step): with
    ``"episode"``, when any did (``"step"`` draws before every action anyway)."""
    return not redrawn_every_step(resample) and dones is not None and bool(np.any(dones))
