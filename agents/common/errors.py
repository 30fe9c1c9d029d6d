"""The exceptions a user sees as one ``train_agent: error: ...`` line (exit code 2)."""

from __future__ import annotations


class ConfigError(ValueError):
    """Invalid user input; the CLI prints its message as one line and exits non-zero."""


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used: damaged, of another run, or holding more than data."""


class NonFiniteDataError(ConfigError):
    """A non-finite number from the environment or the policy; the run stopped."""

    def __init__(self, message: str, good_until: int | None = None) -> None:
        """``good_until``: found after the fact (a population reads its rows at its
        boundaries, :mod:`agents.ddpg.device_rows`), the last step whose state is good; the
        state the run trained to after it is not checkpointed."""
        super().__init__(message)
        self.good_until = good_until


class UpdatesSkippedError(NonFiniteDataError):
    """Every update of a window was skipped for a non-finite loss or gradient; the run
    stopped (it would have trained nothing but a counter)."""


class EnvironmentFailure(ConfigError):
    """The environment raised an exception in ``reset`` or ``step``; the run stopped."""


class RunDirectoryError(ConfigError):
    """A run directory that cannot be used as asked: written by another process, or a file
    of it missing or damaged."""


class DamagedFileError(RunDirectoryError):
    """A run's file (``config.yaml``, ``eval.csv``) that cannot be read as what it should be."""


def os_error_reason(err: OSError) -> str:
    """The reason of an OS error in lower case (``no space left on device``)."""
    reason = err.strerror or str(err) or type(err).__name__
    return reason[:1].lower() + reason[1:]


def os_error_message(err: OSError, doing: str = "cannot use") -> str:
    """One line for an OS error: what was being done, the file, the reason
    (``cannot write out/x/eval.csv: no space left on device``)."""
    target = f" {err.filename}" if err.filename is not None else ""
    return f"{doing}{target}: {os_error_reason(err)}"
