"""The one exception type for bad user input (config, CLI flags, environments)."""


class ConfigError(ValueError):
    """Invalid user input; the CLI prints its message as one line and exits non-zero."""
