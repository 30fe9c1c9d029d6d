"""The one driver of the native engine's runs: a single run, or several trained as one
population — several run directories, one batched process.

A single run is ``train_population([config])`` (what :func:`agents.runs.train.train` calls,
and a grid's task of one run): a population of one whose engine is a single run's
(:class:`~agents.ddpg.engine.Engine`, ``single_run``: it draws from its own generator, its
env resets from its own RNG, its failure is raised and ends the run, as
:meth:`agents.ddpg.agent.DDPG.learn` steps it), its lines its own. SB3's DDPG and TRPO are
not the native engine: their runs train through :func:`agents.runs.train.train`'s own path.

Each member of a population (:mod:`agents.ddpg.population`) is an ordinary run: its own
directory, lock, ``config.yaml``, checkpoints, ``eval.csv``, ``explore.csv`` and TensorBoard
events, written by the same machinery as a single run's (:mod:`agents.runs.opened_run`:
:func:`~agents.runs.opened_run.open_run`, :func:`~agents.runs.opened_run.close_run`;
:class:`~agents.runs.callback.RunCallback`), so ``compare_runs``, the strategy aggregates,
``--resume`` and every guarantee of a run hold for each member. What the population adds:
the memory check counts every member, the members that resume at the same step train
together (members at other steps form populations of their own), and a member whose own
setup, data, env row, bonus, update or disk fails — any exception of its own — stops with
its own error (its last good state checkpointed), while the others go on; an error of the
population as a whole (its shared vector env, its batched update, the driver) ends every
member.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
from gymnasium.vector import VectorEnv

from ..common.devices import resolve_device
from ..common.errors import (
    ConfigError,
    EnvironmentFailure,
    NonFiniteDataError,
    RunDirectoryError,
    os_error_message,
)
from ..common.memory_budget import available_memory
from ..common.vector_envs import OneEnv, make_vector_env
from ..ddpg.engine import Engine, starting_point
from ..ddpg.population import Members, SharedTestEpisodes, build_members
from ..settings import RunSettings
from ..settings.memory import members_that_fit
from ..settings.sharing import check_population
from ..tasks import with_task_report
from .agent_factory import check_runs_env, make_run_bonus, make_task_env, run_env
from .callback import EVAL_SEED_OFFSET, Progress
from .opened_run import OpenRun, close_run, locked_run_dir, open_run
from .population_lines import PopulationLines
from .stopping import RunInterrupted, stop_on_signals
from .tracking import Tracking


@dataclass
class MemberOutcome:
    """How a member's run ended: its directory and its error, None if it finished."""

    run_dir: Path
    error: Exception | None


def population_size(configs: list[RunSettings], workers: int) -> int:
    """How many of ``configs`` (one population's worth) fit in memory as one population,
    with ``workers`` such populations running at once: every member's estimate (its own
    env's dimensions) against the memory available now, at least one."""
    if len(configs) == 1:
        return 1
    try:
        env = make_task_env(configs[0])
    except ConfigError:  # the task says why, in its own report
        return len(configs)
    obs_dim, action_dim = env.observation_space.shape[0], env.action_space.shape[0]
    env.close()
    available = available_memory(resolve_device(configs[0].device))
    return members_that_fit(configs[0], obs_dim, action_dim, len(configs), workers, available)


def train_population(
    configs: list[RunSettings],
    resume: bool = True,
    progress: Progress = False,
    tracking: Tracking | None = None,
    env: gym.Env | None = None,
    *,
    checked: bool = False,
) -> list[MemberOutcome]:
    """Train the runs ``configs`` describe as one population (they share
    :func:`agents.settings.sharing.population_key`); one config is a single run (module
    docstring), on ``env`` if given (wrapped as :func:`agents.runs.agent_factory.run_env`
    says). Every run resumes or starts (and is tracked) as :func:`agents.runs.train.train`
    says. Returns each member's outcome; raises :class:`RunInterrupted` once every member
    checkpointed when a signal asked to stop, and ConfigError for settings that cannot be a
    population, an env whose episodes never end or members that do not fit in memory (before
    anything is allocated or written). ``checked``: the command's one check approved the
    runs on their env and memory already (``train_agent``: :func:`agents.cli._check_runs`),
    so they are not checked again."""
    if not configs:
        return []
    if env is not None and len(configs) > 1:
        raise ValueError("an env of the caller's is a single run's: give one config with it")
    check_population(configs)
    members = _build_members(configs, env, checked)
    outcomes: dict[Path, MemberOutcome] = {}
    signals: list[int] = []
    with ExitStack() as stack:
        stack.enter_context(stop_on_signals())
        opened: list[OpenRun] = []
        for config, member in zip(configs, members.agents, strict=True):
            run_dir = config.run_dir()
            try:
                stack.enter_context(locked_run_dir(run_dir))
                run = open_run(config, member, run_dir, resume, progress, tracking)
            except Exception as err:  # its own (its directory, its checkpoint): it alone
                outcomes[run_dir] = MemberOutcome(run_dir, err)
                continue
            if run is None:  # complete already
                outcomes[run_dir] = MemberOutcome(run_dir, None)
            else:
                opened.append(run)
        if len(configs) == 1:
            signals += _train_single(opened, members, outcomes)
        else:
            for group in _same_step(opened):
                signals += _train_group(group, members, outcomes)
    if signals:
        raise RunInterrupted(signals[0])
    for outcome in outcomes.values():  # the disk's refusal, said as the run's lock says it
        if isinstance(outcome.error, OSError):
            outcome.error = RunDirectoryError(os_error_message(outcome.error, "cannot write"))
    return [outcomes[c.run_dir()] for c in configs]


def _build_members(configs: list[RunSettings], env: gym.Env | None, checked: bool) -> Members:
    """Every member as a single run builds it (:func:`build_members`), on its run's env
    (``env``, for a single run that is given one), after the runs' check on it
    (:func:`check_runs_env`: episodes that end, every member's memory) unless ``checked``."""
    envs = [run_env(config, env) for config in configs]
    if not checked:
        check_runs_env(configs, envs[0])
    return build_members(
        envs,
        [config.learner for config in configs],
        [config.seed for config in configs],
        configs[0].device,
        [make_run_bonus(config, own) for config, own in zip(configs, envs, strict=True)],
        checked=True,
    )


def _vector_env(config: RunSettings, copies: int) -> VectorEnv:
    """``copies`` of the run's env (:func:`make_task_env`'s) stepped together: in MuJoCo Warp
    on the run's CUDA device where it models the env and is installed."""
    return make_vector_env(
        config.env,
        copies,
        config.env_kwargs,
        config.max_episode_steps,
        normalize_actions=config.normalize_actions,
        wrap=with_task_report,
        device=config.device,
    )


def _same_step(runs: list[OpenRun]) -> list[list[OpenRun]]:
    """The runs by the step they resume at (and their replay buffers' fill): a population
    steps its members together."""
    groups: dict[tuple, list[OpenRun]] = defaultdict(list)
    for run in runs:
        groups[starting_point(run.agent)].append(run)
    return list(groups.values())


def _train_single(
    opened: list[OpenRun], built: Members, outcomes: dict[Path, MemberOutcome]
) -> list[int]:
    """A single run's learning (if it is not complete): its front's own engine of one
    (:meth:`DDPG.learn <agents.ddpg.agent.DDPG.learn>`, on its own env and generator), its
    coverage and test episodes its own env's; its data's or env's failure closes it with
    its message (:func:`close_run`); the signal that stopped it, if one did."""
    if not opened:
        return []
    (run,) = opened
    built.coverage.attach(OneEnv(run.agent.env), built.agents)
    stop: Exception | None = None
    try:
        run.agent.learn(run.config.total_steps - run.agent.num_timesteps, run.callback)
    except (NonFiniteDataError, EnvironmentFailure, OSError) as error:
        stop = error
    return _closed(run, stop, outcomes)


def _closed(run: OpenRun, stop: Exception | None, outcomes: dict[Path, MemberOutcome]) -> list[int]:
    """Close ``run`` (:func:`close_run`) and record its outcome; the signal that stopped it,
    if one did (it checkpointed: the command continues it)."""
    outcome = MemberOutcome(run.run_dir, None)
    outcomes[run.run_dir] = outcome
    try:
        close_run(run, stop)
    except RunInterrupted as interrupted:
        return [interrupted.signum]
    except Exception as err:  # the member's own error, with where it can continue
        outcome.error = err
    return []


def _train_group(
    group: list[OpenRun], built: Members, outcomes: dict[Path, MemberOutcome]
) -> list[int]:
    """Train runs at one step as a population, their test episodes together; the signal
    that stopped it, if one did. Runs that are not every member built (the others resume
    at another step, or are complete) train on a stack of their own rows."""
    members = [run.agent for run in group]
    first = group[0].config
    state = built.state
    if members != built.agents:
        state = state.regrouped([built.agents.index(member) for member in members])
    envs = _vector_env(first, len(group))
    built.coverage.attach(envs, members)
    population = Engine(members, envs, state)
    tests = SharedTestEpisodes(
        population, lambda copies: _vector_env(first, copies), first.eval_episodes
    )
    lines = None
    if len(group) > 1:  # its members' lines as one
        lines = PopulationLines([run.config for run in group], [run.callback.name for run in group])
        lines.writes_with(group[0].callback.write_line)
    for k, run in enumerate(group):
        run.callback.test_episodes = tests.of(run.agent, run.config.seed + EVAL_SEED_OFFSET)
        if lines is not None:
            run.callback.join_population(lines, first=k == 0)
    runs = {id(run.agent): run for run in group}
    closed: set[int] = set()
    signals: list[int] = []

    def close(run: OpenRun, stop: Exception | None) -> None:
        closed.add(id(run.agent))
        if lines is not None and stop is not None:
            lines.stopped(run.callback)
        signals.extend(_closed(run, stop, outcomes))

    try:
        population.learn(
            group[0].config.total_steps - members[0].num_timesteps,
            [run.callback for run in group],
            on_failure=lambda member, error: close(runs[id(member)], error),
        )
    except BaseException:  # a second Ctrl-C, or a fault of the population's own
        for run in group:
            run.callback.logger.close(failed=True)
        raise
    if lines is not None:
        lines.flush()
    for run in group:
        if id(run.agent) not in closed:
            close(run, None)
    return signals[:1]
