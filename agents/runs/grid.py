"""Grids of runs (strategies × seeds), on local processes or a Ray cluster.

Every run of a grid is an ordinary run with ``resume=True``: a finished run is skipped, an
unfinished one continues from its checkpoint, a new one starts. Re-running the same
command therefore completes an interrupted grid without redoing anything. A failing run is
reported and does not stop the others.

**Populations.** Runs of the native DDPG that differ only in their seed and in settings the
update takes as numbers (:func:`agents.settings.sharing.population_key`) train together,
as one population per task (:mod:`agents.ddpg.population`): each still writes its own run
directory. A grid's populations are as large as the memory allows (every member's
estimate, for the workers running at once) and split so that every worker has one;
``population=False`` (``--no-population``) runs every run as a task of its own.

Local backend: ``workers`` spawned processes, each sent one task at a time and the next when
it reports (so a worker pays its start — imports, the compiled graphs' load — once, not once
per task, and the driver knows exactly which runs a dead worker held: they are reported
lost and a new worker takes the queue on), each limited to ``cores // workers`` torch
threads so that the workers together do not oversubscribe the machine (two one-thread
processes on two cores run ~2× the throughput of one two-thread process at batch 64).
An ``OMP_NUM_THREADS`` set by the user caps that share: two grids started side by side
with ``OMP_NUM_THREADS=1`` then use one core each instead of both claiming all of them.

Ray backend: one Ray *task* per run, each asking for a local worker's share of the cores
(so ``workers`` runs go at once on one machine) and using as many threads as a local
worker. Runs are independent fixed configurations with no search, early stopping or trial
scheduling, which is what Ray Tune adds; tasks give Ray's resource-aware placement
with the smallest dependency and no second results store beside the run directories.
Ray is an optional extra (``pip install -e '.[ray]'``); workers write the run directories
themselves, so on a multi-machine cluster ``--logdir`` must be on a shared file system.

A grid names each run directory once (each has one writer, ``run_lock``). Ctrl-C or
SIGTERM stops it: the running runs stop at their next step (or between two updates) with a
checkpoint, queued runs never start, and :class:`RunInterrupted` is raised once the
workers are gone; re-running the command continues. A second Ctrl-C kills the workers at
once (their last checkpoints, written atomically, stay). A worker that dies (SIGKILL, the
kernel's out-of-memory killer) loses its own task only: its runs are reported lost, each
with its last checkpoint, and the other tasks go on. A worker whose driver dies stops its
runs as SIGTERM does (:func:`watch_driver`) rather than computing on unseen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Literal

from ..common.errors import ConfigError
from ..common.stop_requests import request_stop
from ..settings import RunSettings
from .closed_stdout import run_on_without_stdout
from .stopping import RunInterrupted, install_for_grid_worker, stop_requested
from .tracking import Tracking

#: A grid's runs' progress: a status line every 30 s each (``"lines"``), or none (False,
#: ``--no-progress``); a grid's own lines (each run's outcome, the summary) are its result.
GridProgress = Literal["lines", False]


@dataclass
class RunOutcome:
    """How a grid's run ended: ``ok``, or not with ``message``; ``stopped`` when it stopped
    because the user asked (Ctrl-C, SIGTERM): not a failure, and the command continues it."""

    run_dir: str
    ok: bool
    message: str
    stopped: bool = False


def cores_per_worker(workers: int) -> int:
    """The even share of the machine's cores for each of ``workers`` parallel runs."""
    return max(1, (os.cpu_count() or 1) // workers)


def threads_per_worker(workers: int) -> int:
    """Torch threads for each worker: its share of the cores, capped by ``OMP_NUM_THREADS``.

    The grid knows only its own workers. A user who runs two grids at once (or a grid
    beside anything else) says how many threads each may take with the variable that torch
    and OpenMP already read; without it, the workers split the machine evenly.
    """
    share = cores_per_worker(workers)
    limit = explicit_threads()
    return share if limit is None else min(share, limit)


def single_run_threads() -> int:
    """Torch threads of a run of its own: ``OMP_NUM_THREADS`` where the user set it, else
    one. Measured on 2 cores (docs/speed.md, "A run beside other work"): one thread runs a
    HalfCheetah run as fast as torch's default of one per core when the machine is quiet,
    and beside a busy neighbour takes 1.75× its quiet time against the default's 3.0×
    (OpenMP's threads wait on each other on shared cores)."""
    limit = explicit_threads()
    return 1 if limit is None else limit


def explicit_threads() -> int | None:
    """The threads ``OMP_NUM_THREADS`` asks for, None where it is not set; ConfigError
    for a value that is not a positive whole number."""
    explicit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not explicit:
        return None
    try:
        limit = int(explicit)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ConfigError(f"OMP_NUM_THREADS={explicit!r} is not a positive whole number of threads")
    return limit


def run_task(
    configs: list[RunSettings],
    threads: int,
    progress: GridProgress = "lines",
    tracking: Tracking | None = None,
    checked: bool = False,
) -> list[RunOutcome]:
    """Train one task — the native engine's runs through its one driver, one run or a
    population (:func:`~agents.runs.population_run.train_population`), or a run of SB3's
    DDPG or TRPO through its own (:func:`~agents.runs.train.train`) — resuming each run that
    has a checkpoint, each tracked in W&B where ``tracking`` says; never raises.
    ``checked``: the command's one check approved the runs already (:func:`run_grid`)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    from ..settings.sharing import can_be_populated
    from .population_run import train_population
    from .train import train

    torch.set_num_threads(threads)
    if stop_requested() is not None:  # the grid is stopping: a queued run never starts
        return [RunOutcome(str(c.run_dir()), False, "not started", stopped=True) for c in configs]
    try:
        if not can_be_populated(configs[0]):  # not the native engine: a run of its own
            (config,) = configs
            train(config, resume=True, progress=progress, tracking=tracking, checked=checked)
            return [RunOutcome(str(config.run_dir()), True, "done")]
        outcomes = train_population(configs, True, progress, tracking, checked=checked)
    except KeyboardInterrupt:
        return [RunOutcome(str(c.run_dir()), False, "checkpoint written", stopped=True)
                for c in configs]  # fmt: skip
    except Exception as err:  # one failing run must not stop the grid
        return [RunOutcome(str(c.run_dir()), False, _detail(err)) for c in configs]
    return [
        RunOutcome(str(o.run_dir), o.error is None, "done" if o.error is None else _detail(o.error))
        for o in outcomes
    ]


def _detail(err: BaseException) -> str:
    return traceback.format_exception_only(type(err), err)[-1].strip()


def plan_tasks(
    configs: list[RunSettings], workers: int, population: bool = True
) -> list[list[RunSettings]]:
    """The grid's tasks: populations of the runs that can share one (in the grid's order),
    each as large as memory allows for ``workers`` running at once, split until every
    worker has a task; every other run a task of its own."""
    from ..settings.sharing import population_key
    from .population_run import population_size

    if not population:
        return [[config] for config in configs]
    groups: dict[object, list[RunSettings]] = {}
    for config in configs:
        key = population_key(config)
        key = id(config) if key is None else key
        groups.setdefault(key, []).append(config)
    tasks = []
    for group in groups.values():
        size = population_size(group, workers)
        tasks += [group[i : i + size] for i in range(0, len(group), size)]
    while len(tasks) < workers and max(map(len, tasks)) > 1:
        largest = max(tasks, key=len)
        tasks.remove(largest)
        half = (len(largest) + 1) // 2
        tasks += [largest[:half], largest[half:]]
    return tasks


def check_distinct(configs: list[RunSettings]) -> None:
    """Each run directory once: two runs of one directory would write it together."""
    twice = [str(d) for d, n in Counter(c.run_dir() for c in configs).items() if n > 1]
    if twice:
        raise ConfigError(
            f"the grid names run directory {', '.join(twice)} more than once (a strategy or "
            "seed listed twice?); each run directory takes one run"
        )


def lost_with_worker(configs: list[RunSettings], why: str) -> list[RunOutcome]:
    """The outcomes of a task whose worker died before it reported (killed, out of memory):
    each run keeps its last checkpoint, and running the command again continues it."""
    message = f"lost with its worker ({why}); re-run the command to continue"
    return [RunOutcome(str(c.run_dir()), False, message) for c in configs]


@dataclass
class _Worker:
    """A spawned process that trains the tasks it is sent on ``pipe``, one at a time, and
    answers each with its outcomes; ``task`` is the one it holds now."""

    process: BaseProcess
    pipe: Connection
    task: list[RunSettings] | None = None


def _work(
    pipe: Connection,
    threads: int,
    driver: int,
    progress: GridProgress,
    tracking: Tracking | None,
    checked: bool,
) -> None:
    """A worker process: train each task the driver sends and send back its outcomes, until
    it sends None or is gone; stop (with a checkpoint) should the driver die first."""
    install_for_grid_worker()
    run_on_without_stdout()  # its status lines share the driver's stdout
    watch_driver(driver)
    with contextlib.suppress(EOFError, OSError):  # the driver is gone: nobody to tell
        while (task := pipe.recv()) is not None:
            pipe.send(run_task(task, threads, progress, tracking, checked))


def watch_driver(driver: int, interval: float = 1.0) -> threading.Thread:
    """Ask this process's runs to stop, as SIGTERM does, once its parent ``driver`` is gone
    (killed with SIGKILL, say): an orphaned worker would otherwise go on computing, and
    holding its runs' locks, for as long as its runs take."""

    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(interval)
        request_stop(signal.SIGTERM)

    thread = threading.Thread(target=watch, name="watch-driver", daemon=True)
    thread.start()
    return thread


def _start(
    threads: int, progress: GridProgress, tracking: Tracking | None, checked: bool
) -> _Worker:
    context = get_context("spawn")
    pipe, theirs = context.Pipe()
    args = (theirs, threads, os.getpid(), progress, tracking, checked)
    process = context.Process(target=_work, args=args)
    process.start()
    theirs.close()  # the worker holds the other end: its exit ends the pipe
    return _Worker(process, pipe)


def _finish(worker: _Worker) -> list[RunOutcome]:
    """The outcomes of the task ``worker`` holds, or, if it died first, its runs lost with
    it (the worker is then joined)."""
    task, worker.task = worker.task or [], None
    try:
        return worker.pipe.recv()
    except (EOFError, OSError):
        _retire(worker)
    code = worker.process.exitcode or 0
    why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    return lost_with_worker(task, why)


def _retire(worker: _Worker) -> None:
    """No more tasks for ``worker``: it exits (if it has not died), and is joined."""
    with contextlib.suppress(OSError):
        worker.pipe.send(None)
    worker.process.join()
    worker.pipe.close()


def _run_local(
    tasks: list[list[RunSettings]],
    workers: int,
    report: Callable,
    progress: GridProgress,
    tracking: Tracking | None,
    checked: bool,
) -> list[RunOutcome]:
    """The tasks on ``workers`` spawned processes, each sent the next queued task when it
    reports. A worker that dies (SIGKILL, the kernel's out-of-memory killer) loses its own
    task only: its runs are reported lost, and a new worker takes the queue on."""
    threads = threads_per_worker(workers)
    queued, busy = list(tasks), {}
    outcomes: list[RunOutcome] = []

    def give(worker: _Worker) -> None:
        """``worker``'s next task, or its retirement when none is queued."""
        if not queued:
            _retire(worker)
            return
        worker.task = queued.pop(0)
        worker.pipe.send(worker.task)
        busy[worker.pipe] = worker

    def collect(worker: _Worker) -> bool:
        """Report the outcomes of ``worker``'s task; whether the worker is still alive."""
        del busy[worker.pipe]
        for outcome in _finish(worker):
            outcomes.append(outcome)
            report(outcome)
        return not worker.pipe.closed

    try:
        for _ in range(min(workers, len(queued))):
            give(_start(threads, progress, tracking, checked))
        while busy:
            for ready in wait(list(busy)):
                worker = busy[ready]
                if collect(worker):
                    give(worker)
                elif queued:
                    give(_start(threads, progress, tracking, checked))
    except KeyboardInterrupt as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        _stop_workers(list(busy.values()), signum, collect)
        raise RunInterrupted(signum) from None
    return outcomes


def _stop_workers(workers: list[_Worker], signum: int, collect: Callable) -> None:
    """Ask the workers to stop (they checkpoint their runs), collect what they report and
    retire them; a second interrupt kills them at once."""
    for worker in workers:  # they may have the signal already (Ctrl-C reaches the group)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, signum)
    try:
        for worker in workers:
            if collect(worker):
                _retire(worker)
    except KeyboardInterrupt:
        for worker in workers:
            worker.process.kill()
        raise


def _run_ray(
    tasks: list[list[RunSettings]],
    workers: int,
    address: str | None,
    report: Callable,
    progress: GridProgress,
    tracking: Tracking | None,
    checked: bool,
) -> list[RunOutcome]:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--backend ray needs Ray: pip install -e '.[ray]' (or pip install ray)"
        ) from None
    threads = threads_per_worker(workers)
    cpus = cores_per_worker(workers)  # Ray's slot: ``workers`` tasks at a time on one machine
    started_here = not ray.is_initialized()
    if started_here:
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as err:
            raise ConfigError(f"cannot reach the Ray cluster at {address}: {err}") from None
    try:
        remote = ray.remote(num_cpus=cpus)(run_task)  # one Ray task per run or population
        pending = [remote.remote(task, threads, progress, tracking, checked) for task in tasks]
        task_of = dict(zip(pending, tasks, strict=True))
        outcomes: list[RunOutcome] = []
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                try:
                    finished = ray.get(done[0])
                except ray.exceptions.RayError as err:  # its worker died (run_task never raises)
                    finished = lost_with_worker(task_of[done[0]], type(err).__name__)
                for outcome in finished:
                    outcomes.append(outcome)
                    report(outcome)
        except KeyboardInterrupt as stop:
            for ref in pending:  # a running task gets KeyboardInterrupt: it checkpoints
                ray.cancel(ref)
            raise RunInterrupted(getattr(stop, "signum", signal.SIGINT)) from None
        return outcomes
    finally:
        if started_here:
            ray.shutdown()


def run_grid(
    configs: list[RunSettings],
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    report: Callable[[RunOutcome], None] = lambda outcome: None,
    population: bool = True,
    progress: GridProgress = "lines",
    tracking: Tracking | None = None,
    checked: bool = False,
) -> list[RunOutcome]:
    """Run every configuration, as populations where they can share one (``population``);
    ``report`` is called as each run finishes; ``progress``: the runs' status lines or
    none; ``tracking``: each run's W&B run (:mod:`agents.runs.tracking`), or none.
    ``checked``: the command's one check (``train_agent``'s, :func:`agents.cli._check_runs`)
    approved the grid and each run on its env already, so neither this call nor its tasks
    check them again; without it, the grid is checked here (:func:`check_grid`) and each
    task's runs where they are built."""
    if not checked:
        check_grid(configs, workers, backend)
    tasks = plan_tasks(configs, workers, population)
    if backend == "ray":
        return _run_ray(tasks, workers, address, report, progress, tracking, checked)
    return _run_local(tasks, workers, report, progress, tracking, checked)


def check_grid(configs: list[RunSettings], workers: int, backend: str) -> None:
    """What a grid refuses before anything starts (one ConfigError line): its workers and
    backend, a run directory named twice, an ``OMP_NUM_THREADS`` that is no thread count."""
    if workers <= 0:
        raise ConfigError(f"--workers must be > 0, got {workers}")
    check_distinct(configs)
    if backend not in ("local", "ray"):
        raise ConfigError(f"unknown backend {backend!r}; choose local or ray")
    threads_per_worker(workers)


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A cluster address nothing answers at fails here in seconds, with one line; Ray's
    own attempt retries for minutes and logs each retry."""
    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except ValueError:
        raise ConfigError(f"--address must be host:port, got {address!r}") from None
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"cannot reach the Ray cluster at {address}: {reason}") from None
