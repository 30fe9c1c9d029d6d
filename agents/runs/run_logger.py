"""TensorBoard events and the eval CSV of one run, safe against kills and resumes.

Tags are stable so that ``tensorboard --logdir runs/<env>`` overlays strategies, and those
shared with SB3's own training are named once, in :mod:`agents.common.tags`:

    eval/mean_return, eval/std_return           every ``eval_every`` steps
    eval/success_rate                           tasks that define success (is_success)
    train/episode_return, train/episode_length   every training episode
    train/actor_learning_rate, _critic_…        DDPG: both networks' learning rates
    explore/sigma_mean, _min, _max               weight noise: σ over all actor weights
    explore/sigma_q10, _median, _q90             weight noise: σ's percentiles over them
    explore/sigma_median/<layer>                 weight noise: each layer's median σ
    explore/action_distance                      weight noise: the actions' distance it causes
    explore/clamped_fraction                     Explore strategies: precisions at the floor
    explore/<quantity>_max, _min                 tasks that report coverage (agents.tasks)
    loss/critic, loss/actor                      means over the last ``log_every`` steps
    time/steps_per_second                        training throughput (evaluation excluded)
    time/eval_seconds                            wall time of each evaluation

The CSV row of an evaluation is flushed to disk before the call returns, and the event
writer is flushed at every evaluation, so a killed run keeps what it logged. A resumed run
keeps the CSV rows up to its checkpoint and asks TensorBoard to purge events past it
(``purge_step``), so the curve has neither duplicated nor missing points; no event file is
ever deleted. :func:`eval_rows_from_events` rebuilds the rows from the events when the CSV
is gone. With ``--track`` every scalar goes to the run's W&B run too, under the same tag
(:mod:`agents.runs.tracking`): this class is the one place scalars are written.
"""

from __future__ import annotations

import csv
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.custom_scalar import layout_pb2, metadata
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.writer import FileWriter

from ..common.checkpoints import atomic_write
from ..common.errors import DamagedFileError
from ..common.tags import (
    EVAL_MEAN_RETURN,
    EVAL_STD_RETURN,
    EVAL_SUCCESS_RATE,
    TRAIN_EPISODE_RETURN,
)

if TYPE_CHECKING:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from .tracking import Tracker

EVAL_CSV = "eval.csv"
EVAL_FIELDS = ["step", "mean_return", "std_return", "episodes", "wall_time"]
#: The fraction of test episodes that succeeded, a column for tasks that define success:
#: filled in every row of the file or absent from it.
SUCCESS_FIELD = "success_rate"


#: A chart of TensorBoard's *Custom Scalars* tab: its title, and either the tags of a
#: multiline chart or the (value, lower, upper) tags of a margin chart's bands.
Chart = tuple[str, list[str] | list[tuple[str, str, str]]]
#: Category title → its charts, in order.
Layout = dict[str, list[Chart]]

#: The *Custom Scalars* tab of an env directory (``runs/<env>``) before any strategy
#: aggregate exists: every run's own curves. ``agents.reporting.strategy_aggregates``
#: rewrites it with its strategies' charts in front. σ per run is not charted here: flat
#: σ curves of different sizes on one linear axis read as tick labels "1e-2 1e-2"; the
#: aggregates chart its relative change, and the *Scalars* tab keeps each run's σ.
RUNS_LAYOUT: Layout = {
    "Compare runs": [
        ("eval return (mean of the test episodes), every run", [EVAL_MEAN_RETURN]),
        ("training episode return, every run", [TRAIN_EPISODE_RETURN]),
    ],
}


def _layout_summary(layout: Layout) -> Summary:
    """The custom-scalars plugin's summary of ``layout`` (margin charts with any number of
    bands: one per strategy, which torch's ``add_custom_scalars`` cannot write)."""
    categories = []
    for category, charts in layout.items():
        protos = []
        for title, tags in charts:
            if tags and isinstance(tags[0], tuple):
                series = [
                    layout_pb2.MarginChartContent.Series(value=v, lower=lo, upper=hi)
                    for v, lo, hi in tags
                ]
                chart = layout_pb2.Chart(
                    title=title, margin=layout_pb2.MarginChartContent(series=series)
                )
            else:
                chart = layout_pb2.Chart(
                    title=title, multiline=layout_pb2.MultilineChartContent(tag=tags)
                )
            protos.append(chart)
        categories.append(layout_pb2.Category(title=category, chart=protos))
    tensor = TensorProto(
        dtype="DT_STRING",
        string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
        tensor_shape=TensorShapeProto(),
    )
    value = Summary.Value(
        tag=metadata.CONFIG_SUMMARY_TAG, tensor=tensor, metadata=metadata.create_summary_metadata()
    )
    return Summary(value=[value])


def write_comparison_layout(
    env_dir: str | Path, layout: Layout = RUNS_LAYOUT, replace: bool = False
) -> None:
    """Give ``tensorboard --logdir <env_dir>`` the *Custom Scalars* comparison tab.

    Written once per directory unless ``replace`` (runs starting concurrently may each
    write an identical copy, which is harmless); ``replace`` rewrites an older layout.
    """
    env_dir = Path(env_dir)
    env_dir.mkdir(parents=True, exist_ok=True)
    existing = list(env_dir.glob("events.out.tfevents.*.layout"))
    if existing and not replace:
        return
    for path in existing:
        path.unlink()
    writer = FileWriter(str(env_dir), filename_suffix=".layout")
    writer.add_summary(_layout_summary(layout))
    writer.close()


def read_csv_lines(path: Path) -> list[list[str]]:
    """A run's CSV file as lists of cells; one that is not text or not CSV raises
    :class:`DamagedFileError` naming it."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.reader(f))
    except UnicodeDecodeError:
        raise DamagedFileError(f"{path} is damaged: it is not text") from None
    except csv.Error as err:
        raise DamagedFileError(f"{path} is damaged: {err}") from None


def read_eval_csv(path: str | Path) -> list[dict[str, float]]:
    """The rows of an eval CSV as floats (``step`` and ``episodes`` as ints).

    A file that is not one (binary, truncated, a value that is no number, steps out of
    order) raises :class:`DamagedFileError` (a ``ConfigError``) naming the file and line.
    Columns beyond :data:`EVAL_FIELDS` are read as numbers too (an empty one as None).
    """
    path = Path(path)
    lines = read_csv_lines(path)
    if not lines or lines[0][: len(EVAL_FIELDS)] != EVAL_FIELDS:
        found = ",".join(lines[0])[:60] if lines else "nothing"
        raise DamagedFileError(
            f"{path} is damaged: its header is not {','.join(EVAL_FIELDS)} (found {found!r})"
        )
    header, rows, last = lines[0], [], 0
    for number, values in enumerate(lines[1:], start=2):
        where = f"{path} is damaged: line {number}"
        if len(values) != len(header):
            raise DamagedFileError(f"{where} has {len(values)} values, not {len(header)}")
        row = {}
        for name, text in zip(header, values):
            if name not in EVAL_FIELDS and text == "":
                row[name] = None
                continue
            try:
                row[name] = int(text) if name in ("step", "episodes") else float(text)
            except ValueError:
                raise DamagedFileError(f"{where}: {name} is {text[:20]!r}, not a number") from None
        bad = [name for name in EVAL_FIELDS[1:3] if not math.isfinite(row[name])]
        if bad:
            raise DamagedFileError(f"{where}: {bad[0]} is {row[bad[0]]}, not a finite number")
        if row["step"] <= last:
            if row["step"] == last:  # e.g. two writers appending to one file
                raise DamagedFileError(f"{where}: step {last} twice (two writers?)")
            raise DamagedFileError(f"{where}: step {row['step']} does not follow step {last}")
        last = row["step"]
        rows.append(row)
    return rows


def load_events(run_dir: str | Path) -> EventAccumulator:
    """Every scalar of the run's event files as TensorBoard reads them: events past a
    resume's ``purge_step`` dropped. TensorBoard's warning on meeting that purge (it
    guesses "a TensorFlow restart") is held back: a resumed run is expected to have one."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb_logger = logging.getLogger("tensorboard")
    level = tb_logger.level
    tb_logger.setLevel(logging.ERROR)
    try:
        events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        events.Reload()
    finally:
        tb_logger.setLevel(level)
    return events


def eval_rows_from_events(run_dir: str | Path, last_step: int, episodes: int) -> list[dict]:
    """``eval.csv``'s rows up to ``last_step`` as TensorBoard reads them from the run's
    events (purged events dropped; values as TensorBoard stores them, float32)."""
    events = load_events(run_dir)
    tags = events.Tags()["scalars"]
    if EVAL_MEAN_RETURN not in tags or EVAL_STD_RETURN not in tags:
        return []
    std = {e.step: e.value for e in events.Scalars(EVAL_STD_RETURN)}
    rows = []
    for event in events.Scalars(EVAL_MEAN_RETURN):
        if event.step <= last_step and event.step in std:
            rows.append(
                dict(
                    step=event.step,
                    mean_return=event.value,
                    std_return=std[event.step],
                    episodes=episodes,
                    wall_time=round(event.wall_time, 3),
                )
            )
    return rows


class RunLogger:
    """Writes one run's TensorBoard events and ``eval.csv`` (and its W&B run's scalars)."""

    def __init__(
        self,
        run_dir: str | Path,
        resume_step: int | None = None,
        rows: list[dict[str, float]] | None = None,
        tracker: Tracker | None = None,
    ) -> None:
        """A new run (``resume_step`` None), or one resumed at ``resume_step`` whose
        ``eval.csv`` is to hold ``rows`` (the evaluations up to there); ``tracker``: the
        run's W&B run (``--track``), which receives every scalar too."""
        self.tracker = tracker
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.run_dir / EVAL_CSV
        rows = rows or []
        # The success column is in the file iff every row has a value (compare_runs reads
        # an empty cell as a damaged file): it is decided by the first row, dropped if an
        # evaluation has no success rate after all, and never added under rows without one.
        self.fields = list(EVAL_FIELDS)
        if rows and all(row.get(SUCCESS_FIELD) is not None for row in rows):
            self.fields.append(SUCCESS_FIELD)
        self._rewrite_csv(rows)
        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(str(self.run_dir), purge_step=purge, flush_secs=10)

    def _rewrite_csv(self, rows: list[dict[str, float]]) -> None:
        with atomic_write(self.csv_path) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)
        if self.tracker is not None:
            self.tracker.scalar(tag, value, step)

    def evaluation(
        self,
        step: int,
        mean_return: float,
        std_return: float,
        episodes: int,
        wall_time: float,
        success_rate: float | None = None,
    ) -> None:
        self.scalar(EVAL_MEAN_RETURN, mean_return, step)
        self.scalar(EVAL_STD_RETURN, std_return, step)
        row = dict(
            step=step,
            mean_return=mean_return,
            std_return=std_return,
            episodes=episodes,
            wall_time=round(wall_time, 3),
        )
        if success_rate is not None:
            self.scalar(EVAL_SUCCESS_RATE, success_rate, step)
            row[SUCCESS_FIELD] = success_rate
        self._match_success_column(success_rate is not None)
        with open(self.csv_path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore").writerow(row)
            f.flush()
            os.fsync(f.fileno())
        self.writer.flush()
        if self.tracker is not None:
            self.tracker.flush()

    def _match_success_column(self, has_success: bool) -> None:
        """Keep the success column only while every row, the next one included, fills it."""
        with_column = SUCCESS_FIELD in self.fields
        if has_success == with_column:
            return
        rows = read_eval_csv(self.csv_path)
        if with_column:  # e.g. resumed with settings whose episodes report no success
            self.fields.remove(SUCCESS_FIELD)
        elif not rows:  # the first evaluation of a task that defines success
            self.fields.append(SUCCESS_FIELD)
        else:  # rows written without it (a run resumed from an older version): not added
            return
        self._rewrite_csv(rows)

    def close(self, failed: bool = False) -> None:
        """Close the events (and finish the W&B run, as failed if ``failed``)."""
        self.writer.close()
        if self.tracker is not None:
            self.tracker.finish(exit_code=1 if failed else 0)
            self.tracker = None
