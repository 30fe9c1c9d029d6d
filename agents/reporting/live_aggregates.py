"""A grid's strategy means in TensorBoard while it runs, not only once it ends.

Why: a look at TensorBoard mid-grid (the reason to open it while a grid of hours runs)
found the seeds' own curves only, one colour each; which strategy is ahead was a question
for the end. :class:`StrategyMeansAsRunsEvaluate` is a thread of the grid's driver that
looks at every run's ``eval.csv`` every :data:`POLL_SECONDS` and, when one has a new
evaluation, rewrites the strategy aggregates (:mod:`.strategy_aggregates`) of that env: the
mean over seeds of the evaluation return on the steps every seed with an evaluation has
reached, with its ± one standard error band (the bootstrap interval, seconds of
computation per strategy, and σ, read from every seed's growing event files, wait for the
grid's end, whose writing replaces these). One writer, the driver: the workers only write
their own run directories, so nothing writes ``compare/`` twice at once.

A strategy whose seeds train together (a population, the default) gains a point at each of
its evaluations; seeds that train one after another are averaged over those started, on
the steps all of them have reached.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

from .run_files import EVAL_CSV
from .strategy_aggregates import write_strategy_aggregates

#: Seconds between two looks at the runs' ``eval.csv`` files (a stat of each).
POLL_SECONDS = 2.0

#: A run's evaluations as the file system last showed them: (modification time, size).
Signature = dict[Path, tuple[int, int]]


def evaluations_signature(env_dir: Path) -> Signature:
    """Every run's ``eval.csv`` under ``env_dir`` with its modification time and size."""
    signature = {}
    for path in env_dir.glob(f"*/seed*/{EVAL_CSV}"):
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed between the listing and the stat
            continue
        signature[path] = (stat.st_mtime_ns, stat.st_size)
    return signature


class StrategyMeansAsRunsEvaluate:
    """While the block runs, each of ``env_dirs``' strategy means rewritten after every
    evaluation of one of its runs (module docstring); the thread stops with the block."""

    def __init__(self, env_dirs: list[Path], interval: float = POLL_SECONDS) -> None:
        self.env_dirs = env_dirs
        self.interval = interval
        self._seen: dict[Path, Signature] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="strategy-means", daemon=True)

    def __enter__(self) -> StrategyMeansAsRunsEvaluate:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def update(self) -> None:
        """Rewrite the means of every env whose runs have evaluated since the last call."""
        for env_dir in self.env_dirs:
            signature = evaluations_signature(env_dir)
            if signature and signature != self._seen.get(env_dir):
                # A run whose file cannot be read now is left out of this rewrite; the
                # grid's end names it.
                write_strategy_aggregates(env_dir, "se", skipped=[], sigma=False)
                self._seen[env_dir] = signature

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.update()
            except Exception as err:  # the grid goes on; its end writes them again
                print(
                    f"strategy means not updated while the grid runs: {type(err).__name__}: "
                    f"{err} (written at its end)",
                    flush=True,
                )
                return
