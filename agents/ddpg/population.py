"""A population: members of one strategy trained together as one engine of N members.

Where the members come from and what they share: :func:`build_members` builds their learning
state as one :class:`~agents.ddpg.stacked_state.StackedState` and a
:class:`~agents.ddpg.agent.DDPG` front over each row (member k as the single run of its seed
and settings would start); :func:`make_population` puts them on one vector env as an
:class:`~agents.ddpg.engine.Engine`, which steps them together (its docstring says how,
and what a population's member shares with a single run); their test episodes run
together (:class:`SharedTestEpisodes`); and each member's coverage is its row of the
population's envs (:class:`CoverageRows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import gymnasium as gym
import torch

from ..common.devices import resolve_device
from ..common.envs import make_env
from ..common.evaluation import test_episodes_together
from ..common.reward_bonus import RewardBonus
from ..common.tensor_envs import TensorEnvs, tensor_envs
from ..common.vector_envs import make_vector_env
from ..settings.learners import DDPGSettings
from .agent import DDPG
from .engine import Engine
from .stacked_state import StackedState

#: The test episodes of a member's evaluation: (agent, seed, final infos) → (mean, std).
TestEpisodes = Callable[[DDPG, int, list], tuple[float, float]]


class SharedTestEpisodes:
    """The test episodes of every member's evaluation at one step, run together: members ×
    episodes envs of one vector env, stepped with one vmapped call of every member's μ,
    each episode from its member's seed (``seed + i``, as :func:`evaluate_together`). The
    first member whose callback evaluates at a step runs every member's; the others read
    their results (or their own error: a member whose policy or env fails alone fails)."""

    def __init__(
        self,
        population: Engine,
        make_envs: Callable[[int], gym.vector.VectorEnv],
        episodes: int,
    ) -> None:
        self._population = population
        self._make_envs = make_envs
        self._episodes = episodes
        self._envs: TensorEnvs | None = None
        self._seeds: dict[int, int] = {}
        self._results: dict[int, object] = {}
        self._step: int | None = None

    def of(self, member: DDPG, seed: int) -> TestEpisodes:
        """``member``'s test episodes, from ``seed``: what its callback runs."""
        self._seeds[id(member)] = seed

        def run(agent: DDPG, seed: int, final_infos: list) -> tuple[float, float]:
            if self._step != agent.num_timesteps:
                self._run_all(agent.num_timesteps)
            result = self._results[id(agent)]
            if isinstance(result, Exception):
                raise result
            mean, std, infos = result
            final_infos.extend(infos)
            return mean, std

        return run

    def _run_all(self, step: int) -> None:
        population = self._population
        members = population.members
        if self._envs is None:
            envs = self._make_envs(len(members) * self._episodes)
            self._envs = tensor_envs(envs, population.device)
        seeds = [self._seeds.get(id(m), 0) for m in members]
        results = test_episodes_together(
            population.mean_actions, self._envs, seeds, self._episodes, members[0].env_id
        )
        self._results = {id(m): r for m, r in zip(members, results, strict=True)}
        self._step = step


class CoverageRows:
    """The coverage of the state space each member's row of its population's envs reports:
    the envs report every row's at once, read again when a member asks a second time (the
    members log at the same steps). Each member is built with its reader (:meth:`of`);
    its population attaches its envs."""

    def __init__(self) -> None:
        self._envs: gym.vector.VectorEnv | None = None
        self._rows: dict[int, int] = {}
        self._keys: dict[int, int] = {}
        self._reports: list[dict[str, float]] = []
        self._taken: set[int] = set()

    def of(self, key: int) -> Callable[[], dict[str, float]]:
        """What member ``key`` (its index where it was built) calls for its coverage."""
        return lambda: self._coverage(key)

    def built(self, members: Sequence[DDPG]) -> None:
        """The members were built with keys 0, 1, … in this order."""
        self._keys = {id(member): key for key, member in enumerate(members)}

    def attach(self, envs: gym.vector.VectorEnv, members: Sequence[DDPG]) -> None:
        """``members`` (of those :meth:`built`) step as the rows of ``envs``, in order."""
        self._envs = envs
        self._rows = {self._keys[id(member)]: row for row, member in enumerate(members)}
        self._reports, self._taken = [], set()

    def _coverage(self, key: int) -> dict[str, float]:
        if self._envs is None or key not in self._rows:
            return {}
        if not self._reports or key in self._taken:
            report = getattr(self._envs, "pop_coverage", None)
            self._reports = report() if report is not None else [{}] * self._envs.num_envs
            self._taken = set()
        self._taken.add(key)
        return self._reports[self._rows[key]]


class Members(NamedTuple):
    """A population's members as :func:`build_members` builds them."""

    agents: list[DDPG]
    state: StackedState
    coverage: CoverageRows


def build_members(
    envs: Sequence[gym.Env],
    configs: Sequence[DDPGSettings],
    seeds: Sequence[int | None],
    device: str | torch.device = "auto",
    bonuses: Sequence[RewardBonus | None] | None = None,
    *,
    checked: bool = False,
) -> Members:
    """A population's members — member k on ``envs[k]`` with ``configs[k]``, seed
    ``seeds[k]`` and bonus — as the rows of one stacked state (:meth:`StackedState.build`:
    the settings and the memory of them all checked before anything is allocated, unless
    ``checked`` says the caller did; member k's networks its single run's)."""
    first = envs[0]
    device = resolve_device(device)
    state = StackedState.build(
        configs, seeds, first.observation_space, first.action_space, device, checked=checked
    )
    bonuses = bonuses or [None] * len(envs)
    coverage = CoverageRows()
    members = [
        DDPG(
            env,
            config,
            seed=seed,
            device=device,
            bonus=bonus,
            stack=state,
            row=k,
            coverage=coverage.of(k),
        )
        for k, (env, config, seed, bonus) in enumerate(
            zip(envs, configs, seeds, bonuses, strict=True)
        )
    ]
    coverage.built(members)
    return Members(members, state, coverage)


def make_population(
    env: str,
    configs: Sequence[DDPGSettings],
    seeds: Sequence[int | None],
    device: str | torch.device = "auto",
    bonuses: Sequence[RewardBonus | None] | None = None,
) -> Engine:
    """A population of members on the env of id ``env`` (member k with ``configs[k]``, seed
    ``seeds[k]`` and bonus), its envs :func:`~agents.common.vector_envs.make_vector_env`'s."""
    members = build_members([make_env(env) for _ in seeds], configs, seeds, device, bonuses)
    envs = make_vector_env(env, len(seeds), device=members.state.device)
    members.coverage.attach(envs, members.agents)
    return Engine(members.agents, envs, members.state)
