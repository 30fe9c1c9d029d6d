"""agents: a DDPG agent whose actor explores through ``param_explore`` optimizers."""

from .config import DDPGConfig, TrainConfig, resolve_config
from .ddpg import DDPG, Callback
from .errors import ConfigError
from .evaluation import evaluate, evaluate_together
from .training import train

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
