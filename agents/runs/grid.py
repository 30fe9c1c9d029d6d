"""Grids of runs (strategies × seeds), on local processes or a Ray cluster.

Every run of a grid is an ordinary :func:`agents.runs.training.train` call with ``resume=True``:
a finished run is skipped, an unfinished one continues from its checkpoint, a new one
starts. Re-running the same command therefore completes an interrupted grid without
redoing anything. A failing run is reported and does not stop the others.

Local backend: ``workers`` spawned processes, each limited to ``cores // workers`` torch
threads so that the workers together do not oversubscribe the machine (two one-thread
processes on two cores run ~2× the throughput of one two-thread process at batch 64).

Ray backend: one Ray *task* per run, each asking for as many CPUs as a local worker gets
threads. Runs are independent fixed configurations with no search, early stopping or
trial scheduling, which is what Ray Tune adds; tasks give Ray's resource-aware placement
with the smallest dependency and no second results store beside the run directories.
Ray is an optional extra (``pip install -e '.[ray]'``); workers write the run directories
themselves, so on a multi-machine cluster ``--logdir`` must be on a shared file system.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from ..errors import ConfigError
from .config import TrainConfig


@dataclass
class RunOutcome:
    run_dir: str
    ok: bool
    message: str


def threads_per_worker(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // workers)


def run_one(values: dict[str, Any], threads: int) -> RunOutcome:
    """Train one configuration (resuming it if it has a checkpoint); never raises."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    from .training import train

    torch.set_num_threads(threads)
    config = TrainConfig(**values)
    try:
        train(config, resume=True, progress=False)
    except Exception as err:  # one failing run must not stop the grid
        detail = traceback.format_exception_only(type(err), err)[-1].strip()
        return RunOutcome(str(config.run_dir()), False, detail)
    return RunOutcome(str(config.run_dir()), True, "done")


def _run_local(configs: list[TrainConfig], workers: int, report: Callable) -> list[RunOutcome]:
    threads = threads_per_worker(workers)
    outcomes = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_one, dataclasses.asdict(c), threads) for c in configs]
        for future in as_completed(futures):
            outcomes.append(future.result())
            report(outcomes[-1])
    return outcomes


def _run_ray(
    configs: list[TrainConfig], workers: int, address: str | None, report: Callable
) -> list[RunOutcome]:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--backend ray needs Ray: pip install -e '.[ray]' (or pip install ray)"
        ) from None
    threads = threads_per_worker(workers)
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=threads)(run_one)
        pending = [remote.remote(dataclasses.asdict(c), threads) for c in configs]
        outcomes = []
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            outcomes.append(ray.get(done[0]))
            report(outcomes[-1])
        return outcomes
    finally:
        if started_here:
            ray.shutdown()


def run_grid(
    configs: list[TrainConfig],
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    report: Callable[[RunOutcome], None] = lambda outcome: None,
) -> list[RunOutcome]:
    """Run every configuration; ``report`` is called as each run finishes."""
    if workers <= 0:
        raise ConfigError(f"--workers must be > 0, got {workers}")
    if backend == "ray":
        return _run_ray(configs, workers, address, report)
    if backend != "local":
        raise ConfigError(f"unknown backend {backend!r}; choose local or ray")
    return _run_local(configs, workers, report)
