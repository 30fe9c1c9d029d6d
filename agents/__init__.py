"""agents: a DDPG agent whose actor explores through ``param_explore`` optimizers."""

from .engine.config import DDPGConfig
from .engine.ddpg import DDPG, Callback
from .engine.evaluation import evaluate, evaluate_together
from .errors import ConfigError
from .runs.config import TrainConfig, resolve_config
from .runs.training import train

__all__ = [
    "DDPG",
    "Callback",
    "ConfigError",
    "DDPGConfig",
    "TrainConfig",
    "evaluate",
    "evaluate_together",
    "resolve_config",
    "train",
]
