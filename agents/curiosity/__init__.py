"""Curiosity: bonuses on the reward for what a learner did not know.

VIME's information-gain bonus (Houthooft et al. 2016): a Bayesian dynamics model
p(s′ | s, a; θ), whose posterior is any of ``param_explore.POSTERIORS`` — Bayes by Backprop
(VIME as released), noisy Adam, noisy K-FAC (Zhang et al. 2018, Sec. 5.4) or IVON (Shen et
al. 2024), the ``param_explore`` optimizers in their VI form, all behind one interface
(``param_explore.posterior``) — rewards a transition by how much it would change that
posterior.
:class:`VimeBonus` is the bonus any learner calls; :mod:`agents.curiosity.sb3` brings it to
Stable-Baselines3 (``VimeCallback`` for on-policy algorithms, TRPO included;
``VimeReplayBuffer`` for off-policy ones); :mod:`agents.curiosity.registry` lists the
bonuses ``--bonus`` accepts. ``docs/vime.md`` has the mathematics.
"""

from .config import POSTERIORS, VimeConfig
from .registry import BONUSES, make_bonus, resolve_bonus
from .vime import VimeBonus, make_vime_bonus

__all__ = [
    "BONUSES",
    "POSTERIORS",
    "VimeBonus",
    "VimeConfig",
    "make_bonus",
    "make_vime_bonus",
    "resolve_bonus",
]
