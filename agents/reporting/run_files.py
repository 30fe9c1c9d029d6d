"""Reading a directory of runs for a comparison: what is read, refused and dropped.

``load_runs(runs_dir)`` reads ``<runs_dir>/<strategy>/seed<k>/eval.csv`` (and the run's
``config.yaml`` for its env) into one :class:`~agents.reporting.curves.Curve` per
strategy. Nothing is averaged that should not be, and nothing is left out without a word:

* a damaged file (``eval.csv`` or ``config.yaml``: binary, truncated, a non-number, a
  non-finite return, a step written twice) stops the comparison with a
  :class:`RunFileError` naming the file;
* seeds of one strategy trained on different envs stop it too (their returns would be
  averaged together);
* a seed without evaluations, and a strategy whose seeds share no evaluation step, are
  dropped with a note saying so; a seed that stopped early shortens its strategy's curve
  (the curve covers the steps every seed reached), also with a note; a seed without a
  ``config.yaml`` is compared with a note (its env is its directory's name);
* a grid's end-of-run aggregates (``skipped``) leave a run they cannot read out, naming
  it once, instead of stopping: the grid has reported that run's failure.

A run's env is the ``env`` of its ``config.yaml``; a run without one (e.g. written by
``RunLogger`` alone) belongs to the env its directory is named after (``runs/<env>``).
A runs directory may be shared or copied, so its ``config.yaml`` files are read within
the bounds of a ``--config`` file (:mod:`agents.runs.bounded_yaml`): one that is not a
config in size, nesting or what its aliases expand to is refused like a damaged one.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..common.bounded_yaml import read_yaml_file
from ..common.errors import ConfigError, DamagedFileError
from ..runs.run_logger import EVAL_CSV, read_eval_csv
from .curves import Curve

CONFIG_YAML = "config.yaml"
SUCCESS = "success_rate"

#: What reading a damaged file raises: the csv module's and the YAML parser's errors, bad
#: numbers (ValueError, incl. UnicodeDecodeError; TypeError for a row cut short), missing
#: columns (KeyError) and the OS's.
_READ_ERRORS = (ValueError, TypeError, KeyError, csv.Error, yaml.YAMLError, OSError)


class RunFileError(ConfigError):
    """A run file that cannot be compared; the message names it."""


@dataclass
class SeedRun:
    """One seed's evaluations: ``returns`` (and ``success``) by step."""

    name: str
    env: str
    returns: dict[int, float]
    success: dict[int, float] | None


def _k(step: int) -> str:
    return f"{step / 1000:g} k"


def read_env(seed_dir: Path, default: str) -> str:
    """The ``env`` of the run's ``config.yaml``, ``default`` without that file."""
    path = seed_dir / CONFIG_YAML
    if not path.exists():
        return default
    try:
        config = read_yaml_file(path)
    except ConfigError as err:  # beyond the bounds: the message names the file
        raise RunFileError(str(err)) from None
    except _READ_ERRORS as err:
        raise RunFileError(f"{path} is damaged: {err}") from None
    env = config.get("env") if isinstance(config, dict) else None
    if not isinstance(env, str):
        raise RunFileError(f"{path} is damaged: it names no env")
    return env


@dataclass
class RunDir:
    """One run directory of a comparison: its env, its strategy's name as tables show it
    (with the RUNS_DIR's label, if any), and its seed directory."""

    env: str
    strategy: str
    seed_dir: Path


def compared_runs(
    runs_dirs: list[tuple[Path, str | None]], strategies: set[str] | None
) -> list[RunDir]:
    """Every ``<runs_dir>/<strategy>/seed<k>`` with an ``eval.csv`` (``(runs_dir, label)``
    pairs; ``strategies`` to keep, or all), in the order the comparison's tables list them:
    the runs a report on their other files (``explore.csv``) reads beside the curves."""
    found = []
    for runs_dir, label in runs_dirs:
        for strategy_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
            if strategies is not None and strategy_dir.name not in strategies:
                continue
            name = strategy_dir.name if label is None else f"{strategy_dir.name} ({label})"
            for seed_dir in sorted(p for p in strategy_dir.glob("seed*") if p.is_dir()):
                if (seed_dir / EVAL_CSV).exists():  # else not compared (load_runs says so)
                    found.append(RunDir(read_env(seed_dir, runs_dir.name), name, seed_dir))
    return found


def read_evaluations(path: Path) -> tuple[dict[int, float], dict[int, float] | None]:
    """(return by step, success rate by step or None) of one ``eval.csv``, checked."""
    try:
        rows = read_eval_csv(path)
        steps = [int(row["step"]) for row in rows]
        returns = [float(row["mean_return"]) for row in rows]
        has_success = bool(rows) and all(row.get(SUCCESS) is not None for row in rows)
        success = [float(row[SUCCESS]) for row in rows] if has_success else None
    except DamagedFileError as err:  # names the file already
        raise RunFileError(str(err)) from None
    except _READ_ERRORS as err:
        raise RunFileError(f"{path} is damaged: {err}") from None
    seen: set[int] = set()
    for step, value in zip(steps, returns):
        if step in seen:
            raise RunFileError(
                f"{path} holds step {step} twice (two writers?); keep one row per step"
            )
        seen.add(step)
        if not math.isfinite(value):
            raise RunFileError(f"{path}: the return at step {step} is {value}")
    if success is not None:
        for step, value in zip(steps, success):
            if not 0.0 <= value <= 1.0:  # also refuses NaN
                raise RunFileError(f"{path}: the {SUCCESS} at step {step} is {value}")
    by_step = dict(zip(steps, returns))
    return by_step, None if success is None else dict(zip(steps, success))


#: What a seed that stopped before its strategy's others (a run that failed: a diverged
#: update, an env's error) does to its strategy's curve (``compare_runs --short-runs``):
#: ``truncate`` — the curve ends where that seed's evaluations end (and with it, the task's
#: scores); ``exclude`` — the seed is left out; ``zero`` — it scores 0 (return and success) at
#: the others' later evaluation steps, a run that trains nothing counted as one that failed.
#: Each names the seeds in a note.
SHORT_RUNS = ("truncate", "exclude", "zero")


def _strategy_curve(
    strategy_dir: Path,
    runs: list[SeedRun],
    label: str | None,
    notes: list[str],
    short_runs: str = "truncate",
) -> Curve | None:
    envs = sorted({run.env for run in runs})
    if len(envs) > 1:
        where = "; ".join(
            f"{env}: {', '.join(r.name for r in runs if r.env == env)}" for env in envs
        )
        raise RunFileError(
            f"{strategy_dir} holds runs of {len(envs)} envs ({where}); their returns would "
            "be averaged together: put each env's runs in a directory of their own"
        )
    runs = _with_short_runs(strategy_dir, runs, short_runs, notes)
    common = sorted(set.intersection(*(set(run.returns) for run in runs)))
    if not common:
        spans = ", ".join(f"{r.name}: {_k(min(r.returns))}–{_k(max(r.returns))}" for r in runs)
        notes.append(f"dropped {strategy_dir}: its seeds share no evaluation step ({spans})")
        return None
    reached = max(max(run.returns) for run in runs)
    if common[-1] < reached:
        short = [r.name for r in runs if max(r.returns) < reached]
        notes.append(
            f"{strategy_dir}: {', '.join(short)} stopped before {_k(reached)}, so the "
            f"curve ends at {_k(common[-1])}, the last step every seed reached"
        )
    returns = np.array([[run.returns[s] for s in common] for run in runs])
    success = None
    if all(run.success is not None for run in runs):
        success = np.array([[run.success[s] for s in common] for run in runs])
    elif any(run.success is not None for run in runs):
        notes.append(f"{strategy_dir}: not every seed records {SUCCESS}; returns are compared")
    return Curve(strategy_dir.name, np.array(common), returns, label, envs[0], success)


def _with_short_runs(
    strategy_dir: Path, runs: list[SeedRun], short_runs: str, notes: list[str]
) -> list[SeedRun]:
    """``runs`` with those that stopped before the others' last evaluation treated as
    ``short_runs`` says (:data:`SHORT_RUNS`; ``truncate`` leaves them as they are)."""
    reached = max(max(run.returns) for run in runs)
    short = [run for run in runs if max(run.returns) < reached]
    if short_runs == "truncate" or not short:
        return runs
    names = ", ".join(f"{run.name} (to {_k(max(run.returns))})" for run in short)
    if short_runs == "exclude":
        notes.append(
            f"{strategy_dir}: {names} stopped before {_k(reached)}: left out (--short-runs exclude)"
        )
        return [run for run in runs if run not in short]
    steps = sorted({step for run in runs for step in run.returns})
    notes.append(
        f"{strategy_dir}: {names} stopped before {_k(reached)}: scored 0 at the later "
        "evaluation steps (--short-runs zero)"
    )
    filled = []
    for run in runs:
        later = [step for step in steps if step > max(run.returns)] if run in short else []
        returns = {**run.returns, **dict.fromkeys(later, 0.0)}
        success = None if run.success is None else {**run.success, **dict.fromkeys(later, 0.0)}
        filled.append(SeedRun(run.name, run.env, returns, success))
    return filled


def load_runs(
    runs_dir: str | Path,
    label: str | None = None,
    strategies: set[str] | None = None,
    skipped: list[str] | None = None,
    short_runs: str = "truncate",
) -> tuple[list[Curve], list[str]]:
    """Every strategy's curve under ``runs_dir`` (those in ``strategies`` if given) and the
    notes on what was dropped. With a ``skipped`` list (a grid's end-of-run aggregates,
    whose failed runs the grid has reported already) a run whose files cannot be read is
    left out and named there, once, rather than stopping the reading. ``short_runs``: what
    a seed that stopped before its strategy's others counts as (:data:`SHORT_RUNS`)."""
    runs_dir = Path(runs_dir)
    curves: list[Curve] = []
    notes: list[str] = []
    for strategy_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        if strategies is not None and strategy_dir.name not in strategies:
            continue
        runs = []
        for seed_dir in sorted(p for p in strategy_dir.glob("seed*") if p.is_dir()):
            try:
                run = _seed_run(seed_dir, runs_dir.name, notes)
            except RunFileError as err:
                if skipped is None:
                    raise
                skipped.append(str(err))  # names the file, so the run
                continue
            if run is not None:
                runs.append(run)
        unrecorded = [r.name for r in runs if not (strategy_dir / r.name / CONFIG_YAML).exists()]
        if unrecorded:  # its env is its directory's name, which nothing checks
            notes.append(
                f"{strategy_dir}: {', '.join(unrecorded)} without {CONFIG_YAML}, compared as "
                f"run(s) of {runs_dir.name} with settings nothing records"
            )
        if runs:
            try:
                curve = _strategy_curve(strategy_dir, runs, label, notes, short_runs)
            except RunFileError as err:
                if skipped is None:
                    raise
                skipped.append(str(err))  # names the strategy's directory
                continue
            if curve is not None:
                curves.append(curve)
    return curves, notes


def _seed_run(seed_dir: Path, default_env: str, notes: list[str]) -> SeedRun | None:
    """One seed directory's evaluations and env; None (with a note) when it has none."""
    csv_path = seed_dir / EVAL_CSV
    if not csv_path.exists():
        notes.append(f"dropped {seed_dir}: it has no {EVAL_CSV}")
        return None
    returns, success = read_evaluations(csv_path)
    if not returns:
        notes.append(f"dropped {seed_dir}: its {EVAL_CSV} holds no evaluation")
        return None
    return SeedRun(seed_dir.name, read_env(seed_dir, default_env), returns, success)
