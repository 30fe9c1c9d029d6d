"""A run directory opened for training, and closed after: the one machinery every run of
the native engine, SB3 and TRPO alike, goes through — a single run
(:func:`agents.runs.train.train`) and each member of a population
(:func:`agents.runs.population_run.train_population`).

:func:`locked_run_dir` holds the directory's lock (:mod:`agents.runs.run_lock`);
:func:`open_run` checks what a resume trusts (:mod:`agents.runs.resume`) and prepares the
directory — ``config.yaml``, the checkpoint of step 0, the run's callback and log —, or says
the run is complete already; :func:`close_run` ends it: its checkpoint and ``explore.csv``
after its end or a stop request (:class:`~agents.runs.stopping.RunInterrupted` when a signal
stopped it early), or its own error, re-raised with where it can continue from. A new run
that fails before its first step leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..common.callbacks import RunnableAgent
from ..common.errors import (
    CheckpointError,
    ConfigError,
    RunDirectoryError,
    os_error_message,
)
from ..settings import RunSettings, save_settings
from .callback import Progress, RunCallback
from .explore_log import EXPLORE_CSV, write_explore_csv
from .layout import CHECKPOINT_DIR, CONFIG_FILE, LEGACY_SB3_CHECKPOINT, has_results
from .resume import (
    check_resumable,
    check_run_settings,
    eval_rows_to_keep,
    evaluated_to_the_end,
    saved_settings,
)
from .run_lock import LOCK_FILE, run_dir_lock
from .run_logger import RunLogger, write_comparison_layout
from .stopping import RunInterrupted, stop_requested
from .tracking import Tracking, start_tracker


@contextmanager
def locked_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (creating it) for the block; the directories the block
    created and left empty (a run that failed before its first step) are removed after."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirectoryError(f"{run_dir} is a file, not a run directory")
    new_dirs = [d for d in (run_dir, *run_dir.parents) if not d.exists()]
    try:
        with run_dir_lock(run_dir):
            yield
    except OSError as err:
        raise RunDirectoryError(os_error_message(err, "cannot write")) from None
    finally:
        for directory in new_dirs:  # left empty by a run that failed before its first step
            try:
                directory.rmdir()
            except OSError:
                break


@dataclass
class OpenRun:
    """A run ready to learn: its (locked) directory checked and prepared, its learner
    loaded from its checkpoint or checkpointed at step 0, its callback and log open."""

    config: RunSettings
    agent: RunnableAgent
    run_dir: Path
    callback: RunCallback
    resume_step: int | None
    #: The directory's files before this call (a new run that fails removes the others).
    before: set[Path]


def open_run(
    config: RunSettings,
    agent: RunnableAgent,
    run_dir: Path,
    resume: bool,
    progress: Progress,
    tracking: Tracking | None = None,
) -> OpenRun | None:
    """Check and prepare a locked run directory for ``agent`` (module docstring); None
    when the run is complete already."""
    checkpoint_path = run_dir / CHECKPOINT_DIR / agent.checkpoint_name
    legacy = run_dir / CHECKPOINT_DIR / LEGACY_SB3_CHECKPOINT
    if config.engine == "sb3" and legacy.exists() and not checkpoint_path.exists():
        raise CheckpointError(
            f"{legacy} is a checkpoint of an earlier version: SB3's own zip, which holds "
            "pickled objects that loading would run, so it is never loaded; train the run "
            f"again in another --logdir (or after moving {run_dir} away)"
        )
    if (checkpoint_path.exists() or has_results(run_dir)) and not resume:
        raise RunDirectoryError(
            f"{run_dir} already holds a run; pass --resume to continue it, "
            "or choose another --logdir or --seed"
        )
    resume_step, rows = None, []
    if checkpoint_path.exists():
        metadata = agent.load_checkpoint(
            checkpoint_path, check=lambda meta: check_run_settings(run_dir, config, meta)
        )
        resume_step = agent.num_timesteps
        if resume_step >= config.total_steps:
            print(f"{run_dir}: already complete ({resume_step} steps)", flush=True)
            _write_missing_explore_csv(run_dir)
            return None
        rows = eval_rows_to_keep(run_dir, config, resume_step)
        no_buffer = "buffer_saved" in metadata and not metadata["buffer_saved"]
        if resume_step > 0 and no_buffer and config.algo == "ddpg":
            print(
                f"{run_dir}: resuming at step {resume_step} without the replay buffer "
                "(save_replay_buffer: false): it refills from new experience, so the run "
                "continues on another trajectory than an uninterrupted one",
                flush=True,
            )
    elif has_results(run_dir):
        saved = saved_settings(run_dir)
        if isinstance(saved, ConfigError):
            raise RunDirectoryError(f"cannot resume {run_dir}: {saved}; restore {CONFIG_FILE}")
        if saved is not None:
            check_resumable(saved, config, run_dir)
        if evaluated_to_the_end(run_dir, config):
            # A finished run whose checkpoints were not kept (a study committed with its
            # eval.csv and config.yaml only). Nothing to redo.
            print(f"{run_dir}: already complete (eval.csv reaches the last evaluation)", flush=True)
            _write_missing_explore_csv(run_dir)
            return None
        raise RunDirectoryError(
            f"cannot resume {run_dir}: its checkpoint {checkpoint_path} is missing but the "
            "directory holds results (eval.csv, TensorBoard events); restore the checkpoint "
            "to continue the run, or move the directory away to train it again"
        )

    before = {p for p in run_dir.rglob("*")}
    try:
        write_comparison_layout(Path(config.logdir) / config.env)
        save_settings(config, run_dir / CONFIG_FILE)
        callback = RunCallback(config, checkpoint_path, progress)
        callback.checkpoint_step = resume_step
        if resume_step is None:
            callback.checkpoint(agent)  # step 0: a run with results always has a checkpoint
        tracker = None
        if tracking is not None:
            tracker = start_tracker(tracking, config, run_dir, callback.name)
        callback.logger = RunLogger(run_dir, resume_step=resume_step, rows=rows, tracker=tracker)
    except (ConfigError, OSError) as err:
        if resume_step is None:
            _remove_new_files(run_dir, before)
            raise _not_kept(err, run_dir) from None
        raise
    return OpenRun(config, agent, run_dir, callback, resume_step, before)


def close_run(run: OpenRun, stop: Exception | None = None) -> Path:
    """End a run that learned: after ``stop`` (an error of its own, re-raised with where
    the run can continue from; its ``explore.csv`` up to where it stopped) or after its end
    or a stop request (its checkpoint and ``explore.csv``; :class:`RunInterrupted` when a
    signal stopped it early)."""
    config, agent, callback, run_dir = run.config, run.agent, run.callback, run.run_dir
    callback.logger.close(failed=stop is not None)
    if stop is not None:
        if run.resume_step is None and agent.num_timesteps == 0:
            # Nothing was trained: leave nothing behind, so that the command runs again.
            _remove_new_files(run_dir, run.before)
            raise _not_kept(stop, run_dir) from None
        if isinstance(stop, OSError):
            raise stop
        where = callback.checkpoint_last_good(agent, getattr(stop, "good_until", None))
        write_explore_csv(run_dir)  # a failed run's exploration is a result too
        raise type(stop)(f"{stop}; {where}") from None
    signum = stop_requested()
    callback.checkpoint(agent)
    write_explore_csv(run_dir)
    if signum is not None and agent.num_timesteps < config.total_steps:
        raise RunInterrupted(signum)
    return run_dir


def _write_missing_explore_csv(run_dir: Path) -> None:
    """A finished run from before runs wrote ``explore.csv`` gets it from its events (if
    they are there: a committed study's run has only ``eval.csv`` and ``config.yaml``)."""
    if not (run_dir / EXPLORE_CSV).exists():
        write_explore_csv(run_dir)


def _not_kept(err: ConfigError | OSError, run_dir: Path) -> ConfigError:
    """The error of a new run that failed before its first step, which left nothing."""
    if isinstance(err, OSError):
        err = RunDirectoryError(os_error_message(err, "cannot write"))
    return type(err)(f"{err}; nothing was trained, so {run_dir} was not kept")


def _remove_new_files(run_dir: Path, before: set[Path]) -> None:
    """Remove what this call wrote into the (locked) run directory."""
    for path in sorted(set(run_dir.rglob("*")) - before, reverse=True):
        if path.name == LOCK_FILE:
            continue
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink(missing_ok=True)
