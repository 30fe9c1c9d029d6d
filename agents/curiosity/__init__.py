"""Curiosity: VIME's information-gain bonus on the reward (Houthooft et al. 2016).

A Bayesian dynamics model p(s′ | s, a; θ), whose posterior is Bayes by Backprop (VIME as
released), noisy Adam or noisy K-FAC (Zhang et al. 2018, Sec. 5.4; the ``param_explore``
optimizers in their VI form), rewards a transition by how much it would change that
posterior. :class:`VimeBonus` is the bonus any learner calls; :mod:`agents.curiosity.sb3`
brings it to Stable-Baselines3 (``VimeCallback`` for on-policy algorithms, TRPO included;
``VimeReplayBuffer`` for off-policy ones). ``docs/vime.md`` has the mathematics.
"""

from .config import POSTERIORS, VimeConfig, bonus_config
from .vime import VimeBonus, make_vime_bonus

__all__ = ["POSTERIORS", "VimeBonus", "VimeConfig", "bonus_config", "make_vime_bonus"]
