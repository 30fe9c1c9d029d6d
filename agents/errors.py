"""The exceptions a user sees as one ``train_agent: error: ...`` line (exit code 2)."""


class ConfigError(ValueError):
    """Invalid user input; the CLI prints its message as one line and exits non-zero."""


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used: damaged, of another run, or holding more than data."""


class NonFiniteDataError(ConfigError):
    """The environment returned a non-finite observation or reward; the run stopped."""


class UpdatesSkippedError(NonFiniteDataError):
    """Every update of a window was skipped for a non-finite loss or gradient; the run
    stopped (it would have trained nothing but a counter)."""
