"""A training run: :func:`train` takes a run's resolved settings and trains them into its run
directory (:mod:`agents.runs.layout`), with periodic evaluation, logging and checkpoints;
``--resume`` continues it from its last checkpoint after the checks of
:mod:`agents.runs.resume`.

A run of the native DDPG is a population of one: it trains through the one driver of the
native engine, :func:`agents.runs.population_run.train_population` (as a single run: its
own generator, its own env's resets, its failure its own, :class:`agents.ddpg.engine.Engine`).
SB3's DDPG and sb3-contrib's TRPO are not the native engine: their runs learn through their
own adapters here, in the same run directory machinery (:mod:`agents.runs.opened_run`).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from ..common.errors import EnvironmentFailure, NonFiniteDataError
from ..settings import RunSettings
from ..settings.sharing import can_be_populated
from .agent_factory import make_agent
from .callback import Progress
from .opened_run import close_run, locked_run_dir, open_run
from .population_run import train_population
from .stopping import stop_on_signals
from .tracking import Tracking


def train(
    config: RunSettings,
    resume: bool = False,
    progress: Progress = True,
    env: gym.Env | None = None,
    tracking: Tracking | None = None,
    *,
    checked: bool = False,
) -> Path:
    """Train as ``config`` says and return the run directory (tracked in W&B where
    ``tracking`` says, :mod:`agents.runs.tracking`).

    With ``resume``, an existing run directory is continued from its last checkpoint (or
    started if it has nothing yet); without it, a directory that already holds results is
    an error, so nothing is ever overwritten. The directory is locked for the call's life
    (:mod:`agents.runs.run_lock`). What a resume trusts is checked first: the checkpoint,
    the settings it records (or ``config.yaml``'s), ``eval.csv`` against the evaluations
    the checkpoint has passed; a missing or damaged file stops the call with one line
    naming it, and nothing is deleted. A run that fails before its first step leaves
    nothing behind, so the same command can simply be run again. ``checked``: the
    command's one check (``train_agent``'s, :func:`agents.cli._check_runs`) approved
    ``config`` on its env already, so nothing checks it again; without it, the run's
    settings, env and memory are checked here, before anything is allocated.

    SIGINT and SIGTERM stop the run at the next step, after a checkpoint
    (:mod:`agents.runs.stopping`), and raise :class:`RunInterrupted`.
    """
    if can_be_populated(config):  # the native engine: a population of one
        (outcome,) = train_population([config], resume, progress, tracking, env, checked=checked)
        if outcome.error is not None:
            raise outcome.error
        return outcome.run_dir
    return _train_adapter(config, resume, progress, env, tracking, checked)


def _train_adapter(
    config: RunSettings,
    resume: bool,
    progress: Progress,
    env: gym.Env | None,
    tracking: Tracking | None,
    checked: bool,
) -> Path:
    """A run of SB3's DDPG or of TRPO (not the native engine): its learner's own ``learn``
    in the run directory's machinery."""
    run_dir = config.run_dir()
    # errors in the settings or the env: nothing written yet
    agent = make_agent(config, env, checked=checked)
    with stop_on_signals(), locked_run_dir(run_dir):
        run = open_run(config, agent, run_dir, resume, progress, tracking)
        if run is None:
            return run_dir
        try:
            agent.learn(config.total_steps - agent.num_timesteps, run.callback)
        except (NonFiniteDataError, EnvironmentFailure, OSError) as stop:
            close_run(run, stop)
        return close_run(run)
