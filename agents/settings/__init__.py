"""A run's settings, resolved once at the start into one typed, checked record
(:class:`RunSettings`: the learner and its settings, the strategy, the bonus, the env and
the run's own), which everything below receives."""

from .learners import DDPGSettings, TRPOSettings
from .resolve import load_run_settings, resolve_settings, save_settings
from .run import RunSettings

__all__ = [
    "DDPGSettings",
    "RunSettings",
    "TRPOSettings",
    "load_run_settings",
    "resolve_settings",
    "save_settings",
]
