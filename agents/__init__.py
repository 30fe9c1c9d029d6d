"""agents: a DDPG agent whose actor explores through ``param_explore`` optimizers.

Importing it registers the sparse-reward tasks of :mod:`agents.tasks` with gymnasium.
"""

from .engine.config import DDPGConfig
from .engine.ddpg import DDPG, Callback
from .engine.evaluation import evaluate, evaluate_together
from .errors import ConfigError
from .runs.config import TrainConfig, resolve_config
from .runs.training import train
from .tasks import register_tasks

__all__ = [
    "DDPG",
    "Callback",
    "ConfigError",
    "DDPGConfig",
    "TrainConfig",
    "evaluate",
    "evaluate_together",
    "register_tasks",
    "resolve_config",
    "train",
]
