"""The learner a run's settings name, on the run's env, with the run's bonus.

``--engine native`` (:class:`agents.ddpg.DDPG`), ``--engine sb3`` (SB3's DDPG with
``ParamExplorePolicy``) or ``--algo trpo`` (sb3-contrib's TRPO, an optional extra imported
only here, when a run asks for it); each receives the resolved settings and, where it
takes one, the bonus made from the run's bonus settings on a generator of its own. The
bonus is made before its learner, so what both need is checked here first, together
(:func:`check_runs_env`, :func:`memory_needs`): SB3's and TRPO's adapters then check their
own part again, for callers that build them alone. The native engine's runs are built by
:mod:`agents.runs.population_run` (checked once, there or by the command).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

import gymnasium as gym
import numpy as np

from ..common.callbacks import RunnableAgent
from ..common.devices import resolve_device
from ..common.envs import episode_limit, make_env, with_action_range
from ..common.errors import ConfigError
from ..common.memory_budget import MemoryNeed, check_memory
from ..common.reward_bonus import RewardBonus
from ..curiosity.registry import make_bonus
from ..ddpg import DDPG
from ..settings import RunSettings
from ..settings.memory import run_needs
from ..tasks import with_task_report

#: Offset between the training seed and the curiosity bonus's own generator's seed.
BONUS_SEED_OFFSET = 2_000_000
#: The extra that brings an optional dependency (a learner's, W&B's), by its module.
EXTRAS = {"sb3_contrib": "trpo", "wandb": "track"}


def make_task_env(settings: RunSettings) -> gym.Env:
    """The run's env: ``settings.env`` with its ``env_kwargs`` and ``max_episode_steps``,
    reporting its task's success and coverage (:mod:`agents.tasks`), its actions in
    [−1, 1] with ``normalize_actions`` — for training and evaluation alike."""
    env = make_env(settings.env, settings.env_kwargs, settings.max_episode_steps)
    return with_action_range(with_task_report(env), settings.normalize_actions)


def run_env(settings: RunSettings, env: gym.Env | None = None) -> gym.Env:
    """The env a run trains on: :func:`make_task_env`'s, or ``env`` given with the run's
    ``max_episode_steps`` and ``normalize_actions`` around it."""
    if env is None:
        return make_task_env(settings)
    if settings.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, settings.max_episode_steps)
    return with_action_range(env, settings.normalize_actions)


def make_agent(
    settings: RunSettings, env: gym.Env | None = None, *, checked: bool = False
) -> RunnableAgent:
    """The learner ``settings`` name, on an env whose episodes end (its own time limit, or
    ``max_episode_steps``): checked so (:func:`check_runs_env`) unless ``checked`` says the
    command's one check did already."""
    env = run_env(settings, env)
    if not checked:
        check_runs_env([settings], env)
    if settings.algo == "trpo":
        trpo_agent = learner_module(settings)
        from ..curiosity.sb3 import VimeCallback

        bonus = make_run_bonus(settings, env)
        callback = VimeCallback(bonus=bonus) if bonus is not None else None
        return trpo_agent.SB3TRPOAgent(env, settings, bonus_callback=callback)
    if settings.engine == "sb3":
        from ..sb3.ddpg_agent import SB3Agent

        return SB3Agent(env, settings.learner, seed=settings.seed, device=settings.device)
    return DDPG(
        env,
        settings.learner,
        seed=settings.seed,
        device=settings.device,
        bonus=make_run_bonus(settings, env),
    )


def check_runs_env(configs: Sequence[RunSettings], env: gym.Env) -> None:
    """What runs on one env — a single run, or a population's members, which allocate
    together — need of it before anything is allocated: episodes that end (its own time
    limit, or ``max_episode_steps``) and memory for every run's learner and bonus together
    on the env's spaces; one ConfigError line otherwise (``train_agent --check`` asks the
    same, :func:`agents.cli._check_runs`)."""
    first = configs[0]
    if episode_limit(env) is None:
        raise ConfigError(
            f"{first.env} has no time limit, so an episode might never end (evaluation "
            "would never return, and checkpoints wait for an episode's end); give it one "
            "with --set max_episode_steps=N"
        )
    needs = [need for config in configs for need in memory_needs(config, env)]
    check_memory(needs, resolve_device(first.device))


def memory_needs(settings: RunSettings, env: gym.Env) -> list[MemoryNeed]:
    """What the run's learner and bonus need in memory at least, on ``env``'s spaces
    (:func:`agents.settings.memory.run_needs`)."""
    obs_dim, action_dim = (
        int(np.prod(space.shape)) for space in (env.observation_space, env.action_space)
    )
    return run_needs(settings, obs_dim, action_dim)


def make_run_bonus(settings: RunSettings, env: gym.Env) -> RewardBonus | None:
    """The run's curiosity bonus, on its own generator, or None."""
    if settings.bonus is None:
        return None
    return make_bonus(
        settings.bonus,
        env.observation_space,
        env.action_space,
        seed=settings.seed + BONUS_SEED_OFFSET,
        device=resolve_device(settings.device),
    )


def learner_module(settings: RunSettings) -> ModuleType | None:
    """The module of an optional learner the settings ask for (None for the native DDPG and
    SB3's DDPG, which need nothing optional); a missing extra is one line naming it."""
    if settings.algo == "trpo":
        return optional_import("agents.sb3.trpo_agent", "--algo trpo")
    return None


def optional_import(module: str, what: str) -> ModuleType:
    """Import a module that needs an optional extra (``what`` asks for it); a missing
    extra is one line naming it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        extra = EXTRAS.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        raise ConfigError(
            f"{what} needs {err.name}, an optional dependency: pip install 'param-explore[{extra}]'"
        ) from None
