"""What a resumed run trusts, checked first: the settings it was trained with (its
checkpoint's, else its ``config.yaml``'s) against the command's, and ``eval.csv`` against
the evaluations the checkpoint has passed. A missing or damaged file stops the resume with
one line naming it; nothing is deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common.checkpoints import read_checkpoint
from ..common.errors import CheckpointError, ConfigError, DamagedFileError, RunDirectoryError
from ..settings import RunSettings, load_run_settings
from ..settings.files import upgrade_config_keys
from .layout import CHECKPOINT_DIR, CHECKPOINT_FILE, CONFIG_FILE
from .run_logger import EVAL_CSV, eval_rows_from_events, read_eval_csv

#: The checkpoint's engine (:data:`agents.common.checkpoints.REQUIRED_KEYS`) of a run's
#: (algo, engine).
ENGINES = {("ddpg", "native"): "native", ("ddpg", "sb3"): "sb3", ("trpo", "sb3"): "sb3-trpo"}
#: Keys that may differ between a run's saved settings and the command resuming it.
RESUMABLE_CHANGES = {
    "total_steps",
    "device",
    "logdir",
    "eval_episodes",
    "compile",
    "skipped_window",
}


def check_resumable(
    saved: RunSettings, requested: RunSettings, run_dir: Path, source: str = "config.yaml"
) -> None:
    old, new = saved.values(), requested.values()
    changed = [k for k in old if old[k] != new.get(k) and k not in RESUMABLE_CHANGES]
    if changed:
        details = ", ".join(f"{k}: {old[k]!r} -> {new[k]!r}" for k in changed)
        raise ConfigError(
            f"cannot resume {run_dir} with a different config ({details}; the run's own "
            f"settings are those of its {source})"
        )


def saved_settings(run_dir: Path) -> RunSettings | ConfigError | None:
    """The run's ``config.yaml``; None when missing, the error when it is damaged."""
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return None
    try:
        return load_run_settings(path)
    except ConfigError as err:
        return err


def trained_eval_every(run: RunSettings) -> int | None:
    """The evaluation interval ``run``'s directory was trained with, if it holds a run: its
    ``config.yaml``'s, else (gone or damaged: a resume writes it again) its checkpoint's
    run settings', so that a short run's schedule derived from ``--steps`` never changes an
    existing run's. None for a new run, and for one whose files cannot tell (the resume
    then says what is wrong with them)."""
    run_dir = run.run_dir()
    saved = saved_settings(run_dir)
    if isinstance(saved, RunSettings):
        return saved.eval_every
    path = run_dir / CHECKPOINT_DIR / CHECKPOINT_FILE
    if not path.is_file():
        return None
    engine = ENGINES.get((run.algo, run.engine), "native")
    try:
        recorded = read_checkpoint(path, engine=engine).get("metadata", {}).get("run_config")
        return RunSettings.from_values(upgrade_config_keys(recorded)).eval_every
    except (CheckpointError, ConfigError, TypeError, AttributeError):
        return None


def check_run_settings(run_dir: Path, requested: RunSettings, metadata: dict[str, Any]) -> None:
    """Resume only with the settings the checkpoint was trained with: those the checkpoint
    records (``config.yaml`` may be gone or edited), else ``config.yaml``'s (a checkpoint
    of an earlier version records the agent's settings only)."""
    on_disk = saved_settings(run_dir)
    if "run_config" in metadata:
        try:
            saved = RunSettings.from_values(upgrade_config_keys(metadata["run_config"]))
        except (TypeError, AttributeError, ConfigError) as err:
            raise CheckpointError(
                f"the checkpoint in {run_dir / CHECKPOINT_DIR} records settings that are not "
                f"valid ({err})"
            ) from None
        check_resumable(saved, requested, run_dir, source="checkpoint")
        if not isinstance(on_disk, RunSettings):
            what = "missing" if on_disk is None else f"damaged ({on_disk})"
            print(
                f"{run_dir}: {CONFIG_FILE} was {what}; written again from the checkpoint's "
                "settings",
                flush=True,
            )
        elif on_disk.values() != saved.values():  # edited: the checkpoint's settings rule
            old, new = on_disk.values(), saved.values()
            edited = ", ".join(f"{k}: {old[k]!r} -> {new.get(k)!r}" for k in old
                               if old[k] != new.get(k))  # fmt: skip
            print(
                f"{run_dir}: {CONFIG_FILE} differs from the settings the checkpoint was "
                f"trained with ({edited}); written again from the checkpoint's",
                flush=True,
            )
        return
    if on_disk is None:
        raise RunDirectoryError(
            f"cannot resume {run_dir}: its {CONFIG_FILE} is missing, and its checkpoint (of "
            f"an earlier version) does not record the run's settings; restore {CONFIG_FILE}"
        )
    if isinstance(on_disk, ConfigError):
        raise RunDirectoryError(f"cannot resume {run_dir}: {on_disk}; restore {CONFIG_FILE}")
    check_resumable(on_disk, requested, run_dir)


def evaluated_to_the_end(run_dir: Path, config: RunSettings) -> bool:
    """Whether ``eval.csv`` holds the run's last scheduled evaluation (or, for a run
    shorter than ``eval_every``, the one at its end)."""
    csv_path = run_dir / EVAL_CSV
    last = config.total_steps // config.eval_every * config.eval_every or config.total_steps
    if not csv_path.exists():
        return False
    return any(row["step"] >= last for row in read_eval_csv(csv_path))


def eval_rows_to_keep(run_dir: Path, config: RunSettings, resume_step: int) -> list[dict]:
    """``eval.csv``'s rows up to the checkpoint, checked against the evaluations the
    checkpoint has passed; rebuilt from the TensorBoard events when the file is missing."""
    expected = list(range(config.eval_every, resume_step + 1, config.eval_every))
    csv_path = run_dir / EVAL_CSV
    rebuild = "remove it to have it rebuilt from the TensorBoard events, or restore it"
    if csv_path.exists():
        try:
            rows = [row for row in read_eval_csv(csv_path) if row["step"] <= resume_step]
        except DamagedFileError as err:
            raise DamagedFileError(f"cannot resume: {err}; {rebuild}") from None
        found = [row["step"] for row in rows]
        if found != expected:
            raise DamagedFileError(
                f"cannot resume: {csv_path} lacks evaluations the checkpoint (step "
                f"{resume_step}) has passed (it has steps {_steps(found)}, the run made "
                f"{_steps(expected)}); {rebuild}"
            )
        return rows
    rows = eval_rows_from_events(run_dir, resume_step, config.eval_episodes) if expected else []
    found = [row["step"] for row in rows]
    if found != expected:
        raise RunDirectoryError(
            f"cannot resume: {csv_path} is missing, and the TensorBoard events hold the "
            f"evaluations at steps {_steps(found)} only, not {_steps(expected)}; restore it"
        )
    if rows:
        print(
            f"{run_dir}: {EVAL_CSV} was missing; rebuilt from the TensorBoard events "
            f"({len(rows)} evaluations, as TensorBoard stores them: float32)",
            flush=True,
        )
    return rows


def _steps(steps: list[int]) -> str:
    if not steps:
        return "none"
    return ", ".join(map(str, steps)) if len(steps) <= 6 else f"{steps[0]} … {steps[-1]}"
