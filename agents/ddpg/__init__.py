"""The native DDPG: this project's agent (``--engine native``), whose actor explores and is
trained through a ``param_explore`` strategy, its networks, replay buffer and its update
written once (:mod:`agents.ddpg.update`), run eagerly or as one compiled graph."""

from .agent import DDPG

__all__ = ["DDPG"]
