"""Tracking a run in Weights & Biases (``train_agent --track``), as CleanRL and rl-zoo3 do.

W&B is an optional extra (``pip install 'param-explore[track]'``), imported only when a run
asks for it. Each run — a single one, each member of a population, each run of a grid —
is one W&B run:

    name      the run's directory below the logdir (``Pendulum-v1/vadam/seed0``)
    group     ``--wandb-group``, else ``WANDB_RUN_GROUP``, else the run's strategy as its
              directory names it (``vadam``, ``vadam+vime-noisy-kfac``,
              ``vadam@sample_constant=100``), so that W&B aggregates a strategy's seeds
    config    the run's resolved settings (:meth:`RunSettings.values`, ``config.yaml``'s)
    history   every scalar the run writes to TensorBoard, under the same tag, against the
              environment step (``global_step``, W&B's x axis for every tag)

The scalars come from :class:`agents.runs.run_logger.RunLogger`, the one place that writes
them, so the two never differ. W&B's own ``sync_tensorboard`` would read the same events,
but it patches TensorBoard's writer for the whole process and follows one run per process:
a population writes several runs from one process. The values of one step go to W&B as one
row, sent when the next step starts and at every evaluation (a killed run keeps them as its
TensorBoard events do).

W&B's own settings are honoured: ``WANDB_MODE=offline`` runs without a network or an
account (``wandb sync`` uploads later), ``WANDB_PROJECT``/``WANDB_ENTITY`` when the flags
are not given, ``WANDB_DIR`` for its files (by default ``<logdir>/wandb``, beside the runs,
where the grid's workers write on any machine). A resumed run continues its W&B run: its id
is kept in the run directory (:data:`WANDB_ID_FILE`), and ``global_step`` lets the steps
after its checkpoint be logged again.

What W&B prints is kept to what a user acts on (:func:`_quiet_unless_asked`,
:func:`_no_weave_suggestion`): where the run's files are and how to view them, or its page
when online; not its version banner, the history panel of every run as it ends, nor a
suggestion of W&B Weave for a library this project is not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..common.errors import ConfigError
from ..settings import RunSettings
from .agent_factory import optional_import

#: The project of a run whose command and environment name none.
DEFAULT_PROJECT = "param-explore"
#: The run directory's file holding its W&B run id (a resume continues that run).
WANDB_ID_FILE = "wandb_run_id"
#: W&B's x axis of every tag: the environment step, as TensorBoard's.
STEP_METRIC = "global_step"


@dataclass(frozen=True)
class Tracking:
    """Where runs are tracked: W&B's project, entity (None: W&B's default for the user)
    and group (None: each run's strategy)."""

    project: str | None = None
    entity: str | None = None
    group: str | None = None


def check_tracking() -> ModuleType:
    """W&B's module, or the one line that names the extra to install or the W&B setting
    of the environment W&B refuses (:func:`check_wandb_environment`)."""
    wandb = optional_import("wandb", "--track")
    check_wandb_environment(wandb)
    return wandb


def check_wandb_environment(wandb: ModuleType) -> None:
    """W&B's settings from the environment (``WANDB_MODE``, ``WANDB_DIR``, …), checked as
    ``wandb.init`` checks them, without starting anything: a value W&B refuses
    (``WANDB_MODE=bogus``) is one ConfigError line naming the variable, for ``--check``
    and the run alike, instead of a run that stops before its first step."""
    settings = getattr(wandb, "Settings", None)
    if settings is None or not hasattr(settings, "update_from_env_vars"):
        return  # a W&B without this check: wandb.init says what it refuses
    try:
        settings().update_from_env_vars(dict(os.environ))
    except Exception as err:  # pydantic's ValidationError, or W&B's own
        raise ConfigError(
            f"--track: W&B refuses its settings in the environment: {_refusal(err)}"
        ) from None


def _quiet_unless_asked(wandb: ModuleType) -> Any:
    """W&B's quiet mode, unless the user's ``WANDB_QUIET`` or ``WANDB_SILENT`` says how much
    to print: a run's start says where its files are and how to view them (its page online),
    without the version banner, and its end prints no history panel (a population's members
    end together, a panel each). W&B's settings passed here would override the variables."""
    if "WANDB_QUIET" in os.environ or "WANDB_SILENT" in os.environ:
        return None
    return wandb.Settings(quiet=True)


@contextmanager
def _no_weave_suggestion() -> Iterator[None]:
    """W&B suggests W&B Weave ("Detected [agents] in use", three lines a run) when a library
    Weave traces is imported, known by its top-level name: OpenAI's Agents SDK is ``agents``,
    the name of this project's package. ``WANDB_DISABLE_WEAVE`` turns the suggestion (and
    Weave's own start, which a run of this project never asks for) off while W&B starts the
    run; a value the user set is kept, and the process's environment is left as it was."""
    if "WANDB_DISABLE_WEAVE" in os.environ:
        yield
        return
    os.environ["WANDB_DISABLE_WEAVE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("WANDB_DISABLE_WEAVE", None)


def group_of(config: RunSettings, tracking: Tracking) -> str:
    """The run's W&B group: the flag's, W&B's variable's, or the run's strategy directory."""
    return tracking.group or os.environ.get("WANDB_RUN_GROUP") or config.run_dir().parent.name


class Tracker:
    """One run's W&B run: the scalars of :class:`~agents.runs.run_logger.RunLogger`, by step."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._step: int | None = None
        self._row: dict[str, float] = {}

    def scalar(self, tag: str, value: float, step: int) -> None:
        if step != self._step:
            self.flush()
            self._step = step
        self._row[tag] = float(value)

    def flush(self) -> None:
        """Send the pending step's values as one row."""
        if self._row:
            self.run.log({**self._row, STEP_METRIC: self._step})
            self._row = {}

    def finish(self, exit_code: int = 0) -> None:
        self.flush()
        self.run.finish(exit_code=exit_code)


def start_tracker(tracking: Tracking, config: RunSettings, run_dir: Path, name: str) -> Tracker:
    """Start (or, for a run directory that holds one's id, continue) the run's W&B run; a
    W&B that cannot start it (no account in online mode, no network) is one ConfigError
    line."""
    wandb = check_tracking()
    id_file = run_dir / WANDB_ID_FILE
    run_id = id_file.read_text().strip() if id_file.exists() else None  # None: W&B's new id
    project = tracking.project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT
    directory = None if os.environ.get("WANDB_DIR") else Path(config.logdir).resolve()
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    try:
        with _no_weave_suggestion():
            run = wandb.init(
                project=project,
                entity=tracking.entity,
                group=group_of(config, tracking),
                name=name,
                id=run_id,
                resume="allow",
                config={**config.values(), "run_dir": str(run_dir)},
                dir=directory,
                reinit="create_new",  # one W&B run per member of a population
                settings=_quiet_unless_asked(wandb),
            )
    except Exception as err:  # W&B's errors (login, network, settings) have no common base
        raise ConfigError(
            f"--track: W&B could not start the run ({type(err).__name__}: "
            f"{' '.join(str(err).split())}); log in "
            "with `wandb login`, or run offline with WANDB_MODE=offline"
        ) from None
    if run_id is None:
        id_file.write_text(run.id + "\n")
    run.define_metric(STEP_METRIC)
    run.define_metric("*", step_metric=STEP_METRIC)
    return Tracker(run)


def _refusal(err: Exception) -> str:
    """What W&B refused, one line per setting: the variable that set it and why."""
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return " ".join(str(err).split())
    found = []
    for error in errors():
        field = ".".join(map(str, error.get("loc", ()))) or "?"
        given = error.get("input")
        names = [k for k, v in os.environ.items() if k.startswith("WANDB_") and v == str(given)]
        where = names[0] if names else field
        found.append(f"{where}={given!r}: {error.get('msg', 'refused')}")
    return "; ".join(found) or " ".join(str(err).split())
