"""``explore.csv``: a run's ``explore/*`` scalars as a file that is committed with it.

The exploration statistics (σ of the weights, a task's coverage: the car's highest
position, the cheetah's furthest x, ... per logging window) are TensorBoard scalars, and a
study commits ``eval.csv`` and ``config.yaml`` per run, not event files. So that a report
of what the exploring policies reached is regenerated from committed files as the
success-rate report is, a run also writes its ``explore/`` scalars as a CSV:

    step,<name>,<name>,...        one row per logging window, one column per explore/<name>

It is written from the run's events when training stops (finished, or asked to stop), so a
resumed run's file is what TensorBoard shows: events purged at the resume are not in it.
A run that was finished before runs wrote it gets it from its events with
:func:`write_explore_csv` (which ``train_agent`` calls on a finished run it skips).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from ..common.checkpoints import atomic_write
from ..common.errors import DamagedFileError
from .run_logger import load_events, read_csv_lines

EXPLORE_CSV = "explore.csv"
_PREFIX = "explore/"


def explore_rows_from_events(run_dir: str | Path) -> list[dict[str, float]]:
    """The ``explore/*`` scalars of the run's events, one row per step (``step`` and the
    names without the prefix; values as TensorBoard stores them, float32). A step that
    lacks a scalar (e.g. a window without a training step) has None for it."""
    events = load_events(run_dir)
    tags = sorted(t for t in events.Tags()["scalars"] if t.startswith(_PREFIX))
    by_step: dict[int, dict[str, float]] = {}
    for tag in tags:
        for event in events.Scalars(tag):
            by_step.setdefault(event.step, {})[tag[len(_PREFIX) :]] = event.value
    names = [tag[len(_PREFIX) :] for tag in tags]
    return [
        {"step": step, **{name: values.get(name) for name in names}}
        for step, values in sorted(by_step.items())
    ]


def write_explore_csv(run_dir: str | Path) -> Path | None:
    """Write ``<run_dir>/explore.csv`` from the run's events (atomically); returns its path,
    or None (and writes nothing) when the events hold no ``explore/`` scalar."""
    run_dir = Path(run_dir)
    rows = explore_rows_from_events(run_dir)
    if not rows:
        return None
    path = run_dir / EXPLORE_CSV
    fields = list(rows[0])
    with atomic_write(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(fields)
        for row in rows:
            writer.writerow([row["step"], *(_cell(row[name]) for name in fields[1:])])
    return path


def _cell(value: float | None) -> str:
    """A float32 value in full (9 significant digits), an absent one empty."""
    return "" if value is None else f"{value:.9g}"


def read_explore_csv(path: str | Path) -> list[dict[str, float | None]]:
    """The rows of an ``explore.csv`` (``step`` an int, an empty cell None), checked: a
    damaged file (not text, a row cut short, a non-number, steps out of order) raises
    :class:`DamagedFileError` naming the file and line."""
    path = Path(path)
    lines = read_csv_lines(path)
    if not lines or not lines[0] or lines[0][0] != "step":
        raise DamagedFileError(f"{path} is damaged: its header does not start with step")
    header, rows, last = lines[0], [], -1
    for number, values in enumerate(lines[1:], start=2):
        where = f"{path} is damaged: line {number}"
        if len(values) != len(header):
            raise DamagedFileError(f"{where} has {len(values)} values, not {len(header)}")
        row: dict[str, float | None] = {}
        for name, text in zip(header, values):
            try:
                row[name] = int(text) if name == "step" else (float(text) if text else None)
            except ValueError:
                raise DamagedFileError(f"{where}: {name} is {text[:20]!r}, not a number") from None
            if name != "step" and row[name] is not None and math.isnan(row[name]):
                raise DamagedFileError(f"{where}: {name} is NaN")
        if row["step"] <= last:
            raise DamagedFileError(f"{where}: step {row['step']} does not follow step {last}")
        last = int(row["step"])
        rows.append(row)
    return rows
