"""agents: learners whose exploration comes from ``param_explore``, and the runs around them.

Importing it registers the sparse-reward tasks of :mod:`agents.tasks` with gymnasium.
"""

from .common.callbacks import Callback
from .common.errors import ConfigError
from .common.evaluation import evaluate, evaluate_together
from .ddpg import DDPG
from .runs.train import train
from .settings import DDPGSettings, RunSettings, resolve_settings
from .tasks import register_tasks

__all__ = [
    "DDPG",
    "Callback",
    "ConfigError",
    "DDPGSettings",
    "RunSettings",
    "evaluate",
    "evaluate_together",
    "register_tasks",
    "resolve_settings",
    "train",
]
