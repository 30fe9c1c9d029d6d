"""TensorBoard events and the eval CSV of one run, safe against kills and resumes.

Tags are stable so that ``tensorboard --logdir runs/<env>`` overlays strategies:

    eval/mean_return, eval/std_return           every ``eval_every`` steps
    eval/success_rate                           tasks that define success (is_success)
    train/episode_return, train/episode_length   every training episode
    explore/sigma_mean, _min, _max               σ over all actor weights
    explore/clamped_fraction                     Explore strategies: precisions at the floor
    explore/<quantity>_max, _min                 tasks that report coverage (agents.tasks)
    loss/critic, loss/actor                      means over the last ``log_every`` steps
    time/steps_per_second                        training throughput (evaluation excluded)
    time/eval_seconds                            wall time of each evaluation

The CSV row of an evaluation is flushed to disk before the call returns, and the event
writer is flushed at every evaluation, so a killed run keeps what it logged. A resumed run
drops CSV rows past its checkpoint and asks TensorBoard to purge events past it
(``purge_step``); a run started from scratch (no checkpoint yet) removes an earlier
attempt's events. Either way the curve has neither duplicated nor missing points.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

from ..engine.checkpoints import atomic_write

EVAL_CSV = "eval.csv"
EVAL_FIELDS = ["step", "mean_return", "std_return", "episodes", "wall_time"]
#: The fraction of test episodes that succeeded, a column for tasks that define success:
#: filled in every row of the file or absent from it.
SUCCESS_FIELD = "success_rate"


# TensorBoard's *Custom Scalars* tab of an env directory (``runs/<env>``): every run's own
# curves, and the per-strategy mean ± band runs that ``agents.reporting.strategy_aggregates``
# writes under ``<env>/compare/<strategy>/`` with the ``strategy/<series>[_lower|_upper]``
# tags named here. A run writes it when it starts, so a single run's TensorBoard has it too.
_MARGIN = "Margin"
_SERIES = {
    "eval_return": "eval return: mean over seeds, band: 95 % CI or ± s.e. (strategy/band)",
    "sigma_mean": "exploration σ (mean over weights): mean over seeds with its band",
}

#: Custom-scalars layout: strategies as margin charts, then every run's own line.
COMPARISON_LAYOUT = {
    "Compare strategies": {
        title: [_MARGIN, [f"strategy/{name}", f"strategy/{name}_lower", f"strategy/{name}_upper"]]
        for name, title in _SERIES.items()
    },
    "Compare runs": {
        "eval return (mean, test episodes)": ["Multiline", [r"eval/mean_return"]],
        "training episode return": ["Multiline", [r"train/episode_return"]],
        "exploration sigma (mean over weights)": ["Multiline", [r"explore/sigma_mean"]],
    },
}


def write_comparison_layout(env_dir: str | Path, replace: bool = False) -> None:
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
    with SummaryWriter(str(env_dir), filename_suffix=".layout") as writer:
        writer.add_custom_scalars(COMPARISON_LAYOUT)


def read_eval_csv(path: str | Path) -> list[dict[str, float]]:
    """The rows of an eval CSV as floats (``step`` and ``episodes`` as ints)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    ints = ("step", "episodes")
    return [{k: int(v) if k in ints else float(v) for k, v in row.items()} for row in rows]


def _csv_fields(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


class RunLogger:
    """Writes one run's TensorBoard events and ``eval.csv``."""

    def __init__(self, run_dir: str | Path, resume_step: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.run_dir / EVAL_CSV
        # The success column is in the file iff every row has a value (compare_runs reads
        # an empty cell as a damaged file): it is decided by the first row, dropped if an
        # evaluation has no success rate after all, and never added under rows without one.
        self.fields = list(EVAL_FIELDS)
        if resume_step is None or not self.csv_path.exists():
            # A start from scratch: an earlier attempt's results go (a run killed before
            # its first checkpoint), so TensorBoard never shows a step twice.
            self._rewrite_csv([])
            for path in self.run_dir.glob("events.out.tfevents.*"):
                path.unlink()
        else:
            if SUCCESS_FIELD in _csv_fields(self.csv_path):
                self.fields.append(SUCCESS_FIELD)
            kept = [row for row in read_eval_csv(self.csv_path) if row["step"] <= resume_step]
            self._rewrite_csv(kept)
        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(str(self.run_dir), purge_step=purge, flush_secs=10)

    def _rewrite_csv(self, rows: list[dict[str, float]]) -> None:
        with atomic_write(self.csv_path) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)

    def evaluation(
        self,
        step: int,
        mean_return: float,
        std_return: float,
        episodes: int,
        wall_time: float,
        success_rate: float | None = None,
    ) -> None:
        self.scalar("eval/mean_return", mean_return, step)
        self.scalar("eval/std_return", std_return, step)
        row = dict(
            step=step,
            mean_return=mean_return,
            std_return=std_return,
            episodes=episodes,
            wall_time=round(wall_time, 3),
        )
        if success_rate is not None:
            self.scalar("eval/success_rate", success_rate, step)
            row[SUCCESS_FIELD] = success_rate
        self._match_success_column(success_rate is not None)
        with open(self.csv_path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.fields, extrasaction="ignore").writerow(row)
            f.flush()
            os.fsync(f.fileno())
        self.writer.flush()

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

    def close(self) -> None:
        self.writer.close()
